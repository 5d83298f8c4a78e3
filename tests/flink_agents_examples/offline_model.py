"""The offline model the ported examples use instead of an Ollama server (ours).

``ResourceDescriptor(clazz=OFFLINE_CONNECTION, function="offline_model:answer")`` is the one
line each example changes besides its imports. ``answer`` reads the request the way the
examples' prompts write it and answers as a model following the prompt would: review
scores (calling ``notify_shipping_manager`` first for a shipping complaint), product
suggestions, aspect sentiments and their summary, and arithmetic through the math skill.
"""

from __future__ import annotations

import json
import re
from typing import Any

from flink_agents_py.testing import ScriptedRequest, tool_call, tool_calls

OFFLINE_CONNECTION = "flink_agents_py.testing.ScriptedChatModel"
"""The class path of the offline connection (a scripted chat model)."""

_SHIPPING = ("damaged", "wet", "broken", "shipping", "arrived")


def _text(request: ScriptedRequest) -> str:
    return "\n".join(m.content for m in request.messages)


def _review(request: ScriptedRequest) -> tuple[str, str]:
    users = [m.content for m in request.messages if m.role == "user"]
    text = users[-1] if users else ""
    found = re.search(r'"id":\s*"?([A-Za-z0-9_-]+)"?[,\s]+"review":\s*(.*)', text, re.DOTALL)
    if found is None:
        return "unknown", text
    return found.group(1), found.group(2).strip().strip('"').strip()


def answer(request: ScriptedRequest) -> Any:
    """The answer to one request (see the module docstring)."""
    text = _text(request)
    last = request.messages[-1].content if request.messages else ""
    if last.startswith("Judge the"):
        aspect = last.split('"')[1]
        return {"aspect": aspect, "result": "positive" if aspect == "taste" else "negative"}
    if "Judgments:" in last:
        return {"summary": ", ".join(last.split("Judgments: ")[1].split())}
    if "suggestion_list" in text:
        return {"suggestion_list": ["improve packaging", "check sizing", "keep the comfort"]}
    offered = {t.name for t in request.tools}
    if "load_skill" in offered:
        return _math(request, offered)
    product, review = _review(request)
    shipping = any(w in review.lower() for w in _SHIPPING)
    if shipping and "notify_shipping_manager" in offered and not request.tool_results:
        return tool_calls(tool_call("notify_shipping_manager", "notify", id=product,
                                    review=review[:80]))
    score = 1 if shipping else 5
    body = {"id": product, "score": score, "reasons": ["shipping damage"] if shipping else []}
    if request.output_schema is not None:  # structured output: the JSON only
        return body
    return "<think>reading the review</think>" + json.dumps(body)


def _math(request: ScriptedRequest, offered: set[str]) -> Any:
    """The math agent: load the skill, run ``bc`` through ``bash``, answer with its output."""
    question = [m.content for m in request.messages if m.role == "user"][-1]
    tool_msgs = [m for m in request.messages if m.role == "tool"]
    if not tool_msgs:
        return tool_calls(tool_call("load_skill", "skill", name="math-calculator"))
    if len(tool_msgs) == 1 and "bash" in offered:
        expr = re.sub(r"^(What is|Compute)\s+", "", question).rstrip("?.")
        expr = expr.replace(" divided by ", " / ")
        return tool_calls(tool_call("bash", "bc", command=f"echo '{expr}' | bc"))
    return json.loads(tool_msgs[-1].content)["output"].strip()
