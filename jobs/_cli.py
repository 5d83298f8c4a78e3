"""The review job's command line: options, the run on the chosen runner, the exit status.

See ``jobs.review_analysis`` for the job and its options (``python -m jobs.review_analysis
--help``).
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time
from typing import Any

import orjson

from flink_agents_py.io import MAX_RECORD_BYTES
from jobs import review_analysis as ra
from jobs.review_analysis import (
    DEFAULT_INPUT,
    DEFAULT_OUTPUT,
    MODES,
    build_agent,
    count_records,
    evaluate,
    read_records,
    run_local,
    write_jsonl,
)

__all__ = ["main"]

EPILOG = """\
bad input:
  A record that is not UTF-8, holds a NUL byte, is over --max-record-bytes, is not a JSON
  object or lacks a string "id"/"review" becomes an error row naming its line (Kafka:
  partition and offset) and what is wrong; the job goes on. Blank lines are skipped; a
  UTF-8 byte order mark and CRLF endings are accepted. Error rows go to
  <output>.errors.jsonl (Kafka output: the <topic>-errors topic).

exit status:
  0  success (some records may have failed: see the errors file)
  1  every record failed, or more than --max-error-rate of them (the last line says
     why and quotes the first error); not checked with Kafka output
  2  bad usage
"""


def _error_rate(text: str) -> float:
    from jobs._outcome import parse_error_rate

    try:
        return parse_error_rate(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _path_or_kafka(text: str) -> pathlib.Path | str:
    """A file path, or a ``kafka://HOST:PORT/topic`` URL kept as text."""
    return text if text.startswith("kafka://") else pathlib.Path(text)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    p = argparse.ArgumentParser(prog="python -m jobs.review_analysis",
                                description=ra.__doc__.split("\n\n")[0], epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--input", type=_path_or_kafka, default=DEFAULT_INPUT,
                   help="JSON-lines reviews, or kafka://HOST:PORT/topic")
    p.add_argument("--output", type=_path_or_kafka, default=DEFAULT_OUTPUT,
                   help="results (.jsonl; errors go to <output>.errors.jsonl), or "
                        "kafka://HOST:PORT/topic (errors go to <topic>-errors)")
    p.add_argument("--runner", choices=["local", "flink"], default="flink")
    p.add_argument("--model", choices=["local", "scripted", "openai"], default="local")
    p.add_argument("--mode", choices=list(MODES), default="direct",
                   help="direct: ask the review model; delegate: an orchestrator model "
                        "delegates each review to the reviewer sub-agent")
    p.add_argument("--base-url", default=None, help="OpenAI-compatible base URL (--model openai)")
    p.add_argument("--model-name", default=None, help="provider model name")
    p.add_argument("--limit", type=int, default=None, help="analyse only the first N lines")
    p.add_argument("--evaluate", type=pathlib.Path, default=None,
                   help="label file (line, id, score): rate exactly those lines and print agreement")
    p.add_argument("--parallelism", type=int, default=1, help="Flink parallelism")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.add_argument("--bounded", action="store_true",
                   help="Kafka input: stop at the offsets that are the latest at start")
    p.add_argument("--checkpoint-interval-ms", type=int, default=10_000,
                   help="Flink checkpoint interval (Kafka exactly-once output commits at each)")
    p.add_argument("--delivery-guarantee", default="exactly-once",
                   choices=["exactly-once", "at-least-once", "none"], help="Kafka output")
    p.add_argument("--max-error-rate", type=_error_rate, default=None, metavar="RATE",
                   help="exit 1 when more than this fraction of the input records failed "
                        "(0.05 or 5%%); default: exit 1 only when every record failed. Not "
                        "checked with Kafka output (nothing is collected)")
    p.add_argument("--max-record-bytes", type=int, default=MAX_RECORD_BYTES, metavar="N",
                   help="longer input lines or Kafka values are error rows (default 1 MiB)")
    p.add_argument("--event-log", default=None, metavar="PATH",
                   help="append the event log (JSON lines) to PATH; on Flink each subtask "
                        "writes PATH with -<subtask> before the suffix. Read it with "
                        "`flink-agents-py trace PATH`")
    args = p.parse_args(argv)
    if isinstance(args.input, str) or isinstance(args.output, str):
        if args.runner != "flink" or args.evaluate is not None:
            p.error("kafka:// input or output needs --runner flink and no --evaluate")
        return _main_kafka(args, p)

    labels = None
    only = None
    if args.evaluate is not None:
        labels = [orjson.loads(x) for x in args.evaluate.read_text().splitlines() if x.strip()]
        only = {lab["line"] for lab in labels}
    agent = build_agent(args.model, args.base_url, args.model_name, args.mode)
    if not args.input.is_file():
        p.error(f"--input {args.input}: no such file")
    end_markers = labels is None and getattr(agent, "END_OF_INPUT_MARKERS", False)
    started = time.monotonic()
    if args.runner == "local":
        records, read_errors = read_records(args.input, args.limit, only, args.max_record_bytes)
        outputs, errors = run_local(records, agent, progress=not args.no_progress,
                                    end_markers=end_markers, event_log=args.event_log)
        errors = read_errors + errors
    else:
        from jobs._flink_runner import run_flink

        outputs, errors = run_flink(args.input, count_records(args.input, args.limit, only),
                                    agent, parallelism=args.parallelism, limit=args.limit,
                                    only=only, end_markers=end_markers,
                                    max_record_bytes=args.max_record_bytes,
                                    event_log=args.event_log, progress=not args.no_progress)
    elapsed = time.monotonic() - started
    outputs.sort(key=lambda o: (o.get("line", -1), o.get("kind") != "review"))
    errors.sort(key=lambda e: (e.get("line") is None, e.get("line") or 0))
    n_out = write_jsonl(args.output, outputs)
    err_path = args.output.with_suffix(".errors.jsonl")
    n_err = write_jsonl(err_path, errors)
    reviews = sum(1 for o in outputs if o.get("kind") == "review")
    products = len({o["id"] for o in outputs if o.get("kind") == "product_summary"})
    print(f"{reviews} review results, {products} products, {n_err} errors, {n_out} output rows "
          f"in {elapsed:.1f} s ({args.runner} runner, {args.model} model"
          f"{', delegate mode' if args.mode == 'delegate' else ''}) -> {args.output}",
          file=sys.stderr)
    if labels is not None:
        print(f"agreement: {evaluate(outputs, labels):.2f}")
    return _verdict(outputs, errors, args.max_error_rate)


