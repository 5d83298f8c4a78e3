"""The review-analysis job: rates product reviews with a chat model, per product.

Reads JSON lines ``{"id": product, "review": text, "ts": epoch_s}``, keys them by product,
and for each review asks the chat model for a rating ``{"reasons": [...], "score": 1..5}``
(validated by the ``Rating`` pydantic model). Short-term memory keeps per-product aggregates.
Each review yields ``{"kind": "review", "id", "line", "score", "reasons"}`` and an updated
``{"kind": "product_summary", "id", "count", "mean_score"}``. Malformed lines and failed
ratings go to the error output with their line number and key; the job goes on.

Usage::

    python -m jobs.review_analysis [--input PATH] [--output PATH.jsonl]
        [--runner local|flink] [--model local|scripted|openai] [--limit N]
    python -m jobs.review_analysis --evaluate LABELS.jsonl [--model ...]
"""

from __future__ import annotations

import argparse
import os
import pathlib
import re
import sys
import time
from collections.abc import Iterable, Iterator
from typing import Annotated, Any, Literal

import orjson
from pydantic import BaseModel, Field, StringConstraints, ValidationError

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    ChatMessage,
    ChatModelSetup,
    ChatRequestEvent,
    ChatResponseEvent,
    InputEvent,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    action,
)

DATA_DIR = pathlib.Path(__file__).resolve().parent / "data"
DEFAULT_INPUT = DATA_DIR / "product_reviews.jsonl"
DEFAULT_OUTPUT = pathlib.Path("out") / "review_analysis.jsonl"

REVIEW_PROMPT = (
    "You rate customer reviews of products. Read the review and answer with JSON: "
    '"reasons", a list of at most three short phrases from the review that explain the '
    'rating, then "score", an integer from 1 (very negative) to 5 (very positive); '
    "3 means mixed or neutral."
)


class Rating(BaseModel):
    """The model's answer for one review.

    Reasons come first so an answer cut by ``max_tokens`` has said why before the score. The
    score is an enum, not a bounded integer, and reasons are bounded in count and length:
    llama.cpp's JSON-schema grammar ignores ``minimum``/``maximum`` and lets small models loop
    on open-ended arrays (measured with SmolLM2 here).
    """

    reasons: list[Annotated[str, StringConstraints(max_length=80)]] = Field(
        default_factory=list, max_length=3)
    score: Literal[1, 2, 3, 4, 5]


RATING_SCHEMA = {k: v for k, v in Rating.model_json_schema().items() if k != "description"}


# -- the scripted model: a deterministic lexicon scorer (tests and --model scripted) -----------
_POSITIVE = {
    "love", "loved", "great", "perfect", "comfortable", "comfy", "excellent", "nice", "good",
    "recommend", "happy", "best", "cute", "beautiful", "soft", "favorite", "awesome", "well",
}
_NEGATIVE = {
    "bad", "poor", "broke", "broken", "return", "returned", "returning", "damaged", "small",
    "disappointed", "cheap", "worst", "uncomfortable", "hurt", "hurts", "wet", "terrible",
    "waste", "annoying", "slips", "ripped", "defective", "refund", "never",
}
_WORD = re.compile(r"[a-z']+")


def lexicon_rating(text: str) -> Rating:
    """Rate ``text`` by counting positive and negative words (deterministic)."""
    words = _WORD.findall(text.lower())
    pos = [w for w in words if w in _POSITIVE]
    neg = [w for w in words if w in _NEGATIVE]
    balance = len(pos) - len(neg)
    score = 3 if balance == 0 else (4 if balance == 1 else 5) if balance > 0 else (2 if balance == -1 else 1)
    reasons = [f"says {w!r}" for w in (pos + neg)[:3]] or ["no strong opinion words"]
    return Rating(reasons=reasons, score=score)


def scripted_rating(request: Any) -> dict[str, Any]:
    """Script of the scripted chat model: the lexicon rating of the last user message."""
    return lexicon_rating(request.last_user_text).model_dump()


