"""Provider answers of shapes seen in the field, against local servers speaking each format.

Each test comes from a public report of a similar system:

- Tool call arguments of a call without arguments sent as ``"null"`` (jcode #225,
  OpenDeepWiki #392; LangChain #34242 for ``None``): the chat failed ('not a JSON object
  but null'); they are no arguments now, as ``""`` and a missing field already were.
- Tool call arguments encoded twice, a JSON string holding the object's JSON text (Qwen2.5
  and Granite 4 through vLLM's tool parsers: OpenManus #989, vLLM #54964; Nova Sonic:
  livekit agents #5409; quarkus-langchain4j #2642): the chat failed ('not a JSON object but
  a str'); the object is the arguments now.
- Half of a character in a provider's JSON (``"\\ud83d"``: an emoji cut at the token limit,
  a tokenizer's stray piece; aider #3693, inspect_ai #3802, agent-zero #1773, ragflow
  #9246): the decoded text has no UTF-8 form, so the chat failed ('holds a lone surrogate
  ... has no JSON form') whatever the answer, and tool arguments holding one were 'not
  JSON' (orjson refuses the escape). Each lone surrogate is U+FFFD now, as a UTF-8 decoder
  replaces what it cannot decode, in every connection's answers (text, reasoning, tool
  calls).
- A request of system messages only sent to Anthropic, whose API takes them apart
  (``messages: at least one message is required``: LangChain #30764, braintrust-proxy
  #250, Helicone #5257, arthur-engine #1302): a setup whose prompt holds the whole request
  with an empty user message, as Flink Agents' programs write it, failed every chat with a
  400. The prompt goes as the one user turn now.
- Reasoning that an OpenAI-compatible server names ``reasoning`` (vLLM since its rename,
  vllm #27752 and #27755, the old ``reasoning_content`` removed; OpenRouter, Groq): it was
  dropped, so interleaved thinking across tool rounds broke (vllm-project/router #115 with
  Kimi K2.5; llama_index #21075, #21753; dify-official-plugins #2740). It is kept now and
  goes back in the field it came in.
- A setup's stop sequences and token limit under another provider's names: OpenAI's
  ``stop`` and ``max_completion_tokens`` sent to Anthropic (``stop: Extra inputs are not
  permitted``), Anthropic's ``stop_sequences`` to OpenAI or Ollama; an empty stop sequence
  to Anthropic (``each stop sequence must be non-empty``: mcp-web-ui #5). Each connection
  takes them in its own names now, as it already took ``tool_choice``.
- ``stream=True`` in a setup's options: the OpenAI and Anthropic SDKs handed back a stream,
  and the chat failed after the request was sent (and paid for) with a bare ``TypeError:
  'AsyncStream' object is not iterable``; Ollama's went into its model options. It is
  refused before anything is sent, saying streaming is not offered; ``stream=False`` is
  left out.
- Ollama's JSON mode asked for in a setup's options (``format: "json"``, a request field
  of ``/api/chat``): it went into the model options, which Ollama ignores, so the answer
  was free text. It is the request's ``format`` now (an ``output_schema`` wins).
- A tool returning empty text (a write-only tool, a command with no output), sent to
  Anthropic as an empty ``tool_result`` content, which it refuses (zed #27130, opencode
  #15371, trae-agent #230): every later call of the chat was a 400. The result goes
  without ``content`` now (the API's optional field).
- ``max_tokens`` sent to OpenAI's reasoning models (o-series, GPT-5), which refuse it
  (``Unsupported parameter: 'max_tokens' is not supported with this model. Use
  'max_completion_tokens' instead.``: gollm #33, ComfyUI-Griptape #312, opencode #37964,
  overleaf-copilot #43): a setup's ``max_tokens`` (the option Anthropic requires and Ollama
  takes) failed every call. It is sent as ``max_completion_tokens`` after that refusal,
  and from then on for that model.
- A base URL of the wrong depth, the usual first-run mistake: an OpenAI-compatible
  server's without ``/v1`` (vLLM, LM Studio), Anthropic's or Ollama's with a path their
  clients add themselves (``.../v1``, an Ollama ``/v1`` URL given as ``host``). The error
  said ``Error code: 404`` and nothing else; it names the URL posted to and the likely fix.
- As a user runs it: an agent module of their own, in a temporary folder, against a local
  server that calls a tool with ``null`` arguments and answers with half a character.
- An Anthropic-compatible gateway's body of another shape (``content`` as plain text, a
  ``null`` block, usage counts as text): the chat failed with a bare ``AttributeError`` or
  ``TypeError`` naming nothing; it is a ``ProviderError`` saying the body was unexpected,
  as the OpenAI-compatible connection's already was.
- An Ollama-compatible server's answer the ``ollama`` client refuses (arguments ``null``):
  the chat failed with the client's bare pydantic ``ValidationError``; it is a
  ``ProviderError`` saying the answer is not of Ollama's form, where, what the server sent
  there, and to use ``OpenAIChatModel`` against a server speaking OpenAI's API.
- Ollama-compatible servers and proxies sending tool call arguments as JSON text, OpenAI's
  form (LiteLLM's and LocalAI's Ollama routes: ollama-python #427, open-webui #8526): the
  ``ollama`` client refused every such answer. The text is read as OpenAI's arguments are
  (an object; text around it; unreadable text told to the model by the tool's name).
"""

