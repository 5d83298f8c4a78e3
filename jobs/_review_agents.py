"""The review agents of the job's direct mode: ratings, product aggregates and product advice.

- ``AdvisedReviewAgent`` (``--model scripted`` and ``--model openai``): a chat on the review
  model (``ctx.chat`` with the ``Rating`` schema) rates every review, as in
  ``ReviewAnalysisAgent``.
- ``HybridReviewAgent`` (``--model local``, the default): the fast committee of
  ``jobs._default_rating`` rates each review; only the reviews it is unsure about get a chat
  on the review model (the embedded LLM). When that chat fails or its answer is unusable the
  committee's rating stands.
- ``AdvisedOrchestratorAgent`` (``--mode delegate``): ``ReviewOrchestratorAgent``'s chat on
  the orchestrator model, with the same rows as the direct mode.

All three keep a digest of each product's reviews in its short-term memory and, when advice is
due (``jobs._product_advisor.advice_due``) and at the end of bounded input (an
``end_of_input`` marker per product, after its last review), hand it to the ``advisor``
internal sub-agent and emit its suggestions as a ``product_advice`` row. Output rows::

    {"kind": "review", "id", "line", "score", "reasons"}
    {"kind": "product_summary", "id", "line", "count", "mean_score", "model_rated"}
    {"kind": "product_advice", "id", "line", "count", "mean_score", "final", "suggestions"}

``model_rated`` counts the product's reviews rated by the review model so far; an advice row
whose sub-agent call failed has no suggestions and an ``error``.
"""

from __future__ import annotations

import os
from typing import Any

import orjson
from pydantic import ValidationError

from flink_agents_py.api import (
    ChatMessage,
    ChatModelSetup,
    ChatResponseError,
    InputEvent,
    InternalSubagent,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    action,
)

from ._default_rating import fast_rating
from ._product_advisor import (
    ADVICE_PROMPT,
    ProductAdvisorAgent,
    advice_due,
    build_digest,
    is_end_marker,
    update_digest,
)
from .review_analysis import (
    RATING_SCHEMA,
    REVIEW_PROMPT,
    Rating,
    ReviewAnalysisAgent,
    ReviewOrchestratorAgent,
    connection_descriptor,
)

__all__ = ["AdvisedReviewAgent", "HybridReviewAgent", "AdvisedOrchestratorAgent",
           "build_review_agent", "add_advisor", "ADVICE_MAX_TOKENS"]

ADVICE_MAX_TOKENS = 200
THREADS_ENV_VAR = "FLINK_AGENTS_PY_THREADS"


def local_threads() -> int:
    """llama.cpp threads of the embedded model: ``$FLINK_AGENTS_PY_THREADS``, else this
    process's usable cores (at most 8). llama-cpp-python's own default is half the cores for
    generation, 1 on a 2-core machine: measured 15-35 % slower than 2 here."""
    env = os.environ.get(THREADS_ENV_VAR)
    if env:
        return max(1, int(env))
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, 8))


def model_connection(model: str, base_url: str | None = None,
                     model_name: str | None = None) -> ResourceDescriptor:
    """``connection_descriptor`` of the job, with all usable cores for the embedded model.

    Reviewer and advisor get equal descriptors, so the embedded model is loaded once and
    shared (see ``LlamaCppChatModel``).
    """
    if model == "local":
        return ResourceDescriptor(
            "flink_agents_py.integrations.chat_models._llama.LlamaCppChatModel",
            model_path=os.environ.get("FLINK_AGENTS_PY_GGUF"), max_tokens=160,
            n_threads=local_threads())
    return connection_descriptor(model, base_url, model_name)


def _source(record: dict[str, Any]) -> dict[str, Any]:
    partition = record.get("partition")  # a Kafka record: line is its offset
    return {} if partition is None else {"partition": partition}


