"""The end of bounded input with every run's tool calls still running, in both modes.

The agent of ``test_observability_flink``'s MiniCluster job (a chat model asking for two
tools in one round) on the operator's fakes: thread mode (``PumpHarness``, keys switched in
one callback) and process mode (``Harness``, a drain timer per key). The tools are held
until the final watermark's drain first blocks, so every run is in flight when the input
ends and its calls complete only inside the drain; each input must still have its output.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

pytest.importorskip("pyflink")

from support import flink_agents_for_tests as fa  # noqa: E402
from test_operator_costs import Harness  # noqa: E402
from test_operator_pump import PumpHarness  # noqa: E402

from flink_agents_py.api import (  # noqa: E402
    ChatModelSetup,
    ResourceDescriptor,
    ResourceType,
)
from flink_agents_py.integrations.chat_models import ScriptedChatModel  # noqa: E402

GATE = threading.Event()
"""Holds every tool call until the drain blocks for the first time."""


def price_of(item: str) -> dict[str, Any]:
    """Return the price of an item.

    Args:
        item: the item's name.
    """
    assert GATE.wait(30), "the drain never waited for the calls in flight"
    return {"tool": "price_of", "item": item, "price": 100 + len(item)}


def stock_of(item: str) -> dict[str, Any]:
    """Return how many of an item are in stock.

    Args:
        item: the item's name.
    """
    assert GATE.wait(30), "the drain never waited for the calls in flight"
    return {"tool": "stock_of", "item": item, "stock": 7 * len(item)}


def held_tool_chat_agent() -> Any:
    agent = fa.ToolChatAgent()
    agent.add_resource("shop_connection", ResourceType.CHAT_MODEL_CONNECTION, ResourceDescriptor(
        ScriptedChatModel, function="support.flink_agents_for_tests:script_two_tools"))
    agent.add_resource("shop_model", ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="shop_connection", tools=["price_of", "stock_of"],
        prompt="You answer questions about a shop."))
    agent.add_resource("price_of", ResourceType.TOOL, price_of)
    agent.add_resource("stock_of", ResourceType.TOOL, stock_of)
    return agent


def open_gate_when_the_drain_blocks(core: Any) -> None:
    """Release the tools at the first wait of the operator's thread (the drain's)."""
    for name in ("wait_any", "wait_for"):
        waited = getattr(core, name)

        def wait(*args: Any, _waited: Any = waited) -> bool:
            GATE.set()
            return bool(_waited(*args))

        setattr(core, name, wait)


@pytest.mark.parametrize("mode", ["thread", "process"])
def test_every_input_has_its_output_when_the_tools_complete_inside_the_drain(mode):
    GATE.clear()
    h = (PumpHarness if mode == "thread" else Harness)(held_tool_chat_agent())
    try:
        for n, item in enumerate(fa.CHAT_ITEMS):
            h.feed(f"k{n % fa.CHAT_KEYS}", {"key": f"k{n % fa.CHAT_KEYS}", "item": item})
        assert h.out == [] and not GATE.is_set()  # every run waits for its tools
        open_gate_when_the_drain_blocks(h.op.core)
        h.end()  # the final watermark; processing-time timers are dropped
        errors = [o for o in h.out if isinstance(o, tuple)]
        assert not errors, errors
        assert sorted(o["item"] for o in h.out) == sorted(fa.CHAT_ITEMS)
        assert all(o["answer"] and not o["error"] for o in h.out)
        assert h.op.core.executor.pending == 0
    finally:
        GATE.set()
        h.close()
