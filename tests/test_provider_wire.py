"""Provider wire formats and tool calling, against local servers speaking each provider's format.

Each test comes from a public report of a similar system:

- A model cut at its output token limit while writing a tool call (OpenAI's
  ``finish_reason: "length"``, Anthropic's ``stop_reason: "max_tokens"`` with a partial
  ``input``, Ollama's ``done_reason: "length"``): the call ran with partial arguments, or the
  chat failed saying its arguments are not JSON (LibreChat agents #280, jac #6766, OpenRouter
  typescript-agent #125). None runs now, and the chat's error says the answer was cut.
- Tool call ids another provider made, sent to Anthropic (``tool_use.id: String should
  match pattern '^[a-zA-Z0-9_-]+$'``: ClawRouter #17, nanobot #4356, Roo-Code #10649) or to
  OpenAI (``tool_calls[0].id: string too long ... maximum length 40``: Portkey gateway
  #1062, camel #2215, autogen #6377), when a fallback setup takes over a chat: a 400 on
  every call. They go as stable stand-ins now.
- Tool names OpenAI and Anthropic refuse (``^[a-zA-Z0-9_-]{1,64}$``): MCP tools named
  ``calendar.read`` or ``admin/tools.list`` (openai/codex #8174, github/copilot-cli #2581,
  apify tester-mcp-client #11), a name with a space or over 64 characters. The request was
  refused whole; such a tool goes under a stand-in now, its calls mapped back.
- A model's reasoning dropped between tool rounds: Anthropic with extended thinking refuses
  the next call (``Expected `thinking` or `redacted_thinking`, but found `tool_use```:
  opencode #3077, OpenRouter ai-sdk-provider #162), Kimi and DeepSeek thinking modes too
  (``reasoning_content is missing in assistant tool call message``: kimi-agent-sdk #169,
  eino-ext #700). It is kept with the message (``ChatMessage.reasoning``) and goes back.
- Text Anthropic refuses in a request: a block of whitespace only (the ``"\\n\\n"`` a model
  writes before its tool calls: ``text content blocks must contain non-whitespace text``,
  kibitz #78, LibreChat agents #124) and a final assistant turn ending in whitespace
  (``final assistant content cannot end with trailing whitespace``: crewAI #4413, LangChain
  #35071). Neither is sent now.
- Anthropic's usage with prompt caching: ``input_tokens`` counts only what was neither read
  from nor written to the cache, so a chat's input tokens (and the budgets counting them)
  were a fraction of what was processed (genkit #5412, any-llm #622, oasis #44). They are
  the sum now.
- ``content`` as a list of parts (Mistral's reasoning models: a ``thinking`` part, then
  ``text`` parts; microsoft agent-framework #6978, mistralai client-python #621, big-AGI
  #873): the chat failed with ``unexpected chat completion body``. The text parts are the
  answer now.
- Structured output from Anthropic with extended thinking on: the forced output tool made
  every such call a 400 (``Thinking may not be enabled when tool_choice forces tool use``:
  llama_index #19641, mastra #7507, LangChain #35544). The tool is offered unforced then.
- ``tool_choice`` and ``parallel_tool_calls`` a provider refuses: OpenAI's forms sent to
  Anthropic (``tool_choice: Input should be a valid dictionary``), either sent without tools
  (``'parallel_tool_calls' is only allowed when 'tools' are specified``: Upsonic #323). A
  setup's options now go to either connection, and are left out without tools.
- OpenAI's refusal (``message.refusal``, ``content: null``): the answer was an empty text, a
  structured-output chat asked again and failed quoting ``''`` (openai-agents-python
  #3055, langchain4j #6120). The refusal is the answer's text now, and its metadata.
"""

from __future__ import annotations

import json
import re
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

from flink_agents_py.api import (
    ChatMessage,
    ChatModelSetup,
    ChatResponse,
    MessageRole,
    ResourceDescriptor,
    ResourceType,
    ToolCall,
)
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


# ------------------------------------------------------------------ ids across providers
_ANTHROPIC_ID = re.compile(r"^[a-zA-Z0-9_-]+$")


