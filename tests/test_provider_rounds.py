"""Tool rounds and request parameters against local servers speaking each provider's format.

Each test comes from a public report of a similar system:

- An assistant message holding tool calls only: OpenAI documents ``content`` as nullable
  then; servers differ. Ollama's ``/v1`` refuses ``null`` (``invalid message content type:
  <nil>``: cheetahclaws #71), older llama.cpp servers and Mistral's validator too
  (mistral-common #324); Bedrock refuses an empty text block (Portkey gateway #995).
  OpenAI now gets ``null``; a server refusing it gets ``""`` on the same call and after;
  DashScope (Tongyi) gets ``""``, its guide's form; Anthropic gets no text block.
- OpenAI's reasoning models refuse ``max_tokens`` and sampling parameters (``Unsupported
  value: 'temperature' does not support 0.2 with this model``: LangChain #31500, litellm
  #8228, llama_index #17616): every call of such a setup failed. A model named as one of
  them gets ``max_completion_tokens`` and no such parameter from the first request; any
  other (an Azure deployment's own name) gets the request again without the parameter the
  400 names, and without it from then on. The answer's metadata says what was left out.
- Tool call arguments a model wraps in a markdown fence (```json ... ```) or follows with a
  sentence (LangChain #21047, litellm #6212, llama_index #13014; small models through
  llama.cpp and Ollama): the chat failed ('not JSON'). One JSON object with text around it
  is the arguments now; arguments that are not one object (cut short, two objects, a list)
  are the call's error, told to the model by the tool's name, and the chat goes on.
- A reasoning model spending its whole output limit thinking answers no text with
  ``finish_reason: "length"`` (openai-python #2546, LangChain #32574, litellm #13405: "gpt-5
  returns empty content"); a filter's stop is no text with ``content_filter`` (Azure). Both
  read as an empty answer. They are errors now saying why (and the reasoning tokens spent);
  a filter's stop after some text is still the answer, its finish reason saying so.
- Token usage details (cached prompt tokens, reasoning tokens) were dropped; they are the
  answer's ``metadata["cached_tokens"]`` and ``metadata["reasoning_tokens"]``.
- Claude Opus 4.1, Sonnet and Haiku 4.5 refuse ``temperature`` with ``top_p``
  ("cannot both be specified for this model": litellm #15097, open-webui #17922, gptme
  #1110), extended thinking a ``temperature`` other than 1: every call of a setup written
  for older models failed. The request goes again without ``top_p`` (or the parameter
  thinking refuses), and so from then on for the model.
- Ollama refuses ``think`` for a model that does not think (``"gemma3" does not support
  thinking``: ollama #10961, open-webui #14565): a setup shared by several models failed for
  some. The request goes again without it, and so from then on for the model.
- Qwen3 models on DashScope think by default and refuse to in a request not streamed
  (``parameter.enable_thinking must be set to false for non-streaming calls``: ragflow
  #8972, langchain4j #3974, MemOS #218): every call of a Tongyi setup naming one failed.
  The request goes again with ``enable_thinking: false``, and so from then on.
- An HTTP error named neither the provider nor the model (one job with several
  connections could not tell which failed); it names both, and the status, never the key.
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

from flink_agents_py.api import ChatMessage, MessageRole, ResourceDescriptor, ToolCall
from flink_agents_py.compat import TongyiChatModelConnection
from flink_agents_py.integrations.chat_models import (
    AnthropicChatModel,
    OllamaChatModel,
    OpenAIChatModel,
)
from flink_agents_py.integrations.chat_models._llama import to_openai_messages
from flink_agents_py.testing import CallCounter

pytest.importorskip("openai")
pytest.importorskip("anthropic")
pytest.importorskip("ollama")

pytestmark = pytest.mark.timeout(60)

COUNTER = CallCounter()
KEY = "sk-test-4f9a8b7c6d5e"


def lookup(city: str) -> str:
    """Look a city up.

    Args:
        city: the city.
    """
    COUNTER.count("lookup")
    return f"{city}: sunny"


@pytest.fixture(autouse=True)
def _keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAP_TEST_OPENAI_KEY", KEY)
    monkeypatch.setenv("FAP_TEST_ANTHROPIC_KEY", "sk-ant-test")
    COUNTER.reset()


def _openai(srv: WireServer, **kw: Any) -> ResourceDescriptor:
    return ResourceDescriptor(OpenAIChatModel, base_url=f"{srv.url}/v1",
                              api_key_env="FAP_TEST_OPENAI_KEY", default_model="gpt-test", **kw)


_NULL_REFUSALS = {
    "ollama_v1": (400, {"error": {"message": "invalid message content type: <nil>",
                                  "type": "invalid_request_error", "param": None,
                                  "code": None}}),
    "llama_cpp_python": (500, {"error": {  # its server's validator, quoted in a 500
        "message": "1 validation errors:\n  {'type': 'string_type', 'loc': ('body', "
                   "'messages', 1, 'ChatCompletionRequestAssistantMessage', 'content'), "
                   "'msg': 'Input should be a valid string', 'input': None}",
        "type": "internal_server_error", "param": None, "code": None}}),
}


def _tool_round(refuse_null: str = ""):
    """A server calling ``lookup`` on a first turn, answering after its result."""
    def answer(req: dict[str, Any]) -> tuple[int, Any]:
        messages = req["body"]["messages"]
        calls_only = [m for m in messages if m["role"] == "assistant" and m.get("tool_calls")]
        if refuse_null and any(m.get("content") is None for m in calls_only):
            return _NULL_REFUSALS[refuse_null]
        if messages[-1]["role"] == "tool":
            return 200, openai_reply(f"done: {messages[-1]['content']}")
        return 200, openai_reply(None, [("call_1", "lookup", {"city": "Oslo"})])
    return answer


def _calls_only_contents(srv: WireServer) -> list[Any]:
    return [m.get("content", "<absent>") for b in srv.bodies("/chat/completions")
            for m in b["messages"] if m["role"] == "assistant" and m.get("tool_calls")]


def test_a_tool_calls_only_message_goes_to_openai_with_null_content():
    with WireServer(_tool_round()) as srv:
        res = run_probe(probe_agent(_openai(srv), tools=["lookup"], tool_fns=[lookup]),
                        [{"key": "k", "q": "weather in Oslo?"}])
        contents = _calls_only_contents(srv)
    [ans] = outputs_of(res, "answer")
    assert ans["error"] is None and "Oslo: sunny" in ans["content"]
    assert contents == [None]  # OpenAI's documented form, not ""


@pytest.mark.parametrize("server", list(_NULL_REFUSALS))
def test_a_server_refusing_null_content_gets_empty_text_on_the_same_call_and_after(server):
    with WireServer(_tool_round(refuse_null=server)) as srv:
        res = run_probe(probe_agent(_openai(srv), tools=["lookup"], tool_fns=[lookup]),
                        [{"key": "a", "q": "weather?"}, {"key": "a", "q": "and now?"}])
        contents = _calls_only_contents(srv)
        n = len(srv.requests)
    answers = outputs_of(res, "answer")
    assert [a["error"] for a in answers] == [None, None], answers
    assert all("Oslo: sunny" in a["content"] for a in answers)
    # refused once (null), then "" for this call and the next chat's: 2 + 1 + 2 requests
    assert contents == [None, "", ""] and n == 5 and COUNTER.total == 2


def test_tongyi_sends_a_tool_calls_only_message_with_empty_text():
    with WireServer(_tool_round()) as srv:
        conn = ResourceDescriptor(TongyiChatModelConnection, base_url=f"{srv.url}/v1",
                                  api_key="dashscope-test")
        res = run_probe(probe_agent(conn, tools=["lookup"], tool_fns=[lookup]),
                        [{"key": "k", "q": "weather?"}])
        contents = _calls_only_contents(srv)
    [ans] = outputs_of(res, "answer")
    assert ans["error"] is None and contents == [""]


def test_the_in_process_model_gets_empty_text_not_none_for_its_chat_template():
    msgs = [ChatMessage(role=MessageRole.ASSISTANT,
                        tool_calls=[ToolCall(id="c", name="lookup", arguments={"city": "x"})])]
    assert to_openai_messages(msgs)[0]["content"] == ""  # a template would write "None"


def test_anthropic_gets_no_text_block_for_a_tool_calls_only_message():
    def answer(req: dict[str, Any]) -> tuple[int, Any]:
        last = req["body"]["messages"][-1]["content"]
        if isinstance(last, list) and last[0].get("type") == "tool_result":
            return 200, anthropic_reply([{"type": "text", "text": "done"}])
        return 200, anthropic_reply([{"type": "tool_use", "id": "toolu_1", "name": "lookup",
                                      "input": {"city": "Oslo"}}], stop_reason="tool_use")
    with WireServer(answer) as srv:
        conn = ResourceDescriptor(AnthropicChatModel, base_url=srv.url,
                                  api_key_env="FAP_TEST_ANTHROPIC_KEY", default_model="claude-t")
        res = run_probe(probe_agent(conn, tools=["lookup"], tool_fns=[lookup]),
                        [{"key": "k", "q": "weather?"}])
        second = srv.bodies("/v1/messages")[1]
    [ans] = outputs_of(res, "answer")
    assert ans["error"] is None
    [assistant] = [m for m in second["messages"] if m["role"] == "assistant"]
    assert [b["type"] for b in assistant["content"]] == ["tool_use"]


# ------------------------------------------------------------ arguments with text around
def _calling_with(*raws: str):
    """A server calling ``lookup`` with each of ``raws`` in turn, then answering."""
    def answer(req: dict[str, Any]) -> tuple[int, Any]:
        n = req["n"]
        if n >= len(raws):
            told = [m["content"] for m in req["body"]["messages"] if m["role"] == "tool"]
            return 200, openai_reply(" | ".join(told))
        body = openai_reply(None, [(f"call_{n}", "lookup", {})])
        body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = raws[n]
        return 200, body
    return answer


@pytest.mark.parametrize("raw", [
    '```json\n{"city": "Oslo"}\n```',
    '```\n{"city": "Oslo"}\n```\n',
    '{"city": "Oslo"}\n\nI will look up the weather now.',
    'Arguments: {"city": "Oslo"}',
    json.dumps('```json\n{"city": "Oslo"}\n```'),
])
def test_one_json_object_with_text_around_it_is_the_arguments(raw):
    with WireServer(_calling_with(raw)) as srv:
        res = run_probe(probe_agent(_openai(srv), tools=["lookup"], tool_fns=[lookup]),
                        [{"key": "k", "q": "weather?"}])
    [ans] = outputs_of(res, "answer")
    assert ans["error"] is None and ans["content"] == "Oslo: sunny"
    assert COUNTER.total == 1


@pytest.mark.parametrize(("raw", "problem"), [
    ('{"city": "Oslo"', "are not JSON"),  # cut short
    ('{"city": "Oslo"}{"city": "Bergen"}', "more than one JSON object"),
    ("Oslo", "are not JSON"),
    ('["Oslo"]', "not a JSON object but a list"),
])
def test_arguments_that_are_not_one_object_are_told_to_the_model_which_calls_again(
        raw, problem):
    with WireServer(_calling_with(raw, '{"city": "Oslo"}')) as srv:
        res = run_probe(probe_agent(_openai(srv), tools=["lookup"], tool_fns=[lookup]),
                        [{"key": "k", "q": "weather?"}])
        second = srv.bodies("/chat/completions")[1]
    [ans] = outputs_of(res, "answer")
    assert res.errors == [] and ans["error"] is None, ans
    first_told, then = ans["content"].split(" | ")
    assert first_told.startswith("Error: ") and "tool 'lookup' was called" in first_told
    assert problem in first_told and "one JSON object" in first_told
    assert then == "Oslo: sunny" and COUNTER.total == 1
    # the refused call went back to the model as a call with an object for arguments
    [refused] = [m for m in second["messages"] if m.get("tool_calls")]
    assert isinstance(json.loads(refused["tool_calls"][0]["function"]["arguments"]), dict)


# ------------------------------------------------------- stopped before saying anything
def _openai_stopped(reason: str, content: str | None = None) -> dict[str, Any]:
    body = openai_reply(content)
    body["choices"][0]["finish_reason"] = reason
    body["usage"] = {"prompt_tokens": 20, "completion_tokens": 256, "total_tokens": 276,
                     "prompt_tokens_details": {"cached_tokens": 0},
                     "completion_tokens_details": {"reasoning_tokens": 256}}
    return body


_STOPPED: dict[str, Any] = {
    "openai_length": (lambda s: _openai(s), lambda: _openai_stopped("length", ""),
                      "output token limit (finish reason 'length')"),
    "openai_filter": (lambda s: _openai(s), lambda: _openai_stopped("content_filter", None),
                      "content filter stopped the answer (finish reason 'content_filter')"),
    "anthropic_thinking_only": (
        lambda s: ResourceDescriptor(AnthropicChatModel, base_url=s.url,
                                     api_key_env="FAP_TEST_ANTHROPIC_KEY",
                                     default_model="claude-t"),
        lambda: anthropic_reply([{"type": "thinking", "thinking": "Let me think...",
                                  "signature": "sig"}], stop_reason="max_tokens"),
        "output token limit (finish reason 'max_tokens')"),
    "anthropic_refusal": (
        lambda s: ResourceDescriptor(AnthropicChatModel, base_url=s.url,
                                     api_key_env="FAP_TEST_ANTHROPIC_KEY",
                                     default_model="claude-t"),
        lambda: anthropic_reply([], stop_reason="refusal"),
        "content filter stopped the answer (finish reason 'refusal')"),
    "ollama_length": (
        lambda s: ResourceDescriptor(OllamaChatModel, host=s.url, default_model="qwen3"),
        lambda: {**ollama_reply(""), "done_reason": "length"},
        "output token limit (finish reason 'length')"),
}


@pytest.mark.parametrize("case", list(_STOPPED))
def test_an_answer_stopped_before_any_text_is_an_error_saying_why(case):
    conn, body, said = _STOPPED[case]
    with WireServer(lambda req: (200, body())) as srv:
        res = run_probe(probe_agent(conn(srv)), [{"key": "k", "q": "think hard"}])
        n = len(srv.requests)
    [ans] = outputs_of(res, "answer")
    assert ans["content"] is None and said in ans["error"], ans["error"]
    assert n == 1  # not retried: the same request stops the same way
    if case == "openai_length":
        assert "256 output tokens reasoning" in ans["error"]
        assert "max_completion_tokens" in ans["error"]


def test_a_filters_stop_after_some_text_is_the_answer_with_its_reason():
    with WireServer(lambda req: (200, _openai_stopped("content_filter", "Here is"))) as srv:
        res = run_probe(probe_agent(_openai(srv)), [{"key": "k", "q": "go"}])
    [ans] = outputs_of(res, "answer")
    assert ans["error"] is None and ans["content"] == "Here is"
    assert ans["finish_reason"] == "content_filter"


def test_cached_and_reasoning_tokens_are_in_the_answers_metadata():
    def answer(req: dict[str, Any]) -> tuple[int, Any]:
        body = openai_reply("fine")
        body["usage"] = {"prompt_tokens": 2006, "completion_tokens": 300, "total_tokens": 2306,
                         "prompt_tokens_details": {"cached_tokens": 1920, "audio_tokens": 0},
                         "completion_tokens_details": {"reasoning_tokens": 192}}
        return 200, body
    with WireServer(answer) as srv:
        res = run_probe(probe_agent(_openai(srv)), [{"key": "k", "q": "go"}])
    [ans] = outputs_of(res, "answer")
    assert ans["usage"] == {"input_tokens": 2006, "output_tokens": 300}
    assert ans["metadata"] == {"cached_tokens": 1920, "reasoning_tokens": 192}


# ------------------------------------------------------------------ reasoning models
def _openai_reasoning_rules(req: dict[str, Any]) -> tuple[int, Any]:
    """OpenAI's refusals for its reasoning models, as its API words them."""
    body = req["body"]
    if body["model"] in ("o3-mini", "prod-reasoner", "gpt-5.1"):
        if "max_tokens" in body:
            return 400, {"error": {
                "message": "Unsupported parameter: 'max_tokens' is not supported with this "
                           "model. Use 'max_completion_tokens' instead.",
                "type": "invalid_request_error", "param": "max_tokens",
                "code": "unsupported_parameter"}}
        if body.get("temperature", 1) != 1:
            return 400, {"error": {
                "message": f"Unsupported value: 'temperature' does not support "
                           f"{body['temperature']} with this model. Only the default (1) "
                           "value is supported.",
                "type": "invalid_request_error", "param": "temperature",
                "code": "unsupported_value"}}
        if "top_p" in body:
            return 400, {"error": {
                "message": "Unsupported parameter: 'top_p' is not supported with this model.",
                "type": "invalid_request_error", "param": "top_p",
                "code": "unsupported_parameter"}}
    return 200, openai_reply(f"{body['model']} answered")


