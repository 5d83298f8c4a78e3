"""Provider test helpers, shared by the provider, retry, structured-output, MCP, RAG and
vector store tests.

- ``WireServer``: a local HTTP server answering in a provider's documented wire format and
  recording every request (path, headers, JSON body), so tests assert what an SDK sent.
- ``ChatProbe``: an agent that sends one chat per input and reports every tool request,
  tool response and the final answer as outputs.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    ChatMessage,
    ChatModelConnection,
    ChatModelSetup,
    ChatRequestEvent,
    ChatResponse,
    ChatResponseEvent,
    InputEvent,
    MessageRole,
    OutputEvent,
    ProviderError,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    ToolRequestEvent,
    ToolResponseEvent,
    action,
)
from flink_agents_py.local import LocalRunResult
from flink_agents_py.testing import LocalHTTPServer

from .probes import count, current

Responder = Callable[[dict[str, Any]], tuple[int, Any]]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class WireServer:
    """``with WireServer(responder) as srv``: ``srv.url``, ``srv.requests``.

    ``responder(request)`` gets ``{"method", "path", "headers", "body", "n"}`` (``n``: the
    0-based index of the request) and returns ``(status, json_body)`` or
    ``(status, json_body, headers)``.
    """

    def __init__(self, responder: Responder) -> None:
        self.responder = responder
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _answer(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                with outer._lock:
                    req = {"method": self.command, "path": self.path,
                           "headers": {k.lower(): v for k, v in self.headers.items()},
                           "body": json.loads(raw) if raw else None,
                           "n": len(outer.requests)}
                    outer.requests.append(req)
                headers: dict[str, str] = {}
                try:
                    answer = outer.responder(req)
                    status, body = answer[0], answer[1]
                    if len(answer) > 2:
                        headers = answer[2]
                except Exception as e:  # noqa: BLE001 - a broken responder is a 599
                    status, body = 599, {"error": f"{type(e).__name__}: {e}"}
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            do_POST = do_GET = _answer

        self._httpd = LocalHTTPServer(Handler, poll_s=0.02)
        self.port = self._httpd.port
        self.url = self._httpd.url

    def __enter__(self) -> WireServer:
        self._httpd.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._httpd.__exit__(*exc)

    def bodies(self, path_suffix: str = "") -> list[dict[str, Any]]:
        return [r["body"] for r in self.requests if r["path"].endswith(path_suffix)]


# ------------------------------------------------------------------------- wire answers
def ollama_reply(content: str = "", tool_calls: list[tuple[str, dict]] = (),
                 model: str = "llama-test") -> dict[str, Any]:
    """An Ollama ``/api/chat`` (non-streamed) answer; tool calls carry no ids."""
    msg: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        msg["tool_calls"] = [{"function": {"name": n, "arguments": a}} for n, a in tool_calls]
    return {"model": model, "created_at": "2025-01-01T00:00:00Z", "message": msg, "done": True,
            "done_reason": "stop", "total_duration": 1000, "prompt_eval_count": 12,
            "eval_count": 5}


def anthropic_reply(blocks: list[dict[str, Any]], stop_reason: str = "end_turn",
                    model: str = "claude-test", n: int = 0) -> dict[str, Any]:
    """An Anthropic ``/v1/messages`` answer."""
    return {"id": f"msg_{n}", "type": "message", "role": "assistant", "model": model,
            "content": blocks, "stop_reason": stop_reason, "stop_sequence": None,
            "usage": {"input_tokens": 21, "output_tokens": 8}}


def openai_reply(content: str | None = "", tool_calls: list[tuple[str, str, dict]] = (),
                 model: str = "gpt-test", n: int = 0) -> dict[str, Any]:
    """An OpenAI ``/v1/chat/completions`` answer; tool calls as ``(id, name, args)``."""
    msg: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        msg["tool_calls"] = [{"id": i, "type": "function",
                              "function": {"name": name, "arguments": json.dumps(args)}}
                             for i, name, args in tool_calls]
    return {"id": f"chatcmpl-{n}", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "message": msg, "logprobs": None,
                         "finish_reason": "tool_calls" if tool_calls else "stop"}],
            "usage": {"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13}}


# ------------------------------------------------------------------------- the probe agent
class ChatProbe(Agent):
    """One chat per input ``{"key", "q", "model"?, "schema"?, "args"?}``; reports everything."""

    @action(InputEvent)
    @staticmethod
    def ask(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(ChatRequestEvent(
            model=event.input.get("model", "model"),
            messages=[ChatMessage(content=event.input["q"])],
            prompt_args=event.input.get("args"),
            output_schema=event.input.get("schema"),
        ))

    @action(ToolRequestEvent)
    @staticmethod
    def saw_calls(event: ToolRequestEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output={
            "key": ctx.key, "kind": "calls",
            "calls": [c.model_dump() for c in event.tool_calls]}))

    @action(ToolResponseEvent)
    @staticmethod
    def saw_results(event: ToolResponseEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output={
            "key": ctx.key, "kind": "results",
            "results": {cid: r.model_dump() for cid, r in event.responses.items()}}))

    @action(ChatResponseEvent)
    @staticmethod
    def answer(event: ChatResponseEvent, ctx: RunnerContext) -> None:
        r = event.response
        ctx.send_event(OutputEvent(output={
            "key": ctx.key, "kind": "answer", "error": event.error,
            "content": r.message.content if r else None,
            "structured": r.structured if r else None,
            "metadata": r.metadata if r else None,
            "usage": r.usage.model_dump() if r and r.usage else None,
            "finish_reason": r.finish_reason if r else None,
            "model": r.model if r else None,
        }))


def probe_agent(connection: Any, tools: list[str] = (), tool_fns: list[Callable] = (),
                **setup: Any) -> ChatProbe:
    """A ``ChatProbe`` with connection ``conn``, setup ``model`` and the given tools."""
    agent = ChatProbe()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, connection)
    agent.add_resource("model", ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="conn", tools=list(tools), **setup))
    for fn in tool_fns:
        agent.add_resource(fn.__name__, ResourceType.TOOL, fn)
    return agent


def run_probe(agent: Agent, records: list[dict[str, Any]]) -> LocalRunResult:
    return (AgentsExecutionEnvironment.local().from_list(records).apply(agent).run())


def outputs_of(res: LocalRunResult, kind: str) -> list[dict[str, Any]]:
    return [o for o in res.outputs if o["kind"] == kind]


def only_answer(res: LocalRunResult) -> dict[str, Any]:
    assert res.errors == [], res.errors
    [ans] = outputs_of(res, "answer")
    return ans


# -- retries ------------------------------------------------------------------------------
class Flaky(ChatModelConnection):
    """Fails its first ``fail_first`` calls (per label) with ``error``, then answers ``reply``."""

    label: str
    fail_first: int = 0
    error: str = "provider"  # provider | timeout | value
    status: int = 503
    reply: str = "ok"

    def chat(self, messages, **kwargs) -> ChatResponse:
        n = count(self.label)
        if n <= self.fail_first:
            if self.error == "timeout":
                raise TimeoutError("the model took too long")
            if self.error == "value":
                raise ValueError("a bug in the adapter")
            raise ProviderError("service down", status_code=self.status,
                                retryable=self.status == 429 or self.status >= 500)
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content=self.reply),
                            metadata={"attempt": n})


def flaky(label: str, **kw: Any) -> ResourceDescriptor:
    """A ``Flaky`` connection counting under ``label`` (its count set back to zero)."""
    current().reset(label)
    return ResourceDescriptor(Flaky, label=label, **kw)


FAST = {"retry_initial_backoff_s": 0.001, "retry_max_backoff_s": 0.002}
"""Retry backoff options that keep retry tests fast."""