from __future__ import annotations

import json
import warnings
from typing import Any

import pytest
from support.providers import (
    ChatProbe,
    WireServer,
    anthropic_reply,
    ollama_reply,
    openai_reply,
    outputs_of,
    probe_agent,
    run_probe,
)

from flink_agents_py.api import (
    ChatMessage,
    ChatModelSetup,
    ProviderError,
    ResourceDescriptor,
    ResourceType,
)
from flink_agents_py.integrations.chat_models import (
    AnthropicChatModel,
    OllamaChatModel,
    OpenAIChatModel,
)
from flink_agents_py.testing import CallCounter

pytest.importorskip("anthropic")
pytest.importorskip("ollama")
pytest.importorskip("openai")

pytestmark = pytest.mark.timeout(60)

COUNTER = CallCounter()


def now() -> str:
    """The time."""
    COUNTER.count("now")
    return "12:00"


def book(city: str, nights: int = 1) -> dict:
    """Book a room.

    Args:
        city: where.
        nights: how many nights.
    """
    COUNTER.count("book")
    return {"city": city, "nights": nights}


def _openai(srv: WireServer) -> ResourceDescriptor:
    return ResourceDescriptor(OpenAIChatModel, base_url=f"{srv.url}/v1",
                              api_key_env="FAP_TEST_OPENAI_KEY", default_model="gpt-test")


@pytest.fixture(autouse=True)
def _keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAP_TEST_OPENAI_KEY", "sk-test")
    monkeypatch.setenv("FAP_TEST_ANTHROPIC_KEY", "sk-ant-test")
    COUNTER.reset()


def _calling(name: str, raw_arguments: str):
    def answer(req: dict[str, Any]) -> tuple[int, Any]:
        if req["n"] > 0:
            return 200, openai_reply("done")
        body = openai_reply(None, [("call_1", name, {})])
        body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = raw_arguments
        return 200, body
    return answer


def _chat(answer, tools) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    with WireServer(answer) as srv:
        res = run_probe(probe_agent(_openai(srv), tools=[t.__name__ for t in tools],
                                    tool_fns=tools), [{"key": "k", "q": "go"}])
        bodies = srv.bodies("/chat/completions")
    assert res.errors == []
    [ans] = outputs_of(res, "answer")
    return ans, bodies


@pytest.mark.parametrize("raw", ["null", " null ", '"null"'])
def test_null_arguments_are_a_call_without_arguments(raw):
    ans, bodies = _chat(_calling("now", raw), [now])
    assert ans["error"] is None and ans["content"] == "done"
    assert COUNTER.total == 1
    [tool_message] = [m for m in bodies[1]["messages"] if m["role"] == "tool"]
    assert tool_message["content"] == "12:00"
    [call] = bodies[1]["messages"][1]["tool_calls"]
    assert json.loads(call["function"]["arguments"]) == {}


def test_a_tool_call_in_flink_agents_form_with_null_arguments_has_none():
    from flink_agents_py.api import ToolCall

    for raw in ("null", "", None, "{}"):
        call = ToolCall.model_validate({"id": "c1", "type": "function",
                                        "function": {"name": "now", "arguments": raw}})
        assert (call.name, call.arguments) == ("now", {})