@pytest.mark.parametrize("model", ["o3-mini", "gpt-5.1"])
def test_a_model_named_as_a_reasoning_model_gets_its_parameters_from_the_first_request(model):
    with WireServer(_openai_reasoning_rules) as srv:
        res = run_probe(probe_agent(_openai(srv), model=model, options={
            "temperature": 0.2, "top_p": 0.9, "max_tokens": 300, "seed": 7}),
            [{"key": "k", "q": "hi"}])
        bodies = srv.bodies("/chat/completions")
    [ans] = outputs_of(res, "answer")
    assert ans["error"] is None and ans["content"] == f"{model} answered"
    [sent] = bodies  # no refusal to learn from
    assert sent["max_completion_tokens"] == 300 and sent["seed"] == 7
    assert not {"max_tokens", "temperature", "top_p"} & set(sent)
    assert ans["metadata"]["omitted_options"] == ["temperature", "top_p"]


def test_a_deployment_refusing_parameters_gets_the_request_without_them_and_after():
    with WireServer(_openai_reasoning_rules) as srv:
        res = run_probe(probe_agent(_openai(srv), model="prod-reasoner", options={
            "temperature": 0.2, "top_p": 0.9, "max_tokens": 300}),
            [{"key": "a", "q": "hi"}, {"key": "a", "q": "again"}])
        bodies = srv.bodies("/chat/completions")
    answers = outputs_of(res, "answer")
    assert [a["error"] for a in answers] == [None, None], answers
    assert [a["content"] for a in answers] == ["prod-reasoner answered"] * 2
    assert [a["metadata"]["omitted_options"] for a in answers] == [["temperature", "top_p"]] * 2
    # one refusal per parameter, then the second chat's request is right at once
    assert len(bodies) == 5
    assert not {"max_tokens", "temperature", "top_p"} & set(bodies[-1])


