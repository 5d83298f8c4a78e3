"""A memory set's ``limit`` is a whole number >= 0, or ``None`` for every item of ``get``.

Failed before its fix: ``get(limit=None)`` (every item, as ``VectorStore.get`` reads it)
raised ``TypeError: unsupported operand type(s) for +: 'NoneType' and 'int'`` from inside the
runtime; ``get(limit=-1)`` gave every item but the last, silently; ``search(query, None)``
gave no item, silently; ``search(query, -1)`` failed in the store's recorded call.

Also failed before its fix: after an action deleted an item, its ``search(query, n)`` asked
the store for ``n`` items and left the deleted one out, so it gave fewer than ``n`` (none,
when it had deleted the closest) while the set held more.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("chromadb")

REPO = Path(__file__).resolve().parents[1]

PROGRAM = '''
import json, sys
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (Agent, EmbeddingModelSetup, InputEvent, LongTermMemoryOptions,
    OutputEvent, ResourceDescriptor, ResourceType)
from flink_agents_py.integrations.embedding_models import HashingEmbeddingModel
from flink_agents_py.integrations.vector_stores import ChromaVectorStore


class Notes(Agent):
    def __init__(self, path):
        super().__init__()
        self.add_resource("hashing", ResourceType.EMBEDDING_MODEL_CONNECTION,
                          HashingEmbeddingModel(dimension=16))
        self.add_resource("emb", ResourceType.EMBEDDING_MODEL,
                          ResourceDescriptor(EmbeddingModelSetup, connection="hashing"))
        self.add_resource("kb", ResourceType.VECTOR_STORE,
                          ResourceDescriptor(ChromaVectorStore, embedding_model="emb",
                                             persist_directory=path))
        self.add_action("note", [InputEvent], Notes.note)
        self.set_config(**{LongTermMemoryOptions.VECTOR_STORE: "kb"})

    @staticmethod
    async def note(event, ctx):
        notes = ctx.long_term_memory.get_memory_set("notes")
        if event.input["step"] == 1:
            notes.add(["likes red", "size 9", "lives in Oslo"])
            ctx.send_event(OutputEvent(output={}))
            return
        if event.input["step"] == 3:  # forget the closest, then search again
            [closest] = notes.search("size 9", 1)
            notes.delete(closest.id)
            ctx.send_event(OutputEvent(output={
                "closest": closest.value,
                "next": [i.value for i in notes.search("size 9", 1)],
                "next_two": [i.value for i in await notes.asearch("size 9", 2)]}))
            return
        out = {"all": [i.value for i in notes.get(limit=None)],
               "two": len(notes.get(limit=2)),
               "compat_all": len(ctx.long_term_memory.get(notes, limit=None))}
        for name, call in (("get_-1", lambda: notes.get(limit=-1)),
                           ("get_true", lambda: notes.get(limit=True)),
                           ("search_none", lambda: notes.search("size", None)),
                           ("search_-1", lambda: notes.search("size", -1))):
            try:
                out[name] = len(call())
            except ValueError as e:
                out[name] = str(e)
        ctx.send_event(OutputEvent(output=out))


records = [{"key": "u", "step": n} for n in (1, 2, 3)]
result = AgentsExecutionEnvironment.local().from_list(records).apply(Notes(sys.argv[1])).run()
assert not result.errors, result.errors
print(json.dumps(result.outputs))
'''


def test_a_users_program_reads_every_item_and_is_told_of_a_bad_limit(tmp_path):
    script = tmp_path / "notes.py"
    script.write_text(textwrap.dedent(PROGRAM))
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "db")], cwd=tmp_path,
                          capture_output=True, text=True, timeout=180,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-3000:]
    _, read, forgot = json.loads(done.stdout.splitlines()[-1])
    assert read["all"] == ["likes red", "size 9", "lives in Oslo"]  # oldest first
    assert read["two"] == 2 and read["compat_all"] == 3
    assert read["get_-1"] == ("memory set 'notes' get: limit must be a whole number >= 0, "
                              "got -1 (get(limit=None) reads every item)")
    assert "got True" in read["get_true"]
    assert read["search_none"] == ("memory set 'notes' search: limit must be a whole number "
                                   ">= 0, got None")
    assert "got -1" in read["search_-1"]
    # the action's own delete: the next closest items, as many as asked
    assert forgot["closest"] == "size 9"
    assert len(forgot["next"]) == 1 and forgot["next"][0] != "size 9"
    assert sorted(forgot["next_two"]) == ["likes red", "lives in Oslo"]


def run_two_steps(tmp_path, action):
    """Run ``action`` (on InputEvent) for records ``step`` 1 and 2 of one key, long-term
    memory in a Chroma store under ``tmp_path``; the local runner's result."""
    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.api import (
        Agent,
        EmbeddingModelSetup,
        InputEvent,
        LongTermMemoryOptions,
        ResourceDescriptor,
        ResourceType,
    )
    from flink_agents_py.integrations.embedding_models import HashingEmbeddingModel
    from flink_agents_py.integrations.vector_stores import ChromaVectorStore

    agent = Agent()
    agent.add_resource("hashing", ResourceType.EMBEDDING_MODEL_CONNECTION,
                       HashingEmbeddingModel(dimension=8))
    agent.add_resource("emb", ResourceType.EMBEDDING_MODEL,
                       ResourceDescriptor(EmbeddingModelSetup, connection="hashing"))
    agent.add_resource("kb", ResourceType.VECTOR_STORE,
                       ResourceDescriptor(ChromaVectorStore, embedding_model="emb",
                                          persist_directory=str(tmp_path / "db")))
    agent.add_action(action.__name__, [InputEvent], action)
    agent.set_config(**{LongTermMemoryOptions.VECTOR_STORE: "kb"})
    records = [{"key": "u", "step": 1}, {"key": "u", "step": 2}]
    return AgentsExecutionEnvironment.local().from_list(records).apply(agent).run()