def _strict_anthropic(req: dict[str, Any]) -> tuple[int, Any]:
    """Anthropic's checks of tool call ids: the pattern, and each result naming a call."""
    uses: set[str] = set()
    for i, m in enumerate(req["body"]["messages"]):
        for j, b in enumerate(m["content"]):
            key = "id" if b["type"] == "tool_use" else "tool_use_id"
            if b["type"] in ("tool_use", "tool_result") and not _ANTHROPIC_ID.match(b[key]):
                return 400, {"type": "error", "error": {
                    "type": "invalid_request_error", "message": f"messages.{i}.content.{j}."
                    f"{b['type']}.{key}: String should match pattern '^[a-zA-Z0-9_-]+$'"}}
            if b["type"] == "tool_use":
                uses.add(b["id"])
            if b["type"] == "tool_result" and b["tool_use_id"] not in uses:
                return 400, {"type": "error", "error": {"type": "invalid_request_error",
                                                       "message": "unexpected tool_use_id"}}
    return 200, anthropic_reply([{"type": "text", "text": "done by claude"}])


def _strict_openai(req: dict[str, Any]) -> tuple[int, Any]:
    """OpenAI's checks of tool call ids: at most 40 characters, each result naming a call."""
    calls: set[str] = set()
    for i, m in enumerate(req["body"]["messages"]):
        for j, c in enumerate(m.get("tool_calls") or []):
            if len(c["id"]) > 40:
                return 400, {"error": {"message": f"Invalid 'messages[{i}].tool_calls[{j}]"
                                                  f".id': string too long. Expected a string "
                                                  f"with maximum length 40, but got a string "
                                                  f"with length {len(c['id'])} instead."}}
            calls.add(c["id"])
        if m["role"] == "tool" and m["tool_call_id"] not in calls:
            return 400, {"error": {"message": "tool_call_id does not answer a call"}}
    return 200, openai_reply("done by gpt")


def _price(item: str) -> float:
    """Price of an item.

    Args:
        item: what to price.
    """
    return 7.0


def _down_after_tools(first: dict[str, Any], down: dict[str, Any]) -> Any:
    return lambda req: (200, first) if req["n"] == 0 else (503, down)


_FOREIGN_IDS: dict[str, Any] = {
    # Ollama gives no ids: the chat action's synthetic ones have '/', '#' and '.'
    "ollama_to_anthropic": (_ollama, _down_after_tools(
        ollama_reply(tool_calls=[("_price", {"item": "tea"}), ("_price", {"item": "cake"})]),
        {"error": "down"}), _anthropic, _strict_anthropic, "done by claude"),
    # a gateway's ids of 44 characters, sent on to OpenAI
    "gateway_to_openai": (_openai, _down_after_tools(
        openai_reply(None, [(f"portkey-6aa6db90-1b84-4155-9f32-f658c97d6b1{i}", "_price",
                             {"item": "tea"}) for i in range(2)]),
        {"error": {"message": "down"}}), _openai, _strict_openai, "done by gpt"),
}


@pytest.mark.parametrize("case", list(_FOREIGN_IDS))
def test_tool_call_ids_of_another_provider_reach_a_fallback_as_ids_it_takes(case):
    first_conn, first, fallback_conn, strict, answer = _FOREIGN_IDS[case]
    with WireServer(first) as one, WireServer(strict) as two:
        agent = probe_agent(first_conn(one), tools=["_price"], tool_fns=[_price],
                            fallbacks=["other"])
        agent.add_resource("conn2", ResourceType.CHAT_MODEL_CONNECTION, fallback_conn(two))
        agent.add_resource("other", ResourceType.CHAT_MODEL, ResourceDescriptor(
            ChatModelSetup, connection="conn2", tools=["_price"]))
        res = run_probe(agent, [{"key": "k", "q": "prices?"}])
        [sent] = two.bodies()
    [ans] = outputs_of(res, "answer")
    assert ans["error"] is None and ans["content"] == answer, ans
    assert ans["metadata"]["model_setup"] == "other"
    # two calls, two distinct ids, each result under its call's
    if "messages" in sent and sent["messages"][1]["role"] == "assistant" \
            and isinstance(sent["messages"][1]["content"], list):
        ids = [b["id"] for b in sent["messages"][1]["content"] if b["type"] == "tool_use"]
        answered = [b["tool_use_id"] for b in sent["messages"][2]["content"]]
    else:
        ids = [c["id"] for c in sent["messages"][1]["tool_calls"]]
        answered = [m["tool_call_id"] for m in sent["messages"][2:]]
    assert len(set(ids)) == 2 and answered == ids


