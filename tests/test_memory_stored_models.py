"""A pydantic model or ``bytes`` stored in memory is a value, in every way memory is read.

Each test failed before its fix:

- ``to_dict()`` gave the runtime's stored form of such values
  (``{"$model": "mod:User", "data": {...}}``, ``{"$model": "$bytes", "data": "AAE="}``)
  where ``get`` gives the model and the bytes;
- a dotted path went inside that stored form: ``set("user.tier", "gold")`` over a stored
  ``User`` made an object with the fields ``$model``, ``data`` and ``tier`` (read back as
  such, on every later run), and ``get("user.data")`` gave the model's fields. As in Flink
  Agents' memory (a value under a path that ``set`` writes below is replaced by an object),
  the model is now replaced by an object holding the new field, and ``get`` below a stored
  value finds nothing.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from pydantic import BaseModel

from flink_agents_py.runtime.context._memory import ActionMemory, apply_writes, priors

REPO = Path(__file__).resolve().parents[1]

PROGRAM = '''
import json
from pydantic import BaseModel
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action


class User(BaseModel):
    name: str
    tier: str = "basic"


class Profiles(Agent):
    @action(InputEvent)
    @staticmethod
    def visit(event: InputEvent, ctx: RunnerContext) -> None:
        memory = ctx.short_term_memory
        out = {}
        if event.input["step"] == 1:
            memory.set("user", User(name="ann"))
            memory.set("avatar", b"\\x00\\x01")
        elif event.input["step"] == 2:
            whole = memory.to_dict()
            out["to_dict"] = {"user": repr(whole["user"]), "avatar": repr(whole["avatar"])}
            out["below_model"] = [memory.get("user.data"), memory.is_exist("user.data"),
                                  memory.get("user.name")]
            memory.set("user.tier", "gold")  # a value is replaced by an object
            out["mine"] = dict(memory.get("user"))
        else:
            out["user"] = dict(memory.get("user"))
            out["names"] = memory.get("user").get_field_names()
        ctx.send_event(OutputEvent(output=out))


records = [{"key": "k", "step": n} for n in (1, 2, 3)]
result = AgentsExecutionEnvironment.local().from_list(records).apply(Profiles()).run()
assert not result.errors, result.errors
print(json.dumps(result.outputs))
'''


def test_a_users_program_reads_stored_models_and_bytes_as_values(tmp_path):
    script = tmp_path / "profiles.py"
    script.write_text(textwrap.dedent(PROGRAM))
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=180,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-3000:]
    _, second, third = json.loads(done.stdout.splitlines()[-1])
    assert second["to_dict"] == {"user": "User(name='ann', tier='basic')",
                                 "avatar": repr(b"\x00\x01")}
    assert second["below_model"] == [None, False, None]
    assert second["mine"] == {"tier": "gold"}
    assert third == {"user": {"tier": "gold"}, "names": ["tier"]}


class Item(BaseModel):
    sku: str


def test_a_write_below_a_stored_model_is_undone_to_the_model():
    memory = ActionMemory({}, "short_term_memory")
    memory.set("item", Item(sku="a"))
    tree: dict = {}
    apply_writes(tree, memory.writes)
    writes = [(["item", "qty"], 2)]
    undo = priors(tree, writes)
    apply_writes(tree, writes)
    assert ActionMemory(tree, "short_term_memory").get("item") == {"qty": 2}
    seen = ActionMemory(tree, "short_term_memory", lambda _m: list(reversed(undo)))
    assert seen.get("item") == Item(sku="a")
    deleting = ActionMemory(tree, "short_term_memory")
    deleting.delete("item.qty.more")  # nothing there: the object is kept as it is
    assert deleting.get("item") == {"qty": 2}


def test_check_replay_safety_passes_writes_below_a_stored_model():
    """At every crash point: ``read`` reads a stored model before and after a call while
    ``upgrade`` (the same input) replaces it or writes a field below it."""
    from support.memory_replay_agents import ModelFields

    from flink_agents_py.testing import check_replay_safety

    records = [{"key": "a", "n": n} for n in range(4)]
    report = check_replay_safety(ModelFields(), records, other_process=False)
    report.assert_ok()
    assert report.points_total > 5
