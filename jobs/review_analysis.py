"""The review-analysis job: rates product reviews with a chat model, per product.

Reads JSON lines ``{"id": product, "review": text, "ts": epoch_s}``, keys them by product,
and for each review asks the chat model for a rating ``{"reasons": [...], "score": 1..5}``
(validated by the ``Rating`` pydantic model). Short-term memory keeps per-product aggregates.
Each review yields ``{"kind": "review", "id", "line", "score", "reasons"}`` and an updated
``{"kind": "product_summary", "id", "count", "mean_score"}``.

Bad input never costs good input: every input path (the file on either runner, a Kafka topic)
reads raw bytes, and a record that is not UTF-8, holds a NUL byte, is over
``--max-record-bytes`` (1 MiB), is not JSON, not an object, or lacks a string ``id``/``review``
goes to the error output with its line number (Kafka: partition and offset) and what is wrong;
so does a failed rating, with its key. Blank lines are skipped; a UTF-8 byte order mark and
CRLF endings are accepted. The job goes on, and its exit status says whether it succeeded:
1 when every record failed (or more than ``--max-error-rate`` of them), with a last line
``FAILED: all 3 records failed; first error: line 0: ...``. See docs/how-to/input-errors.md.

Two modes, same output: ``--mode direct`` (the default) asks the review model itself;
``--mode delegate`` asks an orchestrator model that delegates each review to the ``reviewer``
internal sub-agent through its ``_subagent_reviewer`` callable (the reviewer asks the review
model) and answers with the reviewer's rating. Delegation needs a model that calls tools
(``scripted`` or an OpenAI-compatible server).

Usage::

    python -m jobs.review_analysis [--input PATH] [--output PATH.jsonl]
        [--runner local|flink] [--model local|scripted|openai] [--mode direct|delegate]
        [--limit N] [--max-error-rate RATE] [--max-record-bytes N] [--event-log PATH]
    python -m jobs.review_analysis --evaluate LABELS.jsonl [--model ...]
    python -m jobs.review_analysis --input kafka://HOST:PORT/reviews \
        --output kafka://HOST:PORT/results [--bounded] [--delivery-guarantee exactly-once]

With Kafka (``jobs._kafka_runner``) a record's ``line`` is its offset and results carry its
``partition``; errors go to the ``<output topic>-errors`` topic.
"""

from __future__ import annotations

import os
import pathlib
import re
import sys
from collections.abc import Iterable, Iterator
from typing import Annotated, Any, Literal