def test_null_arguments_of_a_tool_with_required_ones_go_back_to_the_model_as_its_error():
    ans, bodies = _chat(_calling("book", "null"), [book])
    assert ans["error"] is None and ans["content"] == "done" and COUNTER.total == 0
    [tool_message] = [m for m in bodies[1]["messages"] if m["role"] == "tool"]
    assert tool_message["content"].startswith("Error: ") and "city" in tool_message["content"]


def test_arguments_encoded_twice_are_the_object():
    raw = json.dumps(json.dumps({"city": "Oslo", "nights": 2}))
    ans, bodies = _chat(_calling("book", raw), [book])
    assert ans["error"] is None and COUNTER.total == 1
    [tool_message] = [m for m in bodies[1]["messages"] if m["role"] == "tool"]
    assert json.loads(tool_message["content"]) == {"city": "Oslo", "nights": 2}


@pytest.mark.parametrize(("raw", "kind"), [('"Oslo"', "a str"), ('"{not json"', "a str"),
                                           ('"[1, 2]"', "a str"), ("[1, 2]", "a list"),
                                           (json.dumps(json.dumps('"{}"')), "a str")])
def test_a_string_that_holds_no_object_is_still_refused_by_name(raw, kind):
    ans, bodies = _chat(_calling("book", raw), [book])
    # the model is told, by the tool's name (the chat goes on: it may call again)
    assert ans["error"] is None and ans["content"] == "done" and COUNTER.total == 0
    [tool_message] = [m for m in bodies[1]["messages"] if m["role"] == "tool"]
    assert f"tool 'book' was called with arguments that are not a JSON object but {kind}" \
        in tool_message["content"]


def test_an_answer_the_ollama_client_refuses_is_a_provider_error_saying_where_and_what():
    body = ollama_reply(tool_calls=[("book", {})])
    body["message"]["tool_calls"][0]["function"]["arguments"] = None
    with WireServer(lambda req: (200, body)) as srv:
        with pytest.raises(ProviderError) as e:
            OllamaChatModel(host=srv.url).chat([ChatMessage(content="book it")])
    assert "not of Ollama's form" in str(e.value)
    assert "message.tool_calls.0.function.arguments" in str(e.value)
    assert "(it sent null)" in str(e.value) and "OpenAIChatModel" in str(e.value)
    assert e.value.retryable is False


def _ollama_calling(*raws: str):
    """An Ollama-compatible server calling ``book`` with each of ``raws`` as JSON text."""
    def answer(req: dict[str, Any]) -> tuple[int, Any]:
        if req["n"] > 0:
            told = [m["content"] for m in req["body"]["messages"] if m["role"] == "tool"]
            return 200, ollama_reply(" | ".join(told))
        body = ollama_reply(tool_calls=[("book", {}) for _ in raws])
        for call, raw in zip(body["message"]["tool_calls"], raws, strict=True):
            call["function"]["arguments"] = raw
        return 200, body
    return answer


def test_ollama_compatible_arguments_sent_as_json_text_are_the_call_s_arguments():
    raws = ['{"city": "Oslo", "nights": 2}', '```json\n{"city": "Rome"}\n```']
    with WireServer(_ollama_calling(*raws)) as srv:
        res = run_probe(probe_agent(ResourceDescriptor(OllamaChatModel, host=srv.url),
                                    tools=["book"], tool_fns=[book]),
                        [{"key": "k", "q": "book Oslo and Rome"}])
    assert res.errors == []
    [ans] = outputs_of(res, "answer")
    assert ans["error"] is None and COUNTER.total == 2
    assert ans["content"] == '{"city":"Oslo","nights":2} | {"city":"Rome","nights":1}'


def test_ollama_compatible_arguments_text_holding_no_object_is_told_to_the_model():
    with WireServer(_ollama_calling('{"city": "Os')) as srv:
        res = run_probe(probe_agent(ResourceDescriptor(OllamaChatModel, host=srv.url),
                                    tools=["book"], tool_fns=[book]),
                        [{"key": "k", "q": "book Oslo"}])
    [ans] = outputs_of(res, "answer")
    assert ans["error"] is None and COUNTER.total == 0
    assert "tool 'book' was called with arguments that are not" in ans["content"]


