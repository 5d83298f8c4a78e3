"""Tool rounds as the Messages API wants them, against a local server checking its rules.

Anthropic's Messages API (``POST /v1/messages``) refuses, with a 400:

- two ``tool_use`` blocks sharing an id anywhere in the request (``tool_use ids must be
  unique``: anthropics/claude-code #28515, litellm #23510, ducks/claux #40). A conversation
  holds such ids when the server numbers each round's calls from ``call_0`` (an
  Anthropic-compatible gateway in front of a local model), or a model writes the same id into
  every call it writes as text; every later call of the chat failed. A repeated id goes
  under a stand-in now, its results with it;
- (OpenAI's chat completions likewise: ``Invalid parameter: Duplicate value for
  'tool_call_id'``, agno #5116; Mistral's ``Not the same number of function calls and
  responses``, NousResearch/hermes-agent #11722, when its small models repeat their own
  9-character ids; Kimi and MiMo repeat ids too, can1357/oh-my-pi #2055);
- a user turn whose ``tool_result`` blocks do not come first (``Did not find 1
  `tool_result` block(s) at the beginning of this message``: QwenLM/qwen-code #8161,
  Zoo-Code #1705): a history with a user message between a tool call and its result
  (merged into one turn) failed. Results go first in the turn now, the text after them.
"""

from __future__ import annotations

from typing import Any

import pytest
from support.providers import (
    WireServer,
    anthropic_reply,
    openai_reply,
    outputs_of,
    probe_agent,
    run_probe,
)

from flink_agents_py.api import ChatMessage, MessageRole, ResourceDescriptor, ToolCall
from flink_agents_py.integrations.chat_models import AnthropicChatModel, OpenAIChatModel
from flink_agents_py.integrations.chat_models._wire import wire_call_id
from flink_agents_py.testing import CallCounter

pytest.importorskip("anthropic")

pytestmark = pytest.mark.timeout(60)

COUNTER = CallCounter()


def lookup(city: str) -> str:
    """Look a city up.

    Args:
        city: the city.
    """
    COUNTER.count("lookup")
    return f"{city}: sunny"


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAP_TEST_ANTHROPIC_KEY", "sk-ant-test")
    COUNTER.reset()


def _refusal(message: str) -> tuple[int, Any]:
    return 400, {"type": "error", "error": {"type": "invalid_request_error",
                                            "message": message}}


def _messages_api_rules(body: dict[str, Any]) -> tuple[int, Any] | None:
    """The 400 the Messages API answers a request breaking its tool rules with, if any."""
    seen: set[str] = set()
    turns = body["messages"]
    for i, turn in enumerate(turns):
        blocks = turn["content"]
        for j, block in enumerate(blocks):
            if block["type"] == "tool_use":
                if block["id"] in seen:
                    return _refusal(f"messages.{i}.content.{j}: `tool_use` ids must be unique")
                seen.add(block["id"])
        uses = [b["id"] for b in blocks if b["type"] == "tool_use"]
        if uses:
            after = turns[i + 1]["content"] if i + 1 < len(turns) else []
            firsts = [b.get("tool_use_id") for b in after[:len(uses)]]
            if sorted(firsts, key=str) != sorted(uses):
                return _refusal(f"messages.{i + 1}: Did not find {len(uses)} `tool_result` "
                                "block(s) at the beginning of this message. Messages "
                                "following `tool_use` blocks must begin with a matching "
                                "number of `tool_result` blocks.")
    return None


def _anthropic(srv: WireServer) -> ResourceDescriptor:
    return ResourceDescriptor(AnthropicChatModel, base_url=srv.url,
                              api_key_env="FAP_TEST_ANTHROPIC_KEY", default_model="claude-test")


