"""System messages past the first, sent to servers whose chat template takes one only.

Qwen's chat templates (Qwen2.5 on) take one ``system`` message, the first, and raise
``System message must be at the beginning.`` for any other: vLLM answers a 400 (vllm
#41114, intuitem/ciso-assistant-community #4679: "fails after tool execution"), llama.cpp's
``--jinja`` server a 400 or a 500 (llama.cpp #20733, #27367). A setup's prompt beside a
system message of the chat's own, or a system message in the middle of a conversation,
failed every call. The request goes again with its system messages joined, in order, into
one at the start, and so from then on for that model; OpenAI's API, which takes them where
they are, still gets them where they are.

Gemini's OpenAI-compatible API wants the tool's ``name`` on each ``tool`` message (OpenAI
documents none there): ``function_response.name: Name cannot be empty`` (NousResearch/
hermes-agent #19728, vectorize-io/hindsight #187, ollama #14214) failed every tool round.
A connection to ``*.googleapis.com`` names them from the first request; another server
whose 400 asks for them gets the request again so, and so from then on for the model.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.providers import WireServer, openai_reply, outputs_of, probe_agent, run_probe

from flink_agents_py.api import (
    Agent,
    ChatMessage,
    ChatModelSetup,
    InputEvent,
    MessageRole,
    OutputEvent,
    ProviderError,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    ToolCall,
    action,
)
from flink_agents_py.integrations.chat_models import OpenAIChatModel

pytest.importorskip("openai")

pytestmark = pytest.mark.timeout(60)

_REFUSALS = {
    "vllm": (400, {"object": "error", "message": "System message must be at the beginning.",
                   "type": "BadRequestError", "param": None, "code": 400}),
    "llama_cpp": (500, {"error": {"code": 500, "type": "server_error", "message":
                                  "Jinja Exception: System message must be at the beginning."}}),
}


def _qwen_template(server: str):
    """A server applying Qwen's template: a system message past the first is refused."""
    def answer(req: dict[str, Any]) -> tuple[int, Any]:
        roles = [m["role"] for m in req["body"]["messages"]]
        if "system" in roles[1:]:
            return _REFUSALS[server]
        return 200, openai_reply(f"ok after {roles}")
    return answer


CONVERSATION = [
    ChatMessage(role=MessageRole.SYSTEM, content="You are terse."),
    ChatMessage(content="Hi."),
    ChatMessage(role=MessageRole.ASSISTANT, content="Hello."),
    ChatMessage(role=MessageRole.SYSTEM, content="Answer in French from now on."),
    ChatMessage(content="How are you?"),
]


@pytest.mark.parametrize("server", list(_REFUSALS))
def test_a_system_message_mid_conversation_is_joined_into_the_first_and_after(server):
    with WireServer(_qwen_template(server)) as srv:
        conn = OpenAIChatModel(base_url=f"{srv.url}/v1", default_model="Qwen/Qwen3-8B")
        first = conn.chat(CONVERSATION)
        second = conn.chat(CONVERSATION)
        bodies = srv.bodies("/chat/completions")
    assert first.message.content == second.message.content == (
        "ok after ['system', 'user', 'assistant', 'user']")
    assert len(bodies) == 3  # refused once; the joined form from then on
    assert bodies[1]["messages"][0] == {
        "role": "system", "content": "You are terse.\n\nAnswer in French from now on."}
    assert [m["content"] for m in bodies[1]["messages"][1:]] == ["Hi.", "Hello.", "How are you?"]
    assert bodies[2]["messages"] == bodies[1]["messages"]


class _OwnSystem(Agent):
    """Asks with a system message of its own, beside its setup's prompt."""

    @action(InputEvent)
    @staticmethod
    async def ask(event: InputEvent, ctx: RunnerContext) -> None:
        answer = await ctx.chat("model", [
            ChatMessage(role=MessageRole.SYSTEM, content="Use metric units."),
            ChatMessage(content=event.input["q"])])
        ctx.send_event(OutputEvent(output={"key": ctx.key, "answer": answer.message.content}))