# ------------------------------------------------------------------------ lone surrogates
HALF = "Oslo \ud83d"  # the JSON server writes it as the escape "\\ud83d", alone
WHOLE = "Oslo \N{GRINNING FACE}"  # written as the escaped pair: one character


def _anthropic(srv: WireServer) -> ResourceDescriptor:
    return ResourceDescriptor(AnthropicChatModel, base_url=srv.url,
                              api_key_env="FAP_TEST_ANTHROPIC_KEY", default_model="claude-test")


def _ollama(srv: WireServer) -> ResourceDescriptor:
    return ResourceDescriptor(OllamaChatModel, host=srv.url, default_model="llama-test")


def _openai_half(n: int) -> dict[str, Any]:
    if n:
        body = openai_reply(f"booked {HALF} and {WHOLE}")
        body["choices"][0]["message"]["reasoning_content"] = f"thought {HALF}"
        return body
    body = openai_reply(None, [("call_1", "book", {})])
    body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = (
        '{"city": "Oslo \\ud83d"}')  # the escape as a server writes it
    return body


def _anthropic_half(n: int) -> dict[str, Any]:
    if n:
        return anthropic_reply([{"type": "text", "text": f"booked {HALF} and {WHOLE}"}])
    return anthropic_reply([{"type": "text", "text": f"booking {HALF}"},
                            {"type": "tool_use", "id": "toolu_1", "name": "book",
                             "input": {"city": HALF}}], stop_reason="tool_use")


def _ollama_half(n: int) -> dict[str, Any]:
    if n:
        return ollama_reply(f"booked {HALF} and {WHOLE}")
    return ollama_reply(tool_calls=[("book", {"city": HALF})])


@pytest.mark.parametrize(("conn", "reply", "path"), [
    (_openai, _openai_half, "/chat/completions"),
    (_anthropic, _anthropic_half, "/v1/messages"),
    (_ollama, _ollama_half, "/api/chat")], ids=["openai", "anthropic", "ollama"])
def test_half_a_character_in_an_answer_is_the_replacement_character(conn, reply, path):
    with WireServer(lambda req: (200, reply(req["n"]))) as srv:
        res = run_probe(probe_agent(conn(srv), tools=["book"], tool_fns=[book]),
                        [{"key": "k", "q": "book Oslo"}])
        second = srv.bodies(path)[1]
    assert res.errors == []
    [ans] = outputs_of(res, "answer")
    assert ans["error"] is None, ans["error"]
    assert ans["content"] == "booked Oslo \ufffd and Oslo \N{GRINNING FACE}"
    [results] = outputs_of(res, "results")
    [result] = results["results"].values()
    assert result["ok"] and result["content"] == {"city": "Oslo \ufffd", "nights": 1}
    assert COUNTER.total == 1
    # the next request carries the call's arguments as valid text (it could not be encoded)
    assert "Oslo \ufffd" in json.dumps(second, ensure_ascii=False)


def test_an_answer_nested_deeply_is_walked_without_recursion():
    from flink_agents_py.integrations.chat_models._answers import valid_text

    deep: Any = {"\ud83d key": HALF}
    for _ in range(20_000):
        deep = {"a": [deep]}
    valid_text(deep)
    for _ in range(20_000):
        deep = deep["a"][0]
    assert deep == {"\ufffd key": "Oslo \ufffd"}


# ------------------------------------------------------------- Anthropic: system text only
def _anthropic_strict(req: dict[str, Any]) -> tuple[int, Any]:
    """Answers as the Messages API does: a request without turns is a 400."""
    if not req["body"]["messages"]:
        return 400, {"type": "error", "error": {
            "type": "invalid_request_error",
            "message": "messages: at least one message is required"}}
    return 200, anthropic_reply([{"type": "text", "text": "positive"}])


