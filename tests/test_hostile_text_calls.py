"""Tool call arguments with no JSON form are unreadable arguments, whatever their route.

Two neighbours of ``tests/test_hostile_deep_answers.py``, from a model or a server:

- tool calls a model writes as text (``<tool_call>{...}</tool_call>``: Ollama, an
  OpenAI-compatible server without its tool parser, the in-process llama.cpp) were read with
  the standard library's permissive decoder: arguments nested 5,000 levels deep (10 kB of
  text) raised ``RecursionError`` out of the connection (a failed chat blaming "the
  server's answer"), and ``NaN`` or ``Infinity`` came through as floats;
- the SDKs read structured tool call arguments (Ollama's and Anthropic's are objects in the
  body) with Python's ``json`` module, which takes ``NaN`` and ``Infinity`` too.

A float with no JSON form could not be recorded: the chat failed with a
``SerializationError`` at its durable call. Now both are unreadable arguments, which the
tool refuses, telling the model (the chat goes on; the tool never runs). So did an Anthropic
structured answer (the forced output tool's input) holding one: it is now an answer that is
no JSON, and the model is asked again.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from flink_agents_py.api import ChatMessage, ChatResponse
from flink_agents_py.api.internal import UNREADABLE_ARGUMENTS, strict_json
from flink_agents_py.integrations.chat_models._answers import tool_arguments
from flink_agents_py.integrations.chat_models._text_calls import calls_from_text
from flink_agents_py.testing._local_server import LocalHTTPServer

pytestmark = pytest.mark.timeout(120)
ROOT = Path(__file__).resolve().parents[1]
DEEP = "[" * 5_000 + "]" * 5_000
OFFERED = {"t": {"type": "object", "properties": {"a": {"type": "array"}}}}


def _read(text: str) -> ChatResponse:
    return calls_from_text(
        ChatResponse(message=ChatMessage(role="assistant", content=text)), OFFERED
    )


@pytest.mark.parametrize(
    "text",
    [
        '<tool_call>{"name": "t", "arguments": {"a": ' + DEEP + "}}</tool_call>",
        '<tool_call>{"name": "t", "arguments": {"a": NaN}}</tool_call>',
        '<tool_call>{"name": "t", "arguments": {"a": [1, -Infinity]}}</tool_call>',
        '<tool_call>{{"name": "t", "arguments": {"a": Infinity}}}</tool_call>',
    ],
)
def test_a_call_written_as_text_with_no_json_form_is_unreadable(text):
    (call,) = _read(text).message.tool_calls
    assert call.name == "t"
    assert list(call.arguments) == [UNREADABLE_ARGUMENTS]


@pytest.mark.parametrize("text", ['{"name": "t", "arguments": {"a": NaN}}', "[" * 100_000])
def test_a_bare_answer_with_no_json_form_stays_text(text):
    response = _read(text)
    assert response.message.tool_calls == []
    assert response.message.content == text


@pytest.mark.parametrize("value", [DEEP, "NaN", "Infinity"])
def test_a_parameter_written_as_xml_with_no_json_form_stays_its_text(value):
    text = f"<tool_call><function=t><parameter=a>{value}</parameter></function></tool_call>"
    (call,) = _read(text).message.tool_calls
    assert call.arguments == {"a": value}


@pytest.mark.parametrize(
    "raw", [{"a": float("nan")}, {"a": [{"b": float("inf")}]}, {"a": (1.0, float("-inf"))}]
)
def test_decoded_arguments_holding_nan_or_infinity_are_unreadable(raw):
    found = tool_arguments(raw, 0, "t")
    assert list(found) == [UNREADABLE_ARGUMENTS]
    assert "NaN or Infinity" in found[UNREADABLE_ARGUMENTS]


def test_finite_decoded_arguments_are_kept():
    raw = {"a": [1.5, {"b": -2.0}], "c": "NaN"}
    assert tool_arguments(raw, 0, "t") == raw


SCRIPT = r'''
import json, sys, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (Agent, ChatMessage, ChatModelSetup, ChatResponseError,
                                 InputEvent, OutputEvent, ResourceDescriptor, RunnerContext,
                                 action, chat_model_connection, chat_model_setup, tool)
from flink_agents_py.integrations.chat_models import OllamaChatModel

DEEP = "[" * 5000 + "]" * 5000
CALLS = {  # the first answer's message, as the body's JSON text
    "object_nan": '"content": "", "tool_calls": [{"function": {"name": "t", '
                  '"arguments": {"a": NaN}}}]',
    "text_nan": json.dumps({"content": '<tool_call>{"name": "t", "arguments": '
                                       '{"a": NaN}}</tool_call>'})[1:-1],
    "text_deep": json.dumps({"content": '<tool_call>{"name": "t", "arguments": {"a": '
                                        + DEEP + '}}</tool_call>'})[1:-1],
}
RAN = []


class Fake(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        told = [m["content"] for m in request["messages"] if m.get("role") == "tool"]
        message = (json.dumps({"content": "told: " + told[0][:60]})[1:-1] if told
                   else CALLS[request["messages"][0]["content"]])
        body = ('{"model": "m", "created_at": "2024-01-01T00:00:00Z", "done": true, '
                '"done_reason": "stop", "message": {"role": "assistant", ' + message
                + "}}").encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


server = ThreadingHTTPServer(("127.0.0.1", 0), Fake)
threading.Thread(target=server.serve_forever, daemon=True).start()
URL = f"http://127.0.0.1:{server.server_address[1]}"


class Asker(Agent):
    @chat_model_connection
    @staticmethod
    def local() -> ResourceDescriptor:
        return ResourceDescriptor(OllamaChatModel, host=URL, timeout_s=30)

    @chat_model_setup
    @staticmethod
    def model() -> ResourceDescriptor:
        return ResourceDescriptor(ChatModelSetup, connection="local", model="m", tools=["t"])

    @tool
    @staticmethod
    def t(a: list) -> str:
        """Take a list.

        Args:
            a: the list.
        """
        RAN.append(a)
        return "ran"

    @action(InputEvent)
    @staticmethod
    async def ask(event: InputEvent, ctx: RunnerContext) -> None:
        try:
            said = (await ctx.chat("model", [ChatMessage(content=event.input["form"])])).content
        except ChatResponseError as e:
            said = "failed: " + str(e)[:200]
        ctx.send_event(OutputEvent(output={"form": event.input["form"], "said": said}))


records = [{"key": form, "form": form} for form in CALLS]
result = AgentsExecutionEnvironment.local().from_list(records).apply(Asker()).run()
for out in sorted(result.outputs, key=lambda o: o["form"]):
    print("OUT", json.dumps(out))
print("ERRORS", len(result.errors), "RAN", len(RAN))
'''


def test_a_users_chat_goes_on_when_a_call_has_arguments_with_no_json_form(tmp_path):
    pytest.importorskip("ollama")
    assert ROOT not in tmp_path.resolve().parents
    (tmp_path / "asker.py").write_text(SCRIPT)
    proc = subprocess.run(
        [sys.executable, "asker.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=100,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    outs = [line for line in proc.stdout.splitlines() if line.startswith("OUT ")]
    assert len(outs) == 3, proc.stdout
    for line in outs:  # each chat went on: the model was told, in the tool's message
        assert '"said": "told: Error: ' in line, line
    assert "ERRORS 0 RAN 0" in proc.stdout, proc.stdout


class _AnthropicNaN(BaseHTTPRequestHandler):
    """An Anthropic answer whose forced structured-output tool input holds ``NaN``."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        body = (
            b'{"id": "m1", "type": "message", "role": "assistant", "model": "c", '
            b'"stop_reason": "tool_use", "stop_sequence": null, '
            b'"usage": {"input_tokens": 1, "output_tokens": 1}, "content": [{"type": '
            b'"tool_use", "id": "tu1", "name": "structured_output", "input": {"score": NaN}}]}'
        )
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def test_an_anthropic_structured_answer_holding_nan_is_no_json_answer(monkeypatch):
    # recorded, the value failed the chat with a SerializationError; now the answer has no
    # structured value and its text is no JSON, so the chat asks the model again
    pytest.importorskip("anthropic")
    from flink_agents_py.integrations.chat_models import AnthropicChatModel

    monkeypatch.setenv("A8_KEY", "k-123456789012345")
    schema = {"type": "object", "properties": {"score": {"type": "number"}}}
    with LocalHTTPServer(_AnthropicNaN) as srv:
        connection = AnthropicChatModel(base_url=srv.url, api_key_env="A8_KEY", timeout_s=30)
        answer = asyncio.run(
            connection.achat([ChatMessage(content="rate")], output_schema=schema, model="c")
        )
    assert answer.structured is None
    assert answer.message.content == '{"score": NaN}'
    with pytest.raises(ValueError):
        strict_json(answer.message.content)


