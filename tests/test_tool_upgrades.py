"""A tool renamed (or removed) between a snapshot and its restore, while a chat's tool round
was in flight.

The model's recorded turn asks for the old tool name; the new code has no tool of that name
and refuses the request without a durable call. The old code's recorded call to it (done or
only started) must not be dropped with a warning while the model is told "no tool named ...":
the round diverges, naming the call and the missing tool, whether or not another call of the
round comes after it. Neither tool runs after the restore in its place (local runner,
snapshots through JSON).
"""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    ChatMessage,
    ChatModelSetup,
    InputEvent,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    action,
)
from flink_agents_py.testing import CallCounter, model_from_function, tool_call, tool_calls

pytestmark = pytest.mark.timeout(120)

RAN = CallCounter()
HOLD = {"price": threading.Event(), "stock": threading.Event()}


def price_of(item: str) -> dict:
    """The price of an item.

    Args:
        item: the item's name.
    """
    RAN.count("price_of")
    assert HOLD["price"].wait(10), "never released"
    return {"item": item, "price": len(item)}


def cost_of(item: str) -> dict:
    """The cost of an item.

    Args:
        item: the item's name.
    """
    RAN.count("cost_of")
    return {"item": item, "cost": 100 * len(item)}


def stock_of(item: str) -> dict:
    """The stock of an item (a tool both versions have).

    Args:
        item: the item's name.
    """
    RAN.count("stock_of")
    assert HOLD["stock"].wait(10), "never released"
    return {"item": item, "stock": 3}


def answer(request: Any) -> Any:
    """Asks for the shop's price tool and ``stock_of``, then answers with what it got."""
    results = request.tool_results
    if not results:
        # in the order the setup offers them: the price tool last, or first
        return tool_calls(*(tool_call(t.name, f"t{i}", item="apple")
                            for i, t in enumerate(request.tools)))
    return "got " + " | ".join(m.content for m in results)


class Shop(Agent):
    @action(InputEvent)
    @staticmethod
    async def ask(event: InputEvent, ctx: RunnerContext) -> None:
        reply = await ctx.chat("model", [ChatMessage(content="price of apple?")])
        ctx.send_event(OutputEvent(output=reply.message.content))


def shop(tool_name: str, tool: Any, last: bool = False) -> Shop:
    agent = Shop()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, model_from_function(answer))
    agent.add_resource("model", ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="conn",
        tools=["stock_of", tool_name] if last else [tool_name, "stock_of"]))
    agent.add_resource(tool_name, ResourceType.TOOL, tool)
    agent.add_resource("stock_of", ResourceType.TOOL, stock_of)
    return agent