@pytest.mark.parametrize("question", ["", "  "])
def test_a_prompt_holding_the_whole_request_reaches_anthropic_as_a_user_turn(question):
    with WireServer(_anthropic_strict) as srv:
        agent = probe_agent(_anthropic(srv), prompt="Classify this review: {review}")
        res = run_probe(agent, [{"key": "k", "q": question, "args": {"review": "great tea"}}])
        [body] = srv.bodies("/v1/messages")
    [ans] = outputs_of(res, "answer")
    assert ans["error"] is None and ans["content"] == "positive"
    assert body["messages"] == [{"role": "user", "content": [
        {"type": "text", "text": "Classify this review: great tea"}]}]
    assert "system" not in body


def test_a_prompt_beside_a_question_stays_anthropics_system_text():
    with WireServer(_anthropic_strict) as srv:
        agent = probe_agent(_anthropic(srv), prompt="You classify reviews.")
        res = run_probe(agent, [{"key": "k", "q": "great tea"}])
        [body] = srv.bodies("/v1/messages")
    assert outputs_of(res, "answer")[0]["content"] == "positive"
    assert body["system"] == "You classify reviews."
    assert body["messages"] == [{"role": "user", "content": [
        {"type": "text", "text": "great tea"}]}]


# --------------------------------------------------------- reasoning named "reasoning"
def _vllm_reasoning(field: str):
    def answer(req: dict[str, Any]) -> tuple[int, Any]:
        if req["n"] == 0:
            body = openai_reply(None, [("call_1", "book", {"city": "Oslo"})])
            body["choices"][0]["message"][field] = "Oslo first."
            return 200, body
        [turn] = [m for m in req["body"]["messages"] if m.get("tool_calls")]
        others = {"reasoning", "reasoning_content"} - {field}
        if turn.get(field) != "Oslo first." or any(k in turn for k in others):
            return 400, {"error": {"message": f"the assistant turn lost its {field}: {turn}"}}
        return 200, openai_reply("booked")
    return answer


@pytest.mark.parametrize("field", ["reasoning", "reasoning_content"])
def test_reasoning_goes_back_in_the_field_the_server_named_it(field):
    ans, bodies = _chat(_vllm_reasoning(field), [book])
    assert ans["error"] is None and ans["content"] == "booked", ans
    assert len(bodies) == 2


def test_a_message_carries_which_field_its_reasoning_came_in():
    def answer(req: dict[str, Any]) -> tuple[int, Any]:
        body = openai_reply("fine")
        body["choices"][0]["message"]["reasoning"] = "thought"
        return 200, body

    with WireServer(answer) as srv:
        conn = OpenAIChatModel(base_url=f"{srv.url}/v1", api_key_env="FAP_TEST_OPENAI_KEY")
        got = conn.chat([ChatMessage(content="hi")])
    assert got.message.reasoning == [{"type": "reasoning", "text": "thought",
                                      "field": "reasoning"}]
    assert got.message.reasoning_text == "thought"


# ------------------------------------------------- max_tokens refused by reasoning models
def _reasoning_models(req: dict[str, Any]) -> tuple[int, Any]:
    body = req["body"]
    if body["model"].startswith("reasoner") and "max_tokens" in body:
        return 400, {"error": {
            "message": "Unsupported parameter: 'max_tokens' is not supported with this "
                       "model. Use 'max_completion_tokens' instead.",
            "type": "invalid_request_error", "param": "max_tokens",
            "code": "unsupported_parameter"}}
    return 200, openai_reply(f"{body['model']} answered")


def test_max_tokens_reaches_a_reasoning_model_as_max_completion_tokens():
    with WireServer(_reasoning_models) as srv:
        agent = ChatProbe()
        agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, _openai(srv))
        for name, model in (("o4", "reasoner-deploy"), ("gpt", "gpt-4o")):
            agent.add_resource(name, ResourceType.CHAT_MODEL, ResourceDescriptor(
                ChatModelSetup, connection="conn", model=model,
                options={"max_tokens": 300, "temperature": 0}))
        records = [{"key": k, "q": "hi", "model": m}  # one key's records: one at a time
                   for k, m in (("a", "o4"), ("a", "o4"), ("b", "gpt"))]
        res = run_probe(agent, records)
        bodies = srv.bodies("/chat/completions")
    assert res.errors == []
    assert sorted(a["content"] for a in outputs_of(res, "answer")) == [
        "gpt-4o answered", "reasoner-deploy answered", "reasoner-deploy answered"]
    sent = [(b["model"], b.get("max_tokens"), b.get("max_completion_tokens"),
             b["temperature"]) for b in bodies]
    # refused once, then sent as the model takes it; another model keeps max_tokens
    # (a deployment named freely: a model named o4-mini gets it so from the first request)
    assert sent.count(("reasoner-deploy", 300, None, 0)) == 1
    assert sent.count(("reasoner-deploy", None, 300, 0)) == 2
    assert sent.count(("gpt-4o", 300, None, 0)) == 1 and len(sent) == 4


