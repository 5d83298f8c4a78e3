"""Records nested too deep never end a job: each becomes an error row where it was read.

orjson reads JSON nested up to 1,024 levels, but a Flink stream pickles records between
operators (which fails at about 490 levels) and orjson writes at most 255: such a record read
from a file or a topic failed the job at every restart, the same record coming again. And a
record nested deeper than the stack, given to the local runner (or the Flink operator), ended
the job with a ``RecursionError`` instead of becoming its error row.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from pydantic import BaseModel
from support.bad_input import PYTHON, ROOT

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents_py.io import read_json_lines


def nested(levels: int) -> bytes:
    """A JSON object ``{"id": ..., "d": ...}`` nesting ``levels`` objects in all."""
    return b'{"id": "deep", "d": ' + b'{"a": ' * (levels - 1) + b"1" + b"}" * levels


def nested_list(levels: int) -> bytes:
    return b"[" * levels + b"]" * levels


class Echo(Agent):
    @action(InputEvent)
    @staticmethod
    def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output={"key": ctx.key}))


def _deep_dict(levels: int) -> dict:
    value: dict = {"leaf": 1}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


def test_json_nested_deeper_than_200_levels_is_a_bad_line(tmp_path):
    lines = [b'{"id": "g0"}', nested(200), nested(201), nested(600), nested_list(1000),
             nested_list(1100), b'[' + b",".join([b"{}"] * 500) + b"]", b'{"id": "g1"}']
    (tmp_path / "in.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    got = list(read_json_lines(tmp_path / "in.jsonl"))
    assert [r.line for r in got if r.error is None] == [0, 1, 6, 7]  # 200 levels, 500 siblings
    errors = {r.line: r.error["error"] for r in got if r.error is not None}
    assert sorted(errors) == [2, 3, 4, 5]
    for line in (2, 3, 4):
        assert errors[line].startswith(f"line {line}: record: nested more than 200 levels "
                                       "deep"), errors[line]
    assert "not JSON (depth limit exceeded" in errors[5]  # orjson's own limit (1,024)


def test_a_kafka_value_nested_too_deep_is_an_error_row_with_its_offset():
    pytest.importorskip("pyflink")
    from flink_agents_py.flink._kafka import _Parse, json_value

    tag = object()
    parse = _Parse(json_value, tag)
    rows = [list(parse(("t", 2, offset, 0, "k", raw)))
            for offset, raw in enumerate([b'{"id": 1}', nested(600), b'{"id": 2}'])]
    assert rows[0] == [{"id": 1}] and rows[2] == [{"id": 2}]
    [(got_tag, error)] = rows[1]
    assert got_tag is tag and (error["partition"], error["offset"]) == (2, 1)
    assert "nested more than 200 levels deep" in error["error"]


def test_a_record_nested_deeper_than_the_stack_is_an_error_row_on_the_local_runner():
    # it ended the job: RecursionError while the record's JSON form was looked for again
    def records():  # a generator, as a user may pass
        yield {"key": "g", "n": 0}
        yield {"key": "deep700", "d": _deep_dict(700)}
        yield {"key": "g", "n": 1}
        yield {"key": "deep5000", "d": _deep_dict(5000)}
        yield {"key": "g", "n": 2}

    limit = sys.getrecursionlimit()
    result = AgentsExecutionEnvironment.local().from_list(records()).apply(Echo()).run()
    assert sys.getrecursionlimit() == limit
    # 700 levels: run or refused, by the room the stack has here; once either way
    ran = [o["key"] for o in result.outputs]
    refused = [(e.key, e.action, e.execution_id, e.error_type) for e in result.errors]
    assert ran.count("g") == 3 and "deep5000" not in ran
    assert (ran.count("deep700"), refused.count(
        ("deep700", "<input>", "record 1", "SerializationError"))) in ((1, 0), (0, 1))
    assert refused[-1] == ("deep5000", "<input>", "record 3", "SerializationError")
    assert len(ran) + len(refused) == 5
    for e in result.errors:
        assert "nested too deeply" in e.message and f"key '{e.key}'" in e.message
        assert len(str(e.input)) < 1100  # shown bounded, not the record


def test_a_stored_input_nested_deeper_than_the_stack_still_reaches_its_action():
    # a record the queue took (its JSON form found) ended the run when the action's copy of
    # it was made with less room on the stack: on Flink, at every restore of that state
    from flink_agents_py.runtime.core._results import input_event

    stored = _deep_dict(5000)
    event, _ = input_event("r0", stored)
    value, depth = event.input, 1
    while "a" in value:
        value, depth = value["a"], depth + 1
    assert depth == 5000 and value == {"leaf": 1} and event.input is not stored


def test_user_reads_a_file_with_a_too_deep_line_from_another_directory(tmp_path):
    """As a user would: their own script, run from a directory outside the repository."""
    (tmp_path / "in.jsonl").write_bytes(b'{"key": "a"}\n' + nested(600) + b'\n{"key": "b"}\n')
    (tmp_path / "main.py").write_text(
        "from flink_agents_py import AgentsExecutionEnvironment\n"
        "from flink_agents_py.api import Agent, InputEvent, OutputEvent, action\n"
        "from flink_agents_py.io import read_json_lines\n"
        "class Echo(Agent):\n"
        "    @action(InputEvent)\n"
        "    @staticmethod\n"
        "    def on_input(event, ctx):\n"
        "        ctx.send_event(OutputEvent(output=ctx.key))\n"
        "rows = list(read_json_lines('in.jsonl'))\n"
        "records = [r.record for r in rows if r.error is None]\n"
        "print([r.error['error'][:40] for r in rows if r.error])\n"
        "print(AgentsExecutionEnvironment.local().from_list(records).apply(Echo()).collect())\n")
    proc = subprocess.run([PYTHON, "main.py"], cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.splitlines() == ["['line 1: record: nested more than 200 lev']",
                                        "['a', 'b']"]


class Point(BaseModel):
    x: int
    tags: list[str] = []


def test_the_deep_copy_of_a_stored_input_is_the_usual_one():
    from flink_agents_py.runtime._serde import to_json_value
    from flink_agents_py.runtime.core._results import _rebuilt_deep, _rebuilt_walk

    record = {"p": Point(x=1, tags=["a"]), "ps": [Point(x=2), {"$model": 1, "data": [3]}],
              "plain": {"$model": "x", "data": {"y": [1, {"z": None}]}}, "n": [[1.5, "s"]]}
    stored = to_json_value(record, "input record")
    assert _rebuilt_deep(stored) == _rebuilt_walk(stored)
    assert _rebuilt_deep(stored)["p"] == Point(x=1, tags=["a"])
    assert _rebuilt_deep(stored)["plain"] == record["plain"]
