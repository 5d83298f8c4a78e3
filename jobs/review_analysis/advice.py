"""Product advice: when it is due, the digest kept in short-term memory, what the advisor reads.

The review agent keeps, in each product's short-term memory, a bounded digest of its reviews
(count, mean, histogram of scores, how many critical reviews mention each complaint theme, a
few distinct critical and positive excerpts). When advice is due (``advice_due``: the
product's count reaches 200, 400, 800, ... reviews, and once more at the end of bounded
input, announced by an ``end_of_input`` marker per product) it hands the digest
(``models.ProductDigest``) to the ``advisor`` internal sub-agent, which asks its chat model
for at most three improvement suggestions (``models.Advice``) and answers with them.

Everything here is a pure function of its arguments (and the memory it is given).
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from .models import ADVICE_SCHEMA, SUGGESTION_CHARS, ProductDigest

__all__ = ["ADVICE_FIRST_AT", "END_OF_INPUT", "THEMES", "advice_due",
           "advice_schema", "build_digest", "digest_message", "end_of_input_markers",
           "is_end_marker", "plural", "themes_of", "tidy_suggestion", "update_digest"]

ADVICE_FIRST_AT = 200
"""The first count at which a product gets advice; then at each doubling (400, 800, ...)."""

MAX_COMPLAINTS = 3
MAX_PRAISES = 1
EXCERPT_CHARS = 160

#: Complaint themes, each with the words (or word pairs) that mark a review as mentioning it.
THEMES: dict[str, tuple[str, ...]] = {
    "size and fit": ("size", "sizes", "sized", "small", "big", "large", "tight", "loose",
                     "narrow", "wide", "fit", "fits", "fitting", "snug", "roomy", "long",
                     "short", "smaller", "bigger", "larger"),
    "comfort and support": ("comfort", "uncomfortable", "hurt", "hurts", "pain", "painful",
                            "blister", "blisters", "support", "arch", "cushion", "cushioning",
                            "sore", "stiff"),
    "durability": ("broke", "broken", "apart", "ripped", "rip", "tear", "torn", "hole", "holes",
                   "worn", "coming off", "came off", "cracked", "lasted", "durable",
                   "durability", "peeling", "fell apart", "elastic", "elastics"),
    "quality and defects": ("cheap", "quality", "defective", "damaged", "stain", "stained",
                            "flimsy", "smell", "smells", "squeak", "squeaks", "squeaky",
                            "glue", "stitching", "defect"),
    "look and colour": ("color", "colour", "colors", "look", "looks", "picture", "pictures",
                        "photo", "pictured", "described", "description", "shade"),
    "price and value": ("price", "expensive", "overpriced", "money", "worth", "value", "cost"),
    "order and delivery": ("shipping", "shipped", "delivery", "arrived", "package", "wrong",
                           "missing", "received", "seller", "return", "returned", "returning",
                           "refund", "exchange"),
}

_WORDS = re.compile(r"[a-z']+")
END_OF_INPUT = "end_of_input"
"""The ``kind`` of an end-of-input marker record."""


# -- when advice is due ------------------------------------------------------------------------
def advice_due(count: int) -> bool:
    """Whether a product whose count just reached ``count`` gets a refreshed advice row.

    At ``ADVICE_FIRST_AT`` reviews and at every doubling after it: O(log n) advice calls per
    product on an unbounded stream. The end of bounded input adds a final one.

    Returns:
        ``True`` at 200, 400, 800, ... reviews.
    """
    n = ADVICE_FIRST_AT
    while n < count:
        n *= 2
    return n == count


def is_end_marker(record: Any) -> bool:
    """Whether ``record`` is an end-of-input marker (not a review)."""
    return isinstance(record, dict) and record.get("kind") == END_OF_INPUT


def end_of_input_markers(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One marker per product of ``records``: ``{"kind": "end_of_input", "id", "line"}``.

    Args:
        records: the parsed reviews, in input order.

    Returns:
        The markers, in the order of their lines. A marker's ``line`` is its product's last
        line, so the final advice sorts right after that product's last review.
    """
    last: dict[str, int] = {}
    for r in records:
        last[r["id"]] = r["line"]
    return [{"kind": END_OF_INPUT, "id": pid, "line": line}
            for pid, line in sorted(last.items(), key=lambda kv: kv[1])]


# -- the digest in short-term memory -----------------------------------------------------------
def themes_of(text: str) -> list[str]:
    """The complaint themes ``text`` mentions, in ``THEMES`` order."""
    lower = text.lower()
    words = set(_WORDS.findall(lower))
    return [name for name, cues in THEMES.items()
            if any((c in lower) if " " in c else (c in words) for c in cues)]