def test_a_setups_prompt_beside_the_chats_own_system_message_reaches_the_model():
    with WireServer(_qwen_template("vllm")) as srv:
        agent = _OwnSystem()
        agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ResourceDescriptor(
            OpenAIChatModel, base_url=f"{srv.url}/v1"))
        agent.add_resource("model", ResourceType.CHAT_MODEL, ResourceDescriptor(
            ChatModelSetup, connection="conn", prompt="You are a weather bot."))
        res = run_probe(agent, [{"key": "k", "q": "hi"}])
        first = srv.bodies("/chat/completions")[0]["messages"]
        sent = srv.bodies("/chat/completions")[-1]["messages"]
    assert res.errors == [] and res.outputs == [
        {"key": "k", "answer": "ok after ['system', 'user']"}]
    assert [m["role"] for m in first] == ["system", "system", "user"]  # as the chat has it
    assert sent[0]["content"] == "You are a weather bot.\n\nUse metric units."


def test_openai_keeps_a_system_message_where_it_is():
    def answer(req: dict[str, Any]) -> tuple[int, Any]:
        return 200, openai_reply("fine")

    with WireServer(answer) as srv:
        OpenAIChatModel(base_url=f"{srv.url}/v1").chat(CONVERSATION)
        [body] = srv.bodies("/chat/completions")
    assert [m["role"] for m in body["messages"]] == [
        "system", "user", "assistant", "system", "user"]


def test_another_refusal_is_still_the_error():
    def answer(req: dict[str, Any]) -> tuple[int, Any]:
        return 400, {"object": "error", "message": "Conversation roles must alternate "
                     "user/assistant/user/assistant/...", "type": "BadRequestError",
                     "code": 400}

    with WireServer(answer) as srv:
        with pytest.raises(ProviderError, match="roles must alternate"):
            OpenAIChatModel(base_url=f"{srv.url}/v1").chat(CONVERSATION)
        assert len(srv.requests) == 1


# ---------------------------------------------------------- tool messages named (Gemini)
def _gemini_compat(list_body: bool):
    """Gemini's OpenAI-compatible API: a ``tool`` message without ``name`` is a 400."""
    def answer(req: dict[str, Any]) -> tuple[int, Any]:
        messages = req["body"]["messages"]
        nameless = [i for i, m in enumerate(messages) if m["role"] == "tool" and not m.get("name")]
        if nameless:
            error = {"error": {"code": 400, "status": "INVALID_ARGUMENT", "message":
                               f"* GenerateContentRequest.contents[{nameless[0]}].parts[0]"
                               ".function_response.name: Name cannot be empty.\n"}}
            return 400, [error] if list_body else error
        if messages[-1]["role"] == "tool":
            return 200, openai_reply(f"done: {messages[-1]['content']}")
        return 200, openai_reply(None, [("call_a", "lookup", {"city": "Oslo"})])
    return answer


def lookup(city: str) -> str:
    """Look a city up.

    Args:
        city: the city.
    """
    return f"{city}: sunny"


@pytest.mark.parametrize("list_body", [False, True], ids=["object", "list"])
def test_a_server_wanting_tool_messages_named_gets_them_named_on_the_same_call_and_after(
        list_body):
    with WireServer(_gemini_compat(list_body)) as srv:
        agent = probe_agent(ResourceDescriptor(OpenAIChatModel, base_url=f"{srv.url}/v1",
                                               default_model="gemini-2.5-flash"),
                            tools=["lookup"], tool_fns=[lookup])
        res = run_probe(agent, [{"key": "a", "q": "weather?"}, {"key": "a", "q": "again?"}])
        bodies = srv.bodies("/chat/completions")
    answers = outputs_of(res, "answer")
    assert [a["error"] for a in answers] == [None, None]
    assert [a["content"] for a in answers] == ["done: Oslo: sunny"] * 2
    tool_rounds = [b for b in bodies if b["messages"][-1]["role"] == "tool"]
    assert len(tool_rounds) == 3  # the first refused once; named from then on
    assert [m for m in tool_rounds[-1]["messages"] if m["role"] == "tool"][0]["name"] == "lookup"