import orjson
from pydantic import BaseModel, Field, StringConstraints, ValidationError

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    ChatMessage,
    ChatModelSetup,
    ChatResponseError,
    InputEvent,
    InternalSubagent,
    MessageRole,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    ToolCall,
    action,
)
from flink_agents_py.io import (
    MAX_RECORD_BYTES,
    decode_record,
    is_blank,
    read_json_lines,
    split_lines,
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

MODES = ("direct", "delegate")

ORCHESTRATOR_PROMPT = (
    "You coordinate the rating of customer reviews of products. Call _subagent_reviewer "
    'once with {"review": <the review text of the user message>}; it answers with a list '
    "holding one rating. Then answer with exactly that rating as JSON: "
    '{"reasons": [...], "score": 1..5}.'
)


class ReviewTask(BaseModel):
    """What the reviewer sub-agent takes (delegate mode): one review's text."""

    review: str


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
NO_OPINION = "no strong opinion words"
"""The lexicon's one reason when it found no opinion word (its score is then 3)."""


def lexicon_rating(text: str) -> Rating:
    """Rate ``text`` by counting positive and negative words (deterministic)."""
    words = _WORD.findall(text.lower())
    pos = [w for w in words if w in _POSITIVE]
    neg = [w for w in words if w in _NEGATIVE]
    balance = len(pos) - len(neg)
    score = 3 if balance == 0 else (4 if balance == 1 else 5) if balance > 0 else (2 if balance == -1 else 1)
    reasons = [f"says {w!r}" for w in (pos + neg)[:3]] or [NO_OPINION]
    return Rating(reasons=reasons, score=score)


def scripted_rating(request: Any) -> dict[str, Any]:
    """Script of the scripted chat model: the lexicon rating of the last user message."""
    return lexicon_rating(request.last_user_text).model_dump()


def scripted_orchestrator(request: Any) -> Any:
    """Script of the scripted orchestrator (delegate mode).

    First turn: call ``_subagent_reviewer`` with ``{"review": text}`` (the review of the last
    user message). Second turn: answer with the rating the reviewer returned (its one
    output), or with the failure text when the delegation failed.
    """
    results = request.tool_results
    if not results:
        text = request.last_user_text
        text = text[len("Review: "):] if text.startswith("Review: ") else text
        return ChatMessage(role=MessageRole.ASSISTANT, tool_calls=[
            ToolCall(id="review", name="_subagent_reviewer", arguments={"review": text})])
    content = results[-1].content
    if content.startswith("Error:"):
        return content
    outputs = orjson.loads(content)
    return outputs[0] if isinstance(outputs, list) and len(outputs) == 1 else content


# -- the agent -----------------------------------------------------------------------------
async def rate_with_chat(event: InputEvent, ctx: RunnerContext, model: str) -> None:
    """Rate the review of ``event`` with a whole chat on ``model``; emit the job's rows.

    Raises:
        ValueError: when the chat failed or its answer is not a valid ``Rating`` (the run's
            record then goes to the error output with its line).
    """
    record = event.input
    try:
        result = await ctx.chat(model, [ChatMessage(content=f"Review: {record['review']}")],
                                output_schema=Rating)
    except ChatResponseError as e:
        raise ValueError(f"the rating chat failed: {e.reason}") from e
    emit_rating(ctx, record, result.structured)


def emit_rating(ctx: RunnerContext, record: dict[str, Any], rating: Rating) -> None:
    """Update the product's aggregates in short-term memory; emit the review and summary rows."""
    mem = ctx.short_term_memory
    count = mem.get("count", 0) + 1
    total = mem.get("total", 0) + rating.score
    mem.set("count", count)
    mem.set("total", total)
    line = record.get("line")
    partition = record.get("partition")  # a Kafka record: line is its offset
    source = {} if partition is None else {"partition": partition}
    ctx.send_event(OutputEvent(output={
        "kind": "review", "id": ctx.key, "line": line, **source,
        "score": rating.score, "reasons": rating.reasons,
    }))
    ctx.send_event(OutputEvent(output={
        "kind": "product_summary", "id": ctx.key, "line": line, **source,
        "count": count, "mean_score": round(total / count, 4),
    }))


class ReviewAnalysisAgent(Agent):
    """Rates each review with a chat on ``review_model`` and keeps product aggregates."""

    @action(InputEvent)
    @staticmethod
    async def ask_rating(event: InputEvent, ctx: RunnerContext) -> None:
        """Await the rating chat (``ctx.chat`` with ``output_schema=Rating``); emit rows."""
        await rate_with_chat(event, ctx, "review_model")


class ReviewOrchestratorAgent(ReviewAnalysisAgent):
    """Delegate mode: the chat is on ``orchestrator_model``, which delegates the rating to
    the ``reviewer`` sub-agent; aggregates and emits like ``ReviewAnalysisAgent``."""

    @action(InputEvent)
    @staticmethod
    async def ask_rating(event: InputEvent, ctx: RunnerContext) -> None:
        """Await the orchestrator's chat; emit rows."""
        await rate_with_chat(event, ctx, "orchestrator_model")


class ReviewerAgent(Agent):
    """The ``reviewer`` sub-agent (delegate mode): rates one ``ReviewTask`` with
    ``review_model`` and emits the ``Rating``."""

    @action(InputEvent)
    @staticmethod
    async def rate(event: InputEvent, ctx: RunnerContext) -> None:
        """Ask the review model for the rating of ``event.input["review"]``.

        Raises:
            ValueError: when the model's answer is not a valid ``Rating`` (the delegation
                then fails, and the orchestrator is told why).
        """
        response = await ctx.chat(
            "review_model", [ChatMessage(content=f"Review: {event.input['review']}")],
            output_schema=RATING_SCHEMA)
        try:
            rating = Rating.model_validate(response.structured if response.structured is not None
                                           else orjson.loads(response.message.content))
        except (ValidationError, orjson.JSONDecodeError) as e:
            raise ValueError(f"the model's rating is invalid: {e}") from e
        ctx.send_event(OutputEvent(output=rating.model_dump()))


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
                model_name: str | None = None, mode: str = "direct") -> ReviewAnalysisAgent:
    """The review agent wired to the chat model kind ``model``, in ``mode``.

    ``"direct"``: ``jobs._review_agents.build_review_agent`` (the hybrid fast-scorer + LLM
    agent for ``local``, the review model for every review otherwise; both with the product
    ``advisor`` sub-agent). ``"delegate"``:
    ``ReviewOrchestratorAgent`` asks ``orchestrator_model`` (the scripted orchestrator for
    ``--model scripted``, else the same provider as the reviewer), which offers the
    ``reviewer`` sub-agent (a ``ReviewerAgent`` with its own ``review_model``).

    Raises:
        ValueError: for an unknown model kind or mode.
    """
    if mode not in MODES:
        raise ValueError(f"unknown --mode {mode!r} ({', '.join(MODES)})")
    review_model = ResourceDescriptor(
        ChatModelSetup, connection="review_connection", prompt=REVIEW_PROMPT, model=model_name,
    )
    if mode == "direct":
        from jobs._review_agents import build_review_agent

        return build_review_agent(model, base_url, model_name)
    reviewer = ReviewerAgent()
    reviewer.add_resource("review_connection", ResourceType.CHAT_MODEL_CONNECTION,
                          connection_descriptor(model, base_url, model_name))
    reviewer.add_resource("review_model", ResourceType.CHAT_MODEL, review_model)
    from jobs._review_agents import AdvisedOrchestratorAgent, add_advisor

    orchestrator = AdvisedOrchestratorAgent()  # a ReviewOrchestratorAgent with product advice
    orchestrator.add_resource("orchestrator_connection", ResourceType.CHAT_MODEL_CONNECTION, (
        ResourceDescriptor("flink_agents_py.integrations.chat_models.ScriptedChatModel",
                           function="jobs.review_analysis:scripted_orchestrator")
        if model == "scripted" else connection_descriptor(model, base_url, model_name)))
    orchestrator.add_resource("reviewer", ResourceType.AGENT, ResourceDescriptor(
        InternalSubagent, agent=reviewer, input_type="jobs.review_analysis:ReviewTask",
        description="Rates one customer review of a product; returns a list holding one "
                    'rating {"reasons": [...], "score": 1..5}.'))
    orchestrator.add_resource("orchestrator_model", ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="orchestrator_connection", prompt=ORCHESTRATOR_PROMPT,
        model=model_name, subagents=["reviewer"],
    ))
    return add_advisor(orchestrator, model, base_url, model_name)


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


