"""The review agent and its two sub-agents.

``ReviewAgent`` has one action, ``ask_rating``, run for each input record of a product (the
agent key):

1. it rates the review with the strategy its configuration names (``strategies``);
2. it folds the rating into the product's short-term memory (count, total, how many the chat
   model rated, the advice digest of ``advice``) and emits a ``review`` and a
   ``product_summary`` row;
3. when advice is due, it submits the digest to the ``advisor`` sub-agent
   (``ProductAdvisorAgent``) and emits its suggestions as a ``product_advice`` row; an
   ``end_of_input`` marker (bounded input) asks for the final advice.

Output rows (``partition`` only for Kafka input, where ``line`` is the record's offset)::

    {"kind": "review", "id", "line", "score", "reasons"}
    {"kind": "product_summary", "id", "line", "count", "mean_score", "model_rated"}
    {"kind": "product_advice", "id", "line", "count", "mean_score", "final", "suggestions"}

``model_rated`` counts the product's reviews rated by a chat model so far; an advice row whose
sub-agent call failed has no suggestions and an ``error``. ``ReviewerAgent`` is the
``reviewer`` sub-agent of the ``delegate`` rating. ``build.build_agent`` wires all three.
"""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import ValidationError

from flink_agents_py.api import (
    Agent,
    ChatMessage,
    InputEvent,
    OutputEvent,
    RunnerContext,
    action,
)

from .advice import (
    advice_due,
    advice_schema,
    build_digest,
    digest_message,
    is_end_marker,
    tidy_suggestion,
    update_digest,
)
from .models import Advice, ProductDigest
from .strategies import REVIEW_MODEL, Rated, model_rating, strategy

__all__ = ["ADVICE_MODEL", "ADVISOR", "ProductAdvisorAgent", "ReviewAgent", "ReviewerAgent"]

ADVISOR = "advisor"
"""The advisor sub-agent's resource name."""
ADVICE_MODEL = "advice_model"
"""The advisor's chat model resource."""


class ReviewAgent(Agent):
    """Rates each review with its rating strategy, aggregates per product, asks for advice.

    Args:
        rating: the rating strategy's name (``strategies.RATINGS``); it is the
            ``ask_rating`` action's configuration, so the plan carries it to every runner.

    Raises:
        ValueError: for an unknown strategy.
    """

    def __init__(self, rating: str) -> None:
        super().__init__()
        strategy(rating)  # an unknown name fails here, not at the first review
        self.rating = rating
        self.add_action("ask_rating", [InputEvent], ReviewAgent.ask_rating,
                        config={"rating": rating})

    @staticmethod
    async def ask_rating(event: InputEvent, ctx: RunnerContext) -> None:
        """Rate the review, record it and emit its rows; for an end marker, the final advice.

        Raises:
            ValueError: when the strategy's chat failed or its answer is not a valid
                ``Rating`` (the record then goes to the error output with its line).
        """
        record = event.input
        if is_end_marker(record):
            await _finish(ctx, record)
            return
        rate = strategy(ctx.action_config["rating"])
        await _record(ctx, record, await rate(ctx, record["review"]))


def _source(record: dict[str, Any]) -> dict[str, Any]:
    partition = record.get("partition")  # a Kafka record: line is its offset
    return {} if partition is None else {"partition": partition}


async def _record(ctx: RunnerContext, record: dict[str, Any], rated: Rated) -> None:
    """Fold a review's rating into the product's memory; emit its rows, and advice when due."""
    mem = ctx.short_term_memory
    rating = rated.rating
    count = mem.get("count", 0) + 1
    total = mem.get("total", 0) + rating.score
    model_rated = mem.get("model_rated", 0) + (1 if rated.by_model else 0)
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


async def _advise(ctx: RunnerContext, record: dict[str, Any], final: bool) -> None:
    """Ask the ``advisor`` sub-agent for suggestions on this product; emit the advice row."""
    mem = ctx.short_term_memory
    digest = build_digest(mem, ctx.key)
    handle = await ctx.submit_subagent(ADVISOR, digest.model_dump())
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


class ReviewerAgent(Agent):
    """The ``reviewer`` sub-agent of the ``delegate`` rating: rates one ``ReviewTask``."""

    @action(InputEvent)
    @staticmethod
    async def rate(event: InputEvent, ctx: RunnerContext) -> None:
        """Rate ``event.input["review"]`` with a chat on ``review_model``; emit the rating.

        Raises:
            ValueError: when the chat failed or its answer is not a valid ``Rating`` (the
                delegation then fails, and the orchestrator is told why).
        """
        rating = await model_rating(ctx, event.input["review"], REVIEW_MODEL)
        ctx.send_event(OutputEvent(output=rating.model_dump()))


class ProductAdvisorAgent(Agent):
    """The ``advisor`` sub-agent: writes suggestions for one product from its digest."""

    @action(InputEvent)
    @staticmethod
    async def advise(event: InputEvent, ctx: RunnerContext) -> None:
        """Ask ``advice_model`` for ``Advice`` on the ``ProductDigest`` input; emit it.

        Raises:
            ValueError: when the model's answer is not a valid ``Advice`` (the sub-agent call
                then fails, and the caller says why in the advice row).
        """
        digest = ProductDigest.model_validate(event.input)
        response = await ctx.chat(ADVICE_MODEL, [ChatMessage(content=digest_message(digest))],
                                  output_schema=advice_schema(digest))
        try:
            advice = Advice.model_validate(response.structured if response.structured is not None
                                           else orjson.loads(response.message.content))
        except (ValidationError, orjson.JSONDecodeError) as e:
            raise ValueError(f"the model's advice is invalid: {e}") from e
        ctx.send_event(OutputEvent(output={
            "suggestions": [tidy_suggestion(s) for s in advice.suggestions]}))
