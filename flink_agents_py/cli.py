"""The ``flink-agents-py`` command.

    flink-agents-py --version
    flink-agents-py new DIR [--force]
    flink-agents-py trace EVENT_LOG [EVENT_LOG ...] [--key K] [--run rN] [--failed |
                          --anomalous] [--limit N] [--html OUT.html]
                          [--otlp ENDPOINT [--otlp-header NAME=VALUE]...]
                          [--service-name NAME] [--agent-name NAME]

``trace`` reads event logs (JSON lines written with ``event_log=...``; on Flink, give every
subtask's file) and prints runs as trees (input -> actions -> chat rounds -> tool and
sub-agent calls -> outputs) with timings, token counts and failing nodes' tracebacks, then
the anomalies of every run (the first ``--limit`` trees are printed; anomalies are found in
all of them). ``--html`` also writes one self-contained page of every selected run (index,
filters, anomalies, trees, timelines); ``--otlp`` sends the runs as OpenTelemetry spans to an
OTLP/HTTP endpoint (needs the ``otel`` extra) and checks they were delivered. Every line
printed has its control and bidi characters escaped (keys, outputs and errors come from
records and models). Exit status: 0, 1 when no run matches, 2 on bad input (a file
that is no event log of ours: Apache Flink Agents' included, said so), 3 when spans
were not delivered to ``--otlp`` (no receiver listening, refused, timed out).

``new`` writes the starter (an agent with a tool and a chat, its tests with the crash
checker, a script that runs it locally or on Flink, and its input) into ``DIR``, made if
missing; it never overwrites a file unless given ``--force``. Exit status: 0, 2 on bad input.
"""

from __future__ import annotations

import argparse
import difflib
import os
import shlex
import shutil
import sys
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

__all__ = ["main"]


def _say(text: str) -> None:
    """Print one line to stderr, secrets masked, control and bidi characters escaped.

    A line may quote the command's arguments: the ``--otlp`` URL (a token in its query), an
    ``--otlp-header`` written wrongly (``Authorization: Bearer ...``).
    """
    from .api import mask_secrets
    from .observability import escape_controls

    print(escape_controls(mask_secrets(text)), file=sys.stderr)


def _trace(args: argparse.Namespace) -> int:
    from .observability import (
        OtelExportError,
        build_traces,
        read_event_log,
        render_html,
        render_text,
        select_traces,
    )

    folders = [p for p in args.event_log if Path(p).is_dir()]
    if folders:  # a Flink job's folder of per-subtask files, most likely
        _say(f"flink-agents-py trace: {', '.join(folders)} is a folder: give its files "
             f"(e.g. {Path(folders[0]) / '*.jsonl'})")
        return 2
    missing = [p for p in args.event_log if not Path(p).is_file()]
    if missing:
        _say(f"flink-agents-py trace: no such file: {', '.join(missing)}")
        return 2
    status = "failed" if args.failed else "anomalous" if args.anomalous else None
    skipped: list[tuple[str, int]] = []
    records = read_event_log(args.event_log, skipped)
    every = build_traces(records)
    if not every and (records or any(Path(p).stat().st_size for p in args.event_log)):
        _say(_not_our_event_log(args.event_log, records))
        return 2
    traces = select_traces(every, key=args.key, run=args.run, status=status)
    if not traces:
        what = " and ".join(f"{n} {v}" for n, v in (("key", args.key), ("run", args.run))
                            if v)
        kind = f"{status} run" if status else "run"
        _say(f"no {kind}{' of ' + what if what else ''} in {', '.join(args.event_log)}")
        return 1
    exporter = None
    if args.otlp:
        from .observability.internal import otlp_exporter

        headers = {}
        for item in args.otlp_header or ():
            name, sep, value = item.partition("=")
            if not sep or not name.strip():
                _say(f"flink-agents-py trace --otlp-header: expected NAME=VALUE, not {item!r}")
                return 2
            headers[name.strip()] = value
        try:
            exporter = otlp_exporter(args.otlp, headers=headers or None)
        except (ImportError, ValueError) as e:
            _say(f"flink-agents-py trace --otlp: {e}")
            return 2
    sys.stdout.write(render_text(traces, limit=args.limit))
    sys.stdout.flush()
    if skipped:  # what the trace could not read: it may miss runs or parts of them
        where = ", ".join(f"{p}:{n}" for p, n in skipped[:5])
        more = f" and {len(skipped) - 5} more" if len(skipped) > 5 else ""
        _say(f"flink-agents-py trace: skipped {len(skipped)} line{'s' if len(skipped) > 1 else ''}"
             f" that {'are' if len(skipped) > 1 else 'is'} no JSON record (cut short or "
             f"damaged): {where}{more}")
    if args.html:
        out = Path(args.html)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(render_html(traces, title=f"trace of {', '.join(args.event_log)}"),
                       encoding="utf-8")
        _say(f"wrote {out} ({len(traces)} run{'s' if len(traces) != 1 else ''})")
    if exporter is not None:
        from .observability.internal import export_otel

        runs = f"{len(traces)} run{'s' if len(traces) != 1 else ''}"
        try:
            spans = export_otel(traces, exporter, service_name=args.service_name,
                                agent_name=args.agent_name)
        except OtelExportError as e:
            _say(f"flink-agents-py trace --otlp: delivered {e.delivered} of {e.total} spans of "
                 f"{runs} to {args.otlp}: {e.reason or 'not accepted'} (is an OTLP/HTTP "
                 "receiver listening there?)")
            return 3
        _say(f"delivered {spans} spans of {runs} to {args.otlp}")
    return 0


