"""Product advice: per-product aggregates of the reviews and the ``advisor`` sub-agent.

The review agent keeps, in each product's short-term memory, a bounded digest of its reviews
(count, mean, histogram of scores, how many critical reviews mention each complaint theme, a
few distinct critical and positive excerpts). When advice is due (``advice_due``: the
product's count reaches 200, 400, 800, ... reviews, and once more at the end of bounded
input) it hands the digest (``ProductDigest``) to the ``advisor`` internal sub-agent
(``ProductAdvisorAgent``), which asks its chat model for at most three improvement
suggestions (``Advice``); the review agent emits them as a ``product_advice`` row.

``scripted_advice`` is the deterministic advisor of ``--model scripted``: it turns the
digest's most frequent complaint themes into fixed suggestions.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

import orjson
from pydantic import BaseModel, Field, StringConstraints, ValidationError

from flink_agents_py.api import Agent, ChatMessage, InputEvent, OutputEvent, RunnerContext, action

__all__ = [
    "ADVICE_PROMPT", "ADVICE_SCHEMA", "Advice", "ProductDigest", "ProductAdvisorAgent",
    "advice_due", "update_digest", "build_digest", "digest_message", "scripted_advice",
    "END_OF_INPUT", "end_of_input_markers", "is_end_marker", "THEMES", "tidy_suggestion",
    "advice_schema",
]

ADVICE_FIRST_AT = 200
"""The first count at which a product gets advice; then at each doubling (400, 800, ...)."""
SUGGESTION_CHARS = 140

MAX_COMPLAINTS = 3
MAX_PRAISES = 1
EXCERPT_CHARS = 160

ADVICE_PROMPT = (
    "You advise the team that makes and sells a product. You get a summary of its customer "
    "reviews. Answer with JSON holding \"suggestions\": up to three improvement "
    "suggestions, most important first. Each is one short sentence of at most 15 words that "
    "names a problem customers report and says what to change. Do not copy the reviews and "
    "do not invent problems they do not mention; if there are no complaints, say what to keep."
)


class Advice(BaseModel):
    """The advisor's answer: at most three suggestions of bounded length.

    Bounded in count and length: llama.cpp's JSON-schema grammar then cannot loop.
    """

    suggestions: list[Annotated[str, StringConstraints(min_length=1,
                                                       max_length=SUGGESTION_CHARS)]] = Field(
        min_length=1, max_length=3)


ADVICE_SCHEMA = {k: v for k, v in Advice.model_json_schema().items() if k != "description"}


class ProductDigest(BaseModel):
    """What the advisor gets: the aggregated reviews of one product."""

    product: str
    count: int
    mean_score: float
    histogram: dict[str, int]
    critical: int
    themes: dict[str, int]
    complaints: list[str]
    praises: list[str]


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

_THEME_TIPS = {
    "size and fit": "check the size chart against the real fit and say in the listing how it runs",
    "comfort and support": "improve cushioning and support, or state clearly what use it suits",
    "durability": "reinforce the parts that fail early and check materials and assembly",
    "quality and defects": "tighten quality control before shipping",
    "look and colour": "make photos and colour names match the product",
    "price and value": "justify the price in the listing or review the pricing",
    "order and delivery": "check order accuracy, packing and the returns experience",
}

_WORDS = re.compile(r"[a-z']+")
END_OF_INPUT = "end_of_input"


# -- end of bounded input ----------------------------------------------------------------
def is_end_marker(record: Any) -> bool:
    """Whether ``record`` is an end-of-input marker (not a review)."""
    return isinstance(record, dict) and record.get("kind") == END_OF_INPUT


def end_of_input_markers(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One marker per product of ``records``: ``{"kind": "end_of_input", "id", "line"}``.

    ``line`` is the product's last line, so its final advice sorts right after its last
    review. Markers come in the order of those lines (deterministic).
    """
    last: dict[str, int] = {}
    for r in records:
        last[r["id"]] = r["line"]
    return [{"kind": END_OF_INPUT, "id": pid, "line": line}
            for pid, line in sorted(last.items(), key=lambda kv: kv[1])]


def advice_due(count: int) -> bool:
    """Whether a product whose count just reached ``count`` gets a refreshed advice row.

    At ``ADVICE_FIRST_AT`` reviews and at every doubling after it: O(log n) advice calls per
    product on an unbounded stream. The end of bounded input adds a final one.
    """
    n = ADVICE_FIRST_AT
    while n < count:
        n *= 2
    return n == count


# -- the digest in short-term memory -------------------------------------------------------
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
    """Add ``[score, length, line, excerpt]`` to ``items`` (distinct excerpts only), keeping
    the ``limit`` most telling: lowest (critical) or highest score first, then the longest,
    then the earliest."""
    if any(e[3] == entry[3] for e in items):
        return items
    out = [*items, entry]
    out.sort(key=lambda e: (e[0] if critical else -e[0], -e[1], e[2]))
    return out[:limit]


