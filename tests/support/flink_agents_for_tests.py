"""Agents, tools, scripts and job builders used by the Flink tests (tests/test_flink_host.py).

They live in an importable module (not a test file) because thread-mode workers import
agents, tools and chat scripts by reference. Running this module prints the outputs of the
small chat job as JSON: ``python -m support.flink_agents_for_tests thread|process``
(cwd=tests/), used to run process mode in a fresh JVM when needed.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from typing import Any

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    ChatMessage,
    ChatModelSetup,
    ChatRequestEvent,
    ChatResponseEvent,
    Event,
    InputEvent,
    MessageRole,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    ToolCall,
    action,
)
from flink_agents_py.integrations.chat_models import ScriptedChatModel
from flink_agents_py.testing import ScriptedRequest
from support.tool_messages import tool_value

# ------------------------------------------------------------------ the counter agent
N_RECORDS = 300
N_KEYS = 7


def fails(n: int) -> bool:
    return n % 50 == 7


def slow_double(n: int) -> int:
    """The slow durable call: sleeps 0-30 ms."""
    time.sleep(random.uniform(0.0, 0.03))
    return n * 2


def make_record(n: int) -> dict[str, Any]:
    return {"key": f"k{n % N_KEYS}", "n": int(n), "t_in": time.monotonic()}


class Counted(Event):
    """A user event: the start action's result, handled by a second action."""

    n: int
    doubled: int
    count: int
    t_in: float
    t_start: float


class CounterAgent(Agent):
    """Awaits a slow durable call, counts per key in short-term memory, emits via a 2nd action."""

    @action(InputEvent)
    @staticmethod
    async def start(event: InputEvent, ctx: RunnerContext) -> None:
        n = event.input["n"]
        t_start = time.monotonic()
        doubled = await ctx.durable_execute_async(slow_double, n)
        count = ctx.short_term_memory.get("count", 0) + 1
        # written before the failure check: a failed action's writes must not be applied
        ctx.short_term_memory.set("count", count)
        ctx.short_term_memory.set("last_n", n)
        if fails(n):
            raise ValueError(f"boom on n={n}")
        ctx.send_event(Counted(n=n, doubled=doubled, count=count, t_in=event.input["t_in"],
                               t_start=t_start))

    @action(Counted)
    @staticmethod
    def finish(event: Counted, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output={
            "key": ctx.key,
            **event.model_dump(include={"n", "doubled", "count", "t_in", "t_start"}),
            "event_type": event.type,
            # start's writes are visible here (applied when start completed)
            "memory_count": ctx.short_term_memory.get("count"),
            "memory_last_n": ctx.short_term_memory.get("last_n"),
            "t_done": time.monotonic(),
        }))


def counter_job(env: Any) -> list[tuple[str, Any]]:
    """Run CounterAgent over N_RECORDS numbers; returns tagged ("out"|"err", value) rows."""
    from pyflink.common import Types, WatermarkStrategy
    from pyflink.datastream.connectors.number_seq import NumberSequenceSource

    pickled = Types.PICKLED_BYTE_ARRAY()
    ds = env.from_source(NumberSequenceSource(0, N_RECORDS - 1), WatermarkStrategy.no_watermarks(),
                         "numbers").map(make_record, output_type=pickled)
    applied = AgentsExecutionEnvironment.flink(env).from_datastream(ds).apply(CounterAgent())
    both = applied.to_datastream().map(lambda o: ("out", o), output_type=pickled).union(
        applied.errors_datastream().map(lambda e: ("err", e), output_type=pickled))
    with both.execute_and_collect("counter-agent") as rows:
        return list(rows)


# ------------------------------------------------------------------ the chat agent with tools
CHAT_ITEMS = ["apple", "kiwi", "banana", "fig", "cherry", "plum", "melon", "lime"]
CHAT_KEYS = 3


def price_of(item: str) -> dict[str, Any]:
    """Return the price of an item.

    Args:
        item: the item's name.
    """
    time.sleep(0.02)  # slower than stock_of: the two calls complete out of order
    return {"tool": "price_of", "item": item, "price": 100 + len(item)}


def stock_of(item: str) -> dict[str, Any]:
    """Return how many of an item are in stock.

    Args:
        item: the item's name.
    """
    return {"tool": "stock_of", "item": item, "stock": 7 * len(item)}


