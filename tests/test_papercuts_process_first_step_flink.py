"""A record that does not load in the job's first Python step is an error row, either mode.

The agent's key step is the job's first Python step when the program hands
``from_datastream`` a stream of pickled records straight from ``env.from_collection``: Beam's
coder loaded each record before the step's code ran, so a record whose ``__reduce__`` raised
as it loaded failed the task, and the job with it (``ValueError: cannot load record t1``).
The key step now gets the records' pickles (``_keyed_input.pickles_of``) and loads them
itself: such a record goes to the error output (no key can be taken from it: ``key`` None,
``execution_id`` ``record``, the message naming what loading raised), and every other record
runs. In thread mode the same record failed the task in PyFlink's input converter of the
key step; that step's selector (``_fast_input.FirstStepKeys``) now gives it a converter that
hands such a record on as an ``UnreadableRecord``, which no key is taken from: the same
error row.
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

BAD = """
    def _rebuild(tag):
        raise ValueError(f"cannot load record {tag}")


    class Bad(dict):
        def __init__(self, tag):
            super().__init__(id="b", tag=tag)

        def __reduce__(self):
            return _rebuild, (self["tag"],)


    def key_of(record):
        return record["id"]
"""

JOB = """
    import json
    import sys
    from pyflink.common import Types
    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.api import Agent, InputEvent, OutputEvent, action
    from flink_agents_py.flink import create_stream_environment
    from bad import Bad, key_of


    class Echo(Agent):
        @action(InputEvent)
        @staticmethod
        def go(event, ctx):
            ctx.send_event(OutputEvent(output={"key": ctx.key, "n": event.input["n"]}))


    env = create_stream_environment(execution_mode=sys.argv[1], parallelism=1,
                                    restart_attempts=0)
    agents = AgentsExecutionEnvironment.flink(env, metrics=False)
    records = [{"id": "a", "n": 1}, Bad("t1"), {"id": "c", "n": 2}, {"id": "a", "n": 3}]
    ds = env.from_collection(records, type_info=Types.PICKLED_BYTE_ARRAY())
    job = agents.from_datastream(ds, key_selector=key_of).apply(Echo())
    with job.to_datastream().union(job.errors_datastream()).execute_and_collect("bad") as rows:
        for r in rows:
            print("ROW " + json.dumps(r, sort_keys=True), flush=True)
"""


def _refuse(tag: str) -> None:
    raise ValueError(f"cannot load {tag}")


class _Unloadable:
    def __reduce__(self):
        return _refuse, ("x",)


def test_a_pickle_that_does_not_load_is_sealed_under_a_rejected_key():
    pytest.importorskip("pyflink")
    from flink_agents_py.flink._keyed_input import seal_pickled
    from flink_agents_py.runtime import JSON_KEYS

    good = seal_pickled(JSON_KEYS, lambda r: r["id"], pickle.dumps({"id": "a"}))
    assert good.key == JSON_KEYS.flink_key(lambda r: r["id"], {"id": "a"})
    assert good.opened() == {"id": "a"}
    bad = seal_pickled(JSON_KEYS, lambda r: r["id"], pickle.dumps(_Unloadable()))
    rejected = JSON_KEYS.rejected(bad.key)
    assert rejected is not None and rejected.error_type == "SerializationError"
    assert (
        "could not be decoded, so no key could be taken from it (ValueError: cannot "
        "load x)" in rejected.message
    )


@pytest.mark.flink
@pytest.mark.timeout(300)
@pytest.mark.parametrize("mode", ["process", "thread"])
def test_a_job_goes_past_a_record_its_first_python_step_cannot_load(tmp_path, mode):
    pytest.importorskip("pyflink")
    assert ROOT not in tmp_path.resolve().parents  # the user's own folder and modules
    (tmp_path / "bad.py").write_text(textwrap.dedent(BAD))
    (tmp_path / "job.py").write_text(textwrap.dedent(JOB))
    proc = subprocess.run(
        [sys.executable, "job.py", mode],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=280,
        env={**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{tmp_path}"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(line[4:]) for line in proc.stdout.splitlines() if line.startswith("ROW ")]
    assert sorted((r["key"], r["n"]) for r in rows if "n" in r) == [("a", 1), ("a", 3), ("c", 2)]
    [error] = [r for r in rows if "error_type" in r]
    assert (error["key"], error["execution_id"], error["error_type"]) == (
        None,
        "record",
        "SerializationError",
    )
    assert (
        error["message"].startswith("the pickled record of ")
        and "could not be decoded, so no key could be taken from it "
        "(ValueError: cannot load record t1)"
        in error["message"]
    )


class _RaisingConverter:
    def to_internal(self, value):
        raise TypeError(f"cannot convert {value!r}")


def test_the_key_step_s_converter_hands_on_a_record_that_fails_as_its_stand_in():
    pytest.importorskip("pyflink")
    from flink_agents_py.flink._fast_input import LoadingInput
    from flink_agents_py.runtime import JSON_KEYS
    from flink_agents_py.runtime.internal import UnreadableRecord

    pickled = LoadingInput(None, pickled=True)
    assert pickled.to_internal(pickle.dumps({"id": "a"})) == {"id": "a"}
    assert pickled.to_internal(None) is None
    stand_in = pickled.to_internal(pickle.dumps(_Unloadable()))
    assert type(stand_in) is UnreadableRecord
    # no key is taken from it, whatever the selector: the same rejection as process mode's
    rejected = JSON_KEYS.rejected(JSON_KEYS.flink_key(lambda r: None, stand_in))
    assert rejected is not None and rejected.error_type == "SerializationError"
    assert "could not be decoded, so no key could be taken from it (ValueError: cannot load x)" in (
        rejected.message
    )
    other = LoadingInput(_RaisingConverter(), pickled=False).to_internal(
        "v"
    )  # a value its type cannot convert
    assert type(other) is UnreadableRecord and "TypeError: cannot convert 'v'" in other.error
