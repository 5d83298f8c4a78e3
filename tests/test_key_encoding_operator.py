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
from test_operator_pump import JavaStream, by_key  # noqa: E402

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


def test_the_operator_decodes_each_key_for_the_action_and_rejects_one_with_no_encoding(
        pump_harness):
    from flink_agents_py.flink import ERROR_TAG
    from flink_agents_py.runtime import JSON_KEYS

    h = pump_harness(Remember())  # the default key encoding: keys arrive as Flink STRINGs
    records = [{"key": k, "n": n} for n, k in enumerate([1, True, 1.0, ("t", 1), "1", 1])]
    records.append({"key": 3j, "n": 6})
    for record in records:
        h.feed(JSON_KEYS.flink_key(lambda r: r["key"], record), record)
    outputs = [o for o in h.out if not (isinstance(o, tuple) and o[:1] == (ERROR_TAG,))]
    assert [(o["key"], type(o["key"])) for o in outputs] == [
        (1, int), (True, bool), (1.0, float), (("t", 1), tuple), ("1", str), (1, int)]
    # five keys: the int 1 saw two records
    assert h.op._memory_state.data[JSON_KEYS.flink_key(lambda r: r, 1)] == '{"seen":2}'
    assert h.op._memory_state.data[JSON_KEYS.flink_key(lambda r: r, True)] == '{"seen":1}'
    [(_, error)] = [o for o in h.out if isinstance(o, tuple) and o[:1] == (ERROR_TAG,)]
    assert error["error_type"] == "KeyEncodingError" and "key_encoding='pickle'" in error["message"]