def _excerpt(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= EXCERPT_CHARS else text[:EXCERPT_CHARS - 3].rstrip() + "..."


def _keep(items: list[list[Any]], entry: list[Any], limit: int, critical: bool) -> list[list[Any]]:
    """Add ``[score, length, line, excerpt]`` to ``items`` (distinct excerpts only).

    Returns:
        The ``limit`` most telling entries: lowest (critical) or highest score first, then
        the longest, then the earliest.
    """
    if any(e[3] == entry[3] for e in items):
        return items
    out = [*items, entry]
    out.sort(key=lambda e: (e[0] if critical else -e[0], -e[1], e[2]))
    return out[:limit]


def update_digest(mem: Any, score: int, text: str, line: Any) -> None:
    """Fold one rated review into the product's digest.

    Args:
        mem: the product's short-term memory.
        score: the review's score.
        text: the review's text.
        line: the review's line (offset on Kafka), the tie-break between equal excerpts.
    """
    hist = dict(mem.get("hist") or {})
    hist[str(score)] = hist.get(str(score), 0) + 1
    mem.set("hist", hist)
    excerpt = _excerpt(text)
    entry = [score, len(excerpt), line if isinstance(line, int) else -1, excerpt]
    if score <= 3:
        mem.set("critical", (mem.get("critical") or 0) + 1)
        themes = dict(mem.get("themes") or {})
        for t in themes_of(text):
            themes[t] = themes.get(t, 0) + 1
        mem.set("themes", themes)
        if excerpt:
            mem.set("complaints", _keep(list(mem.get("complaints") or []), entry,
                                        MAX_COMPLAINTS, critical=True))
    elif excerpt:
        mem.set("praises", _keep(list(mem.get("praises") or []), entry, MAX_PRAISES,
                                 critical=False))


def build_digest(mem: Any, product: str) -> ProductDigest:
    """The ``ProductDigest`` of the product whose short-term memory is ``mem``."""
    count = mem.get("count", 0)
    hist = mem.get("hist") or {}
    themes = mem.get("themes") or {}
    return ProductDigest(
        product=str(product), count=count,
        mean_score=round(mem.get("total", 0) / count, 4) if count else 0.0,
        histogram={str(s): hist.get(str(s), 0) for s in range(5, 0, -1)},
        critical=mem.get("critical") or 0,
        themes=dict(sorted(themes.items(), key=lambda kv: (-kv[1], kv[0]))),
        complaints=[e[3] for e in mem.get("complaints") or []],
        praises=[e[3] for e in mem.get("praises") or []],
    )


# -- what the advisor reads and answers --------------------------------------------------------
def plural(n: int, noun: str) -> str:
    """``"1 review"``, ``"2 reviews"``."""
    return f"{n} {noun}" + ("" if n == 1 else "s")


def digest_message(d: ProductDigest) -> str:
    """The user message that presents digest ``d`` to the advisor's chat model."""
    stars = ", ".join(f"{plural(n, 'time')} {s}" for s, n in d.histogram.items() if n)
    lines = [f"Product {d.product}: {plural(d.count, 'review')}, mean rating "
             f"{d.mean_score:.2f} of 5 (rated {stars})."]
    if d.themes:
        lines.append(f"Complaint themes in the {plural(d.critical, 'critical review')}: "
                     + "; ".join(f"{t} ({n})" for t, n in d.themes.items()) + ".")
    else:
        lines.append(f"No recurring complaint theme ({plural(d.critical, 'critical review')}).")
    if d.complaints:
        lines.append("Critical reviews:")
        lines.extend(f"- {c}" for c in d.complaints)
    if d.praises:
        lines.append("Positive reviews:")
        lines.extend(f"- {p}" for p in d.praises)
    return "\n".join(lines)


def advice_schema(digest: ProductDigest) -> dict[str, Any]:
    """``ADVICE_SCHEMA`` allowing as many suggestions as the digest has evidence for.

    Returns:
        A copy of the schema whose ``maxItems`` is one per complaint theme, at most one per
        critical review, at least one and at most three (a small model otherwise pads a
        one-review product with invented problems).
    """
    n = max(1, min(3, digest.critical, len(digest.themes)))
    schema: dict[str, Any] = orjson.loads(orjson.dumps(ADVICE_SCHEMA))
    schema["properties"]["suggestions"]["maxItems"] = n
    return schema


def tidy_suggestion(text: str) -> str:
    """Collapse white space and end ``text`` as a sentence.

    Returns:
        The suggestion; one cut at ``SUGGESTION_CHARS`` by the grammar is trimmed back to its
        last complete sentence or clause and marked with an ellipsis.
    """
    text = " ".join(text.split()).rstrip(",;: ")
    if len(text) < SUGGESTION_CHARS - 1 or text.endswith((".", "!", ")")):
        return text if text.endswith((".", "!", "?", ")")) else text + "."
    for stop in (". ", "; ", ", "):
        cut = text.rfind(stop)
        if cut >= SUGGESTION_CHARS // 3:
            return text[:cut + 1].rstrip(",;") + ("" if stop == ". " else "...")
    return text.rstrip() + "..."
