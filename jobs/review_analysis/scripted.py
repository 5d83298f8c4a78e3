"""The scripted chat models of ``--model scripted``: deterministic, no model file, no server.

Each function is the script of a ``ScriptedChatModel`` (``build`` names it by
``module:qualname``): it receives the whole request and returns the answer. The tests and the
crash checker run the job with them; the rows are the same on every run and every runner.

- ``scripted_rating``: the review model, the lexicon scorer (``scoring.lexicon_rating``);
- ``scripted_orchestrator``: the orchestrator of the ``delegate`` rating, which calls the
  ``reviewer`` sub-agent's callable and answers with its rating;
- ``scripted_advice``: the advisor's model, fixed suggestions for the top complaint themes.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from flink_agents_py.api import ChatMessage, MessageRole, ToolCall

from .advice import plural
from .scoring import lexicon_rating

__all__ = ["scripted_advice", "scripted_orchestrator", "scripted_rating"]


def scripted_rating(request: Any) -> dict[str, Any]:
    """The lexicon rating of the request's last user message (``Review: <text>``)."""
    return lexicon_rating(request.last_user_text).model_dump()


def scripted_orchestrator(request: Any) -> Any:
    """The orchestrator of the ``delegate`` rating.

    Returns:
        First turn: a message calling ``_subagent_reviewer`` with ``{"review": text}`` (the
        review of the last user message). Second turn: the rating the reviewer returned (its
        one output), or the failure text when the delegation failed.
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


_THEME_TIPS = {
    "size and fit": "check the size chart against the real fit and say in the listing how it runs",
    "comfort and support": "improve cushioning and support, or state clearly what use it suits",
    "durability": "reinforce the parts that fail early and check materials and assembly",
    "quality and defects": "tighten quality control before shipping",
    "look and colour": "make photos and colour names match the product",
    "price and value": "justify the price in the listing or review the pricing",
    "order and delivery": "check order accuracy, packing and the returns experience",
}
_THEMES_LINE = re.compile(r"^Complaint themes in the (\d+) critical reviews?: (.*)\.$", re.M)
_THEME_ITEM = re.compile(r"^(.*) \((\d+)\)$")
_HEAD = re.compile(r"^Product .*: (\d+) reviews?, mean rating ([0-9.]+) of 5", re.M)


def scripted_advice(request: Any) -> dict[str, Any]:
    """Fixed suggestions for the top complaint themes of the digest message.

    Returns:
        ``{"suggestions": [...]}`` for the digest message (``advice.digest_message``) of the
        last user message: as many as ``advice.advice_schema`` allows.
    """
    text = request.last_user_text
    head = _HEAD.search(text)
    count = int(head.group(1)) if head else 0
    keep = {"suggestions": [f"Keep the product as it is: no recurring complaint in "
                            f"{plural(count, 'review')}."]}
    m = _THEMES_LINE.search(text)
    if m is None:
        return keep
    critical = int(m.group(1))
    suggestions = []
    for item in m.group(2).split("; ")[:max(1, min(3, critical))]:
        im = _THEME_ITEM.match(item)
        if im is None:
            continue
        theme, n = im.group(1), int(im.group(2))
        tip = _THEME_TIPS.get(theme, "look into it")
        suggestions.append(f"{theme.capitalize()}: {n} of {critical} critical reviews mention "
                           f"it; {tip}.")
    return {"suggestions": suggestions} if suggestions else keep