# ------------------------------------------------------------------ names providers refuse
_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_LONG = "lookup_" + "x" * 70


def _refused_names(names: list[str]) -> list[str]:
    return [n for n in names if not _NAME.match(n)]


def _named_calls(calls: list[tuple[str, str]], done: str) -> Any:
    """A strict server: refuses a bad name anywhere; calls each tool once, by offered name."""

    def answer(req: dict[str, Any]) -> tuple[int, Any]:
        body = req["body"]
        anthropic = "input_schema" in json.dumps(body.get("tools", []))
        offered = [t["name"] if anthropic else t["function"]["name"] for t in body["tools"]]
        called = [b["name"] for m in body["messages"] if isinstance(m["content"], list)
                  for b in m["content"] if b.get("type") == "tool_use"] if anthropic else [
            c["function"]["name"] for m in body["messages"] for c in m.get("tool_calls") or []]
        choice = body.get("tool_choice") or {}
        chosen = [choice.get("name") or (choice.get("function") or {}).get("name") or "ok"]
        bad = _refused_names(offered + called + chosen)
        if bad:
            return 400, {"error": {"message": f"Invalid 'tools[0].name': {bad[0]!r} does not "
                                              "match pattern '^[a-zA-Z0-9_-]+$'"},
                         "type": "error"}
        if req["n"] > 0:
            return 200, (anthropic_reply([{"type": "text", "text": done}]) if anthropic
                         else openai_reply(done))
        by_label = {label: [n for n in offered if n.startswith(label[:5])] for label, _ in calls}
        picks = [(f"call_{i}", by_label[label][0], {"item": item})
                 for i, (label, item) in enumerate(calls)]
        if anthropic:
            return 200, anthropic_reply([{"type": "tool_use", "id": i, "name": n, "input": a}
                                         for i, n, a in picks], stop_reason="tool_use")
        return 200, openai_reply(None, picks)

    return answer


@pytest.mark.parametrize("conn", [_openai, _anthropic], ids=["openai", "anthropic"])
def test_tools_named_as_mcp_servers_name_them_are_offered_and_called_under_stand_ins(conn):
    from flink_agents_py.api import FunctionTool

    names = ["calendar.read", "admin/tools.list", "price lookup", _LONG, "calendar_read"]
    with WireServer(_named_calls([("calen", "tea"), ("admin", "cake"), ("price", "jam"),
                                  ("looku", "bun")], "all four")) as srv:
        agent = probe_agent(conn(srv), tools=names,
                            options={"tool_choice": {"type": "function",
                                                     "function": {"name": "calendar.read"}}}
                            if conn is _openai else {})
        for name in names:
            agent.add_resource(name, ResourceType.TOOL,
                               FunctionTool.from_function(_price, name=name))
        res = run_probe(agent, [{"key": "k", "q": "prices?"}])
        first, second = srv.bodies()
    [ans] = outputs_of(res, "answer")
    assert ans["error"] is None and ans["content"] == "all four", ans
    [calls] = outputs_of(res, "calls")  # the calls name the tools by their own names
    assert [c["name"] for c in calls["calls"]] == ["calendar.read", "admin/tools.list",
                                                   "price lookup", _LONG]
    [results] = outputs_of(res, "results")
    assert all(r["ok"] and r["content"] == 7.0 for r in results["results"].values())
    offered = [t.get("name") or t["function"]["name"] for t in first["tools"]]
    assert len(set(offered)) == 5 and _refused_names(offered) == []
    assert offered[-1] == "calendar_read"  # a name that fits keeps it; the other one moves
    assert offered[2] == "price_lookup" and len(offered[3]) <= 64


# ------------------------------------------------------------------ reasoning round trip
def _thinking_anthropic(req: dict[str, Any]) -> tuple[int, Any]:
    """Anthropic with extended thinking: the tool round's assistant turn starts thinking."""
    body = req["body"]
    if req["n"] == 0:
        return 200, anthropic_reply([
            {"type": "thinking", "thinking": "Tea first, then cake.", "signature": "sig-1"},
            {"type": "redacted_thinking", "data": "opaque-2"},
            {"type": "text", "text": "Looking both up."},
            {"type": "tool_use", "id": "toolu_1", "name": "_price", "input": {"item": "tea"}},
        ], stop_reason="tool_use")
    turn = body["messages"][1]["content"]
    if "thinking" in body and turn[0]["type"] not in ("thinking", "redacted_thinking"):
        return 400, {"type": "error", "error": {
            "type": "invalid_request_error", "message": "messages.1.content.0.type: Expected "
            "`thinking` or `redacted_thinking`, but found `text`. When `thinking` is "
            "enabled, a final `assistant` message must start with a thinking block"}}
    assert turn[:2] == [
        {"type": "thinking", "thinking": "Tea first, then cake.", "signature": "sig-1"},
        {"type": "redacted_thinking", "data": "opaque-2"}], turn
    return 200, anthropic_reply([{"type": "thinking", "thinking": "Done.", "signature": "s2"},
                                 {"type": "text", "text": "tea is 7"}])