def test_a_gateway_reusing_tool_call_ids_each_round_still_gets_its_tool_rounds():
    def answer(req: dict[str, Any]) -> tuple[int, Any]:
        refused = _messages_api_rules(req["body"])
        if refused is not None:
            return refused
        results = [b for t in req["body"]["messages"] for b in t["content"]
                   if b["type"] == "tool_result"]
        if len(results) < 2:  # each round's call numbered from 0, as the gateway does
            city = ["Oslo", "Rome"][len(results)]
            return 200, anthropic_reply([{"type": "tool_use", "id": "call_0", "name": "lookup",
                                          "input": {"city": city}}], stop_reason="tool_use")
        return 200, anthropic_reply([{"type": "text", "text": " / ".join(
            b["content"] for b in results)}])

    with WireServer(answer) as srv:
        res = run_probe(probe_agent(_anthropic(srv), tools=["lookup"], tool_fns=[lookup]),
                        [{"key": "k", "q": "weather in Oslo, then Rome?"}])
        last = srv.bodies("/v1/messages")[-1]
    [ans] = outputs_of(res, "answer")
    assert ans["error"] is None, ans["error"]
    assert ans["content"] == "Oslo: sunny / Rome: sunny"
    assert COUNTER["lookup"] == 2
    uses = [b["id"] for t in last["messages"] for b in t["content"] if b["type"] == "tool_use"]
    results = [b["tool_use_id"] for t in last["messages"] for b in t["content"]
               if b["type"] == "tool_result"]
    assert len(set(uses)) == 2 and results == uses


def _openai_rules(body: dict[str, Any]) -> tuple[int, Any] | None:
    """The 400 OpenAI answers a request whose tool messages answer one id twice with."""
    where: dict[str, int] = {}
    for i, m in enumerate(body["messages"]):
        if m["role"] == "tool":
            if m["tool_call_id"] in where:
                return 400, {"error": {
                    "message": f"Invalid parameter: Duplicate value for 'tool_call_id' of "
                               f"'{m['tool_call_id']}', in messages[{where[m['tool_call_id']]}]"
                               f" and messages[{i}].", "type": "invalid_request_error",
                    "param": f"messages.[{i}].tool_call_id", "code": None}}
            where[m["tool_call_id"]] = i
    return None


@pytest.mark.parametrize("call_id", ["b9mgIC84m", "functions.lookup:0"])
def test_a_model_repeating_its_tool_call_id_each_round_still_gets_its_rounds_on_openai(call_id):
    def answer(req: dict[str, Any]) -> tuple[int, Any]:
        refused = _openai_rules(req["body"])
        if refused is not None:
            return refused
        results = [m["content"] for m in req["body"]["messages"] if m["role"] == "tool"]
        if len(results) < 2:
            city = ["Oslo", "Rome"][len(results)]
            return 200, openai_reply(None, [(call_id, "lookup", {"city": city})])
        return 200, openai_reply(" / ".join(results))

    with WireServer(answer) as srv:
        conn = ResourceDescriptor(OpenAIChatModel, base_url=f"{srv.url}/v1",
                                  default_model="mistral-small-latest")
        res = run_probe(probe_agent(conn, tools=["lookup"], tool_fns=[lookup]),
                        [{"key": "k", "q": "weather in Oslo, then Rome?"}])
        last = srv.bodies("/chat/completions")[-1]["messages"]
    [ans] = outputs_of(res, "answer")
    assert ans["error"] is None, ans["error"]
    assert ans["content"] == "Oslo: sunny / Rome: sunny" and COUNTER["lookup"] == 2
    calls = [c["id"] for m in last if m["role"] == "assistant" for c in m["tool_calls"]]
    results = [m["tool_call_id"] for m in last if m["role"] == "tool"]
    assert len(set(calls)) == 2 and results == calls
    assert calls[0] == wire_call_id(call_id, 40)  # the first keeps its (wire) id


