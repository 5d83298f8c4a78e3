"""Tool calls a model wrote as text, against local servers speaking each provider's format.

A server turns a model's tool calls into structured ``tool_calls`` only when its tool
parser knows the model's format; otherwise the call comes back as the answer's text with
``finish_reason: "stop"`` (OpenAI's chat completions: ``choices[].message.content``;
Ollama's ``/api/chat``: ``message.content``), and the chat ended with that text as its
answer, no tool run. Each form comes from a public report:

- Hermes / Qwen ``<tool_call>{...}</tool_call>``: vLLM without ``--tool-call-parser``
  (vllm #17161), Ollama when its parse fails (ollama #17274);
- Mistral ``[TOOL_CALLS][...]`` and ``[TOOL_CALLS]name[ARGS]{...}``: LM Studio
  (lmstudio-bug-tracker #797);
- Llama 3.1 ``<|python_tag|>{"name", "parameters"}`` and Llama 3.2's bare
  ``{"name", "parameters"}`` (Rapid-MLX #700, vllm #16214);
- Qwen3-Coder's ``<function=name><parameter=key>value</parameter></function>``, wrapped in
  ``<tool_call>`` or not (ollama #12751, mlx-lm #1616);
- a bare ``{"name", "arguments"}`` object, several whitespace-separated, a zero-argument
  call without ``arguments``: Qwen 2.5 through Ollama's ``/v1`` (NousResearch/hermes-agent
  #87900, #107125), mistral-common #73.

Such calls run now when they name an offered tool; other text is left as it was (prose
holding JSON, a tool not offered, a call inside ``<think>``), and OpenAI's own API, whose
models answer calls only structured, keeps its text as text. The answer's metadata says
how many calls were read from text.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from support.providers import (
    WireServer,
    ollama_reply,
    openai_reply,
    outputs_of,
    probe_agent,
    run_probe,
)

from flink_agents_py.api import (
    ChatMessage,
    ResourceDescriptor,
    ToolMetadata,
)
from flink_agents_py.integrations.chat_models import (
    LlamaCppChatModel,
    OllamaChatModel,
    OpenAIChatModel,
)
from flink_agents_py.testing import CallCounter

pytest.importorskip("openai")
pytest.importorskip("ollama")

pytestmark = pytest.mark.timeout(60)

COUNTER = CallCounter()
SEEN: list[str] = []


def lookup(city: str) -> str:
    """Look a city's weather up.

    Args:
        city: the city.
    """
    COUNTER.count("lookup")
    SEEN.append(city)
    return f"{city}: sunny"


def clock() -> str:
    """The time."""
    COUNTER.count("clock")
    return "12:00"


@pytest.fixture(autouse=True)
def _reset() -> None:
    COUNTER.reset()
    SEEN.clear()


def _openai(srv: WireServer, **kw: Any) -> ResourceDescriptor:
    return ResourceDescriptor(OpenAIChatModel, base_url=f"{srv.url}/v1",
                              default_model="served-model", **kw)


def _ollama(srv: WireServer) -> ResourceDescriptor:
    return ResourceDescriptor(OllamaChatModel, host=srv.url, default_model="qwen2.5:7b")


def _as_text(text: str, reply=openai_reply):
    """A server answering its first call with ``text``, then with what the tools said."""
    def answer(req: dict[str, Any]) -> tuple[int, Any]:
        told = [m["content"] for m in req["body"]["messages"] if m["role"] == "tool"]
        return 200, reply(f"done: {' | '.join(told)}" if told else text)
    return answer


HERMES = 'Checking.\n<tool_call>\n{"name": "lookup", "arguments": {"city": "Oslo"}}\n</tool_call>'
FORMS = {
    "hermes_vllm": (HERMES, ["Oslo"], "Checking."),
    "hermes_list_unclosed": ('<tool_call>[{"name": "lookup", "arguments": {"city": "Oslo"}}, '
                             '{"name": "lookup", "arguments": {"city": "Rome"}}]',
                             ["Oslo", "Rome"], ""),
    "mistral_v3": ('[TOOL_CALLS] [{"name": "lookup", "arguments": {"city": "Oslo"}, '
                   '"id": "a1b2c3d4e"}]', ["Oslo"], ""),
    "mistral_v11": ('[TOOL_CALLS]lookup[ARGS]{"city": "Oslo"}[TOOL_CALLS]lookup[ARGS]'
                    '{"city": "Rome"}', ["Oslo", "Rome"], ""),
    "llama31_python_tag": ('<|python_tag|>{"name": "lookup", "parameters": {"city": "Oslo"}}; '
                           '{"name": "lookup", "parameters": {"city": "Rome"}}<|eom_id|>',
                           ["Oslo", "Rome"], ""),
    "llama32_bare": ('{"name": "lookup", "parameters": {"city": "Oslo"}}', ["Oslo"], ""),
    # the embedded Qwen2.5-Coder-1.5B copies its GGUF template's doubled braces, untagged,
    # with one or two closing braces too many (seen in the tutorial's agent: no tool ran)
    "qwen_template_doubled": ('{{"name": "lookup", "arguments": {"city": "Oslo"}}}',
                              ["Oslo"], ""),
    "qwen_template_doubled_extra": ('{{"name": "lookup", "arguments": {"city": "Oslo"}}}}',
                                    ["Oslo"], ""),
    "qwen_template_doubled_tagged": ('<tool_call>\n{{"name": "lookup", "arguments": '
                                     '{"city": "Oslo"}}}\n</tool_call>', ["Oslo"], ""),
    "qwen_bare_fenced_two": ('```json\n{"name": "lookup", "arguments": {"city": "Oslo"}}\n'
                             '{"name": "lookup", "arguments": "{\\"city\\": \\"Rome\\"}"}\n```',
                             ["Oslo", "Rome"], ""),
}


@pytest.mark.parametrize("form", list(FORMS))
def test_a_local_servers_tool_call_written_as_text_runs_the_tool(form):
    text, cities, kept = FORMS[form]
    with WireServer(_as_text(text)) as srv:
        res = run_probe(probe_agent(_openai(srv), tools=["lookup"], tool_fns=[lookup]),
                        [{"key": "k", "q": "weather?"}])
        bodies = srv.bodies("/chat/completions")
    [ans] = outputs_of(res, "answer")
    assert ans["error"] is None, ans["error"]
    assert SEEN == cities
    assert ans["content"] == "done: " + " | ".join(f"{c}: sunny" for c in cities)
    [assistant] = [m for m in bodies[1]["messages"] if m["role"] == "assistant"]
    assert (assistant["content"] or "") == kept  # the call's text went, the rest stayed
    ids = [c["id"] for c in assistant["tool_calls"]]
    assert [json.loads(c["function"]["arguments"]) for c in assistant["tool_calls"]] == [
        {"city": c} for c in cities]
    results = [m for m in bodies[1]["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in results] == ids and len(set(ids)) == len(ids)
    [calls] = outputs_of(res, "calls")
    assert all(c["name"] == "lookup" for c in calls["calls"])


@pytest.mark.parametrize("text", [
    '<tool_call>\n{"name": "lookup", "arguments": {"city": "Oslo"}}\n</tool_call>',
    '{"name": "lookup", "arguments": {"city": "Oslo"}}',
], ids=["hermes", "bare"])
def test_an_ollama_model_whose_call_ollama_did_not_parse_runs_the_tool(text):
    with WireServer(_as_text(text, reply=ollama_reply)) as srv:
        res = run_probe(probe_agent(_ollama(srv), tools=["lookup"], tool_fns=[lookup]),
                        [{"key": "k", "q": "weather?"}])
        bodies = srv.bodies("/api/chat")
    [ans] = outputs_of(res, "answer")
    assert ans["error"] is None and ans["content"] == "done: Oslo: sunny"
    assert SEEN == ["Oslo"]
    [assistant] = [m for m in bodies[1]["messages"] if m["role"] == "assistant"]
    assert assistant["tool_calls"] == [{"function": {"name": "lookup",
                                                     "arguments": {"city": "Oslo"}}}]
    assert [m.get("tool_name") for m in bodies[1]["messages"] if m["role"] == "tool"] == [
        "lookup"]


def test_a_zero_argument_call_written_as_text_without_arguments_runs():
    with WireServer(_as_text('{"name": "clock"}', reply=ollama_reply)) as srv:
        res = run_probe(probe_agent(_ollama(srv), tools=["clock"], tool_fns=[clock]),
                        [{"key": "k", "q": "time?"}])
    [ans] = outputs_of(res, "answer")
    assert ans["content"] == "done: 12:00" and COUNTER["clock"] == 1


@pytest.mark.parametrize("text", [
    'A user looks like {"name": "Alice", "arguments": {}} in our records.',
    '<tool_call>{"name": "delete_everything", "arguments": {}}</tool_call>',
    '{"name": "lookup", "arguments": {"city": "Oslo"}, "note": "an example"}',
    '<think>I could <tool_call>{"name": "lookup", "arguments": {"city": "Oslo"}}'
    '</tool_call> but no.</think>It is sunny everywhere.',
    'Call it like this: {"name": "lookup", "arguments": {"city": "Oslo"}}',
    '{{"name": "delete_everything", "arguments": {}}}',
    '{{"name": "lookup", "arguments": {"city": "Oslo"}, "note": "an example"}}',
    'Write {{"name": "lookup", "arguments": {"city": "Oslo"}}} to call it.',
], ids=["prose_with_json", "tool_not_offered", "unknown_key", "inside_think", "prose_around",
        "doubled_tool_not_offered", "doubled_unknown_key", "doubled_prose_around"])
def test_text_that_is_not_a_call_of_an_offered_tool_stays_the_answer(text):
    with WireServer(_as_text(text)) as srv:
        res = run_probe(probe_agent(_openai(srv), tools=["lookup"], tool_fns=[lookup]),
                        [{"key": "k", "q": "weather?"}])
        assert len(srv.requests) == 1
    [ans] = outputs_of(res, "answer")
    assert ans["error"] is None and ans["content"] == text
    assert COUNTER["lookup"] == 0 and "text_tool_calls" not in ans["metadata"]


def test_a_structured_answer_shaped_like_a_call_is_the_answer_not_a_call():
    text = '{"name": "lookup", "arguments": {"city": "Oslo"}}'
    schema = {"type": "object", "properties": {"name": {"type": "string"},
                                               "arguments": {"type": "object"}}}
    with WireServer(_as_text(text)) as srv:
        res = run_probe(probe_agent(_openai(srv), tools=["lookup"], tool_fns=[lookup]),
                        [{"key": "k", "q": "describe a call", "schema": schema}])
    [ans] = outputs_of(res, "answer")
    assert ans["error"] is None and ans["structured"] == json.loads(text)
    assert COUNTER["lookup"] == 0


def test_a_call_written_as_text_cut_at_the_token_limit_is_not_run():
    def answer(req: dict[str, Any]) -> tuple[int, Any]:
        body = openai_reply('<tool_call>\n{"name": "lookup", "arguments": {"city": "Os')
        body["choices"][0]["finish_reason"] = "length"
        return 200, body

    with WireServer(answer) as srv:
        res = run_probe(probe_agent(_openai(srv), tools=["lookup"], tool_fns=[lookup]),
                        [{"key": "k", "q": "weather?"}])
    [ans] = outputs_of(res, "answer")
    assert "cut at its output token limit" in ans["error"] and "'lookup'" in ans["error"]
    assert COUNTER["lookup"] == 0


def test_a_call_written_as_broken_json_is_told_to_the_model_which_calls_again():
    broken = '<tool_call>\n{"name": "lookup", "arguments": {"city": "Oslo"}\n</tool_call>'

    def answer(req: dict[str, Any]) -> tuple[int, Any]:
        told = [m["content"] for m in req["body"]["messages"] if m["role"] == "tool"]
        if not told:
            return 200, openai_reply(broken)  # vllm #22885: the closing brace lost
        if len(told) == 1:
            assert "not JSON" in told[0] and told[0].startswith("Error:")
            return 200, openai_reply(HERMES)
        return 200, openai_reply(f"done: {told[-1]}")

    with WireServer(answer) as srv:
        res = run_probe(probe_agent(_openai(srv), tools=["lookup"], tool_fns=[lookup]),
                        [{"key": "k", "q": "weather?"}])
    [ans] = outputs_of(res, "answer")
    assert ans["error"] is None and ans["content"] == "done: Oslo: sunny"
    assert SEEN == ["Oslo"]


def test_of_two_calls_in_one_block_the_whole_one_runs_and_the_broken_one_is_told():
    both = ('<tool_call>\n{"name": "lookup", "arguments": {"city": "Oslo"}}\n'
            '{"name": "lookup", "arguments": {"city": "Ro\n</tool_call>')

    def answer(req: dict[str, Any]) -> tuple[int, Any]:
        told = [m["content"] for m in req["body"]["messages"] if m["role"] == "tool"]
        return 200, openai_reply(" | ".join(told) if told else both)

    with WireServer(answer) as srv:
        res = run_probe(probe_agent(_openai(srv), tools=["lookup"], tool_fns=[lookup]),
                        [{"key": "k", "q": "weather?"}])
    [ans] = outputs_of(res, "answer")
    assert SEEN == ["Oslo"]
    ran, told = ans["content"].split(" | ")
    assert ran == "Oslo: sunny" and told.startswith("Error:") and "not JSON" in told


def forecast(city: str, days: int, hourly: bool = False) -> str:
    """A city's forecast.

    Args:
        city: the city (a postcode, written as digits, is a city too).
        days: how many days.
        hourly: whether hour by hour.
    """
    SEEN.append(f"{city}/{days}/{hourly}")
    return f"{city}: rain for {days} days"


QWEN3_CODER = ("I'll check.\n<tool_call>\n<function=forecast>\n<parameter=city>\n0150\n"
               "</parameter>\n<parameter=days>\n3\n</parameter>\n<parameter=hourly>\ntrue\n"
               "</parameter>\n</function>\n</tool_call>")


@pytest.mark.parametrize("kind", ["openai", "ollama"])
def test_qwen3_coders_xml_call_runs_with_each_value_of_its_parameters_type(kind):
    """Qwen3-Coder and Qwen 3.5 on write ``<function=...><parameter=...>`` (vLLM's
    ``qwen3_coder`` parser): left as text when the server cannot parse it (ollama #12751,
    mlx-lm #1616, llama.cpp #15012). Values are read by the tool's schema: ``0150`` stays
    the text a ``str`` wants."""
    reply = openai_reply if kind == "openai" else ollama_reply
    conn = _openai if kind == "openai" else _ollama
    with WireServer(_as_text(QWEN3_CODER, reply=reply)) as srv:
        res = run_probe(probe_agent(conn(srv), tools=["forecast"], tool_fns=[forecast]),
                        [{"key": "k", "q": "weather at 0150?"}])
    [ans] = outputs_of(res, "answer")
    assert ans["error"] is None and ans["content"] == "done: 0150: rain for 3 days"
    assert SEEN == ["0150/3/True"]


class _MockedOpenAI(OpenAIChatModel):
    """An OpenAI connection whose client answers from an ``httpx.MockTransport``."""

    def _sdk_client(self, openai: Any, headers: dict[str, str] | None) -> Any:
        def answer(request: httpx.Request) -> httpx.Response:
            return httpx.Response(200, json=openai_reply(HERMES))
        return openai.AsyncOpenAI(base_url=self.base_url, api_key="sk-test",
                                  http_client=httpx.AsyncClient(
                                      transport=httpx.MockTransport(answer)))


TOOLS = [ToolMetadata(name="lookup", description="Look a city up.", parameters={
    "type": "object", "properties": {"city": {"type": "string"}}})]


@pytest.mark.parametrize(("url", "setting", "read"), [
    ("https://api.openai.com/v1", None, False),
    ("https://my-res.openai.azure.com/openai", None, False),
    ("https://api.openai.com/v1", True, True),
    ("https://inference.example.com/v1", None, True),
    ("https://inference.example.com/v1", False, False),
])
def test_openais_own_api_keeps_text_as_text_unless_asked(monkeypatch, url, setting, read):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    conn = _MockedOpenAI(base_url=url, text_tool_calls=setting)
    answer = conn.chat([ChatMessage(content="weather?")], tools=TOOLS)
    if read:
        assert answer.message.content == "Checking."
        assert [(c.name, c.arguments) for c in answer.message.tool_calls] == [
            ("lookup", {"city": "Oslo"})]
        assert answer.finish_reason == "tool_calls"
        assert answer.metadata["text_tool_calls"] == 1
    else:
        assert answer.message.content == HERMES and answer.message.tool_calls == []


def test_the_in_process_models_calls_written_as_text_are_its_calls():
    """llama-cpp-python's GGUF chat templates parse no calls: SmolLM2 writes them as text."""
    body = openai_reply('<tool_call>[{"name": "lookup", "arguments": {"city": "Oslo"}}]'
                        '</tool_call>')
    request = {"tools": [{"type": "function", "function": {"name": "lookup"}}]}
    answer = LlamaCppChatModel()._answer(body, request)
    assert [(c.name, c.arguments) for c in answer.message.tool_calls] == [
        ("lookup", {"city": "Oslo"})]
    assert LlamaCppChatModel()._answer(body, {}).message.tool_calls == []
    # Qwen 2.5's template form, as the default model wrote it for the tutorial's question
    body = openai_reply('{{"name": "lookup", "arguments": {"city": "kettle"}}}}')
    answer = LlamaCppChatModel()._answer(body, request)
    assert [(c.name, c.arguments) for c in answer.message.tool_calls] == [
        ("lookup", {"city": "kettle"})]
    assert answer.message.content == "" and answer.finish_reason == "tool_calls"


USER_SCRIPT = r'''
import json, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import flink_agents_py
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (Agent, ChatMessage, ChatModelSetup, InputEvent, OutputEvent,
                                 ResourceDescriptor, RunnerContext, action,
                                 chat_model_connection, chat_model_setup, tool)
from flink_agents_py.integrations.chat_models import OpenAIChatModel

TOLD = []


class VllmWithoutToolParser(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        results = [m["content"] for m in body["messages"] if m["role"] == "tool"]
        TOLD.extend(results)
        text = (f"The weather: {results[0]}" if results else
                '<tool_call>\n{"name": "weather", "arguments": {"city": "Lima"}}\n</tool_call>')
        data = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": "q",
                           "choices": [{"index": 0, "finish_reason": "stop", "message": {
                               "role": "assistant", "content": text}}]}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


server = ThreadingHTTPServer(("127.0.0.1", 0), VllmWithoutToolParser)
threading.Thread(target=server.serve_forever, daemon=True).start()
URL = f"http://127.0.0.1:{server.server_address[1]}/v1"


@tool
def weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: the city.
    """
    return f"{city}: foggy"


class WeatherAgent(Agent):
    @chat_model_connection
    @staticmethod
    def vllm() -> ResourceDescriptor:
        return ResourceDescriptor(OpenAIChatModel, base_url=URL, default_model="qwen")

    @chat_model_setup
    @staticmethod
    def model() -> ResourceDescriptor:
        return ResourceDescriptor(ChatModelSetup, connection="vllm", tools=["weather"])

    weather = staticmethod(weather)

    @action(InputEvent)
    @staticmethod
    async def ask(event: InputEvent, ctx: RunnerContext) -> None:
        answer = await ctx.chat("model", [ChatMessage(content=event.input["q"])])
        ctx.send_event(OutputEvent(output={"key": ctx.key,
                                           "answer": answer.message.content}))


out = (AgentsExecutionEnvironment.local().from_list([{"key": "a", "q": "Lima?"}])
       .apply(WeatherAgent()).collect())
print(json.dumps({"package": flink_agents_py.__file__, "out": out, "told": TOLD}))
'''


def test_a_users_agent_against_vllm_without_a_tool_parser_runs_its_tool(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    (tmp_path / "weather_agent.py").write_text(USER_SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(root)}
    proc = subprocess.run([sys.executable, "weather_agent.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["package"].startswith(str(root))
    assert got["out"] == [{"key": "a", "answer": "The weather: Lima: foggy"}]
    assert got["told"] == ["Lima: foggy"]
