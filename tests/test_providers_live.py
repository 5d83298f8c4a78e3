"""Hosted providers, for real. Marked ``live``; skipped unless ``FLINK_AGENTS_PY_LIVE=1`` and
the provider's credentials (or, for Ollama, a model name) are set, so no run of the suite
reaches the internet by accident.

    FLINK_AGENTS_PY_LIVE=1 OPENAI_API_KEY=... ANTHROPIC_API_KEY=... \\
    FLINK_AGENTS_PY_LIVE_OLLAMA_MODEL=llama3.2 pytest -m live tests/test_providers_live.py
"""

from __future__ import annotations

import os

import pytest
from support.providers import only_answer, outputs_of, probe_agent, run_probe

from flink_agents_py.api import ResourceDescriptor
from flink_agents_py.integrations.chat_models import (
    AnthropicChatModel,
    OllamaChatModel,
    OpenAIChatModel,
)

pytestmark = [pytest.mark.live, pytest.mark.timeout(180)]
SCHEMA = {"type": "object", "properties": {"score": {"type": "integer", "enum": [1, 2, 3, 4, 5]}},
          "required": ["score"], "additionalProperties": False}


def _needs(*names: str) -> None:
    if os.environ.get("FLINK_AGENTS_PY_LIVE") != "1":
        pytest.skip("live provider tests run only with FLINK_AGENTS_PY_LIVE=1")
    missing = [n for n in names if not os.environ.get(n)]
    if missing:
        pytest.skip(f"needs {', '.join(missing)}")


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: the first.
        b: the second.
    """
    return a + b


def _connections() -> dict[str, tuple[tuple[str, ...], ResourceDescriptor]]:
    return {
        "openai": (("OPENAI_API_KEY",), ResourceDescriptor(
            OpenAIChatModel, default_model=os.environ.get("FLINK_AGENTS_PY_LIVE_OPENAI_MODEL",
                                                          "gpt-4o-mini"))),
        "anthropic": (("ANTHROPIC_API_KEY",), ResourceDescriptor(AnthropicChatModel, **(
            {"default_model": os.environ["FLINK_AGENTS_PY_LIVE_ANTHROPIC_MODEL"]}
            if os.environ.get("FLINK_AGENTS_PY_LIVE_ANTHROPIC_MODEL") else {}))),
        "ollama": (("FLINK_AGENTS_PY_LIVE_OLLAMA_MODEL",), ResourceDescriptor(
            OllamaChatModel,
            default_model=os.environ.get("FLINK_AGENTS_PY_LIVE_OLLAMA_MODEL", ""))),
    }


@pytest.mark.parametrize("provider", ["openai", "anthropic", "ollama"])
def test_live_tool_round_and_structured_output(provider):
    needs, conn = _connections()[provider]
    _needs(*needs)
    res = run_probe(probe_agent(conn, tools=["add"], tool_fns=[add], error_policy="retry"),
                    [{"key": "k", "q": "Use the add tool to add 2 and 3, then rate the number 5 "
                                        "on a 1 to 5 scale as JSON {\"score\": n}.",
                      "schema": SCHEMA}])
    ans = only_answer(res)
    assert ans["error"] is None, ans["error"]
    assert ans["structured"]["score"] in (1, 2, 3, 4, 5)
    assert ans["usage"]["input_tokens"] > 0
    assert outputs_of(res, "results"), "the model did not call the tool"
