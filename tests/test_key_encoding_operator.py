"""The agent operator's keys, on the fakes of ``test_operator_pump`` (thread mode, no Flink).

With ``key_encoding="pickle"`` PyFlink pickles each key, with ``pickle`` in thread mode and
``cloudpickle`` in process mode: a savepoint taken in process mode holds other key bytes
than a thread-mode job writes, so a key's next records would not find its state. The
restore sweep (the first callback of a restored thread-mode operator lists the keys with
runs in flight) checks the stored bytes and stops the job with what to do.
"""

from __future__ import annotations

import pickle
from typing import Any

import pytest

pytest.importorskip("pyflink")

from test_operator_costs import Slow  # noqa: E402
from test_operator_pump import JavaStream, by_key, pump_harness  # noqa: E402, F401

from flink_agents_py.api import (  # noqa: E402
    Agent,
    InputEvent,
    OutputEvent,
    RunnerContext,
    action,
)
from flink_agents_py.runtime import KeyEncodingMismatchError  # noqa: E402

STATES = ("_run_state", "_memory_state", "_head_state", "_tail_state")


class JavaRow(tuple):
    """A key as the Java backend lists it: ``Row(<the key's stored bytes>)``."""

    stored: bytes

    def getField(self, i: int) -> Any:  # noqa: N802 - Java's name
        assert i == 0
        return self.stored


class Unpickle:
    """PyFlink's thread-mode key converter for pickled keys."""

    @staticmethod
    def to_internal(stored: bytes) -> Any:
        return pickle.loads(stored)


class Remember(Agent):
    """Counts the key's records in short-term memory; no I/O (its runs complete at once)."""

    @action(InputEvent)
    @staticmethod
    def remember(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.short_term_memory.set("seen", ctx.short_term_memory.get("seen", 0) + 1)
        ctx.send_event(OutputEvent(output={"key": ctx.key, "n": event.input["n"]}))


def restored(pump_harness, dumps, agent: Any = None) -> Any:
    """An operator restored from the state of key ``"a"`` after one record (a run of ``Slow``
    in flight), its key stored as ``dumps`` pickled it."""
    agent = agent or Slow()
    h = pump_harness(agent, max_in_flight=8, key_encoding="pickle")
    h.feed("a", {"n": 1})
    saved = {name: dict(getattr(h.op, name).data) for name in STATES}
    h.op.close()
    sub = pump_harness(agent, max_in_flight=8, key_encoding="pickle")
    for name, data in saved.items():
        getattr(sub.op, name).data.update(data)
    sub.ctx._key_converter = Unpickle()

    def get_keys(state: str, namespace: Any) -> Any:
        row = JavaRow(("java-key", "a"))
        row.stored = dumps("a")
        return JavaStream([row] if "a" in sub.rc.java.states[state].data else [])

    sub.rc.java.getKeys = get_keys
    return sub


def test_a_restored_run_whose_key_was_pickled_as_this_job_pickles_it_resumes(pump_harness):
    sub = restored(pump_harness, pickle.dumps)
    sub.feed("b", {"n": 2})  # the first callback resumes the run of "a"
    sub.run_timers()
    assert by_key(sub.out) == {"a": [1], "b": [2]}


def test_a_restored_key_pickled_in_the_other_execution_mode_stops_the_job(pump_harness):
    import cloudpickle

    sub = restored(pump_harness, cloudpickle.dumps)  # what process mode wrote
    with pytest.raises(KeyEncodingMismatchError) as e:
        sub.feed("b", {"n": 2})
    message = str(e.value)
    assert "'a'" in message and "process mode" in message and "key_encoding='pickle'" in message


def test_an_idle_key_with_memory_pickled_otherwise_stops_the_job_too(pump_harness):
    import cloudpickle

    sub = restored(pump_harness, cloudpickle.dumps, Remember())
    assert not sub.rc.java.states["agent-run"].data  # no run in flight: its memory only
    with pytest.raises(KeyEncodingMismatchError, match="process mode"):
        sub.feed("b", {"n": 2})


def test_an_idle_key_with_memory_pickled_as_this_job_pickles_it_keeps_its_memory(pump_harness):
    sub = restored(pump_harness, pickle.dumps, Remember())
    sub.feed("b", {"n": 2})
    sub.feed("a", {"n": 3})
    assert by_key(sub.out) == {"b": [2], "a": [3]}
    assert sub.op._memory_state.data["a"] == '{"seen":2}'