def _thinking_openai(req: dict[str, Any]) -> tuple[int, Any]:
    """Kimi's (DeepSeek's) thinking mode: tool call turns must carry reasoning_content."""
    if req["n"] == 0:
        body = openai_reply(None, [("call_1", "_price", {"item": "tea"})])
        body["choices"][0]["message"]["reasoning_content"] = "Tea first."
        return 200, body
    for i, m in enumerate(req["body"]["messages"]):
        if m["role"] == "assistant" and m.get("tool_calls") and not m.get("reasoning_content"):
            return 400, {"error": {"message": "thinking is enabled but reasoning_content is "
                                              f"missing in assistant tool call message at "
                                              f"index {i}"}}
    assert req["body"]["messages"][1]["reasoning_content"] == "Tea first."
    return 200, openai_reply("tea is 7")


def _thinking_ollama(req: dict[str, Any]) -> tuple[int, Any]:
    if req["n"] == 0:
        body = ollama_reply(tool_calls=[("_price", {"item": "tea"})])
        body["message"]["thinking"] = "Tea first."
        return 200, body
    sent = req["body"]["messages"][1]
    return 200, ollama_reply("tea is 7" if sent.get("thinking") == "Tea first." else "lost")


@pytest.mark.parametrize(("conn", "server", "options"), [
    (_anthropic, _thinking_anthropic, {"thinking": {"type": "enabled", "budget_tokens": 1024},
                                       "max_tokens": 2048}),
    (_openai, _thinking_openai, {}),
    (_ollama, _thinking_ollama, {"think": True}),
], ids=["anthropic", "openai_compatible", "ollama"])
def test_the_models_reasoning_goes_back_with_its_tool_calls(conn, server, options):
    with WireServer(server) as srv:
        res = run_probe(probe_agent(conn(srv), tools=["_price"], tool_fns=[_price],
                                    options=options), [{"key": "k", "q": "price of tea?"}])
        n = len(srv.requests)
    [ans] = outputs_of(res, "answer")
    assert ans["error"] is None and ans["content"] == "tea is 7", ans
    assert n == 2


def test_reasoning_is_kept_on_the_message_and_out_of_its_json_when_there_is_none():
    plain = ChatMessage(role=MessageRole.ASSISTANT, content="hi")
    assert "reasoning" not in plain.model_dump() and "reasoning" not in plain.model_dump_json()
    thought = ChatMessage(role=MessageRole.ASSISTANT, content="hi", reasoning=[
        {"type": "thinking", "thinking": "a", "signature": "s"},
        {"type": "reasoning", "text": "b"}, {"type": "redacted_thinking", "data": "x"}])
    again = ChatMessage.model_validate_json(thought.model_dump_json())
    assert again == thought and again.reasoning_text == "a\n\nb"


# ------------------------------------------------------------------ whitespace Anthropic refuses
def _whitespace_rules(body: dict[str, Any]) -> str | None:
    for m in body["messages"]:
        for b in m["content"]:
            if b["type"] == "text" and not b["text"].strip():
                return "messages: text content blocks must contain non-whitespace text"
    last = body["messages"][-1]
    if last["role"] == "assistant" and last["content"][-1].get("text", "x") != \
            last["content"][-1].get("text", "x").rstrip():
        return "messages: final assistant content cannot end with trailing whitespace"
    return None