def _verdict(outputs: list[Any], errors: list[Any], max_error_rate: float | None) -> int:
    """Print why a run failed (``jobs._outcome.judge``); returns the exit status."""
    from jobs._outcome import EXIT_FAILED, judge

    verdict = judge(outputs, errors, max_error_rate)
    if verdict.ok:
        return 0
    print(f"FAILED: {verdict.reason}", file=sys.stderr)
    return EXIT_FAILED


def _main_kafka(args: argparse.Namespace, p: argparse.ArgumentParser) -> int:
    """``main`` with a ``kafka://`` input or output (see ``jobs._kafka_runner``)."""
    from jobs._kafka_runner import run_kafka_job

    agent = build_agent(args.model, args.base_url, args.model_name, args.mode)
    started = time.monotonic()
    try:
        result = run_kafka_job(args.input, args.output, agent, parallelism=args.parallelism,
                               limit=args.limit, bounded=args.bounded,
                               checkpoint_interval_ms=args.checkpoint_interval_ms,
                               delivery_guarantee=args.delivery_guarantee,
                               max_record_bytes=args.max_record_bytes,
                               event_log=args.event_log)
    except ValueError as e:
        p.error(str(e))
    elapsed = time.monotonic() - started
    if result is None:
        print(f"job finished in {elapsed:.1f} s ({args.model} model) -> {args.output} "
              f"(errors -> {args.output}-errors)", file=sys.stderr)
        return 0
    outputs, errors = result
    outputs.sort(key=lambda o: (o.get("partition", 0), o.get("line", -1),
                                o.get("kind") != "review"))
    errors.sort(key=lambda e: (e.get("partition", 0), e.get("line") is None, e.get("line") or 0))
    n_out = write_jsonl(args.output, outputs)
    n_err = write_jsonl(args.output.with_suffix(".errors.jsonl"), errors)
    print(f"{n_out} output rows, {n_err} errors in {elapsed:.1f} s -> {args.output}",
          file=sys.stderr)
    return _verdict(outputs, errors, args.max_error_rate)


