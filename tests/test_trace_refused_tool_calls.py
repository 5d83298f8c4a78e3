"""A model's call to a tool the chat does not offer shows as a failure in traces.

Such a call is refused before any call runs: the model gets the error back ("no tool named
'lookup_order'; available: stock") and goes on. No call record says so, so the trace showed
only ``failed: lookup_order`` on the ToolResponseEvent, with ``anomalies: none``; ``--failed``
did not find the run, and the OpenTelemetry export had no error anywhere. The event log now
records the refusal with its reason, the trace flags it as a failure, and the run span has
status ``ERROR`` with the refusal on the span event.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from flink_agents_py.observability import build_traces, export_otel, read_event_log

ROOT = Path(__file__).resolve().parents[1]

PROGRAM = textwrap.dedent('''
    from typing import Any

    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.api import (Agent, ChatMessage, ChatModelSetup, ChatRequestEvent,
        ChatResponseEvent, InputEvent, MessageRole, OutputEvent, ResourceDescriptor,
        ResourceType, RunnerContext, ToolCall, action, chat_model_connection)
    from flink_agents_py.integrations.chat_models import ScriptedChatModel


    def stock(sku: str) -> dict:
        """How many are in stock.

        Args:
            sku: the product.
        """
        return {"sku": sku, "in_stock": 3}


    def script(request: Any) -> Any:
        if not request.tool_results:
            return ChatMessage(role=MessageRole.ASSISTANT, tool_calls=[
                ToolCall(id="t1", name="lookup_order", arguments={"id": 7}),
                ToolCall(id="t2", name="stock", arguments={"sku": "s-1"})])
        return "done"


    class Shop(Agent):
        @chat_model_connection
        @staticmethod
        def conn() -> ResourceDescriptor:
            return ResourceDescriptor(ScriptedChatModel, function="shop_agent:script")

        @action(InputEvent)
        @staticmethod
        def ask(event: InputEvent, ctx: RunnerContext) -> None:
            ctx.send_event(ChatRequestEvent(model="m", messages=[ChatMessage(content="hi")]))

        @action(ChatResponseEvent)
        @staticmethod
        def answer(event: ChatResponseEvent, ctx: RunnerContext) -> None:
            ctx.send_event(OutputEvent(output=event.response.message.content))


    if __name__ == "__main__":
        agent = Shop()
        agent.add_resource("m", ResourceType.CHAT_MODEL, ResourceDescriptor(
            ChatModelSetup, connection="conn", model="llm", tools=["stock"]))
        agent.add_resource("stock", ResourceType.TOOL, stock)
        env = AgentsExecutionEnvironment.local(event_log="out/events.jsonl")
        print(env.from_list([{"key": "a"}]).apply(agent).collect())
''')

REFUSAL = "refused tool call: lookup_order: no tool named 'lookup_order'; available: stock"


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("shop")
    (folder / "shop_agent.py").write_text(PROGRAM)
    done = subprocess.run([sys.executable, "shop_agent.py"], cwd=folder, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.stdout == "['done']\n", done.stderr
    return folder / "out" / "events.jsonl"


def test_trace_failed_finds_the_run_and_names_the_refusal(log):
    done = subprocess.run([sys.executable, "-m", "flink_agents_py", "trace", str(log),
                           "--failed"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"failed: lookup_order  !! {REFUSAL}" in done.stdout
    assert "1 run failed" in done.stdout
    # the tool that ran is no refusal
    assert "refused tool call: stock" not in done.stdout


def test_the_refusal_is_an_error_in_the_otel_spans(log):
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import StatusCode

    exporter = InMemorySpanExporter()
    export_otel(build_traces(read_event_log([log])), exporter)
    spans = exporter.get_finished_spans()
    [root] = [s for s in spans if s.parent is None]
    assert root.status.status_code is StatusCode.ERROR
    [event] = [e for s in spans for e in s.events if e.name == "ToolResponseEvent"]
    assert list(event.attributes["flink_agents.anomalies"]) == [REFUSAL]
