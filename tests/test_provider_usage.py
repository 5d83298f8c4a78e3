"""Answers without token usage, from local servers speaking each provider's format.

Servers leave usage out of an answer: OpenAI-compatible ones send ``"usage": null`` or
none (microsoft/foundry-local #173, red-hat-data-services/agentic-starter-kits #193; Aider
#244: "completion.usage doesn't exist for non openai models"), Anthropic-compatible
gateways no ``usage``, Ollama-compatible servers no ``prompt_eval_count``/``eval_count``.
The connections read such an answer as 0 input and 0 output tokens (the zero-usage cost
windmill-labs/windmill #10688's review warns of), so a setup's budget counted nothing for it
and was never reached, however much was asked: the runtime's estimate for an answer
without usage never applied. The
answer has no usage now (``None``), and the chat spends its estimated tokens
(``metadata["usage_estimated"]``); a count an answer does give is kept.

Also here: an Anthropic answer holding a block type the installed SDK does not know, and
a setup's ``tool_choice`` sent to Ollama, which has no such field.
"""

from __future__ import annotations

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

from flink_agents_py.api import Budget, ChatMessage, ResourceDescriptor
from flink_agents_py.integrations.chat_models import (
    AnthropicChatModel,
    OllamaChatModel,
    OpenAIChatModel,
)

pytest.importorskip("openai")
pytest.importorskip("anthropic")
pytest.importorskip("ollama")

pytestmark = pytest.mark.timeout(60)

ANSWER = "x" * 400  # 100 estimated tokens


def _openai_no_usage(req: dict[str, Any]) -> tuple[int, Any]:
    body = openai_reply(ANSWER)
    body["usage"] = None
    return 200, body


def _anthropic_no_usage(req: dict[str, Any]) -> tuple[int, Any]:
    body = anthropic_reply([{"type": "text", "text": ANSWER}])
    del body["usage"]
    return 200, body


def _ollama_no_usage(req: dict[str, Any]) -> tuple[int, Any]:
    body = ollama_reply(ANSWER)
    del body["prompt_eval_count"], body["eval_count"]
    return 200, body


def _args(kind: str, srv: WireServer) -> tuple[type, dict[str, Any]]:
    if kind == "openai":
        return OpenAIChatModel, {"base_url": f"{srv.url}/v1"}
    if kind == "anthropic":
        return AnthropicChatModel, {"base_url": srv.url, "api_key_env": "FAP_TEST_ANTHROPIC_KEY"}
    return OllamaChatModel, {"host": srv.url}


def _conn(kind: str, srv: WireServer) -> ResourceDescriptor:
    cls, args = _args(kind, srv)
    return ResourceDescriptor(cls, **args)


SERVERS = {"openai": _openai_no_usage, "anthropic": _anthropic_no_usage,
           "ollama": _ollama_no_usage}


@pytest.mark.parametrize("kind", list(SERVERS))
def test_a_budget_counts_answers_without_usage_and_is_reached(kind, monkeypatch):
    monkeypatch.setenv("FAP_TEST_ANTHROPIC_KEY", "sk-ant-test")
    with WireServer(SERVERS[kind]) as srv:
        agent = probe_agent(_conn(kind, srv), budget=Budget(max_tokens=250, scope="key"))
        res = run_probe(agent, [{"key": "a", "q": "q" * 40} for _ in range(4)])
        asked = len(srv.requests)
    answers = outputs_of(res, "answer")
    assert answers[0]["metadata"]["usage_estimated"] is True
    assert answers[0]["usage"] == {"input_tokens": 10, "output_tokens": 100}
    # 110 estimated tokens a call: 0, 110 and 220 are under 250; the fourth finds it spent
    assert [a["error"] is None for a in answers] == [True, True, True, False]
    assert answers[3]["error"].startswith("BudgetExceededError")
    assert asked == 3


@pytest.mark.parametrize("kind", list(SERVERS))
def test_a_connection_gives_no_usage_for_an_answer_that_reports_none(kind, monkeypatch):
    monkeypatch.setenv("FAP_TEST_ANTHROPIC_KEY", "sk-ant-test")
    with WireServer(SERVERS[kind]) as srv:
        cls, args = _args(kind, srv)
        answer = cls(**args).chat([ChatMessage(content="hi")])
    assert answer.message.content == ANSWER and answer.usage is None


def test_a_count_the_answer_gives_is_kept_and_the_other_is_zero():
    def answer(req: dict[str, Any]) -> tuple[int, Any]:
        body = ollama_reply("ok")
        del body["prompt_eval_count"]  # Ollama leaves it out when the prompt was cached
        return 200, body

    with WireServer(answer) as srv:
        got = OllamaChatModel(host=srv.url).chat([ChatMessage(content="hi")])
    assert (got.usage.input_tokens, got.usage.output_tokens) == (0, 5)


def test_an_anthropic_answer_with_a_block_type_the_sdk_does_not_know_warns_nothing(monkeypatch):
    """A block type newer than the installed SDK (the API adds them: server tools,
    containers) is kept by the SDK as it came; dumping it warned once per model it did not
    fit (a dozen ``PydanticSerializationUnexpectedValue`` warnings for each answer)."""
    import warnings

    monkeypatch.setenv("FAP_TEST_ANTHROPIC_KEY", "sk-ant-test")

    def answer(req: dict[str, Any]) -> tuple[int, Any]:
        body = anthropic_reply([{"type": "text", "text": "ok", "citations": None},
                                {"type": "brand_new_block", "payload": {"a": 1}}])
        body["container"] = None
        return 200, body

    with WireServer(answer) as srv, warnings.catch_warnings():
        warnings.simplefilter("error")
        got = AnthropicChatModel(base_url=srv.url, api_key_env="FAP_TEST_ANTHROPIC_KEY").chat(
            [ChatMessage(content="hi")])
    assert got.message.content == "ok" and got.message.tool_calls == []


def test_tool_choice_is_not_sent_to_ollama_as_a_model_option_and_the_answer_says_so():
    """Ollama's ``/api/chat`` has no ``tool_choice`` (nor ``parallel_tool_calls``): a
    setup's, shared with an OpenAI or Anthropic connection, went into the model options,
    which Ollama ignores with a warning in its own log, so nothing told the user the model
    was not made to call a tool."""
    with WireServer(lambda req: (200, ollama_reply("ok"))) as srv:
        agent = probe_agent(ResourceDescriptor(OllamaChatModel, host=srv.url),
                            options={"tool_choice": "required", "parallel_tool_calls": False,
                                     "temperature": 0})
        res = run_probe(agent, [{"key": "k", "q": "hi"}])
        [body] = srv.bodies("/api/chat")
    [ans] = outputs_of(res, "answer")
    assert ans["content"] == "ok"
    assert body["options"] == {"temperature": 0}
    assert ans["metadata"]["omitted_options"] == ["tool_choice", "parallel_tool_calls"]