def test_another_models_parameters_are_kept():
    with WireServer(_openai_reasoning_rules) as srv:
        res = run_probe(probe_agent(_openai(srv), model="gpt-4o", options={
            "temperature": 0.2, "max_tokens": 300}), [{"key": "k", "q": "hi"}])
        [sent] = srv.bodies("/chat/completions")
    [ans] = outputs_of(res, "answer")
    assert ans["error"] is None and "omitted_options" not in ans["metadata"]
    assert sent["temperature"] == 0.2 and sent["max_tokens"] == 300


def test_an_http_error_names_provider_model_and_status_and_not_the_key():
    def refuse(req: dict[str, Any]) -> tuple[int, Any]:  # a gateway echoing the key
        return 400, {"error": {"message": "Invalid value for 'messages[0].role'. (key "
                                          f"{req['headers']['authorization'][7:]})",
                               "type": "invalid_request_error", "param": "messages",
                               "code": None}}
    with WireServer(refuse) as srv:
        res = run_probe(probe_agent(_openai(srv), model="gpt-4o-mini",
                                    options={"temperature": 0.2}),
                        [{"key": "k", "q": "hi"}])
        n = len(srv.requests)
    [ans] = outputs_of(res, "answer")
    error = ans["error"]
    assert n == 1  # no parameter named as unsupported: not sent again
    assert "OpenAIChatModel at 127.0.0.1" in error and "'gpt-4o-mini'" in error, error
    assert error.endswith("(status 400)") and "Invalid value for 'messages[0].role'" in error
    assert KEY not in error and KEY not in repr(res.outputs)