def test_a_key_standing_across_the_cut_of_an_unreadable_call_leaves_no_piece():
    # the note quoting a call written as text that is no JSON was cut at 300 characters,
    # then masked: the key's first characters before the cut (fewer than the 12 a piece
    # needs to be masked) stayed in the answer, recorded and sent back to the model
    from flink_agents_py.api import register_secret

    key = "sk-ZYXWVUTSRQ9876543210abcdefghijklmnop"
    register_secret(key)
    start = '{"name": "t", "arguments": {"a": "'
    text = "<tool_call>" + start + "x" * (300 - len(start) - 8) + key + '"</tool_call>'
    (call,) = _read(text).message.tool_calls
    note = call.arguments[UNREADABLE_ARGUMENTS]
    assert key[:8] not in note and "[REDACTE" in note, note


@pytest.mark.parametrize("raw", ['{"a": 1e999}', '{"a": [-1e400]}', 'sure: {"a": 1E+999}'])
def test_argument_text_with_a_number_past_the_float_range_is_unreadable(raw):
    # Python's decoder reads 1e999 as an infinity (orjson refuses it, the standard
    # library's fallback took it): OpenAI's argument strings failed the chat when recorded
    assert list(tool_arguments(raw, 0, "t")) == [UNREADABLE_ARGUMENTS]
    written = (
        '<tool_call>{"name": "t", "arguments": ' + raw.removeprefix("sure: ") + "}</tool_call>"
    )
    (call,) = _read(written).message.tool_calls
    assert list(call.arguments) == [UNREADABLE_ARGUMENTS]