class LineFilter:
    """Which non-blank lines the job reads: only ``only`` (if given), at most ``limit``.

    Called once per non-blank line, in order (``flink_agents_py.io.read_json_lines``'s and
    ``NumberedLines``' ``keep``); bad lines count toward the limit like good ones.
    """

    def __init__(self, limit: int | None = None, only: set[int] | None = None) -> None:
        self.limit = limit
        self.only = only
        self.kept = 0

    def __call__(self, line_no: int) -> bool:
        """Whether to read line ``line_no``."""
        if self.only is not None and line_no not in self.only:
            return False
        if self.limit is not None and self.kept >= self.limit:
            return False
        self.kept += 1
        return True


def read_records(path: pathlib.Path, limit: int | None = None, only: set[int] | None = None,
                 max_record_bytes: int | None = MAX_RECORD_BYTES,
                 ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Read the reviews of ``path``: ``(records, errors)``, both in line order.

    The file is read as bytes (``flink_agents_py.io.read_json_lines``): a line that is not
    UTF-8, holds a NUL byte, is over ``max_record_bytes`` or is not a review becomes an error
    row naming its line and what is wrong; blank lines are skipped; a UTF-8 byte order mark on
    the first line and CRLF endings are accepted.

    Raises:
        OSError: when the file cannot be read.
    """
    records, errors = [], []
    for r in read_json_lines(path, parse_line, max_record_bytes=max_record_bytes,
                             keep=LineFilter(limit, only)):
        if r.error is not None:
            errors.append(input_error(r.error))
        else:
            records.append(r.record)
    return records, errors


def read_lines(path: pathlib.Path, limit: int | None = None,
               only: set[int] | None = None) -> Iterator[tuple[int, str]]:
    """Yield ``(line_no, text)`` of the non-blank lines of ``path`` (0-based).

    At most ``limit`` lines, or only ``only``. The job reads with ``read_records``.

    Raises:
        BadRecordError: at a line that is not UTF-8 text.
    """
    keep = LineFilter(limit, only)
    with path.open("rb") as f:
        for line_no, raw in split_lines(f):
            if not is_blank(raw, first=line_no == 0) and keep(line_no):
                yield line_no, decode_record(raw, strip_bom=line_no == 0, max_record_bytes=None)


def error_record(line_no: int | None, message: str, key: Any = None) -> dict[str, Any]:
    """The error output's shape for a line that could not be analysed."""
    return {"kind": "error", "line": line_no, "id": key, "error": message}


def input_error(row: dict[str, Any]) -> dict[str, Any]:
    """A bad-line row of ``flink_agents_py.io`` in the job's error shape (with ``value``)."""
    return {**error_record(row["line"], row["error"]), "value": row.get("value")}


# -- runners -------------------------------------------------------------------------------
def run_local(records: list[dict[str, Any]], agent: Agent, progress: bool,
              end_markers: bool = False, event_log: str | None = None,
              ) -> tuple[list[Any], list[Any]]:
    """Run parsed ``records`` on the local runner. Returns ``(outputs, errors)``.

    ``end_markers``: after the records, one ``end_of_input`` marker per product (final advice).
    ``event_log``: a path to write the event log to (JSON lines).
    """
    errors: list[Any] = []
    records = list(records)
    if end_markers:
        from jobs._product_advisor import end_of_input_markers

        records += end_of_input_markers(records)
    from jobs._product_advisor import is_end_marker

    job = AgentsExecutionEnvironment.local(progress=progress, event_log=event_log).from_list(
        records, key_selector=lambda r: r["id"],
        counted=lambda r: not is_end_marker(r)).apply(agent)  # the bar counts reviews only
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


def count_records(path: pathlib.Path, limit: int | None = None,
                  only: set[int] | None = None) -> int:
    """How many input records (non-blank lines kept by ``limit``/``only``) ``path`` holds."""
    keep = LineFilter(limit, only)
    with path.open("rb") as f:
        return sum(1 for n, raw in split_lines(f) if not is_blank(raw, n == 0) and keep(n))


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point (``jobs._cli.main``); returns the exit status."""
    from jobs._cli import main as cli_main

    return cli_main(argv)


if __name__ == "__main__":
    sys.exit(main())
