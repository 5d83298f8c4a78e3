"""Short-term memory behaves as a program ported from Apache Flink Agents expects.

Each test failed before its fix:

- listing short-term memory (``get_field_names``, ``get_fields``, iteration, ``to_dict``)
  showed the runtime's own entries: ``_flink_agents_py`` (the key's memory epoch) on the
  first record of any agent that declares a vector store, ``_budget`` once a budgeted chat
  ran; a program checking for a first visit (``not memory.get_field_names()``) or copying
  its fields out saw them;
- a value memory cannot keep (a ``set``) raised a ``SerializationError`` that was not a
  ``TypeError``, which Flink Agents' memory raises (``except TypeError`` missed it);
- ``is_exist("")`` / ``"a..b" in memory`` raised ``ValueError``; Flink Agents answers
  ``False``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from flink_agents_py.api import SerializationError
from flink_agents_py.runtime.context._memory import ActionMemory

REPO = Path(__file__).resolve().parents[1]

PORTED = '''
import json
from flink_agents_py.compat import (Agent, AgentsExecutionEnvironment, Event, EventType,
    InputEvent, OutputEvent, ResourceDescriptor, ResourceName, RunnerContext, action,
    embedding_model_connection, embedding_model_setup, vector_store)


class Visits(Agent):
    @embedding_model_connection
    @staticmethod
    def hashing_connection() -> ResourceDescriptor:
        return ResourceDescriptor(clazz="flink_agents_py.integrations.embedding_models."
                                        "HashingEmbeddingModel", dimension=8)

    @embedding_model_setup
    @staticmethod
    def hashing_embedding() -> ResourceDescriptor:
        return ResourceDescriptor(clazz=ResourceName.EmbeddingModel.OLLAMA_SETUP,
                                  connection="hashing_connection", model="hashing")

    @vector_store
    @staticmethod
    def docs() -> ResourceDescriptor:
        return ResourceDescriptor(clazz=ResourceName.VectorStore.CHROMA_VECTOR_STORE,
                                  embedding_model="hashing_embedding", collection="docs")

    @action(EventType.InputEvent)
    @staticmethod
    def visit(event: Event, ctx: RunnerContext) -> None:
        memory = ctx.get_short_term_memory()
        first = not memory.get_field_names()
        try:
            memory.set("tags", {"new", "sale"})  # a set: no checkpoint-stable form
            kept = "set"
        except TypeError:
            memory.set("tags", sorted({"new", "sale"}))
            kept = "list"
        memory.set("visits", (memory.get("visits") or 0) + 1)
        ctx.send_event(OutputEvent(output={
            "first": first, "kept": kept, "fields": memory.get_fields(),
            "names": list(memory), "exists": [memory.is_exist(""), memory.is_exist("a..b"),
                                              "tags" in memory]}))


env = AgentsExecutionEnvironment.get_execution_environment()
out = env.from_list([{"key": "k", "value": 1}, {"key": "k", "value": 2}]).apply(Visits()).to_list()
env.execute()
print(json.dumps(out))
'''


def test_a_ported_program_lists_only_its_own_memory_and_catches_type_errors(tmp_path):
    pytest.importorskip("chromadb")
    script = tmp_path / "visits.py"
    script.write_text(textwrap.dedent(PORTED))
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=180,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-3000:]
    first, second = (row["k"] for row in json.loads(done.stdout.splitlines()[-1]))
    assert first == {"first": True, "kept": "list",
                     "fields": {"tags": ["new", "sale"], "visits": 1},
                     "names": ["tags", "visits"], "exists": [False, False, True]}
    assert second["first"] is False and second["fields"]["visits"] == 2
    assert second["names"] == ["tags", "visits"]


def test_the_runtimes_entries_are_read_by_path_and_left_out_of_listings():
    base = {"_budget": {"model": {"input": 5}}, "_flink_agents_py": {"epoch": "e"}, "x": 1}
    memory = ActionMemory(base, "short_term_memory")
    assert memory.to_dict() == {"x": 1}
    assert memory.get_field_names() == ["x"] and list(memory) == ["x"]
    assert list(memory.get_fields()) == ["x"]
    assert memory.get("_budget.model.input") == 5 and "_budget" in memory
    assert memory.get("_budget").get_field_names() == ["model"]
    memory.delete("_budget.model")  # still allowed: a key resets its spend
    assert memory.get("_budget") == {}
    # sensory memory has no reserved entries: an action's own '_budget' is listed
    sensory = ActionMemory({"_budget": 1}, "sensory_memory")
    assert sensory.get_field_names() == ["_budget"]


def test_a_value_memory_cannot_keep_is_a_type_error_naming_its_path():
    memory = ActionMemory({}, "short_term_memory")
    for value in ({1, 2}, {1: "a"}, float("nan"), object()):
        with pytest.raises(TypeError) as caught:
            memory.set("bad.value", value)
        assert isinstance(caught.value, SerializationError)
        assert "'bad.value'" in str(caught.value)
    assert memory.to_dict() == {}
    for path in ("", "a..b", ".a", "a.", 5, None):
        assert memory.is_exist(path) is False  # type: ignore[arg-type]
        assert (path in memory) is False
    with pytest.raises(ValueError, match="dotted names"):
        memory.get("a..b")


SENSORY_LISTING = '''
import json
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (Agent, InputEvent, OutputEvent, ResourceType, RunnerContext,
                                 action)


class Child(Agent):
    @action(InputEvent)
    @staticmethod
    def look(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.sensory_memory.set("mine", 1)
        ctx.send_event(OutputEvent(output={
            "names": ctx.sensory_memory.get_field_names(),
            "listed": list(ctx.sensory_memory), "dict": ctx.sensory_memory.to_dict()}))


class Parent(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        result = await (await ctx.submit_subagent("child", {"text": "hi"}))
        ctx.send_event(OutputEvent(output=result.result))


parent = Parent()
parent.add_resource("child", ResourceType.AGENT, Child())
out = AgentsExecutionEnvironment.local().from_list([{"key": "k"}]).apply(parent).collect()
print(json.dumps(out))
'''


def test_sensory_memory_listings_leave_out_the_runtimes_entries(tmp_path):
    # a sub-agent listing its sensory memory saw the runtime's '_subagent' entry (and an
    # agent driving a chat its '_chat' entry); short-term listings hid the runtime's already
    script = tmp_path / "my_agent.py"
    script.write_text(textwrap.dedent(SENSORY_LISTING))
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=180,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-3000:]
    [[child]] = json.loads(done.stdout.splitlines()[-1])  # the parent's one output
    assert child == {"names": ["mine"], "listed": ["mine"], "dict": {"mine": 1}}
    sensory = ActionMemory({"_chat": {"chats": {}}, "_subagent": {"input": 1}, "x": 2},
                           "sensory_memory")
    assert sensory.get_field_names() == ["x"]
    assert sensory.get("_subagent.input") == 1  # read by path, as the runtime does