def test_whitespace_anthropic_refuses_is_not_sent_in_a_tool_round_or_a_prefill():
    def answer(req: dict[str, Any]) -> tuple[int, Any]:
        refused = _whitespace_rules(req["body"])
        if refused:
            return 400, {"type": "error", "error": {"type": "invalid_request_error",
                                                   "message": refused}}
        if req["n"] == 0:
            return 200, anthropic_reply([
                {"type": "text", "text": "\n\n"},
                {"type": "tool_use", "id": "toolu_1", "name": "_price", "input": {"item": "tea"}},
            ], stop_reason="tool_use")
        return 200, anthropic_reply([{"type": "text", "text": "tea is 7"}])

    with WireServer(answer) as srv:
        res = run_probe(probe_agent(_anthropic(srv), tools=["_price"], tool_fns=[_price]),
                        [{"key": "k", "q": "price of tea?"}])
        [ans] = outputs_of(res, "answer")
        assert ans["error"] is None and ans["content"] == "tea is 7", ans
        assert srv.bodies()[1]["messages"][1]["content"][0]["type"] == "tool_use"
        conn = AnthropicChatModel(base_url=srv.url, api_key_env="FAP_TEST_ANTHROPIC_KEY")
        reply = conn.chat([ChatMessage(content="Name a colour."),
                           ChatMessage(role=MessageRole.ASSISTANT, content="The colour is: \n")])
        assert reply.message.content == "tea is 7"
        assert srv.bodies()[-1]["messages"][-1]["content"] == [
            {"type": "text", "text": "The colour is:"}]


# ------------------------------------------------------------------ usage with prompt caching
def test_anthropic_input_tokens_count_what_the_prompt_cache_read_and_wrote():
    body = anthropic_reply([{"type": "text", "text": "hi"}])
    body["usage"] = {"input_tokens": 7, "output_tokens": 12, "cache_read_input_tokens": 9000,
                     "cache_creation_input_tokens": 400}
    with WireServer(lambda req: (200, body)) as srv:
        res = run_probe(probe_agent(_anthropic(srv)), [{"key": "k", "q": "hi"}])
    [ans] = outputs_of(res, "answer")
    assert ans["usage"] == {"input_tokens": 9407, "output_tokens": 12}
    assert ans["metadata"] == {"cache_read_input_tokens": 9000,
                               "cache_creation_input_tokens": 400,
                               "cached_tokens": 9000}  # OpenAI's name, as its answers give


# ------------------------------------------------------------------ content as parts
def test_an_answer_whose_content_is_a_list_of_parts_is_its_text_parts():
    body = openai_reply(None)
    body["choices"][0]["message"]["content"] = [
        {"type": "thinking", "thinking": [{"type": "text", "text": "They want JSON."}]},
        {"type": "text", "text": '{"score": '}, {"type": "reference", "reference_ids": [1]},
        {"type": "text", "text": "4}"}]
    schema = {"type": "object", "properties": {"score": {"type": "integer"}}}
    with WireServer(lambda req: (200, body)) as srv:
        res = run_probe(probe_agent(_openai(srv)), [{"key": "k", "q": "rate", "schema": schema}])
    [ans] = outputs_of(res, "answer")
    assert ans["error"] is None and ans["content"] == '{"score": 4}', ans
    assert ans["structured"] == {"score": 4}


# ------------------------------------------------------------------ thinking + structured output
@pytest.mark.parametrize("answer_by", ["tool", "text"])
def test_anthropic_structured_output_with_extended_thinking_does_not_force_the_tool(answer_by):
    def answer(req: dict[str, Any]) -> tuple[int, Any]:
        body = req["body"]
        if "thinking" in body and body.get("tool_choice", {}).get("type") in ("any", "tool"):
            return 400, {"type": "error", "error": {
                "type": "invalid_request_error",
                "message": "Thinking may not be enabled when tool_choice forces tool use."}}
        thought = {"type": "thinking", "thinking": "Four.", "signature": "sig"}
        if answer_by == "tool":
            return 200, anthropic_reply([thought, {"type": "tool_use", "id": "toolu_1",
                                                   "name": "structured_output",
                                                   "input": {"score": 4}}],
                                        stop_reason="tool_use")
        return 200, anthropic_reply([thought, {"type": "text", "text": '{"score": 4}'}])

    schema = {"type": "object", "properties": {"score": {"type": "integer"}},
              "required": ["score"]}
    with WireServer(answer) as srv:
        res = run_probe(probe_agent(_anthropic(srv), options={
            "thinking": {"type": "enabled", "budget_tokens": 1024}, "max_tokens": 2048}),
            [{"key": "k", "q": "rate it", "schema": schema}])
        [sent] = srv.bodies()
    [ans] = outputs_of(res, "answer")
    assert ans["error"] is None and ans["structured"] == {"score": 4}, ans
    assert sent["tool_choice"] == {"type": "auto"}
    assert sent["tools"][-1]["name"] == "structured_output"


