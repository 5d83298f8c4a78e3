"""A context kept by one action and used by another action is refused (``context._owner``).

An agent that keeps what its ``ctx`` gave it (a memory set fetched once, the ``ctx``
itself, its short-term memory) in a module global and uses it in another key's action,
while the first key's action still runs (it awaits a call; keys run concurrently), read the
first key's long-term memory, wrote into it and into its short-term memory, and sent events
as it; so did a durable call's function of the other key's action (a helper, a tool).
Each use now raises ``NotInActionContextError`` in the action that made it, and
nothing reaches the first key. (Used after the first action finished, it was refused
already.) Flink Agents documents the same rule for its memory sets: obtain one per action.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

LEAKY_AGENT = '''
import json, threading
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (Agent, EmbeddingModelSetup, InputEvent, LongTermMemoryOptions,
    OutputEvent, ResourceDescriptor, ResourceType, RunnerContext, action)
from flink_agents_py.integrations.embedding_models import HashingEmbeddingModel
from flink_agents_py.integrations.vector_stores import ChromaVectorStore

KEPT = {}  # the bug: what one action's ctx gave, kept for the next action
USED = threading.Event()


def until_the_other_key_ran() -> bool:
    return USED.wait(60)


def attempt(fn):
    try:
        fn()
        return "done"
    except Exception as e:
        return type(e).__name__


class Notes(Agent):
    @action(InputEvent)
    @staticmethod
    async def note(event: InputEvent, ctx: RunnerContext) -> None:
        if event.input["op"] == "first":
            notes = ctx.long_term_memory.get_memory_set("notes")
            notes.add("alice's private note")
            ctx.short_term_memory.set("owner", ctx.key)
            KEPT.update(ctx=ctx, notes=notes, stm=ctx.short_term_memory,
                        kb=ctx.get_resource("kb", ResourceType.VECTOR_STORE))
            await ctx.durable_execute_async(until_the_other_key_ran)
            # its own durable functions still read its own memory
            own = await ctx.durable_execute_async(lambda: ctx.short_term_memory.get("owner"))
            ctx.send_event(OutputEvent(output={"key": ctx.key, "done": True, "own": own}))
        elif event.input["op"] == "reuse":
            tried = {
                "read_notes": attempt(lambda: KEPT["notes"].get()),
                "search_notes": attempt(lambda: KEPT["notes"].search("private", 3)),
                "add_note": attempt(lambda: KEPT["notes"].add("written by mallory")),
                "clear_notes": attempt(lambda: KEPT["notes"].delete()),
                "read_stm": attempt(lambda: KEPT["stm"].get("owner")),
                "write_stm": attempt(lambda: KEPT["stm"].set("owner", "mallory")),
                "ctx_stm": attempt(lambda: KEPT["ctx"].short_term_memory),
                "send_event": attempt(lambda: KEPT["ctx"].send_event(OutputEvent(output="forged"))),
                "durable_call": attempt(lambda: KEPT["ctx"].durable_execute(len, "x")),
                "store_get": attempt(lambda: KEPT["kb"].get(limit=5)),
                # inside this action's own durable calls' functions (not stepped: no
                # action runs there), in its thread and on the I/O executor
                "stm_in_call": ctx.durable_execute(
                    lambda: attempt(lambda: KEPT["stm"].get("owner"))),
                "notes_in_call": ctx.durable_execute(
                    lambda: attempt(lambda: KEPT["notes"].get())),
                "stm_in_async_call": await ctx.durable_execute_async(
                    lambda: attempt(lambda: KEPT["stm"].get("owner"))),
                "notes_in_async_call": await ctx.durable_execute_async(
                    lambda: attempt(lambda: KEPT["notes"].get())),
            }
            USED.set()
            ctx.send_event(OutputEvent(output={"key": ctx.key, "tried": tried}))
        else:
            notes = ctx.long_term_memory.get_memory_set("notes")
            ctx.send_event(OutputEvent(output={
                "key": ctx.key, "notes": [i.value for i in notes.get()],
                "owner": ctx.short_term_memory.get("owner")}))


agent = Notes()
agent.add_resource("hashing", ResourceType.EMBEDDING_MODEL_CONNECTION,
                   ResourceDescriptor(HashingEmbeddingModel, dimension=8))
agent.add_resource("emb", ResourceType.EMBEDDING_MODEL,
                   ResourceDescriptor(EmbeddingModelSetup, connection="hashing"))
agent.add_resource("kb", ResourceType.VECTOR_STORE,
                   ResourceDescriptor(ChromaVectorStore, embedding_model="emb"))
agent.set_config(**{LongTermMemoryOptions.VECTOR_STORE: "kb"})
records = [{"key": "alice", "op": "first"}, {"key": "mallory", "op": "reuse"},
           {"key": "alice", "op": "check"}]
result = AgentsExecutionEnvironment.local().from_list(records).apply(agent).run()
print(json.dumps({"outputs": result.outputs, "errors": [e.message for e in result.errors]}))
'''


def test_what_one_keys_action_kept_cannot_be_used_by_another_keys_action(tmp_path):
    pytest.importorskip("chromadb")
    script = tmp_path / "leaky_agent.py"
    script.write_text(textwrap.dedent(LEAKY_AGENT))
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=180,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["errors"] == []
    by_key = {}
    for out in report["outputs"]:
        assert out != "forged"  # no event went out as alice's
        by_key.setdefault(out["key"], []).append(out)
    [reuse] = by_key["mallory"]
    assert set(reuse["tried"].values()) == {"NotInActionContextError"}, reuse["tried"]
    first, check = by_key["alice"]
    assert first == {"key": "alice", "done": True, "own": "alice"}
    # alice's memory is as alice left it: her note, her short-term memory
    assert check == {"key": "alice", "notes": ["alice's private note"], "owner": "alice"}
