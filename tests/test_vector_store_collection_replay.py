"""A vector store's collection calls across a restore: made once, replayed after.

``delete_collection``, ``get_collection`` and ``get_or_create_collection`` of the durable
view (``ctx.get_resource(name, VECTOR_STORE)``) were the store's own calls, not recorded: an
action re-entered after a restore deleted its collection a second time, with the documents
written to it since by others, and read a collection as its crashed attempt had left it.
They are durable calls now (core-level restores, ``support.harness``).
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("chromadb")

from support.harness import KEY, call_of, new_core, run_to_end, snapshot_of  # noqa: E402
from support.probes import gate  # noqa: E402
from test_long_term_memory import _gated_plan, _wait_gate  # noqa: E402

from flink_agents_py.api import (  # noqa: E402
    CollectionNotFoundError,
    Document,
    OutputEvent,
    ResourceType,
)
from flink_agents_py.runtime import InMemoryKeyState  # noqa: E402
from flink_agents_py.runtime._resources import ResourceEnvironment  # noqa: E402

pytestmark = pytest.mark.timeout(120)

OLD_CALLS = {"on": False}
"""Whether ``_drop_then_gate`` calls the store itself, as the version before the fix did."""


@pytest.fixture(autouse=True)
def _new_calls():
    OLD_CALLS["on"] = False


async def _drop_then_gate(event: Any, ctx: Any) -> None:
    kb = ctx.get_resource("kb", ResourceType.VECTOR_STORE)
    store = kb.resource if OLD_CALLS["on"] else kb
    try:
        before = store.get_collection("scratch").name
    except CollectionNotFoundError:
        before = None
    made = store.get_or_create_collection("made").name
    dropped = store.delete_collection("scratch")
    await ctx.durable_execute_async(_wait_gate, True)  # the checkpoint is taken here
    ctx.send_event(OutputEvent(output={"before": before, "made": made, "dropped": dropped}))


def _store(plan: Any) -> Any:
    """A store of the plan's own (one chroma client a store: a deleted collection it held
    is not read from another's cache)."""
    return ResourceEnvironment(plan).get("kb", ResourceType.VECTOR_STORE)


def _checkpoint(plan: Any) -> tuple[InMemoryKeyState, list[Any]]:
    """The key's state once the gated call is in flight, and the first attempt's outputs."""
    core = new_core(plan)
    try:
        gate().clear()
        state = InMemoryKeyState()
        core.on_input(KEY, {"x": 0}, state)
        snapshot = snapshot_of(state, "json")
        gate().set()
        first, errors = run_to_end(core, state)
    finally:
        gate().set()
        core.close()
    assert errors == []
    return snapshot, first


def test_a_collection_deleted_before_the_checkpoint_is_not_deleted_again(tmp_path, probes):
    plan = _gated_plan(tmp_path, _drop_then_gate)
    _store(plan).add(Document(id="a", content="old", metadata={"x": 0}), "scratch")
    snapshot, first = _checkpoint(plan)
    assert first == [{"before": "scratch", "made": "made", "dropped": True}]
    recorded = [c.target.rsplit(".", 1)[-1] if c else None
                for c in (call_of(snapshot, "go", n) for n in range(3))]
    # after the run, another writer fills the collection again
    _store(plan).add(Document(id="b", content="written since", metadata={"x": 0}), "scratch")
    core = new_core(plan)
    try:
        outputs, errors = run_to_end(core, snapshot)
    finally:
        core.close()
    assert errors == [] and outputs == first  # what the first attempt saw and did
    assert _store(plan).size("scratch") == 1  # before: 0, deleted a second time
    assert core.counters["calls_replayed"] == 3
    assert recorded == ["get_collection", "get_or_create_collection", "delete_collection"]


async def _look_then_gate(event: Any, ctx: Any) -> None:
    kb = ctx.get_resource("kb", ResourceType.VECTOR_STORE)
    store = kb.resource if OLD_CALLS["on"] else kb
    try:
        before = store.get_collection("scratch").name
    except CollectionNotFoundError:
        before = None
    made = store.get_or_create_collection("made").name
    await ctx.durable_execute_async(_wait_gate, True)  # the checkpoint is taken here
    ctx.send_event(OutputEvent(output={"before": before, "made": made}))


def test_a_checkpoint_whose_collection_reads_were_not_recorded_replays_in_place(
        tmp_path, probes):
    """A checkpoint of the version before: the gated call is at c0. The restored code's
    collection reads (now durable calls) must not take its place: no divergence."""
    plan = _gated_plan(tmp_path, _look_then_gate)
    _store(plan).add(Document(id="a", content="old", metadata={"x": 0}), "scratch")
    OLD_CALLS["on"] = True
    snapshot, first = _checkpoint(plan)
    assert call_of(snapshot, "go", 0).target.endswith("_wait_gate")
    OLD_CALLS["on"] = False
    core = new_core(plan)
    try:
        outputs, errors = run_to_end(core, snapshot)
    finally:
        core.close()
    assert errors == [] and core.counters["replay_divergences"] == 0
    assert outputs == first == [{"before": "scratch", "made": "made"}]


def test_a_checkpoint_whose_collection_delete_was_not_recorded_diverges_before_deleting(
        tmp_path, probes):
    """A checkpoint of the version before: the gated call is at c0, after unrecorded
    collection calls. The restored code's delete, now a durable call, meets that record at
    its place: the action diverges, naming the call, before it deletes a second time."""
    plan = _gated_plan(tmp_path, _drop_then_gate)
    _store(plan).add(Document(id="a", content="old", metadata={"x": 0}), "scratch")
    OLD_CALLS["on"] = True
    snapshot, _first = _checkpoint(plan)
    assert call_of(snapshot, "go", 0).target.endswith("_wait_gate")
    OLD_CALLS["on"] = False
    _store(plan).add(Document(id="b", content="written since", metadata={"x": 0}), "scratch")
    core = new_core(plan)
    try:
        outputs, errors = run_to_end(core, snapshot)
    finally:
        core.close()
    assert outputs == []
    [error] = errors
    assert error.error_type == "ReplayDivergenceError" and "r0/go/c0" in error.message
    assert "delete_collection" in error.message
    assert _store(plan).size("scratch") == 1  # not deleted a second time