# ------------------------------------------- a user's own connection, run as a user runs it
USER_AGENT = '''
from typing import Any, Dict, Sequence

from flink_agents_py.compat import (
    Agent, BaseChatModelSetup, ChatMessage, ChatRequestEvent, ChatResponseEvent, Event,
    InputEvent, MessageRole, OutputEvent, ResourceDescriptor, RunnerContext, ToolType,
    action, chat_model_setup, tool)


class FencedSetup(BaseChatModelSetup):
    """A small model's habits: its tool arguments come as text in a markdown fence."""

    def open(self) -> None:
        pass

    @property
    def model_kwargs(self) -> Dict[str, Any]:
        return {}

    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        if messages[-1].role == MessageRole.TOOL:
            return ChatMessage(role=MessageRole.ASSISTANT, content=messages[-1].content)
        call = {"id": "c1", "type": ToolType.FUNCTION,
                "function": {"name": "add", "arguments": messages[-1].content}}
        return ChatMessage(role=MessageRole.ASSISTANT, content="", tool_calls=[call])


class FencedAgent(Agent):
    @chat_model_setup
    @staticmethod
    def fenced() -> ResourceDescriptor:
        return ResourceDescriptor(clazz=f"{FencedSetup.__module__}.{FencedSetup.__name__}",
                                  connection="none", tools=["add"])

    @tool
    @staticmethod
    def add(a: int, b: int) -> int:
        """Calculate the sum of a and b."""
        return a + b

    @action(InputEvent.EVENT_TYPE)
    @staticmethod
    def process_input(event: Event, ctx: RunnerContext) -> None:
        text = InputEvent.from_event(event).input
        ctx.send_event(ChatRequestEvent(
            model="fenced", messages=[ChatMessage(role=MessageRole.USER, content=text)]))

    @action(ChatResponseEvent.EVENT_TYPE)
    @staticmethod
    def process_chat_response(event: Event, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output=ChatResponseEvent.from_event(event).response.content))
'''

