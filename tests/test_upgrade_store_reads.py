"""New code restored from a checkpoint, with a call inserted before a vector-store add that
the crashed attempt made after the checkpoint: a read the new code makes before its own add
must not see that add's document (the "a re-made read sees the future" defect, across an
upgrade). Before, a read of the execution showed its own documents by call position alone
(written at a position before the read's), which the inserted call shifts: the read saw a
document the restored run had not written yet. Now it shows them only where this attempt
made (or replayed) the same write of the store at that position (its digest: not another
add that the new code makes first).
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("chromadb")

from test_long_term_memory import (  # noqa: E402
    _crash_at_the_gate,
    _gated_plan,
    _restored,
    _wait_gate,
)

from flink_agents_py.api import (  # noqa: E402
    Document,
    InputEvent,
    OutputEvent,
    ResourceType,
    VectorStoreQuery,
)

DEPLOYED = {"version": 1}


@pytest.fixture(autouse=True)
def _old_code():
    DEPLOYED.update(version=1)


def audit(tag: str) -> str:
    return tag


def _seen(kb: Any) -> dict[str, Any]:
    found = kb.get(collection_name="docs", limit=None)
    hits = kb.query(VectorStoreQuery(query_text="ticket", limit=5, collection_name="docs"))
    return {"got": sorted(d.content for d in found), "size": kb.size("docs"),
            "hits": sorted(d.content for d in hits.documents)}


async def _file_then_read(event: InputEvent, ctx: Any) -> None:
    """Old code: gate, add, read. New code (2): an audit call inserted before the add,
    read before the add; (3): the audit inserted, then add and read as before."""
    kb = ctx.get_resource("kb", ResourceType.VECTOR_STORE)
    await ctx.durable_execute_async(_wait_gate, True)
    version = DEPLOYED["version"]
    if version > 1:
        await ctx.durable_execute_async(audit, "inserted")
    if version == 2:
        before = _seen(kb)
        kb.add(Document(id="t9", content="ticket 9"), "docs")
    else:
        kb.add(Document(id="t9", content="ticket 9"), "docs")
        before = _seen(kb)
    ctx.send_event(OutputEvent(output=before))


def _store_with_one_ticket(plan: Any) -> None:
    from flink_agents_py.runtime._resources import ResourceEnvironment
    store = ResourceEnvironment(plan).get("kb", ResourceType.VECTOR_STORE)
    store.add(Document(id="t0", content="ticket 0"), "docs")


def test_a_read_before_the_re_made_add_does_not_see_the_crashed_attempts_document(
        tmp_path, probes):
    plan = _gated_plan(tmp_path, _file_then_read)
    _store_with_one_ticket(plan)
    snapshot, crashed = _crash_at_the_gate(plan, {"x": 0})
    both = {"got": ["ticket 0", "ticket 9"], "size": 2, "hits": ["ticket 0", "ticket 9"]}
    assert crashed == [both]
    DEPLOYED["version"] = 2
    assert _restored(plan, snapshot) == [
        {"got": ["ticket 0"], "size": 1, "hits": ["ticket 0"]}]


def test_a_read_after_the_re_made_add_at_its_new_position_sees_it(tmp_path, probes):
    plan = _gated_plan(tmp_path, _file_then_read)
    _store_with_one_ticket(plan)
    snapshot, _crashed = _crash_at_the_gate(plan, {"x": 0})
    DEPLOYED["version"] = 3
    both = {"got": ["ticket 0", "ticket 9"], "size": 2, "hits": ["ticket 0", "ticket 9"]}
    assert _restored(plan, snapshot) == [both]


def test_the_same_code_reads_after_its_own_add_as_before(tmp_path, probes):
    plan = _gated_plan(tmp_path, _file_then_read)
    _store_with_one_ticket(plan)
    snapshot, crashed = _crash_at_the_gate(plan, {"x": 0})
    assert _restored(plan, snapshot) == crashed


async def _two_adds(event: InputEvent, ctx: Any) -> None:
    """Old code: gate, add ticket 8, add ticket 9, read. New code: ticket 9 first, read,
    then ticket 8."""
    kb = ctx.get_resource("kb", ResourceType.VECTOR_STORE)
    await ctx.durable_execute_async(_wait_gate, True)
    first, second = ("t9", "t8") if DEPLOYED["version"] == 2 else ("t8", "t9")
    kb.add(Document(id=first, content=f"ticket {first[1]}"), "docs")
    if DEPLOYED["version"] == 2:
        before = _seen(kb)
        kb.add(Document(id=second, content=f"ticket {second[1]}"), "docs")
    else:
        kb.add(Document(id=second, content=f"ticket {second[1]}"), "docs")
        before = _seen(kb)
    ctx.send_event(OutputEvent(output=before))


def test_another_add_at_the_crashed_attempts_position_does_not_show_its_document(
        tmp_path, probes):
    """The new code's first add is another one (ticket 9, not 8): at the position where the
    crashed attempt added ticket 8, so the position alone would show ticket 8 too."""
    plan = _gated_plan(tmp_path, _two_adds)
    _store_with_one_ticket(plan)
    snapshot, crashed = _crash_at_the_gate(plan, {"x": 0})
    assert crashed == [{"got": ["ticket 0", "ticket 8", "ticket 9"], "size": 3,
                        "hits": ["ticket 0", "ticket 8", "ticket 9"]}]
    DEPLOYED["version"] = 2
    assert _restored(plan, snapshot) == [
        {"got": ["ticket 0", "ticket 9"], "size": 2, "hits": ["ticket 0", "ticket 9"]}]


async def _delete_then_read(event: InputEvent, ctx: Any) -> None:
    """Old code: gate, delete ticket 0, read. New code: an audit call inserted first, read
    before the delete."""
    kb = ctx.get_resource("kb", ResourceType.VECTOR_STORE)
    await ctx.durable_execute_async(_wait_gate, True)
    if DEPLOYED["version"] == 2:
        await ctx.durable_execute_async(audit, "inserted")
        before = _seen(kb)
        kb.delete(ids=["t0"], collection_name="docs")
    else:
        kb.delete(ids=["t0"], collection_name="docs")
        before = _seen(kb)
    ctx.send_event(OutputEvent(output=before))


def test_a_read_before_the_re_made_delete_still_sees_the_document(tmp_path, probes):
    """The crashed attempt deleted ticket 0 after the checkpoint, at the position where the
    new code makes its inserted call: the new code's read, before its own delete, sees
    ticket 0 as the checkpoint had it (its kept prior), not the crashed attempt's delete."""
    plan = _gated_plan(tmp_path, _delete_then_read)
    _store_with_one_ticket(plan)
    snapshot, crashed = _crash_at_the_gate(plan, {"x": 0})
    assert crashed == [{"got": [], "size": 0, "hits": []}]
    DEPLOYED["version"] = 2
    assert _restored(plan, snapshot) == [
        {"got": ["ticket 0"], "size": 1, "hits": ["ticket 0"]}]