async def _model_rating(ctx: RunnerContext, record: dict[str, Any], model: str) -> Rating:
    """Rate ``record``'s review with a whole chat on ``model`` (``ctx.chat``, ``Rating`` schema).

    Raises:
        ValueError: when the chat failed or its answer is not a valid ``Rating``.
    """
    try:
        result = await ctx.chat(model, [ChatMessage(content=f"Review: {record['review']}")],
                                output_schema=RATING_SCHEMA)
    except ChatResponseError as e:
        raise ValueError(f"the rating chat failed: {e.reason}") from e
    try:
        return Rating.model_validate(result.structured if result.structured is not None
                                     else orjson.loads(result.message.content))
    except (ValidationError, orjson.JSONDecodeError) as e:
        raise ValueError(f"the model's rating is invalid: {e}") from e


async def _advise(ctx: RunnerContext, record: dict[str, Any], final: bool) -> None:
    """Ask the ``advisor`` sub-agent for suggestions on this product; emit the advice row."""
    mem = ctx.short_term_memory
    digest = build_digest(mem, ctx.key)
    handle = await ctx.submit_subagent("advisor", digest.model_dump())
    result = await handle
    mem.set("advised_at", digest.count)
    row: dict[str, Any] = {
        "kind": "product_advice", "id": ctx.key, "line": record.get("line"), **_source(record),
        "count": digest.count, "mean_score": round(digest.mean_score, 4), "final": final,
    }
    outputs = result.result if result.success else None
    if isinstance(outputs, list) and len(outputs) == 1 and isinstance(outputs[0], dict):
        row["suggestions"] = outputs[0].get("suggestions", [])
    else:
        row["suggestions"] = []
        row["error"] = result.error_message or f"unexpected advisor result: {outputs!r}"[:500]
    ctx.send_event(OutputEvent(output=row))


async def _record(ctx: RunnerContext, record: dict[str, Any], rating: Rating,
                  by_model: bool) -> None:
    """Fold a review's rating into the product's memory; emit review and summary rows, and
    advice when due."""
    mem = ctx.short_term_memory
    count = mem.get("count", 0) + 1
    total = mem.get("total", 0) + rating.score
    model_rated = mem.get("model_rated", 0) + (1 if by_model else 0)
    mem.set("count", count)
    mem.set("total", total)
    mem.set("model_rated", model_rated)
    line = record.get("line")
    update_digest(mem, rating.score, record.get("review") or "", line)
    ctx.send_event(OutputEvent(output={
        "kind": "review", "id": ctx.key, "line": line, **_source(record),
        "score": rating.score, "reasons": rating.reasons,
    }))
    ctx.send_event(OutputEvent(output={
        "kind": "product_summary", "id": ctx.key, "line": line, **_source(record),
        "count": count, "mean_score": round(total / count, 4), "model_rated": model_rated,
    }))
    if advice_due(count):
        await _advise(ctx, record, final=False)


async def _finish(ctx: RunnerContext, marker: dict[str, Any]) -> None:
    """End of input for this product: final advice, unless nothing changed since the last."""
    mem = ctx.short_term_memory
    count = mem.get("count", 0)
    if count and mem.get("advised_at") != count:
        await _advise(ctx, marker, final=True)


async def _rate_with_model(ctx: RunnerContext, record: dict[str, Any], model: str) -> None:
    """Rate ``record``'s review with a chat on ``model`` and record it; for an end marker,
    write the final advice.

    Raises:
        ValueError: when the chat failed or its answer is not a valid ``Rating``.
    """
    if is_end_marker(record):
        await _finish(ctx, record)
        return
    await _record(ctx, record, await _model_rating(ctx, record, model), by_model=True)


class AdvisedReviewAgent(ReviewAnalysisAgent):
    """Rates every review with ``review_model``; aggregates, and advises through ``advisor``."""

    END_OF_INPUT_MARKERS = True  # the runners add one end_of_input marker per product

    @action(InputEvent)
    @staticmethod
    async def ask_rating(event: InputEvent, ctx: RunnerContext) -> None:
        """Rate the review with a chat on ``review_model`` and record it; or, for an end
        marker, write the final advice.

        Raises:
            ValueError: when the chat failed or its answer is not a valid ``Rating``.
        """
        await _rate_with_model(ctx, event.input, "review_model")