FILTERS = (({"ok": 1}, []), ({"ok": True}, ["a"]), ({"n": 1}, ["b", "c"]),
           ({"n": 1.0}, ["b", "c"]), ({"n": True}, []), ({"gone": 1}, []))


def test_a_filter_finds_the_actions_own_adds_as_it_finds_them_once_stored(tmp_path):
    """Failed before its fix: the action's own adds were matched with Python's ``==``, where
    ``True == 1``: ``get(filters={"ok": 1})`` found an item added with ``{"ok": True}``
    until the action completed, and never again (the store tells a bool from a number)."""
    from flink_agents_py.api import OutputEvent

    def tag(event, ctx):
        facts = ctx.long_term_memory.get_memory_set("facts")
        if event.input["step"] == 1:
            facts.add(["a", "b", "c"], [{"ok": True}, {"n": 1}, {"n": 1.0}])
        ctx.send_event(OutputEvent(output=[sorted(i.value for i in facts.get(filters=f))
                                           for f, _ in FILTERS]))

    result = run_two_steps(tmp_path, tag)
    assert not result.errors
    pending, stored = result.outputs
    assert stored == [found for _, found in FILTERS]  # the store's matching
    assert pending == stored


def test_ids_given_as_numbers_read_and_delete_as_their_text(tmp_path):
    """Failed before its fix: ``get(ids=[1])`` failed inside the store ("Expected ID to be a
    str") while ``delete(ids=[1])`` took the id as its text, and ``delete(5)`` (one id, not
    text) failed with ``TypeError: 'int' object is not iterable``."""
    from flink_agents_py.api import OutputEvent

    def use(event, ctx):
        facts = ctx.long_term_memory.get_memory_set("facts")
        if event.input["step"] == 1:
            ctx.short_term_memory.set("ids", facts.add(["a", "b"]))
            ctx.send_event(OutputEvent(output=None))
            return
        ids = ctx.short_term_memory.get("ids")
        facts.delete(12345)  # no such item: nothing to delete, no error
        ctx.send_event(OutputEvent(output={
            "by_number": [i.value for i in facts.get(ids=[12345, ids[1]])],
            "one": [i.value for i in facts.get(ids=ids[0])]}))

    result = run_two_steps(tmp_path, use)
    assert not result.errors, result.errors
    assert result.outputs[1] == {"by_number": ["b"], "one": ["a"]}