USER_PROGRAM = '''
import json
from flink_agents_py.compat import AgentsExecutionEnvironment
from fenced_agent import FencedAgent

env = AgentsExecutionEnvironment.get_execution_environment()
records = [{"key": "a", "value": "```json\\n{\\"a\\": 1, \\"b\\": 2}\\n```"},
           {"key": "b", "value": "{\\"a\\": 1, \\"b\\": 2} -- adding them"},
           {"key": "c", "value": "a=1, b=2"}]
out = env.from_list(records).apply(FencedAgent()).to_list()
env.execute()
print(json.dumps(sorted(out, key=lambda row: list(row))))
'''


def test_a_users_own_connection_giving_fenced_argument_text_runs_its_tool(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    (tmp_path / "fenced_agent.py").write_text(USER_AGENT)
    (tmp_path / "prog.py").write_text(USER_PROGRAM)
    proc = subprocess.run([sys.executable, "prog.py"], cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(root)},
                          capture_output=True, text=True, timeout=50)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout.strip().splitlines()[-1])
    assert rows[:2] == [{"a": "3"}, {"b": "3"}], rows
    [told] = rows[2].values()  # the model is told, and answers: the chat did not fail
    assert told.startswith("Error: ValueError: tool 'add' was called with arguments that are "
                           "not JSON"), told


