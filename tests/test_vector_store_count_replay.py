"""A vector store's ``count`` after a restore: what the first execution counted, not the future.

``ctx.get_resource(name, VECTOR_STORE).count(...)`` was the store's own call, the only read of
the durable view that was not a durable call: made again after a restore, it counted the
documents the key's crashed attempt had added after the checkpoint and left out those it had
deleted, where ``size``, ``get`` and ``query`` beside it saw the store as of the checkpoint.
It is now recorded and bounded as they are (core-level restores, ``support.harness``).
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("chromadb")

from support.harness import KEY, call_of, new_core, run_to_end, snapshot_of  # noqa: E402
from support.probes import gate  # noqa: E402
from test_long_term_memory import (  # noqa: E402
    _crash_at_the_gate,
    _gated_plan,
    _restored,
    _wait_gate,
)

from flink_agents_py.api import Document, OutputEvent, ResourceType  # noqa: E402
from flink_agents_py.runtime import InMemoryKeyState  # noqa: E402
from flink_agents_py.runtime._resources import ResourceEnvironment  # noqa: E402

pytestmark = pytest.mark.timeout(120)

OLD_COUNT = {"on": False}
"""Whether ``_count_then_gate`` counts as the version before did (the store's own count)."""


@pytest.fixture(autouse=True)
def _new_count():
    OLD_COUNT["on"] = False


def _counts(kb: Any) -> dict[str, int]:
    return {"all": kb.count("docs"), "x0": kb.count("docs", {"x": 0}), "size": kb.size("docs")}


async def _gate_count_then_change(event: Any, ctx: Any) -> None:
    kb = ctx.get_resource("kb", ResourceType.VECTOR_STORE)
    await ctx.durable_execute_async(_wait_gate, True)  # the checkpoint is taken here
    seen = _counts(kb)
    op = event.input["op"]
    if op == "add":
        kb.add(Document(id="t9", content="ticket 9", metadata={"x": 0}), "docs")
    elif op == "delete":
        kb.delete(ids=["t0"], collection_name="docs")
    else:
        kb.update(Document(id="t0", content="ticket 0 (moved)", metadata={"x": 1}), "docs")
    ctx.send_event(OutputEvent(output=seen))


def _plan_with_two_tickets(tmp_path: Any, fn: Any) -> Any:
    plan = _gated_plan(tmp_path, fn)
    store = ResourceEnvironment(plan).get("kb", ResourceType.VECTOR_STORE)
    store.add(Document(id="t0", content="ticket 0", metadata={"x": 0}), "docs")
    store.add(Document(id="t1", content="ticket 1", metadata={"x": 1}), "docs")
    return plan


@pytest.mark.parametrize("op", ["add", "delete", "update"])
def test_a_count_made_again_after_a_restore_does_not_see_what_the_crashed_attempt_changed(
        tmp_path, probes, op):
    plan = _plan_with_two_tickets(tmp_path, _gate_count_then_change)
    snapshot, crashed = _crash_at_the_gate(plan, {"op": op})
    assert crashed == [{"all": 2, "x0": 1, "size": 2}]
    # before: {"all": 3, "x0": 2} after an add, {"all": 1, "x0": 0} after a delete, and
    # {"x0": 0} after an update moving t0 out of the filter (size alone was right)
    assert _restored(plan, snapshot) == crashed


async def _count_then_gate(event: Any, ctx: Any) -> None:
    kb = ctx.get_resource("kb", ResourceType.VECTOR_STORE)
    seen = _counts(kb) if not OLD_COUNT["on"] else {
        "all": kb.resource.count("docs"), "x0": kb.resource.count("docs", {"x": 0}),
        "size": kb.size("docs")}  # (as the version before: the store's own count)
    await ctx.durable_execute_async(_wait_gate, True)
    ctx.send_event(OutputEvent(output=seen))


def _snapshot_at_the_gate(plan: Any, record: dict[str, Any]) -> InMemoryKeyState:
    core = new_core(plan)
    try:
        gate().clear()
        state = InMemoryKeyState()
        core.on_input(KEY, record, state)
        assert any(c is not None and not c.done for c in
                   (call_of(state, "go", n) for n in range(4)))
        return snapshot_of(state, "json")
    finally:
        gate().set()
        core.close()


def test_a_count_recorded_before_the_checkpoint_replays_its_recorded_value(tmp_path, probes):
    """The count is made, then the store changes (another writer), then the restore: the
    action gets what it counted, as it does for ``size``."""
    plan = _plan_with_two_tickets(tmp_path, _count_then_gate)
    snapshot = _snapshot_at_the_gate(plan, {"x": 0})
    assert [call_of(snapshot, "go", n).target.rsplit(".", 1)[-1] for n in range(3)] == \
        ["count", "count", "size"]
    store = ResourceEnvironment(plan).get("kb", ResourceType.VECTOR_STORE)
    store.add(Document(id="t5", content="ticket 5", metadata={"x": 0}), "docs")
    gate().set()
    assert _restored(plan, snapshot) == [{"all": 2, "x0": 1, "size": 2}]


def test_a_checkpoint_whose_counts_were_not_recorded_replays_its_calls_in_place(
        tmp_path, probes, caplog):
    """A checkpoint of the version whose count was not a durable call: its records hold
    ``size`` at c0 and the gated call at c1. Restored, the counts (now durable calls) must
    not take those places: no divergence, nothing replayed to another call."""
    plan = _plan_with_two_tickets(tmp_path, _count_then_gate)
    OLD_COUNT["on"] = True
    snapshot = _snapshot_at_the_gate(plan, {"x": 0})
    assert call_of(snapshot, "go", 0).target.endswith(".size")
    OLD_COUNT["on"] = False  # the new code restores it
    gate().set()
    core = new_core(plan)
    try:
        with caplog.at_level("WARNING", logger="flink_agents_py.runtime"):
            outputs, errors = run_to_end(core, snapshot)
    finally:
        core.close()
    assert errors == []
    assert outputs == [{"all": 2, "x0": 1, "size": 2}]
    assert core.counters["replay_divergences"] == 0
    assert not [r for r in caplog.records if "arguments changed" in r.getMessage()]
