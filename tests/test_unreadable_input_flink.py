"""A keyed input record that fails to unpickle goes to the error output; the job goes on.

In a thread-mode TaskManager the agent operator converts its keyed input itself
(``flink._fast_input``). A record whose pickle raised as it loaded (a class whose
``__reduce__`` or ``__setstate__`` fails there) failed the task, as PyFlink's own converter
does, and so the job at every restart: one such record stopped every key. Now it becomes an
error row under its key (``action="<input>"``, ``SerializationError``, the record's size and
what loading raised), and the key and the other keys go on with their records.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

FLAKY = """
    _LOADS: dict = {}


    def _rebuild(tag):
        # loads once (the key selector's operator), then raises (the agent operator's input)
        _LOADS[tag] = _LOADS.get(tag, 0) + 1
        if _LOADS[tag] >= 2:
            raise ValueError(f"cannot load record {tag} here")
        return Flaky(tag)


    class Flaky(dict):
        def __init__(self, tag):
            super().__init__(id="b", tag=tag)

        def __reduce__(self):
            return _rebuild, (self["tag"],)
"""

JOB = """
    import json
    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
    from flink_agents_py.flink import create_stream_environment
    from flaky import Flaky


    class Echo(Agent):
        @action(InputEvent)
        @staticmethod
        def go(event: InputEvent, ctx: RunnerContext) -> None:
            ctx.send_event(OutputEvent(output={"key": ctx.key, "n": event.input["n"]}))


    records = [{"id": "a", "n": 1}, {"id": "b", "n": 2}, Flaky("t1"), {"id": "b", "n": 3},
               {"id": "c", "n": 4}]
    env = create_stream_environment(execution_mode="thread", parallelism=1, restart_attempts=0)
    agents = AgentsExecutionEnvironment.flink(env)
    job = agents.from_datastream(env.from_collection(records),
                                 key_selector=lambda r: r["id"]).apply(Echo())
    with job.to_datastream().union(job.errors_datastream()).execute_and_collect("bad") as rows:
        for r in rows:
            print("ROW " + json.dumps(r, sort_keys=True), flush=True)
"""


class _Raises:
    def __reduce__(self):
        return _explode, ("no way",)


def _explode(why: str) -> None:
    raise ValueError(why)


def test_the_converter_hands_on_a_record_that_fails_to_unpickle_as_unreadable():
    """(PyFlink's converter module imports only in a TaskManager: its pickle path is set.)"""
    pytest.importorskip("pyflink")
    from flink_agents_py.flink._fast_input import RecordOfKeyedRow
    from flink_agents_py.runtime.internal import UnreadableRecord

    convert = RecordOfKeyedRow.__new__(RecordOfKeyedRow)
    convert._field, convert._pickled = None, True  # PyFlink's ``PickleDataConverter``'s
    assert convert.to_internal((0, ["k", pickle.dumps({"a": 1})])) == (None, {"a": 1})
    for bad, why in (
        (pickle.dumps(_Raises()), "ValueError: no way"),
        (b"\x80\x04not a pickle at all" * 10, "UnpicklingError"),
    ):
        none, stand_in = convert.to_internal((0, ["k", bad]))
        assert none is None and type(stand_in) is UnreadableRecord
        assert stand_in.what == f"pickled record of {len(bad):,} bytes"
        assert stand_in.error.startswith(why)
        assert len(stand_in.excerpt) < 300


def test_an_unreadable_record_is_an_error_record_naming_its_key():
    from flink_agents_py.api import SerializationError
    from flink_agents_py.runtime.core._results import input_form
    from flink_agents_py.runtime.internal import UnreadableRecord

    record = UnreadableRecord("pickled record of 9 bytes", "ValueError: boom", "b'...'")
    with pytest.raises(
        SerializationError,
        match=r"input record of key 'k7': the pickled "
        r"record of 9 bytes could not be decoded "
        r"\(ValueError: boom\)",
    ):
        input_form(record, "k7", lambda k: k)


@pytest.mark.flink
@pytest.mark.timeout(300)
def test_a_users_job_keeps_running_past_a_record_that_fails_to_unpickle(tmp_path):
    pytest.importorskip("pyflink")
    assert ROOT not in tmp_path.resolve().parents
    (tmp_path / "flaky.py").write_text(textwrap.dedent(FLAKY))
    (tmp_path / "job.py").write_text(textwrap.dedent(JOB))
    proc = subprocess.run(
        [sys.executable, "job.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=280,
        env={**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{tmp_path}"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(line[4:]) for line in proc.stdout.splitlines() if line.startswith("ROW ")]
    outputs = sorted((r["key"], r["n"]) for r in rows if "n" in r)
    assert outputs == [("a", 1), ("b", 2), ("b", 3), ("c", 4)]  # none lost, the key goes on
    (error,) = [r for r in rows if "error_type" in r]
    assert error["key"] == "b" and error["action"] == "<input>"
    assert error["error_type"] == "SerializationError"
    assert "could not be decoded (ValueError: cannot load record t1 here)" in error["message"]
    assert error["input"].startswith("<pickled record of ")
