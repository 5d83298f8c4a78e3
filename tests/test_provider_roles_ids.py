"""Message roles and tool call ids that OpenAI-compatible servers refuse, against local servers.

Each test comes from a public report of a similar system:

- ``o1-mini`` and ``o1-preview`` refuse ``system`` messages (``Unsupported value:
  'messages[0].role' does not support 'system' with this model``: LangChain #26546,
  litellm #5606, Continue #2337): every call of a setup with a system prompt failed. A model
  named so gets them as ``user`` messages from the first request; another name (an Azure
  deployment) whose 400 says so gets the request again that way, and so from then on.
- Mistral takes tool call ids of exactly 9 letters and digits (``Tool call id was ... but
  must be a-z, A-Z, 0-9, with a length of 9``: LangChain #21165, litellm #6233, vLLM
  #9019 with ``mistral_common``): a tool round carrying another provider's ids (OpenAI's
  ``call_...``, the chat action's synthetic ``<chat>#<round>.<index>`` for Ollama's calls)
  failed on every call. A connection to ``api.mistral.ai`` sends 9-character stand-ins from
  the first request; another server whose 400 names the rule gets the request again so.
- As a user runs it: an agent module of their own, in a temporary folder, handing a tool
  round an OpenAI model had on to a local server keeping Mistral's rule.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from support.providers import WireServer, openai_reply

from flink_agents_py.api import ChatMessage, MessageRole, ProviderError, ToolCall
from flink_agents_py.integrations.chat_models import OpenAIChatModel

pytest.importorskip("openai")

pytestmark = pytest.mark.timeout(60)

_SYSTEM_400 = {"error": {
    "message": "Unsupported value: 'messages[0].role' does not support 'system' with this "
               "model.", "type": "invalid_request_error", "param": "messages[0].role",
    "code": "unsupported_value"}}


def _no_system(req: dict[str, Any]) -> tuple[int, Any]:
    """OpenAI's o1-mini: a ``system`` message is a 400."""
    if any(m["role"] == "system" for m in req["body"]["messages"]):
        return 400, _SYSTEM_400
    return 200, openai_reply("fine")


_PROMPT = [ChatMessage(role=MessageRole.SYSTEM, content="Answer in French."),
           ChatMessage(content="hello")]


def _openai(srv: WireServer, **kw: Any) -> OpenAIChatModel:
    return OpenAIChatModel(base_url=f"{srv.url}/v1", api_key_required=False, **kw)


@pytest.mark.parametrize("model", ["o1-mini", "o1-preview-2024-09-12", "openai/o1-mini"])
def test_o1_mini_and_preview_get_the_system_prompt_as_a_user_message_from_the_first_call(model):
    with WireServer(_no_system) as srv:
        answer = _openai(srv).chat(_PROMPT, model=model)
        [body] = srv.bodies("/chat/completions")
    assert answer.message.content == "fine"
    assert [(m["role"], m["content"]) for m in body["messages"]] == [
        ("user", "Answer in French."), ("user", "hello")]


def test_a_model_refusing_the_system_role_gets_user_messages_on_the_same_call_and_after():
    with WireServer(_no_system) as srv:
        conn = _openai(srv, default_model="my-azure-reasoner")
        first = conn.chat(_PROMPT)
        second = conn.chat(_PROMPT)
        roles = [[m["role"] for m in b["messages"]] for b in srv.bodies("/chat/completions")]
    assert first.message.content == second.message.content == "fine"
    # refused once, then user on the same call and from the first request of the next
    assert roles == [["system", "user"], ["user", "user"], ["user", "user"]]


def test_other_models_keep_the_system_role():
    def answer(req: dict[str, Any]) -> tuple[int, Any]:
        return 200, openai_reply("fine")
    with WireServer(answer) as srv:
        for model in ("gpt-4o", "o3-mini", "gpt-5"):
            _openai(srv).chat(_PROMPT, model=model)
        roles = [b["messages"][0]["role"] for b in srv.bodies("/chat/completions")]
    assert roles == ["system"] * 3  # OpenAI reads it as developer for o1 and later


