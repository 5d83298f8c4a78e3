"""The default rating of the review job: a fast two-member committee, the chat model when unsure.

Every review is first scored by two deterministic, CPU-cheap scorers:

- the job's lexicon scorer (``lexicon_rating``: counts of positive and negative words, the
  same scorer as ``--model scripted``), and
- VADER (Hutto & Gilbert, "VADER: A Parsimonious Rule-based Model for Sentiment Analysis of
  Social Media Text", ICWSM 2014; the ``vaderSentiment`` package, MIT licence), a published
  general-purpose lexicon-and-rules method that also weighs negation, intensifiers, capitals,
  punctuation and "but" clauses. Its compound score in ``[-1, 1]`` is cut into five equal-width
  bins (``< -0.6`` -> 1, ``< -0.2`` -> 2, ``< 0.2`` -> 3, ``< 0.6`` -> 4, else 5): a plain
  mapping, not fitted to any labels.

The review is **unsure** when the two scores are 2 or more apart, or both are neutral (3:
neither scorer found an opinion); the job then asks the chat model (see
``jobs/_review_agents.py``). This is query by committee: the items the cheap members disagree
on, or have no opinion on, go to the stronger, costlier judge. Otherwise the review is
**confident** and its score is the lexicon's (with the lexicon's reasons).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from .review_analysis import Rating, lexicon_rating

__all__ = ["FastRating", "fast_rating", "vader_compound", "vader_score", "committee_unsure"]


@functools.lru_cache(maxsize=1)
def _analyzer() -> Any:
    try:
        from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer
    except ImportError as e:  # pragma: no cover - installed by make setup (extra "jobs")
        raise ImportError("the default rating needs vaderSentiment: run `make setup` or "
                          "pip install 'flink-agents-py[jobs]'") from e
    return SentimentIntensityAnalyzer()


def vader_compound(text: str) -> float:
    """VADER's normalized compound sentiment of ``text``, in ``[-1, 1]``."""
    return float(_analyzer().polarity_scores(text)["compound"])


def vader_score(text: str) -> int:
    """VADER's compound score of ``text`` cut into five equal-width bins, 1..5."""
    c = vader_compound(text)
    return 1 if c < -0.6 else 2 if c < -0.2 else 3 if c < 0.2 else 4 if c < 0.6 else 5


@dataclass(frozen=True)
class FastRating:
    """The committee's verdict on one review.

    Attributes:
        rating: the rating to use when confident (the lexicon's score and reasons).
        lexicon: the lexicon scorer's score.
        vader: VADER's binned score.
        unsure: whether the review should go to the chat model.
    """

    rating: Rating
    lexicon: int
    vader: int
    unsure: bool


UNSURE_GAP = 2
"""Committee scores this far apart (or more) make a review unsure."""


def committee_unsure(lexicon: int, vader: int) -> bool:
    """Whether two committee scores leave the review unsure: ``UNSURE_GAP`` or more apart, or
    both neutral (3)."""
    return abs(lexicon - vader) >= UNSURE_GAP or lexicon == vader == 3


def fast_rating(text: str) -> FastRating:
    """Score ``text`` with the committee (deterministic; well under a millisecond a review)."""
    lex = lexicon_rating(text)
    vad = vader_score(text)
    return FastRating(rating=lex, lexicon=lex.score, vader=vad,
                      unsure=committee_unsure(lex.score, vad))
