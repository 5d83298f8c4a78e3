"""The agent behind the trace-at-scale tests, and the event log it writes.

``Shop`` asks its scripted chat model about each record; the model calls two tools in one
round (``stock`` and ``price``, run concurrently, so the timeline shows them overlapping),
then answers. Record ``n == FAILING`` makes the ``ask`` action raise ``KeyError: 'missing'``
(a failed action, as a user's bug would). ``write_log`` runs ``runs`` records on the local
runner with an event log, then drops the ``run_completed`` record of the last run (a job
killed before the run ended: an ``unfinished run`` anomaly, not a failure).

Importable by name (``support.trace_agents:script``) so the scripted model can be named in a
descriptor.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import orjson

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    ChatMessage,
    ChatModelSetup,
    ChatRequestEvent,
    ChatResponseEvent,
    InputEvent,
    MessageRole,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    ToolCall,
    action,
    chat_model_connection,
)
from flink_agents_py.integrations.chat_models import ScriptedChatModel

FAILING = 83  # the record whose ``ask`` action raises (the 84th run, key "k83")


def stock(sku: str) -> dict[str, Any]:
    """How many of a product are in stock.

    Args:
        sku: the product.
    """
    time.sleep(0.002)
    return {"sku": sku, "in_stock": 3}


def price(sku: str) -> dict[str, Any]:
    """The price of a product.

    Args:
        sku: the product.
    """
    time.sleep(0.001)
    return {"sku": sku, "eur": 9.5}


def script(request: Any) -> Any:
    """First round: call both tools; then answer with what they said."""
    if not request.tool_results:
        sku = request.last_user_text.split()[-1]
        return ChatMessage(role=MessageRole.ASSISTANT, tool_calls=[
            ToolCall(id="t1", name="stock", arguments={"sku": sku}),
            ToolCall(id="t2", name="price", arguments={"sku": sku})])
    return "answer: " + " | ".join(m.content for m in request.tool_results)


class Shop(Agent):
    """Asks the ``shop_model`` about ``input.sku``; emits its answer."""

    @chat_model_connection
    @staticmethod
    def conn() -> ResourceDescriptor:
        return ResourceDescriptor(ScriptedChatModel, function="support.trace_agents:script")

    @action(InputEvent)
    @staticmethod
    def ask(event: InputEvent, ctx: RunnerContext) -> None:
        record = dict(event.input)
        if record["n"] == FAILING:
            record.pop("sku")
            record["missing"] = record["missing"]  # the user's bug
        ctx.send_event(ChatRequestEvent(
            model="shop_model", messages=[ChatMessage(content=f"tell me about {record['sku']}")]))

    @action(ChatResponseEvent)
    @staticmethod
    def answer(event: ChatResponseEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output={
            "answer": event.response.message.content if event.response else None}))


def shop() -> Shop:
    """A ``Shop`` with its model setup and tools."""
    agent = Shop()
    agent.add_resource("shop_model", ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="conn", model="shop-llm-1", tools=["stock", "price"]))
    agent.add_resource("stock", ResourceType.TOOL, stock)
    agent.add_resource("price", ResourceType.TOOL, price)
    return agent


def write_log(path: Path, runs: int, *, max_in_flight: int = 64) -> dict[str, Any]:
    """Run ``runs`` records (keys ``k0``.., one run each) into the event log at ``path``.

    Returns ``{"outputs": n, "errors": n, "dropped_completion_of": key}``.
    """
    records = [{"key": f"k{i}", "n": i, "sku": f"sku-{i}"} for i in range(runs)]
    result = (AgentsExecutionEnvironment.local(event_log=str(path), max_in_flight=max_in_flight)
              .from_list(records).apply(shop()).run())
    lines = path.read_bytes().splitlines()
    last_key = f"k{runs - 1}"
    kept = [ln for ln in lines if not (b'"run_completed"' in ln
                                       and orjson.loads(ln).get("key") == last_key)]
    assert len(kept) == len(lines) - 1, "the last run's completion was not in the log"
    path.write_bytes(b"\n".join(kept) + b"\n")
    return {"outputs": len(result.outputs), "errors": len(result.errors),
            "dropped_completion_of": last_key}


_CACHE: dict[int, Path] = {}


def cached_log(runs: int) -> Path:
    """``write_log(path, runs)`` once per test process (the trace tests share it)."""
    if runs not in _CACHE:
        import atexit
        import shutil
        import tempfile

        folder = tempfile.mkdtemp(prefix="trace-log-")
        atexit.register(shutil.rmtree, folder, True)
        path = Path(folder) / "events.jsonl"
        write_log(path, runs)
        _CACHE[runs] = path
    return _CACHE[runs]


def echo_script(request: Any) -> Any:
    """Answers ``echo: <the last user text>``."""
    return "echo: " + request.last_user_text


class Chatter(Agent):
    """Asks ``chat_model`` through ``ctx.chat`` from its own action; emits the answer."""

    @chat_model_connection
    @staticmethod
    def echo_conn() -> ResourceDescriptor:
        return ResourceDescriptor(ScriptedChatModel, function="support.trace_agents:echo_script")

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        response = await ctx.chat("chat_model", [ChatMessage(content=event.input["text"])])
        ctx.send_event(OutputEvent(output=response.message.content))


def chatter() -> Chatter:
    """A ``Chatter`` with its model setup."""
    agent = Chatter()
    agent.add_resource("chat_model", ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="echo_conn", model="echo-llm-2"))
    return agent