def test_a_refusal_of_something_else_is_still_the_error():
    def answer(req: dict[str, Any]) -> tuple[int, Any]:
        return 400, {"error": {"message": "Invalid value for 'messages[1].content'",
                               "type": "invalid_request_error", "param": None, "code": None}}
    with WireServer(answer) as srv:
        with pytest.raises(ProviderError, match="Invalid value"):
            _openai(srv).chat(_PROMPT, model="my-model")
        assert len(srv.requests) == 1


# ------------------------------------------------------------------------ tool call ids
_NINE = re.compile(r"[A-Za-z0-9]{9}")


def _mistral(req: dict[str, Any]) -> tuple[int, Any]:
    """Mistral's chat completions: a tool call id of another form is a 400."""
    for m in req["body"]["messages"]:
        for i in [m.get("tool_call_id"), *(c["id"] for c in m.get("tool_calls") or ())]:
            if i is not None and not _NINE.fullmatch(i):
                return 400, {"object": "error", "message": f"Tool call id was {i} but must be "
                             "a-z, A-Z, 0-9, with a length of 9.",
                             "type": "invalid_request_message_error", "param": None,
                             "code": "3280"}
    return 200, openai_reply("sunny", model="mistral-small-latest")


def _history(*ids: str) -> list[ChatMessage]:
    """A conversation holding a call of ``lookup`` and its result for each id."""
    calls = [ToolCall(id=i, name="lookup", arguments={"city": "Oslo"}) for i in ids]
    return [ChatMessage(content="weather?"),
            ChatMessage(role=MessageRole.ASSISTANT, tool_calls=calls),
            *(ChatMessage(role=MessageRole.TOOL, content="Oslo: sunny", tool_call_id=i,
                          name="lookup") for i in ids)]


def _sent_ids(body: dict[str, Any]) -> tuple[list[str], list[str]]:
    calls = [c["id"] for m in body["messages"] for c in m.get("tool_calls") or ()]
    results = [m["tool_call_id"] for m in body["messages"] if m.get("tool_call_id")]
    return calls, results


_IDS = ("call_Xk2b7TqLwP0aZ9e", "chat-7#0.1", "D681PevKs")


def test_a_server_refusing_other_tool_call_ids_gets_nine_char_ones_on_the_same_call_and_after():
    with WireServer(_mistral) as srv:
        conn = _openai(srv, default_model="mistral-small-latest")
        first = conn.chat(_history(*_IDS))
        second = conn.chat(_history(*_IDS))
        bodies = srv.bodies("/chat/completions")
    assert first.message.content == second.message.content == "sunny"
    assert len(bodies) == 3  # refused once, then 9-character ids from the next chat's start
    calls, results = _sent_ids(bodies[1])
    assert calls == results and all(_NINE.fullmatch(i) for i in calls)
    assert len(set(calls)) == 3 and calls[2] == "D681PevKs"  # Mistral's own id kept
    assert _sent_ids(bodies[2]) == (calls, results)  # the same stand-ins every time


def test_a_connection_to_api_mistral_ai_sends_nine_char_ids_from_the_first_request(monkeypatch):
    # the local server is the HTTP proxy the requests to api.mistral.ai go through
    with WireServer(_mistral) as srv:
        for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("HTTP_PROXY", srv.url)
        monkeypatch.setenv("MISTRAL_TEST_KEY", "mistral-test-key")
        conn = OpenAIChatModel(base_url="http://api.mistral.ai/v1", api_key_env="MISTRAL_TEST_KEY",
                               default_model="mistral-large-latest")
        answer = conn.chat(_history(*_IDS))
        [request] = srv.requests
    assert answer.message.content == "sunny"
    assert request["path"] == "http://api.mistral.ai/v1/chat/completions"
    calls, results = _sent_ids(request["body"])
    assert calls == results and all(_NINE.fullmatch(i) for i in calls)


def test_other_servers_keep_the_ids_openai_takes():
    def answer(req: dict[str, Any]) -> tuple[int, Any]:
        return 200, openai_reply("fine")
    with WireServer(answer) as srv:
        _openai(srv).chat(_history("call_Xk2b7TqLwP0aZ9e"))
        [body] = srv.bodies("/chat/completions")
    assert _sent_ids(body) == (["call_Xk2b7TqLwP0aZ9e"], ["call_Xk2b7TqLwP0aZ9e"])