def _tool_records(snap: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found = {}
    for entry in snap["keys"]:
        for rec in ((entry.get("run") or {}).get("inflight") or {}).values():
            for call in (rec.get("calls") or {}).values():
                if call.get("kind") == "tool":
                    found[call["target"]] = call
    return found


def _snapshot(done: bool, last: bool = False) -> tuple[dict[str, Any], list[Any]]:
    """The old code's state once its ``price_of`` call has started (``done``: its outcome
    is recorded, while ``stock_of`` runs)."""
    RAN.reset()
    held = HOLD["stock"] if done else HOLD["price"]
    for gate in HOLD.values():
        gate.clear() if gate is held else gate.set()
    saved: list[dict[str, Any]] = []

    def on_step(job: Any) -> None:
        snap = job.snapshot()
        price = _tool_records(snap).get("price_of")
        if price is not None and not saved and bool(price["done"]) == done:
            saved.append(json.loads(json.dumps(snap)))
        if saved:
            held.set()

    job = AgentsExecutionEnvironment.local().from_list([{"key": "a"}]).apply(
        shop("price_of", price_of, last))
    result = job.run(on_step=on_step)
    assert saved, "the run never reached the point"
    assert RAN["price_of"] == 1 and RAN["stock_of"] == 1
    return saved[0], result.outputs


def _restore(snap: dict[str, Any], agent: Agent) -> Any:
    RAN.reset()
    job = AgentsExecutionEnvironment.local().from_list([{"key": "a"}]).apply(agent)
    job.restore(snap)
    return job.run()


@pytest.mark.parametrize("done", [True, False], ids=["recorded", "started"])
@pytest.mark.parametrize("last", [True, False], ids=["alone", "before_another_tool"])
def test_a_tool_call_of_a_renamed_tool_diverges_naming_it(done, last):
    snap, fault_free = _snapshot(done=done, last=last)
    assert "no tool named" not in fault_free[0]
    result = _restore(snap, shop("cost_of", cost_of, last=last))
    assert result.outputs == []
    divergences = [e for e in result.errors if e.error_type == "ReplayDivergenceError"]
    assert divergences, result.errors
    message = divergences[0].message
    assert "'price_of'" in message and f"_tool_call_action/c{int(last)}" in message
    if last:  # alone: no other call takes its identity (before another: that one diverges)
        assert "recorded tool 'price_of', now calling none" in message
        assert "no tool or offered sub-agent named so" in message
    else:
        assert "recorded tool 'price_of', now calling tool 'stock_of'" in message
    assert RAN["price_of"] == 0 and RAN["cost_of"] == 0
    assert not [o for o in result.outputs if "no tool named" in str(o)]


def test_the_same_tool_replays_its_recorded_call():
    snap, fault_free = _snapshot(done=True)
    result = _restore(snap, shop("price_of", price_of))
    assert result.errors == [] and result.outputs == fault_free
    assert RAN.as_dict() == {"stock_of": 1}


# -- the same tool name, its parameters changed ---------------------------------------------
def price_by_sku(sku: str) -> dict:
    """The price of an item, by its SKU (the parameter ``item`` renamed).

    Args:
        sku: the item's SKU.
    """
    RAN.count("price_by_sku")
    return {"sku": sku, "price": 99}


def price_in(item: str, currency: str = "EUR") -> dict:
    """The price of an item (a new optional parameter: a compatible change).

    Args:
        item: the item's name.
        currency: the currency.
    """
    RAN.count("price_in")
    return {"item": item, "price": len(item), "currency": currency}


@pytest.mark.parametrize("last", [True, False], ids=["alone", "before_another_tool"])
def test_a_started_call_whose_tool_now_refuses_its_arguments_diverges(last):
    """The recorded model turn asked ``price_of(item=...)``; the call had started before the
    restore; the new code's ``price_of`` takes ``sku``. Running it again would only tell the
    model the arguments do not fit, and drop the started call (it may have had effects):
    the round diverges naming the call, the tool and what it refuses, and runs nothing."""
    snap, _ = _snapshot(done=False, last=last)
    result = _restore(snap, shop("price_of", price_by_sku, last=last))
    assert result.outputs == []
    [div] = [e for e in result.errors if e.error_type == "ReplayDivergenceError"]
    assert f"_tool_call_action/c{int(last)}" in div.message and "'price_of'" in div.message
    assert "had started before the restore" in div.message and "sku" in div.message
    assert RAN["price_by_sku"] == 0


def test_a_started_or_recorded_call_whose_tool_still_takes_its_arguments_replays():
    """A compatible change (a new optional parameter): a recorded call replays its outcome,
    a started one runs again with the recorded arguments; a recorded call of a tool that
    refuses them now replays too (it is not made again)."""
    snap, fault_free = _snapshot(done=True)
    result = _restore(snap, shop("price_of", price_by_sku))
    assert result.errors == [] and result.outputs == fault_free
    snap, _ = _snapshot(done=False)
    result = _restore(snap, shop("price_of", price_in))
    assert result.errors == [] and RAN["price_in"] == 1
    assert '"currency":"EUR"' in result.outputs[0]