# ------------------------------------------------------- Anthropic: a tool's empty result
def touch(path: str) -> str:
    """Touch a file; says nothing.

    Args:
        path: the file.
    """
    COUNTER.count("touch")
    return "" if path == "a" else "  \n"


def _anthropic_empty_results(req: dict[str, Any]) -> tuple[int, Any]:
    for i, m in enumerate(req["body"]["messages"]):
        for block in m["content"]:
            if block["type"] == "tool_result" and "content" in block \
                    and not str(block["content"]).strip():
                return 400, {"type": "error", "error": {
                    "type": "invalid_request_error",
                    "message": f"The content field in the Message object at messages.{i} is "
                               "empty. Add a ContentBlock object to the content field and "
                               "try again."}}
    if req["n"] == 0:
        return 200, anthropic_reply([
            {"type": "tool_use", "id": "toolu_1", "name": "touch", "input": {"path": "a"}},
            {"type": "tool_use", "id": "toolu_2", "name": "touch", "input": {"path": "b"}}],
            stop_reason="tool_use")
    return 200, anthropic_reply([{"type": "text", "text": "touched both"}])


def test_a_tools_empty_result_reaches_anthropic_without_content():
    with WireServer(_anthropic_empty_results) as srv:
        res = run_probe(probe_agent(_anthropic(srv), tools=["touch"], tool_fns=[touch]),
                        [{"key": "k", "q": "touch a and b"}])
        second = srv.bodies("/v1/messages")[1]
    [ans] = outputs_of(res, "answer")
    assert ans["error"] is None and ans["content"] == "touched both"
    assert COUNTER.total == 2
    assert second["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_1"},
        {"type": "tool_result", "tool_use_id": "toolu_2"}]


# ------------------------------------------------------------ a base URL of the wrong depth
def _served(req: dict[str, Any]) -> tuple[int, Any]:
    if req["path"] == "/v1/chat/completions":
        if req["body"]["model"] == "missing":
            return 404, {"error": {"message": "The model `missing` does not exist",
                                   "type": "invalid_request_error", "code": "model_not_found"}}
        return 200, openai_reply("ok")
    if req["path"] == "/api/chat":
        return 404, {"error": f"model '{req['body']['model']}' not found"}
    return 404, {"detail": "Not Found"}


@pytest.mark.parametrize(("make", "says"), [
    (lambda url: OpenAIChatModel(base_url=url, api_key_env="FAP_TEST_OPENAI_KEY"),
     "/chat/completions; an OpenAI-compatible server's base_url usually ends in /v1)"),
    (lambda url: AnthropicChatModel(base_url=f"{url}/v1", api_key_env="FAP_TEST_ANTHROPIC_KEY"),
     "/v1/v1/messages; base_url is the server's root, without /v1"),
    (lambda url: OllamaChatModel(host=f"{url}/v1"),
     "/v1/api/chat; host is the server's root, without /api or /v1"),
    (lambda url: OllamaChatModel(host=f"{url}/api/"),
     "/api/api/chat; host is the server's root"),
], ids=["openai_without_v1", "anthropic_with_v1", "ollama_v1", "ollama_api"])
def test_a_404_names_the_url_and_a_base_url_of_the_wrong_depth(make, says):
    with WireServer(_served) as srv:
        with pytest.raises(ProviderError) as e:
            make(srv.url).chat([ChatMessage(content="hi")])
    assert e.value.status_code == 404 and not e.value.retryable
    assert f"(POST {srv.url}{says}" in str(e.value), str(e.value)