def update_digest(mem: Any, score: int, text: str, line: Any) -> None:
    """Fold one rated review into the product's digest in short-term memory ``mem``."""
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


def _n(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def digest_message(d: ProductDigest) -> str:
    """The user message that presents digest ``d`` to the advisor's chat model."""
    stars = ", ".join(f"{_n(n, 'time')} {s}" for s, n in d.histogram.items() if n)
    lines = [f"Product {d.product}: {_n(d.count, 'review')}, mean rating {d.mean_score:.2f} "
             f"of 5 (rated {stars})."]
    if d.themes:
        lines.append(f"Complaint themes in the {_n(d.critical, 'critical review')}: "
                     + "; ".join(f"{t} ({n})" for t, n in d.themes.items()) + ".")
    else:
        lines.append(f"No recurring complaint theme ({_n(d.critical, 'critical review')}).")
    if d.complaints:
        lines.append("Critical reviews:")
        lines.extend(f"- {c}" for c in d.complaints)
    if d.praises:
        lines.append("Positive reviews:")
        lines.extend(f"- {p}" for p in d.praises)
    return "\n".join(lines)


# -- the advisor sub-agent -----------------------------------------------------------------
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
        response = await ctx.chat("advice_model", [ChatMessage(content=digest_message(digest))],
                                  output_schema=advice_schema(digest))
        try:
            advice = Advice.model_validate(response.structured if response.structured is not None
                                           else orjson.loads(response.message.content))
        except (ValidationError, orjson.JSONDecodeError) as e:
            raise ValueError(f"the model's advice is invalid: {e}") from e
        ctx.send_event(OutputEvent(output={
            "suggestions": [tidy_suggestion(s) for s in advice.suggestions]}))


def advice_schema(digest: ProductDigest) -> dict[str, Any]:
    """``ADVICE_SCHEMA`` allowing as many suggestions as the digest has evidence for: one per
    complaint theme, at most one per critical review, at least one and at most three (a small
    model otherwise pads a one-review product with invented problems)."""
    n = max(1, min(3, digest.critical, len(digest.themes)))
    schema = orjson.loads(orjson.dumps(ADVICE_SCHEMA))
    schema["properties"]["suggestions"]["maxItems"] = n
    return schema


def tidy_suggestion(text: str) -> str:
    """Collapse white space; a suggestion cut at ``SUGGESTION_CHARS`` by the grammar is
    trimmed back to its last complete sentence or clause and marked with an ellipsis."""
    text = " ".join(text.split()).rstrip(",;: ")
    if len(text) < SUGGESTION_CHARS - 1 or text.endswith((".", "!", ")")):
        return text if text.endswith((".", "!", "?", ")")) else text + "."
    for stop in (". ", "; ", ", "):
        cut = text.rfind(stop)
        if cut >= SUGGESTION_CHARS // 3:
            return text[:cut + 1].rstrip(",;") + ("" if stop == ". " else "...")
    return text.rstrip() + "..."


# -- the scripted advisor (--model scripted) -------------------------------------------------
_THEMES_LINE = re.compile(r"^Complaint themes in the (\d+) critical reviews?: (.*)\.$", re.M)
_THEME_ITEM = re.compile(r"^(.*) \((\d+)\)$")
_HEAD = re.compile(r"^Product .*: (\d+) reviews?, mean rating ([0-9.]+) of 5", re.M)


def scripted_advice(request: Any) -> dict[str, Any]:
    """Script of the scripted advisor: fixed suggestions for the top complaint themes.

    Reads the digest message (``digest_message``) of the last user message; deterministic.
    """
    text = request.last_user_text
    head = _HEAD.search(text)
    count = int(head.group(1)) if head else 0
    m = _THEMES_LINE.search(text)
    if m is None:
        return {"suggestions": [f"Keep the product as it is: no recurring complaint in "
                                f"{_n(count, 'review')}."]}
    critical = int(m.group(1))
    suggestions = []
    for item in m.group(2).split("; ")[:max(1, min(3, critical))]:  # as advice_schema
        im = _THEME_ITEM.match(item)
        if im is None:
            continue
        theme, n = im.group(1), int(im.group(2))
        tip = _THEME_TIPS.get(theme, "look into it")
        suggestions.append(f"{theme.capitalize()}: {n} of {critical} critical reviews mention "
                           f"it; {tip}.")
    return {"suggestions": suggestions or [f"Keep the product as it is: no recurring "
                                           f"complaint in {_n(count, 'review')}."]}