# ------------------------------------------------------------------- as a user runs it
USER_SCRIPT = r'''
import json, re, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import flink_agents_py
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (Agent, ChatMessage, ChatModelSetup, InputEvent, MessageRole,
                                 OutputEvent, ResourceDescriptor, RunnerContext, ToolCall,
                                 action, chat_model_connection, chat_model_setup)
from flink_agents_py.integrations.chat_models import OpenAIChatModel

SEEN = []


class Mistral(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        SEEN.append(body)
        ids = [i for m in body["messages"] for i in
               [m.get("tool_call_id"), *(c["id"] for c in m.get("tool_calls") or ())] if i]
        if any(not re.fullmatch(r"[A-Za-z0-9]{9}", i) for i in ids):
            status, answer = 400, {"object": "error", "message": "Tool call id was "
                                   f"{ids[0]} but must be a-z, A-Z, 0-9, with a length of 9.",
                                   "type": "invalid_request_message_error", "code": "3280"}
        else:
            status, answer = 200, {"id": "x", "object": "chat.completion", "created": 0,
                                   "model": "m", "choices": [{"index": 0, "finish_reason":
                                   "stop", "message": {"role": "assistant",
                                                       "content": "Il fait beau."}}]}
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


server = ThreadingHTTPServer(("127.0.0.1", 0), Mistral)
threading.Thread(target=server.serve_forever, daemon=True).start()
URL = f"http://127.0.0.1:{server.server_address[1]}/v1"
EARLIER = [  # a tool round an OpenAI model had, handed on to a Mistral model
    ChatMessage(role=MessageRole.SYSTEM, content="Answer in French."),
    ChatMessage(role=MessageRole.USER, content="Weather in Oslo?"),
    ChatMessage(role=MessageRole.ASSISTANT, tool_calls=[ToolCall(
        id="call_Xk2b7TqLwP0aZ9e", name="weather", arguments={"city": "Oslo"})]),
    ChatMessage(role=MessageRole.TOOL, content="sunny", tool_call_id="call_Xk2b7TqLwP0aZ9e",
                name="weather"),
]


class Handover(Agent):
    @chat_model_connection
    @staticmethod
    def mistral() -> ResourceDescriptor:
        return ResourceDescriptor(OpenAIChatModel, base_url=URL,
                                  default_model="mistral-small-latest")

    @chat_model_setup
    @staticmethod
    def assistant() -> ResourceDescriptor:
        return ResourceDescriptor(ChatModelSetup, connection="mistral")

    @action(InputEvent)
    @staticmethod
    async def ask(event: InputEvent, ctx: RunnerContext) -> None:
        answer = await ctx.chat("assistant", EARLIER)
        ctx.send_event(OutputEvent(output={"key": ctx.key, "answer": answer.message.content}))


out = AgentsExecutionEnvironment.local().from_list([{"key": "a"}]).apply(Handover()).collect()
sent = [[(m.get("tool_call_id"), [c["id"] for c in m.get("tool_calls") or ()])
         for m in b["messages"] if m["role"] in ("assistant", "tool")] for b in SEEN]
print(json.dumps({"package": flink_agents_py.__file__, "out": out, "sent": sent}))
'''


def test_a_users_agent_hands_a_tool_round_on_to_a_mistral_server(tmp_path):
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    (tmp_path / "handover.py").write_text(USER_SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(root)}
    proc = subprocess.run([sys.executable, "handover.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["package"].startswith(str(root))
    assert got["out"] == [{"key": "a", "answer": "Il fait beau."}]
    [refused, accepted] = got["sent"]
    assert refused == [[None, ["call_Xk2b7TqLwP0aZ9e"]], ["call_Xk2b7TqLwP0aZ9e", []]]
    [[_, [stand_in]], [result_id, _]] = accepted
    assert _NINE.fullmatch(stand_in) and result_id == stand_in