def test_a_404_at_the_right_url_only_names_it():
    with WireServer(_served) as srv:
        with pytest.raises(ProviderError) as e:
            OpenAIChatModel(base_url=f"{srv.url}/v1", api_key_env="FAP_TEST_OPENAI_KEY",
                            ).chat([ChatMessage(content="hi")], model="missing")
        with pytest.raises(ProviderError) as o:
            OllamaChatModel(host=srv.url).chat([ChatMessage(content="hi")], model="gone")
    assert str(e.value).endswith(f"does not exist (POST {srv.url}/v1/chat/completions) "
                                 "(status 404)"), str(e.value)
    assert f"model 'gone' not found (POST {srv.url}/api/chat)" in str(o.value)


# ------------------------------------------------------------- as a user runs it
USER_SCRIPT = r'''
import json, sys, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import flink_agents_py
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (Agent, ChatMessage, ChatModelSetup, InputEvent, MessageRole,
                                 OutputEvent, ResourceDescriptor, RunnerContext, action,
                                 chat_model_connection, chat_model_setup, tool)
from flink_agents_py.integrations.chat_models import OpenAIChatModel

SEEN = []


class Server(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        SEEN.append(body)
        message = {"role": "assistant", "content": None, "tool_calls": [{
            "id": "call_1", "type": "function",
            "function": {"name": "clock", "arguments": "null"}}]}
        if any(m["role"] == "tool" for m in body["messages"]):
            message = {"role": "assistant", "content": "It is noon \ud83d"}
        data = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                           "choices": [{"index": 0, "message": message,
                                        "finish_reason": "stop"}]}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


server = ThreadingHTTPServer(("127.0.0.1", 0), Server)
threading.Thread(target=server.serve_forever, daemon=True).start()
URL = f"http://127.0.0.1:{server.server_address[1]}/v1"


@tool
def clock() -> str:
    """The time."""
    return "12:00"


class TimeAgent(Agent):
    @chat_model_connection
    @staticmethod
    def local_server() -> ResourceDescriptor:
        return ResourceDescriptor(OpenAIChatModel, base_url=URL)

    @chat_model_setup
    @staticmethod
    def assistant() -> ResourceDescriptor:
        return ResourceDescriptor(ChatModelSetup, connection="local_server", tools=["clock"])

    clock = staticmethod(clock)

    @action(InputEvent)
    @staticmethod
    async def ask(event: InputEvent, ctx: RunnerContext) -> None:
        answer = await ctx.chat("assistant", [ChatMessage(role=MessageRole.USER,
                                                          content=event.input["q"])])
        ctx.send_event(OutputEvent(output={"key": ctx.key, "answer": answer.message.content}))


out = AgentsExecutionEnvironment.local().from_list(
    [{"key": "a", "q": "What time is it?"}]).apply(TimeAgent()).collect()
tool_messages = [m["content"] for m in SEEN[-1]["messages"] if m["role"] == "tool"]
print(json.dumps({"package": flink_agents_py.__file__, "out": out, "tool": tool_messages}))
'''