# -- the agent -----------------------------------------------------------------------------
class ReviewAnalysisAgent(Agent):
    """Rates each review with the ``review_model`` chat model and keeps product aggregates."""

    @action(InputEvent)
    @staticmethod
    def ask_rating(event: InputEvent, ctx: RunnerContext) -> None:
        """Send the review to the chat model, asking for a ``Rating``."""
        record = event.input
        ctx.sensory_memory.set("line", record.get("line"))
        ctx.send_event(ChatRequestEvent(
            model="review_model",
            messages=[ChatMessage(content=f"Review: {record['review']}")],
            output_schema=RATING_SCHEMA,
        ))

    @action(ChatResponseEvent)
    @staticmethod
    def record_rating(event: ChatResponseEvent, ctx: RunnerContext) -> None:
        """Validate the rating, update the product's aggregates, emit both results.

        Raises:
            ValueError: when the chat failed or its answer is not a valid ``Rating`` (the run's
                record then goes to the error output).
        """
        if event.response is None:
            raise ValueError(f"the rating chat failed: {event.error}")
        try:
            rating = Rating.model_validate(event.response.structured
                                           if event.response.structured is not None
                                           else orjson.loads(event.response.message.content))
        except (ValidationError, orjson.JSONDecodeError) as e:
            raise ValueError(f"the model's rating is invalid: {e}") from e
        mem = ctx.short_term_memory
        count = mem.get("count", 0) + 1
        total = mem.get("total", 0) + rating.score
        mem.set("count", count)
        mem.set("total", total)
        ctx.send_event(OutputEvent(output={
            "kind": "review", "id": ctx.key, "line": ctx.sensory_memory.get("line"),
            "score": rating.score, "reasons": rating.reasons,
        }))
        ctx.send_event(OutputEvent(output={
            "kind": "product_summary", "id": ctx.key, "line": ctx.sensory_memory.get("line"),
            "count": count,
            "mean_score": round(total / count, 4),
        }))


def connection_descriptor(model: str, base_url: str | None = None,
                          model_name: str | None = None) -> ResourceDescriptor:
    """The chat model connection for ``--model``.

    Raises:
        ValueError: for an unknown model kind.
    """
    if model == "scripted":
        return ResourceDescriptor(
            "flink_agents_py.integrations.chat_models.ScriptedChatModel",
            function="jobs.review_analysis:scripted_rating",
        )
    if model == "local":
        return ResourceDescriptor(
            "flink_agents_py.integrations.chat_models._llama.LlamaCppChatModel",
            model_path=os.environ.get("FLINK_AGENTS_PY_GGUF"), max_tokens=160,
        )
    if model == "openai":
        return ResourceDescriptor(
            "flink_agents_py.integrations.chat_models._openai.OpenAIChatModel",
            base_url=base_url or os.environ.get("OPENAI_BASE_URL"),
        )
    raise ValueError(f"unknown --model {model!r} (local, scripted, openai)")


def build_agent(model: str = "local", base_url: str | None = None,
                model_name: str | None = None) -> ReviewAnalysisAgent:
    """The review agent wired to the chat model kind ``model``."""
    agent = ReviewAnalysisAgent()
    agent.add_resource("review_connection", ResourceType.CHAT_MODEL_CONNECTION,
                       connection_descriptor(model, base_url, model_name))
    agent.add_resource("review_model", ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="review_connection", prompt=REVIEW_PROMPT, model=model_name,
    ))
    return agent


# -- input ---------------------------------------------------------------------------------
def parse_line(line_no: int, text: str) -> dict[str, Any]:
    """Parse one input line into ``{"line", "id", "review", "ts"}``.

    Raises:
        ValueError: naming the line number and what is wrong with it.
    """
    try:
        data = orjson.loads(text)
    except orjson.JSONDecodeError as e:
        raise ValueError(f"line {line_no}: not JSON ({e})") from e
    if not isinstance(data, dict):
        raise ValueError(f"line {line_no}: expected a JSON object, got {type(data).__name__}")
    pid, review = data.get("id"), data.get("review")
    if not isinstance(pid, str) or not pid:
        raise ValueError(f"line {line_no}: field 'id' must be a non-empty string")
    if not isinstance(review, str):
        raise ValueError(f"line {line_no}: field 'review' must be a string")
    return {"line": line_no, "id": pid, "review": review, "ts": data.get("ts")}


def read_lines(path: pathlib.Path, limit: int | None = None,
               only: set[int] | None = None) -> Iterator[tuple[int, str]]:
    """Yield ``(line_no, text)`` of ``path`` (0-based), at most ``limit``, or only ``only``."""
    with path.open("r", encoding="utf-8") as f:
        n = 0
        for line_no, text in enumerate(f):
            if only is not None and line_no not in only:
                continue
            if limit is not None and n >= limit:
                return
            if text.strip():
                n += 1
                yield line_no, text.rstrip("\n")