def test_a_connection_to_googleapis_names_tool_messages_from_the_first_request():
    import httpx

    sent: list[dict[str, Any]] = []

    class Gemini(OpenAIChatModel):
        def _sdk_client(self, openai: Any, headers: Any) -> Any:
            def answer(request: httpx.Request) -> httpx.Response:
                sent.append(json.loads(request.content))
                return httpx.Response(200, json=openai_reply("fine"))
            return openai.AsyncOpenAI(base_url=self.base_url, api_key="k", http_client=(
                httpx.AsyncClient(transport=httpx.MockTransport(answer))))

    history = [ChatMessage(content="weather?"),
               ChatMessage(role=MessageRole.ASSISTANT, content="", tool_calls=[
                   ToolCall(id="call_a", name="lookup", arguments={"city": "Oslo"})]),
               ChatMessage(role=MessageRole.TOOL, content="Oslo: sunny", tool_call_id="call_a")]
    Gemini(base_url="https://generativelanguage.googleapis.com/v1beta/openai/",
           api_key_required=False).chat(history)
    [body] = sent
    assert body["messages"][2] == {"role": "tool", "content": "Oslo: sunny",
                                   "tool_call_id": "call_a", "name": "lookup"}


def test_an_error_answered_as_a_list_says_what_the_server_said():
    """Gemini's OpenAI-compatible API answers errors as ``[{"error": {...}}]``: the
    SDK's message was ``Error code: 400`` alone, naming no cause."""
    def answer(req: dict[str, Any]) -> tuple[int, Any]:
        return 400, [{"error": {"code": 400, "status": "INVALID_ARGUMENT",
                                "message": "API key not valid. Please pass a valid API key."}}]

    with WireServer(answer) as srv:
        with pytest.raises(ProviderError, match="API key not valid"):
            OpenAIChatModel(base_url=f"{srv.url}/v1").chat([ChatMessage(content="hi")])


USER_SCRIPT = r'''
import json, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import flink_agents_py
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (Agent, ChatMessage, ChatModelSetup, InputEvent, MessageRole,
                                 OutputEvent, ResourceDescriptor, RunnerContext, action,
                                 chat_model_connection, chat_model_setup)
from flink_agents_py.integrations.chat_models import OpenAIChatModel

ROLES = []


class QwenOnVllm(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        roles = [m["role"] for m in body["messages"]]
        ROLES.append(roles)
        if "system" in roles[1:]:
            status, answer = 400, {"object": "error", "code": 400, "type": "BadRequestError",
                                   "message": "System message must be at the beginning."}
        else:
            status, answer = 200, {"id": "x", "object": "chat.completion", "created": 0,
                                   "model": "qwen", "choices": [{
                                       "index": 0, "finish_reason": "stop", "message": {
                                           "role": "assistant",
                                           "content": body["messages"][0]["content"]}}]}
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


server = ThreadingHTTPServer(("127.0.0.1", 0), QwenOnVllm)
threading.Thread(target=server.serve_forever, daemon=True).start()
URL = f"http://127.0.0.1:{server.server_address[1]}/v1"


class Translator(Agent):
    @chat_model_connection
    @staticmethod
    def vllm() -> ResourceDescriptor:
        return ResourceDescriptor(OpenAIChatModel, base_url=URL, default_model="Qwen/Qwen3-8B")

    @chat_model_setup
    @staticmethod
    def model() -> ResourceDescriptor:
        return ResourceDescriptor(ChatModelSetup, connection="vllm", prompt="Be terse.")

    @action(InputEvent)
    @staticmethod
    async def ask(event: InputEvent, ctx: RunnerContext) -> None:
        answer = await ctx.chat("model", [
            ChatMessage(role=MessageRole.SYSTEM, content="Answer in French."),
            ChatMessage(content=event.input["q"])])
        ctx.send_event(OutputEvent(output={"key": ctx.key, "answer": answer.message.content}))


out = (AgentsExecutionEnvironment.local().from_list([{"key": "a", "q": "Hi"}])
       .apply(Translator()).collect())
print(json.dumps({"package": flink_agents_py.__file__, "out": out, "roles": ROLES}))
'''


def test_a_users_agent_with_its_own_system_message_runs_against_qwen_on_vllm(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    (tmp_path / "translator.py").write_text(USER_SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(root)}
    proc = subprocess.run([sys.executable, "translator.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["package"].startswith(str(root))
    assert got["out"] == [{"key": "a", "answer": "Be terse.\n\nAnswer in French."}]
    assert got["roles"] == [["system", "system", "user"], ["system", "user"]]
