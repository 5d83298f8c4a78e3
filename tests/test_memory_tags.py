"""A record cannot make a memory read import a module or build a class it names.

The runtime stores a pydantic model as ``{"$model": "module:Class", "data": ...}`` and a
plain dict of that shape escaped. A memory object built field by field (``set("profile.<field>",
v)`` for each field of a record) was never escaped: a record whose fields were ``$model`` and
``data`` made the read of ``profile`` import the module the record named and build its class
(or return ``bytes`` for ``$bytes``). A memory path may no longer name a field ``$model``; a
dict stored whole keeps its fields as they are.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action

USER_MODULE = """
import pathlib
pathlib.Path("imported").write_text("the record made the runtime import me")

from pydantic import BaseModel


class X(BaseModel):
    pwned: int = 0
"""

USER_SCRIPT = """
import json, pathlib
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action


class Profile(Agent):
    @action(InputEvent)
    @staticmethod
    def go(event: InputEvent, ctx: RunnerContext) -> None:
        for k, v in event.input["fields"].items():  # each field of the record, by its path
            ctx.short_term_memory.set(f"profile.{k}", v)
        got = ctx.short_term_memory.get("profile")
        ctx.send_event(OutputEvent(output={"type": type(got).__name__,
                                           "fields": got.get_fields()}))


records = [{"key": "mallory", "fields": {"$model": "evilmod:X", "data": {"pwned": 1}}},
           {"key": "carol", "fields": {"$model": "$bytes", "data": "aGk="}},
           {"key": "bob", "fields": {"name": "bob", "data": "kept"}}]
result = AgentsExecutionEnvironment.local().from_list(records).apply(Profile()).run()
print(json.dumps({"outputs": result.outputs, "imported": pathlib.Path("imported").exists(),
                  "errors": [[e.key, e.error_type, e.message] for e in result.errors]}))
"""


def test_a_record_naming_a_class_through_memory_fields_imports_nothing(tmp_path):
    (tmp_path / "evilmod.py").write_text(USER_MODULE)  # importable from the user's directory
    (tmp_path / "profile.py").write_text(USER_SCRIPT)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "profile.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["imported"] is False
    assert got["outputs"] == [{"type": "MemoryObject",
                               "fields": {"name": "bob", "data": "kept"}}]
    assert [(k, t) for k, t, _ in got["errors"]] == [("mallory", "ValueError"),
                                                    ("carol", "ValueError")]
    assert all("memory path 'profile.$model' has a field named '$model'" in m
               for _, _, m in got["errors"])


class _Whole(Agent):
    @action(InputEvent)
    @staticmethod
    def go(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.short_term_memory.set("profile", event.input["fields"])  # stored whole: escaped
        obj = ctx.short_term_memory.new_object("other")
        with pytest.raises(ValueError, match="named '\\$model'"):
            obj.set("$model", "evilmod:X")  # a memory object's field: the same path rule
        ctx.send_event(OutputEvent(output=ctx.short_term_memory.get("profile")))


def test_a_dict_of_that_shape_stored_whole_reads_back_as_the_dict():
    fields = {"$model": "os:system", "data": {"x": 1}}
    result = AgentsExecutionEnvironment.local().from_list(
        [{"key": "k", "fields": fields}]).apply(_Whole()).run()
    assert result.errors == [] and result.outputs == [fields]