_REFUSALS: dict[str, Any] = {
    "anthropic": (
        lambda s: ResourceDescriptor(AnthropicChatModel, base_url=s.url,
                                     api_key_env="FAP_TEST_ANTHROPIC_KEY",
                                     default_model="claude-sonnet-t"),
        {"type": "error", "error": {"type": "invalid_request_error",
                                    "message": "bad key sk-ant-test in request"}},
        "(AnthropicChatModel, model 'claude-sonnet-t')"),
    "ollama": (
        lambda s: ResourceDescriptor(OllamaChatModel, host=s.url, default_model="qwen3:8b"),
        {"error": "model requires more system memory"},
        "(model 'qwen3:8b')"),
}


@pytest.mark.parametrize("case", list(_REFUSALS))
def test_other_providers_errors_name_model_and_status_and_not_the_key(case):
    conn, body, said = _REFUSALS[case]
    with WireServer(lambda req: (400, body)) as srv:
        res = run_probe(probe_agent(conn(srv)), [{"key": "k", "q": "hi"}])
    [ans] = outputs_of(res, "answer")
    assert said in ans["error"] and ans["error"].endswith("(status 400)"), ans["error"]
    assert "sk-ant-test" not in repr(res.outputs)


def test_a_used_up_quota_429_is_not_retried_and_says_so():
    calls = {"quota": 0, "rate": 0}

    def answer(req: dict[str, Any]) -> tuple[int, Any]:
        if req["body"]["model"] == "quota-model":
            calls["quota"] += 1
            return 429, {"error": {
                "message": "You exceeded your current quota, please check your plan and "
                           "billing details.", "type": "insufficient_quota", "param": None,
                "code": "insufficient_quota"}}
        calls["rate"] += 1
        if calls["rate"] == 1:  # a rate limit: worth the wait
            return 429, {"error": {"message": "Rate limit reached", "type": "requests",
                                   "code": "rate_limit_exceeded"}}, {"retry-after-ms": "10"}
        return 200, openai_reply("fine")
    with WireServer(answer) as srv:
        res = run_probe(probe_agent(_openai(srv), model="quota-model", error_policy="retry",
                                    retry_initial_backoff_s=0.01),
                        [{"key": "a", "q": "hi"}])
        other = run_probe(probe_agent(_openai(srv), model="gpt-4o", error_policy="retry",
                                      retry_initial_backoff_s=0.01),
                          [{"key": "b", "q": "hi"}])
    [ans] = outputs_of(res, "answer")
    assert calls["quota"] == 1, calls  # one try: waiting does not refill a quota
    assert "insufficient_quota" in ans["error"] and "not retried" in ans["error"]
    assert ans["error"].endswith("(status 429)")
    [fine] = outputs_of(other, "answer")
    assert fine["content"] == "fine" and calls["rate"] == 2  # a rate limit still is