def error_record(line_no: int, message: str, key: Any = None) -> dict[str, Any]:
    """The error output's shape for a line that could not be analysed."""
    return {"kind": "error", "line": line_no, "id": key, "error": message}


# -- runners -------------------------------------------------------------------------------
def run_local(lines: Iterable[tuple[int, str]], agent: Agent, progress: bool) -> tuple[list[Any], list[Any]]:
    """Run on the local runner. Returns ``(outputs, errors)``."""
    records, errors = [], []
    for line_no, text in lines:
        try:
            records.append(parse_line(line_no, text))
        except ValueError as e:
            errors.append(error_record(line_no, str(e)))
    job = AgentsExecutionEnvironment.local(progress=progress).from_list(
        records, key_selector=lambda r: r["id"]).apply(agent)
    result = job.run()
    for err in result.errors:
        line = err.input.get("line") if isinstance(err.input, dict) else None
        errors.append(error_record(line, f"{err.action}: {err.error_type}: {err.message}", err.key))
    return result.outputs, errors


def write_jsonl(path: pathlib.Path, rows: Iterable[Any]) -> int:
    """Write ``rows`` as JSON lines; returns how many."""
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with path.open("wb") as f:
        for row in rows:
            f.write(orjson.dumps(row) + b"\n")
            n += 1
    return n


def evaluate(outputs: list[Any], labels: list[dict[str, Any]]) -> float:
    """Fraction of labelled lines whose score is within 1 of the label (0.0 when none)."""
    scores = {o["line"]: o["score"] for o in outputs if o.get("kind") == "review"}
    hits = sum(1 for lab in labels if lab["line"] in scores and abs(scores[lab["line"]] - lab["score"]) <= 1)
    return hits / len(labels) if labels else 0.0


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    p = argparse.ArgumentParser(prog="python -m jobs.review_analysis", description=__doc__.split("\n\n")[0])
    p.add_argument("--input", type=pathlib.Path, default=DEFAULT_INPUT, help="JSON-lines reviews")
    p.add_argument("--output", type=pathlib.Path, default=DEFAULT_OUTPUT, help="results (.jsonl); errors go to <output>.errors.jsonl")
    p.add_argument("--runner", choices=["local", "flink"], default="flink")
    p.add_argument("--model", choices=["local", "scripted", "openai"], default="local")
    p.add_argument("--base-url", default=None, help="OpenAI-compatible base URL (--model openai)")
    p.add_argument("--model-name", default=None, help="provider model name")
    p.add_argument("--limit", type=int, default=None, help="analyse only the first N lines")
    p.add_argument("--evaluate", type=pathlib.Path, default=None,
                   help="label file (line, id, score): rate exactly those lines and print agreement")
    p.add_argument("--parallelism", type=int, default=1, help="Flink parallelism")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    args = p.parse_args(argv)

    labels = None
    only = None
    if args.evaluate is not None:
        labels = [orjson.loads(x) for x in args.evaluate.read_text().splitlines() if x.strip()]
        only = {lab["line"] for lab in labels}
    agent = build_agent(args.model, args.base_url, args.model_name)
    lines = list(read_lines(args.input, args.limit, only))
    started = time.monotonic()
    if args.runner == "local":
        outputs, errors = run_local(lines, agent, progress=not args.no_progress)
    else:
        from jobs._flink_runner import run_flink

        outputs, errors = run_flink(args.input, lines, agent, parallelism=args.parallelism,
                                    limit=args.limit, only=only)
    elapsed = time.monotonic() - started
    outputs.sort(key=lambda o: (o.get("line", -1), o.get("kind") != "review"))
    errors.sort(key=lambda e: (e.get("line") is None, e.get("line") or 0))
    n_out = write_jsonl(args.output, outputs)
    err_path = args.output.with_suffix(".errors.jsonl")
    n_err = write_jsonl(err_path, errors)
    reviews = sum(1 for o in outputs if o.get("kind") == "review")
    products = len({o["id"] for o in outputs if o.get("kind") == "product_summary"})
    print(f"{reviews} review results, {products} products, {n_err} errors, {n_out} output rows "
          f"in {elapsed:.1f} s ({args.runner} runner, {args.model} model) -> {args.output}",
          file=sys.stderr)
    if labels is not None:
        print(f"agreement: {evaluate(outputs, labels):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