def test_a_structured_answer_past_the_float_range_is_asked_again():
    # the answer's value was an infinity: the chat failed with a SerializationError when
    # its response event was stored; now it is no JSON, and the model is asked again
    from pydantic import BaseModel

    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.api import (
        Agent,
        ChatModelSetup,
        ChatResponseError,
        InputEvent,
        OutputEvent,
        ResourceDescriptor,
        ResourceType,
        action,
    )
    from flink_agents_py.testing import model_from_function

    asked = []

    class Score(BaseModel):
        score: float

    class Rater(Agent):
        @action(InputEvent)
        @staticmethod
        async def rate(event, ctx):  # type: ignore[no-untyped-def]
            try:
                said = repr(
                    (
                        await ctx.chat("model", [ChatMessage(content="rate")], output_schema=Score)
                    ).structured
                )
            except ChatResponseError as e:
                said = str(e)
            ctx.send_event(OutputEvent(output=said))

    agent = Rater()
    agent.add_resource(
        "conn",
        ResourceType.CHAT_MODEL_CONNECTION,
        model_from_function(lambda r: asked.append(1) or '{"score": 1e999}'),
    )
    agent.add_resource(
        "model", ResourceType.CHAT_MODEL, ResourceDescriptor(ChatModelSetup, connection="conn")
    )
    result = AgentsExecutionEnvironment.local().from_list([{"key": "k"}]).apply(agent).run()
    (said,) = result.outputs
    assert said.startswith("StructuredOutputError:") and "is not JSON" in said, said
    assert len(asked) == 2 and result.errors == []
