"""Provider wire formats and tool calling, against local servers speaking each provider's format.

Each test comes from a public report of a similar system:

- A model cut at its output token limit while writing a tool call (OpenAI's
  ``finish_reason: "length"``, Anthropic's ``stop_reason: "max_tokens"`` with a partial
  ``input``, Ollama's ``done_reason: "length"``): the call ran with partial arguments, or the
  chat failed saying its arguments are not JSON (LibreChat agents #280, jac #6766, OpenRouter
  typescript-agent #125). None runs now, and the chat's error says the answer was cut.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.providers import (
    WireServer,
    anthropic_reply,
    ollama_reply,
    openai_reply,
    outputs_of,
    probe_agent,
    run_probe,
)

from flink_agents_py.api import ChatMessage, ChatResponse, MessageRole, ResourceDescriptor, ToolCall
from flink_agents_py.integrations.chat_models import (
    AnthropicChatModel,
    OllamaChatModel,
    OpenAIChatModel,
)
from flink_agents_py.testing import CallCounter, model_from_function

pytest.importorskip("ollama")
pytest.importorskip("anthropic")
pytest.importorskip("openai")

pytestmark = pytest.mark.timeout(60)

COUNTER = CallCounter()


def write_file(path: str, text: str = "") -> str:
    """Write a file.

    Args:
        path: where.
        text: what.
    """
    COUNTER.count("write_file")
    return f"wrote {len(text)} characters to {path}"


def _openai(srv: WireServer) -> ResourceDescriptor:
    return ResourceDescriptor(OpenAIChatModel, base_url=f"{srv.url}/v1",
                              api_key_env="FAP_TEST_OPENAI_KEY", default_model="gpt-test")


def _anthropic(srv: WireServer) -> ResourceDescriptor:
    return ResourceDescriptor(AnthropicChatModel, base_url=srv.url,
                              api_key_env="FAP_TEST_ANTHROPIC_KEY", default_model="claude-test")


def _ollama(srv: WireServer) -> ResourceDescriptor:
    return ResourceDescriptor(OllamaChatModel, host=srv.url, default_model="llama-test")


@pytest.fixture(autouse=True)
def _keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAP_TEST_OPENAI_KEY", "sk-test")
    monkeypatch.setenv("FAP_TEST_ANTHROPIC_KEY", "sk-ant-test")


# ------------------------------------------------------------------ cut at the token limit
def _cut_openai(complete: bool) -> dict[str, Any]:
    body = openai_reply(None, [("call_1", "write_file", {"path": "a.html", "text": "<p>"})])
    if not complete:  # the JSON text stops mid-string
        body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = \
            '{"path": "a.html", "text": "<html><body><h1>Rep'
    body["choices"][0]["finish_reason"] = "length"
    return body


_CUT: dict[str, Any] = {
    "openai_cut_json": (_openai, lambda: _cut_openai(False), "'length'"),
    "openai_whole_json": (_openai, lambda: _cut_openai(True), "'length'"),
    "anthropic_partial_input": (_anthropic, lambda: anthropic_reply(
        [{"type": "text", "text": "Writing the page."},
         {"type": "tool_use", "id": "toolu_1", "name": "write_file",
          "input": {"path": "a.html"}}], stop_reason="max_tokens"), "'max_tokens'"),
    "ollama_length": (_ollama, lambda: {**ollama_reply(tool_calls=[
        ("write_file", {"path": "a.html"})]), "done_reason": "length"}, "'length'"),
}


@pytest.mark.parametrize("case", list(_CUT))
def test_a_tool_call_cut_at_the_token_limit_is_not_run_and_the_error_says_so(case):
    conn, body, reason = _CUT[case]
    COUNTER.reset()
    with WireServer(lambda req: (200, body())) as srv:
        res = run_probe(probe_agent(conn(srv), tools=["write_file"], tool_fns=[write_file]),
                        [{"key": "k", "q": "write the report page"}])
        n_requests = len(srv.requests)
    assert res.errors == []
    [ans] = outputs_of(res, "answer")
    assert ans["content"] is None
    assert "cut at its output token limit" in ans["error"], ans["error"]
    assert f"finish reason {reason}" in ans["error"] and "'write_file'" in ans["error"]
    assert "raise max_tokens" in ans["error"] and "not JSON" not in ans["error"]
    assert outputs_of(res, "calls") == [] and COUNTER.total == 0
    assert n_requests == 1  # not retried: the same request is cut the same way


def test_any_connection_answering_tool_calls_cut_at_the_limit_has_none_run():
    COUNTER.reset()

    def cut(req: Any) -> ChatResponse:
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, tool_calls=[
            ToolCall(id="c1", name="write_file", arguments={"path": "a"})]),
            finish_reason="length")

    res = run_probe(probe_agent(model_from_function(cut), tools=["write_file"],
                                tool_fns=[write_file]), [{"key": "k", "q": "go"}])
    [ans] = outputs_of(res, "answer")
    assert "cut at its output token limit" in ans["error"] and COUNTER.total == 0


def test_a_whole_answer_at_the_limit_without_tool_calls_is_still_the_answer():
    body = openai_reply("a long answer that stops mid-sen")
    body["choices"][0]["finish_reason"] = "length"
    with WireServer(lambda req: (200, body)) as srv:
        res = run_probe(probe_agent(_openai(srv)), [{"key": "k", "q": "go"}])
    [ans] = outputs_of(res, "answer")
    assert ans["error"] is None and ans["finish_reason"] == "length"
    assert json.dumps(ans["content"]).startswith('"a long answer')