def test_a_users_agent_gets_its_answer_from_a_server_answering_so(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    (tmp_path / "time_agent.py").write_text(USER_SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(root)}
    proc = subprocess.run([sys.executable, "time_agent.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["package"].startswith(str(root))
    assert got["out"] == [{"key": "a", "answer": "It is noon \ufffd"}]
    assert got["tool"] == ["12:00"]


# ------------------------------------------------------- options in another provider's names
@pytest.mark.parametrize(("conn", "path", "options", "sent"), [
    (_anthropic, "/v1/messages", {"stop": "\n\n", "max_completion_tokens": 50,
                                  "temperature": 0},
     {"stop_sequences": ["\n\n"], "max_tokens": 50, "temperature": 0}),
    (_anthropic, "/v1/messages", {"stop_sequences": ["", "END"], "stop": ["x"]},
     {"stop_sequences": ["END"], "max_tokens": 1024}),
    (_anthropic, "/v1/messages", {"stop": [""]}, {"max_tokens": 1024}),
    (_openai, "/chat/completions", {"stop_sequences": ["END"], "max_tokens": 5},
     {"stop": ["END"], "max_tokens": 5}),
    (_ollama, "/api/chat", {"stop_sequences": ["END"], "max_completion_tokens": 9,
                            "temperature": 0},
     {"options": {"stop": ["END"], "num_predict": 9, "temperature": 0}}),
], ids=["anthropic_openai_names", "anthropic_empty_stop", "anthropic_only_empty",
        "openai_anthropic_names", "ollama_other_names"])
def test_options_in_another_providers_names_reach_each_in_its_own(conn, path, options, sent):
    def answer(req: dict[str, Any]) -> tuple[int, Any]:
        if path == "/v1/messages":
            return 200, anthropic_reply([{"type": "text", "text": "ok"}])
        if path == "/api/chat":
            return 200, ollama_reply("ok")
        return 200, openai_reply("ok")

    with WireServer(answer) as srv:
        res = run_probe(probe_agent(conn(srv), options=options), [{"key": "k", "q": "hi"}])
        [body] = srv.bodies(path)
    assert outputs_of(res, "answer")[0]["content"] == "ok"
    names = {"stop", "stop_sequences", "max_tokens", "max_completion_tokens", "num_predict",
             "temperature", "options"}
    assert {k: v for k, v in body.items() if k in names} == sent


@pytest.mark.parametrize(("conn", "path"), [(_openai, "/chat/completions"),
                                            (_anthropic, "/v1/messages"),
                                            (_ollama, "/api/chat")],
                         ids=["openai", "anthropic", "ollama"])
def test_stream_true_is_refused_before_sending_and_false_left_out(conn, path):
    def answer(req: dict[str, Any]) -> tuple[int, Any]:
        if path == "/v1/messages":
            return 200, anthropic_reply([{"type": "text", "text": "ok"}])
        return 200, ollama_reply("ok") if path == "/api/chat" else openai_reply("ok")

    with WireServer(answer) as srv:
        res = run_probe(probe_agent(conn(srv), options={"stream": True}),
                        [{"key": "k", "q": "hi"}])
        assert srv.requests == []
        [ans] = outputs_of(res, "answer")
        assert "stream=True is not offered" in ans["error"]
        res = run_probe(probe_agent(conn(srv), options={"stream": False, "temperature": 0}),
                        [{"key": "k", "q": "hi"}])
        [body] = srv.bodies(path)
    assert outputs_of(res, "answer")[0]["content"] == "ok"
    assert body.get("stream") in (None, False) and "stream" not in body.get("options", {})


# a usage count sent as text ("12") is read as its number: tests/test_budgets_unreadable_usage.py
@pytest.mark.parametrize("change", [{"content": "plain text"},
                                    {"content": [None, {"type": "text", "text": "x"}]}],
                         ids=["content_text", "null_block"])
def test_an_anthropic_body_of_another_shape_is_a_provider_error_saying_so(change):
    body = {**anthropic_reply([{"type": "text", "text": "x"}]), **change}
    with WireServer(lambda req: (200, body)) as srv, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the SDK's serializer warns about such a body
        with pytest.raises(ProviderError) as e:
            AnthropicChatModel(base_url=srv.url, api_key_env="FAP_TEST_ANTHROPIC_KEY",
                               ).chat([ChatMessage(content="hi")])
    assert str(e.value).startswith("unexpected anthropic messages body: ")
    assert e.value.retryable is False


@pytest.mark.parametrize("schema", [None, {"type": "object"}])
def test_ollamas_json_mode_in_a_setups_options_is_the_requests_format(schema):
    with WireServer(lambda req: (200, ollama_reply('{"ok": true}'))) as srv:
        res = run_probe(probe_agent(_ollama(srv), options={"format": "json", "temperature": 0}),
                        [{"key": "k", "q": "hi", "schema": schema}])
        [body] = srv.bodies("/api/chat")
    assert outputs_of(res, "answer")[0]["content"] == '{"ok": true}'
    assert body["format"] == (schema or "json") and body["options"] == {"temperature": 0}


def test_an_ollama_server_behind_the_environment_s_proxy_is_still_reached_through_it(
        monkeypatch: pytest.MonkeyPatch):
    # the local server is the HTTP proxy the requests to a remote Ollama go through
    with WireServer(lambda req: (200, ollama_reply("hi"))) as srv:
        for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("HTTP_PROXY", srv.url)
        answer = OllamaChatModel(host="http://ollama.example:11434").chat(
            [ChatMessage(content="hello")])
        [request] = srv.requests
    assert answer.message.content == "hi"
    assert request["path"] == "http://ollama.example:11434/api/chat"
