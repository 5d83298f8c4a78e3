"""A shipped adapter's answer without usage counts an estimate against a budget.

Before: the budgets page promised that an answer without usage ("a server that leaves it
out") counts an estimate, but the shipped adapters never gave one without usage: an
OpenAI-compatible body with ``"usage": null`` (or none) was read as ``TokenUsage(0, 0)``,
likewise Anthropic's and Ollama's, so a budget through ``OpenAIChatModel`` against such a
server (some gateways, local servers) counted 0 tokens a call and was never reached. Now an
answer that reports no token count at all has no usage, and the estimate applies.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from test_flow_control import asker, run

from flink_agents_py.api import Budget, ResourceDescriptor
from flink_agents_py.integrations.chat_models import OpenAIChatModel
from flink_agents_py.integrations.chat_models._anthropic import AnthropicChatModel
from flink_agents_py.integrations.chat_models._llama import from_openai_choice
from flink_agents_py.integrations.chat_models._ollama import _from_ollama

pytestmark = pytest.mark.timeout(120)


class _NoUsageServer:
    """An OpenAI-compatible server on 127.0.0.1 whose answers carry ``usage`` as told."""

    def __init__(self, usage: Any) -> None:
        usage_field = {} if usage == "absent" else {"usage": usage}

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - the http.server name
                self.rfile.read(int(self.headers.get("content-length") or 0))
                data = json.dumps({
                    "id": "x", "object": "chat.completion", "created": 0, "model": "m",
                    "choices": [{"index": 0, "finish_reason": "stop", "message": {
                        "role": "assistant", "content": "y" * 400}}], **usage_field}).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> _NoUsageServer:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize("usage", [None, "absent", {}])
def test_a_budget_through_openai_chat_model_counts_an_answer_without_usage(usage):
    with _NoUsageServer(usage) as server:
        agent = asker({"conn": ResourceDescriptor(OpenAIChatModel, base_url=server.base_url)},
                      {"model": {"connection": "conn", "model": "m",
                                 "budget": Budget(max_tokens=250)}})
        res = run(agent, [{"key": "a", "q": "q" * 40} for _ in range(4)], max_in_flight=1)
    first = res.outputs[0]["metadata"]
    assert first.get("usage_estimated") is True, first
    assert first["budget"]["spent"]["output"] == 100  # 400 characters, 4 a token
    # 110 tokens a call: 0 and 110 are under 250, 220 too; the fourth finds it spent
    assert [o["error"] is None for o in res.outputs] == [True, True, True, False]
    assert res.outputs[3]["error"].startswith("BudgetExceededError")


def test_an_answer_with_counts_keeps_them_and_partial_counts_are_kept_as_said():
    said = from_openai_choice({"choices": [{"message": {"content": "hi"}}],
                               "usage": {"prompt_tokens": 7, "completion_tokens": 0}})
    assert said.usage is not None and (said.usage.input_tokens, said.usage.output_tokens) \
        == (7, 0)
    assert from_openai_choice({"choices": [{"message": {"content": "hi"}}],
                               "usage": None}).usage is None


def test_anthropic_and_ollama_answers_without_usage_have_none():
    model = AnthropicChatModel.model_construct()
    body = {"content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn"}
    assert model._from_anthropic(body, None, False).usage is None
    said = model._from_anthropic({**body, "usage": {"input_tokens": 3, "output_tokens": 2}},
                                 None, False).usage
    assert said is not None and (said.input_tokens, said.output_tokens) == (3, 2)
    answer = {"message": {"role": "assistant", "content": "hi"}, "done": True}
    assert _from_ollama(answer).usage is None
    counted = _from_ollama({**answer, "prompt_eval_count": 4, "eval_count": 1}).usage
    assert counted is not None and (counted.input_tokens, counted.output_tokens) == (4, 1)