def price_call_id(item: str) -> str:
    return f"price-{item}"


def stock_call_id(item: str) -> str:
    return f"stock-{item}"


def script_two_tools(req: ScriptedRequest) -> Any:
    """Ask for both tools in one round; then answer from the tool messages, by call id."""
    item = req.last_user_text.removeprefix("item: ")
    if not req.tool_results:
        return ChatMessage(role=MessageRole.ASSISTANT, tool_calls=[
            ToolCall(id=price_call_id(item), name="price_of", arguments={"item": item}),
            ToolCall(id=stock_call_id(item), name="stock_of", arguments={"item": item}),
        ])
    by_call = {m.tool_call_id: {"name": m.name, "content": tool_value(m)}
               for m in req.tool_results}
    return {"item": item, "by_call": by_call,
            "tools_offered": sorted(t.name for t in req.tools),
            "n_messages": len(req.messages)}


class ToolChatAgent(Agent):
    """InputEvent -> ChatRequestEvent (tool round) -> ChatResponseEvent -> OutputEvent."""

    @action(InputEvent)
    @staticmethod
    def ask(event: InputEvent, ctx: RunnerContext) -> None:
        sent = ctx.send_event(ChatRequestEvent(
            model="shop_model", messages=[ChatMessage(content=f"item: {event.input['item']}")]))
        ctx.sensory_memory.set("request_id", sent.id)
        ctx.sensory_memory.set("item", event.input["item"])

    @action(ChatResponseEvent)
    @staticmethod
    def answer(event: ChatResponseEvent, ctx: RunnerContext) -> None:
        r = event.response
        ctx.send_event(OutputEvent(output={
            "key": ctx.key, "item": ctx.sensory_memory.get("item"),
            "answers_request": event.request_id == ctx.sensory_memory.get("request_id"),
            "error": event.error,
            "answer": r.message.content if r else None,
            "finish_reason": r.finish_reason if r else None,
            "pid": os.getpid(),  # where the action ran (not compared across modes)
        }))


def tool_chat_agent() -> Agent:
    agent = ToolChatAgent()
    agent.add_resource("shop_connection", ResourceType.CHAT_MODEL_CONNECTION, ResourceDescriptor(
        ScriptedChatModel, function="support.flink_agents_for_tests:script_two_tools"))
    agent.add_resource("shop_model", ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="shop_connection", tools=["price_of", "stock_of"],
        prompt="You answer questions about a shop."))
    agent.add_resource("price_of", ResourceType.TOOL, price_of)
    agent.add_resource("stock_of", ResourceType.TOOL, stock_of)
    return agent


def chat_job(env: Any) -> list[Any]:
    """Run ToolChatAgent over CHAT_ITEMS (keys k0..k2); returns the outputs."""
    from pyflink.common import Types, WatermarkStrategy
    from pyflink.datastream.connectors.number_seq import NumberSequenceSource

    pickled = Types.PICKLED_BYTE_ARRAY()
    ds = env.from_source(NumberSequenceSource(0, len(CHAT_ITEMS) - 1),
                         WatermarkStrategy.no_watermarks(), "items").map(
        lambda n: {"key": f"k{n % CHAT_KEYS}", "item": CHAT_ITEMS[n]}, output_type=pickled)
    applied = AgentsExecutionEnvironment.flink(env).from_datastream(ds).apply(tool_chat_agent())
    both = applied.to_datastream().map(lambda o: ("out", o), output_type=pickled).union(
        applied.errors_datastream().map(lambda e: ("err", e), output_type=pickled))
    with both.execute_and_collect("tool-chat-agent") as rows:
        rows = list(rows)
    errors = [v for kind, v in rows if kind == "err"]
    if errors:
        raise AssertionError(f"chat job errors: {errors}")
    return [v for _, v in rows]


def main(argv: list[str]) -> int:
    """Print the chat job's outputs (sorted) as one JSON line, in the given execution mode."""
    from flink_agents_py.flink import create_stream_environment

    mode = argv[0] if argv else "thread"
    outputs = chat_job(create_stream_environment(execution_mode=mode))
    print("RESULT " + json.dumps(sorted(outputs, key=json.dumps)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
