"""The rating step of the review agent, one strategy per way of rating a review.

The agent's action calls the strategy its configuration names (``ctx.action_config
["rating"]``, set by ``agent.ReviewAgent``); each takes the action's context and the review
text and returns a ``Rated``:

- ``committee``: the fast committee (``scoring.fast_rating``) alone, no chat model;
- ``model``: a chat on ``review_model`` for every review;
- ``hybrid``: the committee, and a chat on ``review_model`` only for the reviews it is unsure
  about; when that chat fails or its answer is unusable the committee's rating stands;
- ``delegate``: a chat on ``orchestrator_model``, which delegates the review to the
  ``reviewer`` sub-agent (``agent.ReviewerAgent``) and answers with its rating.

A chat is awaited inside the action (``ctx.chat``), so it is a durable call: recorded in keyed
state and replayed, not repeated, after a restore.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import orjson
from pydantic import ValidationError

from flink_agents_py.api import ChatMessage, ChatResponseError, RunnerContext

from .models import RATING_SCHEMA, Rating
from .scoring import fast_rating

__all__ = ["ORCHESTRATOR_MODEL", "RATINGS", "REVIEW_MODEL", "Rated", "Strategy", "model_rating",
           "strategy"]

REVIEW_MODEL = "review_model"
"""The chat model resource that rates a review."""
ORCHESTRATOR_MODEL = "orchestrator_model"
"""The chat model resource of the ``delegate`` rating (it offers the ``reviewer`` sub-agent)."""

@dataclass(frozen=True)
class Rated:
    """A review's rating and who gave it.

    Attributes:
        rating: the rating.
        by_model: whether a chat model gave it (counted in ``model_rated``).
    """

    rating: Rating
    by_model: bool


Strategy = Callable[[RunnerContext, str], Awaitable[Rated]]
"""A rating strategy: ``await strategy(ctx, review_text)`` gives the ``Rated``."""


async def model_rating(ctx: RunnerContext, text: str, chat_model: str) -> Rating:
    """Rate ``text`` with a whole chat on ``chat_model`` (``ctx.chat``, ``RATING_SCHEMA``).

    Args:
        ctx: the action's context.
        text: the review.
        chat_model: the chat model resource's name.

    Returns:
        The validated rating.

    Raises:
        ValueError: when the chat failed or its answer is not a valid ``Rating``.
    """
    try:
        result = await ctx.chat(chat_model, [ChatMessage(content=f"Review: {text}")],
                                output_schema=RATING_SCHEMA)
    except ChatResponseError as e:
        raise ValueError(f"the rating chat failed: {e.reason}") from e
    try:
        return Rating.model_validate(result.structured if result.structured is not None
                                     else orjson.loads(result.message.content))
    except (ValidationError, orjson.JSONDecodeError) as e:
        raise ValueError(f"the model's rating is invalid: {e}") from e


async def _committee(ctx: RunnerContext, text: str) -> Rated:
    return Rated(fast_rating(text).rating, by_model=False)


async def _model(ctx: RunnerContext, text: str) -> Rated:
    return Rated(await model_rating(ctx, text, REVIEW_MODEL), by_model=True)


async def _hybrid(ctx: RunnerContext, text: str) -> Rated:
    fast = fast_rating(text)
    if fast.unsure:
        try:
            return Rated(await model_rating(ctx, text, REVIEW_MODEL), by_model=True)
        except ValueError:
            pass  # the committee's rating stands; model_rated does not count it
    return Rated(fast.rating, by_model=False)


async def _delegate(ctx: RunnerContext, text: str) -> Rated:
    return Rated(await model_rating(ctx, text, ORCHESTRATOR_MODEL), by_model=True)


_STRATEGIES: dict[str, Strategy] = {
    "committee": _committee, "model": _model, "hybrid": _hybrid, "delegate": _delegate}
RATINGS = tuple(_STRATEGIES)
"""The strategies' names, for ``--rating``."""


def strategy(name: str) -> Strategy:
    """The rating strategy called ``name``.

    Returns:
        The strategy.

    Raises:
        ValueError: for an unknown name (lists the known ones).
    """
    try:
        return _STRATEGIES[name]
    except KeyError:
        raise ValueError(f"unknown --rating {name!r} ({', '.join(RATINGS)})") from None