def test_a_user_message_between_a_call_and_its_result_goes_after_the_result():
    def answer(req: dict[str, Any]) -> tuple[int, Any]:
        return _messages_api_rules(req["body"]) or (
            200, anthropic_reply([{"type": "text", "text": "ok"}]))

    history = [
        ChatMessage(content="weather in Oslo?"),
        ChatMessage(role=MessageRole.ASSISTANT, content="",
                    tool_calls=[ToolCall(id="toolu_1", name="lookup",
                                         arguments={"city": "Oslo"})]),
        ChatMessage(content="(and be brief)"),
        ChatMessage(role=MessageRole.TOOL, content="Oslo: sunny", tool_call_id="toolu_1",
                    name="lookup"),
    ]
    with WireServer(answer) as srv:
        conn = AnthropicChatModel(base_url=srv.url, api_key_env="FAP_TEST_ANTHROPIC_KEY")
        assert conn.chat(history).message.content == "ok"
        [body] = srv.bodies("/v1/messages")
    assert [b["type"] for b in body["messages"][2]["content"]] == ["tool_result", "text"]


USER_SCRIPT = r'''
import json, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import flink_agents_py
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (Agent, ChatMessage, ChatModelSetup, InputEvent, OutputEvent,
                                 ResourceDescriptor, RunnerContext, action,
                                 chat_model_connection, chat_model_setup, tool)
from flink_agents_py.integrations.chat_models import AnthropicChatModel, OpenAIChatModel
from flink_agents_py.integrations.chat_models._wire import wire_call_id

STATUSES = []


class Gateway(BaseHTTPRequestHandler):
    """An Anthropic-compatible gateway numbering each round's calls from toolu_0."""

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        uses = [b["id"] for t in body["messages"] for b in t["content"]
                if b["type"] == "tool_use"]
        results = [b["content"] for t in body["messages"] for b in t["content"]
                   if b["type"] == "tool_result"]
        if len(set(uses)) != len(uses):
            status, answer = 400, {"type": "error", "error": {
                "type": "invalid_request_error", "message": "tool_use ids must be unique"}}
        elif len(results) < 2:
            status, answer = 200, {"content": [{"type": "tool_use", "id": "toolu_0",
                                                "name": "roll", "input": {"n": len(results)}}],
                                   "stop_reason": "tool_use"}
        else:
            status, answer = 200, {"content": [{"type": "text", "text": " ".join(results)}],
                                   "stop_reason": "end_turn"}
        if status == 200:
            answer.update({"id": "m", "type": "message", "role": "assistant", "model": "c",
                           "usage": {"input_tokens": 1, "output_tokens": 1}})
        STATUSES.append(status)
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


server = ThreadingHTTPServer(("127.0.0.1", 0), Gateway)
threading.Thread(target=server.serve_forever, daemon=True).start()


@tool
def roll(n: int) -> str:
    """Roll a die.

    Args:
        n: which roll.
    """
    return f"roll{n}=4"


class Dice(Agent):
    @chat_model_connection
    @staticmethod
    def gateway() -> ResourceDescriptor:
        return ResourceDescriptor(AnthropicChatModel, api_key_required=False,
                                  base_url=f"http://127.0.0.1:{server.server_address[1]}")

    @chat_model_setup
    @staticmethod
    def model() -> ResourceDescriptor:
        return ResourceDescriptor(ChatModelSetup, connection="gateway", tools=["roll"])

    roll = staticmethod(roll)

    @action(InputEvent)
    @staticmethod
    async def ask(event: InputEvent, ctx: RunnerContext) -> None:
        answer = await ctx.chat("model", [ChatMessage(content=event.input["q"])])
        ctx.send_event(OutputEvent(output={"key": ctx.key, "answer": answer.message.content}))


out = (AgentsExecutionEnvironment.local().from_list([{"key": "a", "q": "roll twice"}])
       .apply(Dice()).collect())
print(json.dumps({"package": flink_agents_py.__file__, "out": out, "statuses": STATUSES}))
'''


def test_a_users_agent_gets_two_tool_rounds_through_a_gateway_reusing_ids(tmp_path):
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    (tmp_path / "dice.py").write_text(USER_SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(root)}
    proc = subprocess.run([sys.executable, "dice.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["package"].startswith(str(root))
    assert got["out"] == [{"key": "a", "answer": "roll0=4 roll1=4"}]
    assert got["statuses"] == [200, 200, 200]