def _claude_rules(req: dict[str, Any]) -> tuple[int, Any]:
    body = req["body"]
    if "temperature" in body and "top_p" in body:
        return 400, {"type": "error", "error": {
            "type": "invalid_request_error",
            "message": "`temperature` and `top_p` cannot both be specified for this model. "
                       "Please use only one."}}
    if body.get("thinking") and body.get("temperature", 1) != 1:
        return 400, {"type": "error", "error": {
            "type": "invalid_request_error",
            "message": "`temperature` may only be set to 1 when thinking is enabled. Please "
                       "consult our documentation at https://docs.claude.com/en/docs/build-"
                       "with-claude/extended-thinking#feature-compatibility"}}
    return 200, anthropic_reply([{"type": "text", "text": "fine"}])


@pytest.mark.parametrize(("options", "left_out"), [
    ({"temperature": 0.2, "top_p": 0.9}, ["top_p"]),
    ({"temperature": 0.2, "thinking": {"type": "enabled", "budget_tokens": 1024}},
     ["temperature"]),
])
def test_claude_refusing_a_sampling_parameter_gets_the_request_without_it(options, left_out):
    with WireServer(_claude_rules) as srv:
        conn = ResourceDescriptor(AnthropicChatModel, base_url=srv.url,
                                  api_key_env="FAP_TEST_ANTHROPIC_KEY",
                                  default_model="claude-sonnet-4-5")
        res = run_probe(probe_agent(conn, options=options),
                        [{"key": "a", "q": "hi"}, {"key": "a", "q": "again"}])
        bodies = srv.bodies("/v1/messages")
    answers = outputs_of(res, "answer")
    assert [a["error"] for a in answers] == [None, None], answers
    assert [a["metadata"]["omitted_options"] for a in answers] == [left_out] * 2
    assert len(bodies) == 3  # refused once; the next chat's request is right at once
    assert not set(left_out) & set(bodies[-1])


def test_ollama_asks_a_model_that_does_not_think_again_without_think():
    def answer(req: dict[str, Any]) -> tuple[int, Any]:
        body = req["body"]
        if body["model"] == "gemma3" and body.get("think"):
            return 400, {"error": '"gemma3" does not support thinking'}
        return 200, ollama_reply(f"{body['model']} answered")
    with WireServer(answer) as srv:
        conn = ResourceDescriptor(OllamaChatModel, host=srv.url, default_model="gemma3")
        res = run_probe(probe_agent(conn, options={"think": True}),
                        [{"key": "a", "q": "hi"}, {"key": "a", "q": "again"}])
        thinks = [b.get("think") for b in srv.bodies("/api/chat")]
    answers = outputs_of(res, "answer")
    assert [a["content"] for a in answers] == ["gemma3 answered"] * 2, answers
    assert [a["metadata"]["omitted_options"] for a in answers] == [["think"]] * 2
    assert thinks == [True, None, None]


def test_tongyi_turns_thinking_off_for_a_qwen3_model_that_thinks_only_streamed():
    def answer(req: dict[str, Any]) -> tuple[int, Any]:
        body = req["body"]
        if body["model"].startswith("qwen3") and body.get("enable_thinking") is not False:
            return 400, {"error": {
                "code": "invalid_parameter_error", "param": None,
                "message": "parameter.enable_thinking must be set to false for non-streaming "
                           "calls", "type": "invalid_request_error"},
                "id": "chatcmpl-1", "request_id": "1"}
        return 200, openai_reply(f"{body['model']} answered")
    with WireServer(answer) as srv:
        conn = ResourceDescriptor(TongyiChatModelConnection, base_url=f"{srv.url}/v1",
                                  api_key="dashscope-test")
        res = run_probe(probe_agent(conn, model="qwen3-32b"),
                        [{"key": "a", "q": "hi"}, {"key": "a", "q": "again"}])
        sent = [b.get("enable_thinking") for b in srv.bodies("/chat/completions")]
    answers = outputs_of(res, "answer")
    assert [a["content"] for a in answers] == ["qwen3-32b answered"] * 2, answers
    assert [a["metadata"]["omitted_options"] for a in answers] == [["enable_thinking"]] * 2
    assert sent == [None, False, False]