class HybridReviewAgent(AdvisedReviewAgent):
    """Rates with the fast committee; asks ``review_model`` only for unsure reviews."""

    @action(InputEvent)
    @staticmethod
    async def ask_rating(event: InputEvent, ctx: RunnerContext) -> None:
        """Record the committee's rating, or the chat model's when the committee is unsure
        (the committee's when that chat fails); for an end marker, the final advice."""
        record = event.input
        if is_end_marker(record):
            await _finish(ctx, record)
            return
        fast = fast_rating(record["review"])
        rating, by_model = fast.rating, False
        if fast.unsure:
            try:
                rating, by_model = await _model_rating(ctx, record, "review_model"), True
            except ValueError:
                pass  # the committee's rating stands; model_rated does not count it
        await _record(ctx, record, rating, by_model=by_model)


class AdvisedOrchestratorAgent(ReviewOrchestratorAgent):
    """Delegate mode: ``ReviewOrchestratorAgent``, with the same aggregates and advice rows as
    the direct mode."""

    END_OF_INPUT_MARKERS = True

    @action(InputEvent)
    @staticmethod
    async def ask_rating(event: InputEvent, ctx: RunnerContext) -> None:
        """Rate the review with the orchestrator's chat (which delegates to ``reviewer``) and
        record it; or, for an end marker, write the final advice.

        Raises:
            ValueError: when the chat failed or its answer is not a valid ``Rating``.
        """
        await _rate_with_model(ctx, event.input, "orchestrator_model")


def advisor_connection(model: str, base_url: str | None,
                       model_name: str | None) -> ResourceDescriptor:
    """The advisor's chat model connection: the scripted advisor, or the review model's."""
    if model == "scripted":
        return ResourceDescriptor(
            "flink_agents_py.integrations.chat_models.ScriptedChatModel",
            function="jobs._product_advisor:scripted_advice")
    return model_connection(model, base_url, model_name)


def build_review_agent(model: str = "local", base_url: str | None = None,
                       model_name: str | None = None) -> AdvisedReviewAgent:
    """The direct-mode review agent for ``--model`` ``model``, with its ``advisor``.

    ``local``: ``HybridReviewAgent``; ``scripted`` and ``openai``: ``AdvisedReviewAgent``.
    The embedded model is loaded once and shared by the reviewer and the advisor.

    Raises:
        ValueError: for an unknown model kind.
    """
    agent = HybridReviewAgent() if model == "local" else AdvisedReviewAgent()
    agent.add_resource("review_connection", ResourceType.CHAT_MODEL_CONNECTION,
                       model_connection(model, base_url, model_name))
    agent.add_resource("review_model", ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="review_connection", prompt=REVIEW_PROMPT, model=model_name))
    return add_advisor(agent, model, base_url, model_name)


def add_advisor(agent: Any, model: str, base_url: str | None = None,
                model_name: str | None = None) -> Any:
    """Give ``agent`` the ``advisor`` sub-agent for ``--model`` ``model``; returns ``agent``."""
    advisor = ProductAdvisorAgent()
    advisor.add_resource("advice_connection", ResourceType.CHAT_MODEL_CONNECTION,
                         advisor_connection(model, base_url, model_name))
    advisor.add_resource("advice_model", ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="advice_connection", prompt=ADVICE_PROMPT, model=model_name,
        options={"max_tokens": ADVICE_MAX_TOKENS}))
    agent.add_resource("advisor", ResourceType.AGENT, ResourceDescriptor(
        InternalSubagent, agent=advisor, input_type="jobs._product_advisor:ProductDigest",
        description="Writes at most three improvement suggestions for one product from the "
                    "digest of its reviews."))
    return agent
