"""Process mode: a keyed input record that fails to load goes to the error output.

In a process-mode TaskManager, Beam's coder unpickled the agent operator's input before the
operator's code ran: a record whose pickle raised as it loaded there (a class whose
``__reduce__`` or ``__setstate__`` fails on that worker) failed the task, and so the job at
every restart, while thread mode already made it an error row (``flink._fast_input``). The
key step now seals each record (``flink._keyed_input.Sealed``: its key beside its pickle) and
the operator unpickles it itself: such a record, and one that cannot be pickled at all, is an
``<input>`` ``SerializationError`` row under its key, and every good record runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

FLAKY = """
    import os
    import threading


    def _rebuild(tag):
        # loads once (the key step), then raises (the agent operator): counted in a file,
        # as process mode's steps may run in two Python processes
        path = os.path.join(os.environ["FLAKY_DIR"], tag)
        with open(path, "a") as f:
            f.write("x")
        with open(path) as f:
            loads = len(f.read())
        if loads >= 2:
            raise ValueError(f"cannot load record {tag} here")
        return Flaky(tag)


    class Flaky(dict):
        def __init__(self, tag):
            super().__init__(id="b", tag=tag)

        def __reduce__(self):
            return _rebuild, (self["tag"],)


    def key_of(record):
        return record["id"]


    def with_a_lock(record):
        # a record no pickle can hold, made in the step before the agent's key step
        return {**record, "lock": threading.Lock()} if record.get("lock") else record
"""

JOB = """
    import json
    from pyflink.common import Types
    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
    from flink_agents_py.flink import create_stream_environment
    from flaky import Flaky, key_of, with_a_lock


    class Echo(Agent):
        @action(InputEvent)
        @staticmethod
        def go(event: InputEvent, ctx: RunnerContext) -> None:
            ctx.send_event(OutputEvent(output={"key": ctx.key, "n": event.input["n"]}))


    records = [{"id": "a", "n": 1}, {"id": "b", "n": 2}, Flaky("t1"), {"id": "b", "n": 3},
               {"id": "c", "lock": True}, {"id": "c", "n": 4}]
    env = create_stream_environment(execution_mode="process", parallelism=1,
                                    restart_attempts=0)
    agents = AgentsExecutionEnvironment.flink(env, metrics=False)
    pickled = Types.PICKLED_BYTE_ARRAY()
    ds = env.from_collection(records).map(with_a_lock, output_type=pickled)
    job = agents.from_datastream(ds, key_selector=key_of).apply(Echo())
    with job.to_datastream().union(job.errors_datastream()).execute_and_collect("bad") as rows:
        for r in rows:
            print("ROW " + json.dumps(r, sort_keys=True), flush=True)
"""


def test_a_sealed_record_opens_as_itself_or_as_an_unreadable_stand_in():
    pytest.importorskip("pyflink")
    from flink_agents_py.flink._keyed_input import Positioned, seal
    from flink_agents_py.runtime.internal import UnreadableRecord

    sealed = seal(lambda r: r["id"], {"id": "a", "n": 1})
    assert sealed.key == "a" and sealed.opened() == {"id": "a", "n": 1}

    class Unloadable:  # pickled by value (a local class), fails as it loads
        def __reduce__(self):
            return _explode, ("no way",)

    bad = seal(lambda r: "k", Unloadable()).opened()
    assert type(bad) is UnreadableRecord and bad.error == "ValueError: no way"
    assert bad.what.startswith("pickled record of ")

    placed = seal(lambda r: "k", Positioned("line 7", {"lock": threading.Lock()}))
    opened = placed.opened()
    assert type(opened) is Positioned and opened.where == "line 7"
    assert type(opened.record) is UnreadableRecord
    assert opened.record.what == "dict record"
    assert opened.record.error.startswith("pickling it raised TypeError: ")


def _explode(why: str) -> None:
    raise ValueError(why)


@pytest.mark.flink
@pytest.mark.timeout(400)
def test_a_process_mode_job_keeps_running_past_records_that_do_not_load(tmp_path):
    pytest.importorskip("pyflink")
    assert ROOT not in tmp_path.resolve().parents
    (tmp_path / "flaky.py").write_text(textwrap.dedent(FLAKY))
    (tmp_path / "job.py").write_text(textwrap.dedent(JOB))
    (tmp_path / "loads").mkdir()
    proc = subprocess.run(
        [sys.executable, "job.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=380,
        env={
            **os.environ,
            "PYTHONPATH": f"{ROOT}{os.pathsep}{tmp_path}",
            "FLAKY_DIR": str(tmp_path / "loads"),
        },
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(line[4:]) for line in proc.stdout.splitlines() if line.startswith("ROW ")]
    outputs = sorted((r["key"], r["n"]) for r in rows if "n" in r)
    assert outputs == [("a", 1), ("b", 2), ("b", 3), ("c", 4)]  # none lost, the keys go on
    errors = sorted((r for r in rows if "error_type" in r), key=lambda r: r["key"])
    assert [(e["key"], e["action"], e["error_type"]) for e in errors] == [
        ("b", "<input>", "SerializationError"),
        ("c", "<input>", "SerializationError"),
    ]
    assert "could not be decoded (ValueError: cannot load record t1 here)" in errors[0]["message"]
    assert (
        "dict record could not be decoded (pickling it raised TypeError: " in errors[1]["message"]
    )