def test_a_server_refusing_max_completion_tokens_gets_the_limit_as_max_tokens():
    def answer(req: dict[str, Any]) -> tuple[int, Any]:  # Azure's older API versions
        if "max_completion_tokens" in req["body"]:
            return 400, {"error": {"message": "Unrecognized request argument supplied: "
                                              "max_completion_tokens",
                                   "type": "invalid_request_error", "param": None,
                                   "code": None}}
        return 200, openai_reply("fine")
    with WireServer(answer) as srv:
        res = run_probe(probe_agent(_openai(srv), model="gpt-4o",
                                    options={"max_completion_tokens": 100}),
                        [{"key": "a", "q": "hi"}, {"key": "a", "q": "again"}])
        sent = [(b.get("max_tokens"), b.get("max_completion_tokens"))
                for b in srv.bodies("/chat/completions")]
    answers = outputs_of(res, "answer")
    assert [a["content"] for a in answers] == ["fine"] * 2, answers
    assert sent == [(None, 100), (100, None), (100, None)]
    assert all("omitted_options" not in a["metadata"] for a in answers)  # renamed, kept


@pytest.mark.parametrize("choices", [[], None])
def test_an_answer_without_choices_names_the_provider_and_model(choices):
    body = {"id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4o-mini",
            "choices": choices, "usage": {"prompt_tokens": 5, "completion_tokens": 0}}
    with WireServer(lambda req: (200, body)) as srv:
        res = run_probe(probe_agent(_openai(srv), model="gpt-4o-mini"),
                        [{"key": "k", "q": "hi"}])
    [ans] = outputs_of(res, "answer")
    assert "has no choices" in ans["error"], ans["error"]
    assert "OpenAIChatModel at 127.0.0.1, model 'gpt-4o-mini'" in ans["error"]


USER_REASONING_AGENT = '''
import os

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (Agent, ChatMessage, ChatModelSetup, InputEvent, OutputEvent,
                                 ResourceDescriptor, ResourceType, RunnerContext, action)
from flink_agents_py.integrations.chat_models import OpenAIChatModel


def lookup(city: str) -> str:
    """The weather in a city.

    Args:
        city: the city.
    """
    return f"{city}: sunny"


class Asker(Agent):
    @action(InputEvent)
    @staticmethod
    async def ask(event: InputEvent, ctx: RunnerContext) -> None:
        r = await ctx.chat("model", [ChatMessage.user(event.input["q"])])
        ctx.send_event(OutputEvent(output={"key": ctx.key, "text": r.content,
                                           "omitted": r.metadata.get("omitted_options")}))


agent = Asker()
agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ResourceDescriptor(
    OpenAIChatModel, base_url=os.environ["MY_LLM_URL"], api_key_env="MY_LLM_KEY"))
agent.add_resource("model", ResourceType.CHAT_MODEL, ResourceDescriptor(
    ChatModelSetup, connection="conn", model="o4-mini", tools=["lookup"],
    options={"temperature": 0.3, "max_tokens": 500}))
agent.add_resource("lookup", ResourceType.TOOL, lookup)
res = AgentsExecutionEnvironment.local().from_list([{"key": "a", "q": "Oslo?"}]).apply(
    agent).run()
print(res.outputs, res.errors)
'''


def test_a_users_reasoning_model_setup_runs_a_tool_round_from_its_own_directory(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    def strict(req: dict[str, Any]) -> tuple[int, Any]:  # OpenAI's o4-mini, Ollama's null
        code, body = _openai_reasoning_rules({**req, "body": {
            **req["body"], "model": "o3-mini"}})
        if code != 200:
            return code, body
        return _tool_round(refuse_null="ollama_v1")(req)

    root = Path(__file__).resolve().parents[1]
    (tmp_path / "my_agent.py").write_text(USER_REASONING_AGENT)
    with WireServer(strict) as srv:
        proc = subprocess.run([sys.executable, "my_agent.py"], cwd=tmp_path,
                              env={**os.environ, "PYTHONPATH": str(root),
                                   "MY_LLM_URL": f"{srv.url}/v1", "MY_LLM_KEY": "k-1"},
                              capture_output=True, text=True, timeout=50)
        bodies = srv.bodies("/chat/completions")
    assert proc.returncode == 0, proc.stderr
    assert "'text': 'done: Oslo: sunny'" in proc.stdout, proc.stdout
    assert "'omitted': ['temperature']" in proc.stdout and proc.stdout.rstrip().endswith("[]")
    assert bodies[0]["max_completion_tokens"] == 500 and "temperature" not in bodies[0]
