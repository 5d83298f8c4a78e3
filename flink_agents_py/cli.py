"""The ``flink-agents-py`` command.

    flink-agents-py trace EVENT_LOG [EVENT_LOG ...] [--key K] [--run rN] [--html OUT.html]
                          [--limit N]

``trace`` reads event logs (JSON lines written with ``event_log=...``; on Flink, give every
subtask's file) and prints each run as a tree (input -> actions -> chat rounds -> tool and
sub-agent calls -> outputs) with timings and token counts, then the anomalies. ``--html``
also writes one self-contained page. Exit status: 0, or 1 when no run matches.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["main"]


def _trace(args: argparse.Namespace) -> int:
    from .observability import (
        build_traces,
        read_event_log,
        render_html,
        render_text,
        select_traces,
    )

    missing = [p for p in args.event_log if not Path(p).is_file()]
    if missing:
        print(f"flink-agents-py trace: no such file: {', '.join(missing)}", file=sys.stderr)
        return 2
    traces = select_traces(build_traces(read_event_log(args.event_log)), key=args.key,
                           run=args.run)
    if not traces:
        what = " and ".join(f"{n} {v}" for n, v in (("key", args.key), ("run", args.run)) if v)
        print(f"no run{' of ' + what if what else ''} in {', '.join(args.event_log)}",
              file=sys.stderr)
        return 1
    shown = traces[: args.limit] if args.limit and args.limit > 0 else traces
    sys.stdout.write(render_text(shown))
    if len(shown) < len(traces):
        print(f"({len(traces) - len(shown)} more runs not shown; use --key, --run or --limit)")
    sys.stdout.flush()
    if args.html:
        out = Path(args.html)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(render_html(shown, title=f"trace of {', '.join(args.event_log)}"),
                       encoding="utf-8")
        print(f"wrote {out}", file=sys.stderr)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = argparse.ArgumentParser(prog="flink-agents-py", description="flink-agents-py tools")
    sub = parser.add_subparsers(dest="command", required=True)
    trace = sub.add_parser("trace", help="print runs of an event log as trees",
                           description="Print runs of an event log as trees, with timings, "
                                       "token counts and anomalies.")
    trace.add_argument("event_log", nargs="+", metavar="EVENT_LOG",
                       help="event log file(s) (JSON lines)")
    trace.add_argument("--key", help="only runs of this key (its text or JSON form)")
    trace.add_argument("--run", help="only this run of each key (e.g. r0)")
    trace.add_argument("--html", metavar="OUT.html", help="also write a self-contained page")
    trace.add_argument("--limit", type=int, default=50,
                       help="print at most this many runs (default 50; 0: all)")
    args = parser.parse_args(argv)
    if args.command == "trace":
        try:
            return _trace(args)
        except BrokenPipeError:  # e.g. piped into head
            return 0
    parser.error(f"unknown command {args.command}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