STARTER_SUFFIXES = (".py", ".jsonl")
"""The starter's files, by suffix (``flink_agents_py/starter/``; pyproject's package-data)."""


def _not_our_event_log(paths: Sequence[str], records: list[dict[str, object]]) -> str:
    """Why JSON lines that make no run are not an event log ``trace`` reads.

    Returns:
        One line naming the files, what they look like (Apache Flink Agents' event log files,
        or other JSON) and which file to give instead.
    """
    files = ", ".join(paths)
    ours = ("give the file a job's event_log= writes (AgentsExecutionEnvironment.local("
            "event_log='out/events.jsonl'), .flink(env, event_log=...)): "
            "docs/how-to/observability.md")
    if records and all("eventType" in r and "event" in r for r in records):
        return (f"no run in {files}: it is Apache Flink Agents' event log (one line per event, "
                f"written for baseLogDir / eventLoggerType), which holds no runs' tree; {ours}")
    what = (f"none of its {len(records)} JSON record(s) is of an event log" if records
            else "no line of it is a JSON record")
    return f"no run in {files}: {what}; {ours}"


def _new(args: argparse.Namespace) -> int:
    template = resources.files("flink_agents_py") / "starter"
    files = sorted((f for f in template.iterdir()
                    if f.is_file() and f.name.endswith(STARTER_SUFFIXES)), key=lambda f: f.name)
    if not files:
        print(f"flink-agents-py new: the starter's files are missing from {template}",
              file=sys.stderr)
        return 2
    if not args.dir.strip():
        print("flink-agents-py new: DIR is empty: name the folder to write the starter to "
              "(e.g. flink-agents-py new my-agent)", file=sys.stderr)
        return 2
    target = Path(args.dir)
    if target.exists() and not target.is_dir():
        print(f"flink-agents-py new: {target} exists and is not a folder", file=sys.stderr)
        return 2
    clashes = [str(target / f.name) for f in files if (target / f.name).exists()]
    if clashes and not args.force:
        print(f"flink-agents-py new: would overwrite {', '.join(clashes)} (pass --force to "
              "overwrite, or choose another folder)", file=sys.stderr)
        return 2
    try:
        target.mkdir(parents=True, exist_ok=True)
        for f in files:
            (target / f.name).write_bytes(f.read_bytes())
    except OSError as e:
        print(f"flink-agents-py new: cannot write {target}: {e}", file=sys.stderr)
        return 2
    python = _python_command()
    print(f"wrote the starter to {target}/: my_agent.py (the agent), test_my_agent.py (its "
          "tests), main.py (runs it), questions.jsonl (its input)\n"
          f"next, with this Python ({sys.executable}):\n"
          f"  cd {shlex.quote(str(target))}\n"
          f"  {python} -m pytest -q       # the tests, crash checker included\n"
          f"  {python} main.py            # on the local runner\n"
          f"  {python} main.py flink      # as a Flink job on a MiniCluster")
    return 0


