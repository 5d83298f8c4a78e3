"""A provider that answers 200 with an error in the body.

Gateways and compatible servers (OpenRouter, LiteLLM proxies, vLLM behind a balancer)
answer ``200 OK`` with ``{"error": {"code": 429, "message": ...}}`` when the model failed
after the answer began; Anthropic's form is ``{"type": "error", "error": {...}}``. Before,
the OpenAI adapter failed such an answer as "the chat completion has no choices" (no
status: never held, retried or fallen back from, the provider's message lost) and the
Anthropic adapter recorded it as an empty answer.
"""

from __future__ import annotations

import pytest
from support.providers import WireServer, anthropic_reply, openai_reply
from test_flow_control import asker, run

from flink_agents_py.api import ProviderError, ResourceDescriptor, error_class
from flink_agents_py.integrations.chat_models import AnthropicChatModel, OpenAIChatModel
from flink_agents_py.integrations.chat_models._common import answer_error

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize("body, status, kind", [
    ({"error": {"message": "Rate limit exceeded", "code": 429}}, 429, "throttled"),
    ({"error": {"message": "upstream failed", "code": "502"}}, 502, "unavailable"),
    ({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
     529, "throttled"),
    ({"error": {"message": "slow down", "type": "rate_limit_exceeded"}}, 429, "throttled"),
    ({"object": "error", "message": "engine died", "code": 500}, 500, "unavailable"),
    ({"error": {"message": "context too long", "code": 400}}, 400, "rejected"),
    ({"error": "something broke"}, None, "error"),
])
def test_an_error_body_is_read_as_the_error_it_names(body, status, kind):
    error = answer_error(body, "chat completion failed")
    assert isinstance(error, ProviderError)
    assert error.status_code == status and error_class(error) == kind
    assert "the provider answered with an error: " in str(error)


def test_a_body_without_an_error_is_none():
    assert answer_error(openai_reply("hi"), "x") is None
    assert answer_error({"error": None, "choices": []}, "x") is None
    assert answer_error([], "x") is None


def test_an_openai_200_with_a_429_in_its_body_is_held_then_answered(probes):
    def answer(req):
        if req["n"] == 0:
            return 200, {"error": {"message": "Rate limit exceeded", "code": 429}}, {
                "retry-after": "0.1"}
        return 200, openai_reply("hello", n=req["n"])

    with WireServer(answer) as srv:
        agent = asker({"conn": ResourceDescriptor(OpenAIChatModel, base_url=srv.url)},
                      {"model": {"connection": "conn"}})
        [out] = run(agent, [{"key": "a", "q": "hi"}]).outputs
        assert out["error"] is None and out["content"] == "hello"
        assert out["metadata"]["throttled"] == 1 and len(srv.requests) == 2


def test_an_openai_200_with_an_error_naming_no_status_fails_with_its_message(probes):
    with WireServer(lambda req: (200, {"error": {"message": "model crashed"}})) as srv:
        agent = asker({"conn": ResourceDescriptor(OpenAIChatModel, base_url=srv.url)},
                      {"model": {"connection": "conn", "error_policy": "retry"}})
        [out] = run(agent, [{"key": "a", "q": "hi"}]).outputs
        assert out["error"] == ("ProviderError: chat completion failed: the provider answered "
                                "with an error: model crashed")
        assert len(srv.requests) == 1  # no status: not retried


def test_an_anthropic_200_overloaded_body_is_held_then_answered_not_an_empty_answer(
        monkeypatch, probes):
    monkeypatch.setenv("FAP_TEST_ANTHROPIC_KEY", "sk-ant-test")

    def answer(req):
        if req["n"] == 0:
            return 200, {"type": "error", "error": {"type": "overloaded_error",
                                                    "message": "Overloaded"}}
        return 200, anthropic_reply([{"type": "text", "text": "hello"}], n=req["n"])

    with WireServer(answer) as srv:
        agent = asker({"conn": ResourceDescriptor(
            AnthropicChatModel, base_url=srv.url, api_key_env="FAP_TEST_ANTHROPIC_KEY",
            default_model="claude-test")}, {"model": {"connection": "conn"}})
        [out] = run(agent, [{"key": "a", "q": "hi"}]).outputs
        assert out["error"] is None and out["content"] == "hello"
        assert out["metadata"]["throttled"] == 1 and len(srv.requests) == 2