# ------------------------------------------------------------------ tool_choice across providers
def _openai_choice_rules(body: dict[str, Any]) -> str | None:
    for field in ("tool_choice", "parallel_tool_calls"):
        if field in body and not body.get("tools"):
            return f"Invalid value for '{field}': '{field}' is only allowed when 'tools' " \
                   "are specified."
    choice = body.get("tool_choice", "auto")
    if not (choice in ("auto", "none", "required") or (
            isinstance(choice, dict) and choice.get("type") == "function")):
        return "Invalid value for 'tool_choice'"
    return None


def _anthropic_choice_rules(body: dict[str, Any]) -> str | None:
    if "parallel_tool_calls" in body:
        return "parallel_tool_calls: Extra inputs are not permitted"
    if "tool_choice" in body and not body.get("tools"):
        return "tool_choice may only be specified while providing tools"
    choice = body.get("tool_choice", {"type": "auto"})
    if not isinstance(choice, dict) or choice.get("type") not in ("auto", "any", "tool", "none"):
        return "tool_choice: Input should be a valid dictionary or object"
    return None


_CHOICES: dict[str, Any] = {
    "openai_form_to_anthropic": (_anthropic, ["_price"], {
        "tool_choice": {"type": "function", "function": {"name": "_price"}},
        "parallel_tool_calls": False},
        {"type": "tool", "name": "_price", "disable_parallel_tool_use": True}),
    "required_to_anthropic": (_anthropic, ["_price"], {"tool_choice": "required"},
                              {"type": "any"}),
    "anthropic_form_to_openai": (_openai, ["_price"], {
        "tool_choice": {"type": "tool", "name": "_price"}, "parallel_tool_calls": False},
        {"type": "function", "function": {"name": "_price"}}),
    "any_to_openai": (_openai, ["_price"], {"tool_choice": {"type": "any"}}, "required"),
    "no_tools_openai": (_openai, [], {"tool_choice": "auto", "parallel_tool_calls": False},
                        None),
    "no_tools_anthropic": (_anthropic, [], {"tool_choice": "auto"}, None),
}


@pytest.mark.parametrize("case", list(_CHOICES))
def test_a_setups_tool_choice_reaches_either_provider_in_its_form(case):
    conn, tools, options, expected = _CHOICES[case]
    rules = _anthropic_choice_rules if conn is _anthropic else _openai_choice_rules

    def answer(req: dict[str, Any]) -> tuple[int, Any]:
        refused = rules(req["body"])
        if refused:
            return 400, {"type": "error", "error": {"type": "invalid_request_error",
                                                   "message": refused}}
        return 200, (anthropic_reply([{"type": "text", "text": "fine"}]) if conn is _anthropic
                     else openai_reply("fine"))

    with WireServer(answer) as srv:
        res = run_probe(probe_agent(conn(srv), tools=tools,
                                    tool_fns=[_price] if tools else [], options=options),
                        [{"key": "k", "q": "go"}])
        [sent] = srv.bodies()
    [ans] = outputs_of(res, "answer")
    assert ans["error"] is None and ans["content"] == "fine", ans
    assert sent.get("tool_choice") == expected


# ------------------------------------------------------------------ refusals
def test_a_refusal_is_the_answers_text_and_a_structured_chat_says_it_was_refused():
    body = openai_reply(None)
    body["choices"][0]["message"]["refusal"] = "I'm sorry, I can't help with that."
    schema = {"type": "object", "properties": {"score": {"type": "integer"}}}
    with WireServer(lambda req: (200, body)) as srv:
        res = run_probe(probe_agent(_openai(srv)), [
            {"key": "plain", "q": "how to pick a lock?"},
            {"key": "shaped", "q": "how to pick a lock?", "schema": schema}])
    answers = {a["key"]: a for a in outputs_of(res, "answer")}
    plain = answers["plain"]
    assert plain["error"] is None and plain["content"] == "I'm sorry, I can't help with that."
    assert plain["metadata"] == {"refusal": "I'm sorry, I can't help with that."}
    assert "StructuredOutputError" in answers["shaped"]["error"]
    assert "I'm sorry, I can't help with that." in answers["shaped"]["error"]
