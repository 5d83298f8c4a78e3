"""The job's data shapes: a review's rating, the delegated task, a product's digest and advice.

Each is a pydantic model; the chat models are asked for JSON of the rating and advice schemas
(``RATING_SCHEMA``, ``ADVICE_SCHEMA``) and their answers are validated by these models.
Both are bounded in count and length: llama.cpp's JSON-schema grammar ignores
``minimum``/``maximum`` and lets small models loop on open-ended arrays (measured with SmolLM2
here), so a bounded schema is what keeps a small model's answer short.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, StringConstraints

__all__ = ["ADVICE_SCHEMA", "RATING_SCHEMA", "SUGGESTION_CHARS", "Advice", "ProductDigest",
           "Rating", "ReviewTask", "Score"]

Score = Literal[1, 2, 3, 4, 5]
"""A review's score: 1 (very negative) to 5 (very positive); 3 is mixed or neutral."""


class Rating(BaseModel):
    """The rating of one review.

    Reasons come first so an answer cut by ``max_tokens`` has said why before the score. The
    score is an enum, not a bounded integer (see the module docstring).

    Attributes:
        reasons: at most three short phrases from the review that explain the score.
        score: 1 (very negative) to 5 (very positive); 3 is mixed or neutral.
    """

    reasons: list[Annotated[str, StringConstraints(max_length=80)]] = Field(
        default_factory=list, max_length=3)
    score: Score


def _schema(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON Schema of ``model`` without its description (the prompt says what to do)."""
    return {k: v for k, v in model.model_json_schema().items() if k != "description"}


RATING_SCHEMA = _schema(Rating)
"""The JSON Schema a rating chat asks for."""


class ReviewTask(BaseModel):
    """What the reviewer sub-agent takes (delegate mode): one review's text."""

    # the docstring is the description of the callable offered to the orchestrator model

    review: str


SUGGESTION_CHARS = 140
"""The longest suggestion the advice schema allows, in characters."""


class Advice(BaseModel):
    """The ``advisor`` sub-agent's answer: at most three suggestions of bounded length.

    Attributes:
        suggestions: one to three improvement suggestions, most important first.
    """

    suggestions: list[Annotated[str, StringConstraints(min_length=1,
                                                       max_length=SUGGESTION_CHARS)]] = Field(
        min_length=1, max_length=3)


ADVICE_SCHEMA = _schema(Advice)
"""The JSON Schema an advice chat asks for (``advice.advice_schema`` narrows it per product)."""


class ProductDigest(BaseModel):
    """What the advisor gets: the aggregated reviews of one product."""

    # fields, as ``advice.build_digest`` fills them: the product id (the agent key); how many
    # reviews were rated and their mean score; reviews per score ("5" down to "1"); how many
    # scored 3 or less ("critical"); complaint theme -> critical reviews mentioning it, most
    # first; a few distinct excerpts of critical and of positive reviews

    product: str
    count: int
    mean_score: float
    histogram: dict[str, int]
    critical: int
    themes: dict[str, int]
    complaints: list[str]
    praises: list[str]