def _python_command() -> str:
    """How to run this interpreter from the user's shell: ``python`` when that is it.

    ``python`` on ``PATH`` is this interpreter only with its venv activated; otherwise it is
    another one (a system or pyenv Python without flink-agents-py), so the commands name
    this one by its path. Before, they said ``python`` always, and ``python -m pytest`` in
    the starter failed with ``No module named 'flink_agents_py'`` when the venv was not
    activated (``flink-agents-py new`` run as ``.venv/bin/flink-agents-py``).

    Returns:
        ``python``, or this interpreter's path, quoted for a shell.
    """
    found = shutil.which("python")
    if found is not None:
        here = os.path.abspath(sys.executable)
        # the same folder (a venv's bin: python, python3) and the same file; a base
        # interpreter a venv links to is the same file, but not the venv
        try:
            if (os.path.dirname(os.path.abspath(found)) == os.path.dirname(here)
                    and os.path.samefile(found, here)):
                return "python"
        except OSError:
            pass
    return shlex.quote(sys.executable)


def _refuse_unknown(command: argparse.ArgumentParser, unknown: list[str]) -> None:
    """Exit with argparse's usage error for ``unknown``, naming the options meant."""
    options = [o for action in command._actions for o in action.option_strings]
    meant = [f"{u.split('=')[0]}: did you mean {close[0]}?" for u in unknown if u.startswith("-")
             for close in [difflib.get_close_matches(u.split("=")[0], options, n=1)] if close]
    hint = f" ({'; '.join(meant)})" if meant else ""
    command.error(f"unrecognized arguments: {' '.join(unknown)}{hint}")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    from . import __version__

    parser = argparse.ArgumentParser(prog="flink-agents-py", description="flink-agents-py tools")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    # not required=True: argparse would say only "the following arguments are required:
    # command"; with none given, the help (the commands and what each does) is printed
    sub = parser.add_subparsers(dest="command", title="commands")
    trace = sub.add_parser("trace", help="print runs of an event log as trees",
                           description="Print runs of an event log as trees, with timings, "
                                       "token counts and anomalies.")
    trace.add_argument("event_log", nargs="+", metavar="EVENT_LOG",
                       help="event log file(s) (JSON lines)")
    trace.add_argument("--key", help="only runs of this key (its text or JSON form)")
    trace.add_argument("--run", help="only this run of each key (e.g. r0)")
    only = trace.add_mutually_exclusive_group()
    only.add_argument("--failed", action="store_true",
                      help="only runs with an error (failed action, call, chat, delegation)")
    only.add_argument("--anomalous", action="store_true",
                      help="only runs with an anomaly (errors included)")
    trace.add_argument("--limit", type=int, default=50,
                       help="print at most this many trees (default 50; 0: all); anomalies "
                            "are listed for every run")
    trace.add_argument("--html", metavar="OUT.html",
                       help="also write a self-contained page of every selected run")
    trace.add_argument("--otlp", metavar="ENDPOINT",
                       help="also send the runs as OpenTelemetry spans to this OTLP/HTTP "
                            "endpoint (e.g. http://localhost:4318; needs the otel extra)")
    trace.add_argument("--otlp-header", action="append", metavar="NAME=VALUE",
                       help="an HTTP header for --otlp (e.g. Authorization=Basic ...); "
                            "repeatable")
    trace.add_argument("--service-name", default="flink-agents-py",
                       help="the service.name of exported spans (default flink-agents-py)")
    trace.add_argument("--agent-name",
                       help="the agent's name in exported spans (gen_ai.agent.name, and the "
                            "run span invoke_agent NAME; default: the agent class named in "
                            "the event log)")
    new = sub.add_parser("new", help="write a starter agent project into a folder",
                         description="Write a starter agent (a tool, a chat with a scripted "
                                     "model), its tests and a local/Flink entry point into DIR.")
    new.add_argument("dir", metavar="DIR", help="the folder (made if missing)")
    new.add_argument("--force", action="store_true", help="overwrite files of the same names")
    args, unknown = parser.parse_known_args(argv)
    if args.command is None:
        if unknown:  # e.g. --verison
            _refuse_unknown(parser, unknown)
        parser.print_help(sys.stderr)
        return 2
    if unknown:
        _refuse_unknown({"trace": trace, "new": new}[args.command], unknown)
    if args.command == "new":
        return _new(args)
    if args.command == "trace":
        try:
            return _trace(args)
        except BrokenPipeError:  # e.g. piped into head
            return 0
    parser.error(f"unknown command {args.command}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
