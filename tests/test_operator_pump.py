"""Wake-ups per completion in thread mode: one callback applies every key's completed I/O.

In thread mode the operator may switch the keyed state backend's current key inside a
callback (``KeySwitching.pump``). Driven here over the fakes of ``test_operator_costs``
plus a fake backend whose current key is the one keyed state and timers act on, as in
Flink's embedded Python operator, with key groups and ``getKeys`` (busy keys have no timers
of their own, only their key groups do; a restored operator's first callback resumes every
run keyed state holds).
"""

from __future__ import annotations

import asyncio
import collections
import heapq
import time
from typing import Any

import pytest

pytest.importorskip("pyflink")

from test_operator_costs import (  # noqa: E402
    Backend,
    FakeRuntimeContext,
    Harness,
    Held,
    Slow,
)

from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action  # noqa: E402
from flink_agents_py.flink import AgentOperator  # noqa: E402
from flink_agents_py.plan import AgentPlan  # noqa: E402

GROUPS = 4
"""Key groups of the fake backend (Flink's default max parallelism is 128)."""


class JavaIterator:
    def __init__(self, items: list[Any]) -> None:
        self.items = list(items)

    def hasNext(self) -> bool:  # noqa: N802 - Java's name
        return bool(self.items)

    def next(self) -> Any:
        return self.items.pop(0)


class JavaBackend:
    """Flink's keyed state backend as the operator sees it: a current key it may switch, the
    key group of the current key, and the keys that have a value in a keyed state."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.switches = 0
        self.states: dict[str, Any] = {}

    def getCurrentKey(self) -> Any:  # noqa: N802 - Java's name
        return ("java-key", self.backend.key)

    def setCurrentKey(self, key: Any) -> None:  # noqa: N802
        assert isinstance(key, tuple) and key[0] == "java-key", key
        self.switches += 1
        self.backend.key = key[1]

    def getCurrentKeyGroupIndex(self) -> int:  # noqa: N802
        return sum(str(self.backend.key).encode()) % GROUPS

    def getKeys(self, state: str, namespace: Any) -> Any:  # noqa: N802
        keys = [("java-key", k) for k in self.states[state].data]
        return JavaStream(keys)


class JavaStream:
    """``java.util.stream.Stream``: RocksDB's holds a native iterator until closed."""

    opened: list[JavaStream] = []

    def __init__(self, items: list[Any]) -> None:
        self.items, self.closed = items, False
        JavaStream.opened.append(self)

    def iterator(self) -> JavaIterator:
        return JavaIterator(self.items)

    def close(self) -> None:
        self.closed = True


class KeyConverter:
    @staticmethod
    def to_internal(jkey: Any) -> Any:
        return jkey[1]


class SwitchableContext(FakeRuntimeContext):
    def __init__(self, backend: Backend) -> None:
        super().__init__(backend)
        self.java = JavaBackend(backend)
        self._keyed_state_backend = type("KeyedStateBackend", (), {})()
        self._keyed_state_backend._keyed_state_backend = self.java

    def get_state(self, descriptor: Any) -> Any:
        state = self.java.states[descriptor.name] = super().get_state(descriptor)
        return state


class PumpHarness(Harness):
    """``Harness`` in thread mode; checks that each callback leaves its own key current."""

    def __init__(self, agent: Any, **options: Any) -> None:
        self.backend = Backend()
        from test_operator_costs import Ctx, Timers

        self.timers = Timers(self.backend)
        self.ctx = Ctx(self.backend, self.timers)
        self.ctx._key_converter = KeyConverter()  # as PyFlink's contexts have
        self.rc = SwitchableContext(self.backend)
        self.op = AgentOperator(AgentPlan.from_agent(agent), metrics=False, **options)
        self.op.open(self.rc)
        self.out: list[Any] = []
        self.waiting_seen: list[int] = []

    def feed(self, key: Any, record: Any) -> None:
        super().feed(key, record)
        assert self.backend.key == key, "process_element left another key current"

    def fire(self, t: int, key: Any) -> None:
        super().fire(t, key)
        assert self.backend.key == key, "on_timer left another key current"


def by_key(out: list[dict[str, Any]]) -> dict[str, list[int]]:
    got: dict[str, list[int]] = collections.defaultdict(list)
    for o in out:
        got[o["key"]].append(o["n"])
    return dict(got)


@pytest.fixture
def fast_group_timers(monkeypatch):
    """The key-group timer every 50 ms instead of 2 s (``GROUP_POLL_MS``), for the tests
    that neither count timer callbacks nor bound them: the fakes sleep until a
    processing-time timer is due, and such a test's last (or, after a restore, its first)
    callback is a group timer, so each waited 2 s for it."""
    from flink_agents_py.flink import _switching

    monkeypatch.setattr(_switching, "GROUP_POLL_MS", 50)


def test_one_callback_applies_the_completions_of_many_keys(pump_harness):
    keys = 40
    h = pump_harness(Slow(), max_in_flight=keys)
    assert h.op._switch.backend is h.rc.java  # thread mode: keys can be switched
    for n in range(keys):
        h.feed(f"k{n}", {"n": n})
    h.run_timers()
    assert by_key(h.out) == {f"k{n}": [n] for n in range(keys)}
    # every completion applied by the pump, under its own key, in far fewer callbacks
    assert h.op.stats["pumped"] == keys
    assert h.op.stats["timer_callbacks"] <= keys // 4 + GROUPS, dict(h.op.stats)
    assert h.op.stats["idle_polls"] == 0
    assert h.rc.java.switches >= keys  # each other key made current for its turn
    # every key idle: its run cleared, nothing kept in memory; timers per key group, not key
    assert not h.op._run_state.data and len(h.timers.event) <= GROUPS
    assert h.timers.calls["register_event"] <= GROUPS
    assert h.timers.calls["delete_processing"] == h.timers.calls["delete_event"] == 0
    assert not h.op._switch.jkeys and not h.op._runs


@pytest.mark.usefixtures("fast_group_timers")
def test_queued_inputs_of_a_key_run_in_order_through_the_pump(pump_harness):
    h = pump_harness(Slow(), max_in_flight=4)
    for n in range(12):
        h.feed(f"k{n % 3}", {"n": n})
    h.run_timers()
    assert by_key(h.out) == {f"k{i}": [n for n in range(12) if n % 3 == i] for i in range(3)}
    assert all(not q for q in h.op._queue_state.data.values())
    assert not h.op._run_state.data


@pytest.mark.usefixtures("fast_group_timers")
def test_inputs_arriving_while_calls_complete_are_applied_by_the_element_callback(pump_harness):
    h = pump_harness(Slow(), max_in_flight=8)
    for n in range(8):
        h.feed(f"a{n}", {"n": n})
    time.sleep(0.2)  # the calls complete; no timer fires
    h.feed("b", {"n": 100})  # this element's callback applies the other keys' completions
    assert sorted(o["n"] for o in h.out) == list(range(8))
    h.run_timers()
    assert sorted(o["n"] for o in h.out) == [*range(8), 100]


def test_end_of_input_drains_every_busy_key(pump_harness):
    h = pump_harness(Slow())
    for n in range(12):
        h.feed(f"k{n % 4}", {"n": n})
    h.end()  # processing-time timers are dropped at the end of input
    assert by_key(h.out) == {f"k{i}": [n for n in range(12) if n % 4 == i] for i in range(4)}


@pytest.mark.usefixtures("fast_group_timers")
def test_a_restored_operator_resumes_busy_keys_from_keyed_state_and_their_timers(pump_harness):
    # a checkpoint holds runs in flight and their keys' timers; a new operator (after a
    # failure) has nothing in memory: each key's own poll timer resumes it from keyed state
    h = pump_harness(Slow(), max_in_flight=8)
    for n in range(6):
        h.feed(f"k{n}", {"n": n})
    assert len(h.op._run_state.data) == 6 and h.out == []
    saved = {name: dict(getattr(h.op, name).data) for name in
             ("_run_state", "_memory_state", "_head_state", "_tail_state")}
    h.op.close()  # the failed attempt: its calls are abandoned
    h.op = AgentOperator(AgentPlan.from_agent(Slow()), metrics=False, max_in_flight=8)
    h.op.open(h.rc)
    for name, data in saved.items():
        getattr(h.op, name).data.update(data)
    h.run_timers(timeout_s=30)
    assert by_key(h.out) == {f"k{n}": [n] for n in range(6)}
    assert not h.op._run_state.data
    assert h.op.stats["swept"] == 6  # found in keyed state by the first callback


@pytest.mark.usefixtures("fast_group_timers")
@pytest.mark.parametrize("old_head", [False, True])
def test_a_restored_operator_runs_the_inputs_queued_behind_a_run_in_order(pump_harness,
                                                                          old_head):
    # the queue's head is not stored (it is the input after the run in flight); state an
    # earlier version wrote, with its head counter, restores the same
    h = pump_harness(Slow(), max_in_flight=8)
    for n in range(4):
        h.feed("a", {"n": n})
    assert h.out == [] and sorted(h.op._queue_state.data["a"]) == [1, 2, 3]
    names = ("_run_state", "_memory_state", "_tail_state", "_queue_state")
    saved = {name: {k: (dict(v) if isinstance(v, dict) else v)
                    for k, v in getattr(h.op, name).data.items()} for name in names}
    h.op.close()
    h.op = AgentOperator(AgentPlan.from_agent(Slow()), metrics=False, max_in_flight=8)
    h.op.open(h.rc)
    for name, data in saved.items():
        getattr(h.op, name).data.update(data)
    if old_head:
        h.op._head_state.data["a"] = 1
    h.run_timers(timeout_s=30)
    h.end()
    assert by_key(h.out) == {"a": [0, 1, 2, 3]}
    assert not h.op._run_state.data and not h.op._queue_state.data["a"]


async def step_call(n: int) -> int:
    await asyncio.sleep(0.03)
    return n + 1


class ThreeCalls(Agent):
    @action(InputEvent)
    @staticmethod
    async def ask(event: InputEvent, ctx: RunnerContext) -> None:
        n = event.input["n"]
        for _ in range(3):  # three durable calls in a row: the key stays busy between them
            n = await ctx.durable_execute_async(step_call, n)
        ctx.send_event(OutputEvent(output={"key": ctx.key, "n": n}))


def test_a_key_making_calls_in_a_row_is_resumed_by_the_pump_not_by_polls(pump_harness):
    h = pump_harness(ThreeCalls(), max_in_flight=16)
    for n in range(10):
        h.feed(f"k{n}", {"n": n * 10})
    h.run_timers()
    assert by_key(h.out) == {f"k{n}": [n * 10 + 3] for n in range(10)}
    assert h.op.stats["pumped"] == 30  # each completion applied once, by the pump
    assert h.op.stats["idle_polls"] == 0, dict(h.op.stats)


def test_keys_waiting_on_calls_that_do_not_complete_cost_no_timers_of_their_own(pump_harness):
    # 400 keys, every call running and none completing: no per-key timers at all, so the
    # callbacks while they wait are the key groups' and the pump's, however many keys wait
    keys = 400
    h = pump_harness(Held(), max_in_flight=keys, max_waiting_calls=keys)
    for n in range(keys):
        h.feed(f"k{n}", {"n": n})
    assert len(h.op._switch.jkeys) == keys
    assert h.timers.calls["register_processing"] <= GROUPS + keys  # groups', pumps' at most
    assert h.timers.calls["register_event"] <= GROUPS  # one drain timer per key group
    keyed = {k for _, k in h.timers.processing}
    assert len(keyed) <= GROUPS + 2, len(keyed)  # not one per waiting key
    h.op.stats.clear()
    window_s, t0 = 2.5, time.monotonic()
    while time.monotonic() - t0 < window_s and h.timers.due:
        t, _, key = h.timers.due[0]
        wait = (t - time.time_ns() // 1_000_000) / 1000
        if wait > window_s - (time.monotonic() - t0):
            break
        heapq.heappop(h.timers.due)
        if (t, key) not in h.timers.processing:
            continue
        if wait > 0:
            time.sleep(wait)
        h.timers.processing.discard((t, key))
        h.fire(t, key)
    assert h.out == []
    # a key group's timer every 2 s, and one pump backing off to max_poll_interval_ms (no
    # call has completed, so the executor has no latency to expect): none per waiting key
    pumps = window_s * 1000 / h.op.options.max_poll_interval_ms
    assert h.op.stats["group_timers"] <= 2 * GROUPS, dict(h.op.stats)
    assert h.op.stats["timer_callbacks"] <= pumps + 3 * GROUPS + 5, dict(h.op.stats)


@pytest.mark.usefixtures("fast_group_timers")
@pytest.mark.parametrize("wake", ["group timers", "end of input"])
def test_a_restore_at_another_parallelism_resumes_every_run_in_each_subtask(pump_harness,
                                                                            wake):
    # a savepoint with 12 runs in flight, restored as two subtasks of two key groups each:
    # each subtask gets only its key groups' state and timers, and no input. Its key groups'
    # timers (processing time, or the drain timers at the end of bounded input) wake it,
    # and its first callback resumes every run that keyed state holds.
    h = pump_harness(Slow(), max_in_flight=16)
    keys = [f"k{n}" for n in range(12)]
    for n, k in enumerate(keys):
        h.feed(k, {"n": n})
    names = ("_run_state", "_memory_state", "_head_state", "_tail_state")
    saved = {name: dict(getattr(h.op, name).data) for name in names}
    processing, event = set(h.timers.processing), set(h.timers.event)
    h.op.close()

    def group(key: Any) -> int:
        return sum(str(key).encode()) % GROUPS

    assert {group(k) for k in keys} == set(range(GROUPS))  # both subtasks get runs
    out: list[Any] = []
    for part in ({0, 1}, {2, 3}):
        sub = pump_harness(Slow(), max_in_flight=16)
        for name, data in saved.items():
            getattr(sub.op, name).data.update(
                {k: v for k, v in data.items() if group(k) in part})
        sub.timers.event = {(t, k) for t, k in event if group(k) in part}
        if wake == "group timers":
            sub.timers.processing = {(t, k) for t, k in processing if group(k) in part}
            sub.timers.due = [(t, id(k), k) for t, k in sub.timers.processing]
            heapq.heapify(sub.timers.due)
            sub.run_timers(timeout_s=30)
        else:  # processing-time timers are dropped at the end of input
            sub.end()
        assert sub.op.stats["swept"] == sum(1 for k in keys if group(k) in part)
        assert JavaStream.opened and all(s.closed for s in JavaStream.opened)
        out += sub.out
    assert by_key(out) == {k: [n] for n, k in enumerate(keys)}


@pytest.mark.usefixtures("fast_group_timers")
def test_a_backend_that_cannot_list_its_keys_is_reported_and_the_job_goes_on(pump_harness,
                                                                            caplog):
    h = pump_harness(Slow(), max_in_flight=8)
    h.feed("a", {"n": 1})
    saved = {name: dict(getattr(h.op, name).data) for name in
             ("_run_state", "_memory_state", "_head_state", "_tail_state")}
    h.op.close()
    h.op = AgentOperator(AgentPlan.from_agent(Slow()), metrics=False, max_in_flight=8)
    h.op.open(h.rc)
    for name, data in saved.items():
        getattr(h.op, name).data.update(data)

    def no_keys(state: str, namespace: Any) -> Any:
        raise RuntimeError("getKeys is not supported by this state backend")

    h.rc.java.getKeys = no_keys
    with caplog.at_level("ERROR"):
        h.feed("a", {"n": 2})  # the key's next input resumes its restored run first
    assert "could not list the keys with runs in flight" in caplog.text
    h.run_timers()
    assert by_key(h.out) == {"a": [1, 2]}


def lose_first_outcome(core: Any, key: Any, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Drop the first call outcome of ``key`` on its way to the core's inbox: the key's run
    then stays busy with nothing in flight and nothing delivered (a broken invariant).

    Returns:
        The outcomes dropped (filled when it happens).
    """
    put, lost = core._inbox.put, []

    def dropping(k: Any, item: Any) -> None:
        if k == key and not lost:
            lost.append(item)
            return
        put(k, item)

    monkeypatch.setattr(core._inbox, "put", dropping)
    return lost


def split(out: list[Any]) -> tuple[list[Any], list[dict[str, Any]]]:
    """The operator's outputs and its error records (``(ERROR_TAG, record)`` pairs)."""
    errors = [o[1] for o in out if isinstance(o, tuple)]
    return [o for o in out if not isinstance(o, tuple)], errors


def test_a_run_that_can_never_finish_is_given_up_at_the_end_of_input_with_an_error_record(
        pump_harness, monkeypatch):
    h = pump_harness(Slow(), max_in_flight=8)
    lost = lose_first_outcome(h.op.core, "lost", monkeypatch)
    h.feed("lost", {"n": 1})
    h.feed("lost", {"n": 2})  # queued behind the run that cannot finish
    h.feed("ok", {"n": 3})
    h.end()  # returns: the drain ends
    assert len(lost) == 1
    outputs, errors = split(h.out)
    assert by_key(outputs) == {"lost": [2], "ok": [3]}  # the input behind it still ran
    assert len(errors) == 1, errors
    err = errors[0]
    assert (err["key"], err["seq"], err["action"], err["execution_id"]) == (
        "lost", 0, "ask", "r0/ask")
    assert err["error_type"] == "UnfinishedRunError" and err["input"] == {"n": 1}
    assert "the run of key 'lost' (input 0) could not finish at the end of input" in \
        err["message"]
    assert "nothing in flight and nothing delivered" in err["message"]
    assert "action 'ask' (execution r0/ask) waits for function call r0/ask/c0" in \
        err["message"]
    assert "whose outcome never came back" in err["message"]
    # counted, and nothing of it left: no run in keyed state, no busy key, no queued input
    assert h.op.stats["runs_abandoned"] == 1
    assert h.op.core.counters["runs_abandoned"] == 1
    assert not h.op._run_state.data.get("lost") and not h.op._queue_state.data["lost"]
    assert not h.op._switch.jkeys and not h.op._runs


def test_runs_that_finish_are_not_given_up_at_the_end_of_input(pump_harness):
    h = pump_harness(ThreeCalls(), max_in_flight=4)
    for n in range(8):
        h.feed(f"k{n % 2}", {"n": n * 10})
    h.end()
    outputs, errors = split(h.out)
    assert errors == []
    assert by_key(outputs) == {"k0": [3, 23, 43, 63], "k1": [13, 33, 53, 73]}
    assert h.op.stats["runs_abandoned"] == 0 and not h.op._run_state.data


def test_input_ending_with_runs_in_flight_logs_that_no_savepoint_completes_until_they_end(
        pump_harness, caplog):
    # A deployer's bounded job (NumberSequenceSource, a FileSource read once) whose input has
    # all been read runs its last runs inside the final watermark: a `flink stop
    # --savepointPath` then waits, its CLI times out and a second one fails the job over
    # ("tasks not ready"). The TaskManager log says so (INFO), once per subtask, with the
    # way out.
    h = pump_harness(Slow())
    for n in range(8):
        h.feed(f"k{n % 4}", {"n": n})
    with caplog.at_level("INFO", logger="flink_agents_py.flink"):
        h.end()
    assert by_key(h.out) == {f"k{i}": [i, i + 4] for i in range(4)}
    warned = [r.getMessage() for r in caplog.records if "input ended" in r.getMessage()]
    assert len(warned) == 1, warned
    assert "4 key(s) having runs in flight" in warned[0]
    assert "no checkpoint or savepoint completes" in warned[0]
    assert "flink stop --savepointPath" in warned[0] and "unbounded input" in warned[0]


@pytest.mark.parametrize("python_backend", [False, True], ids=["no-switching", "process"])
def test_the_drain_without_key_switching_logs_the_same_once(python_backend, caplog):
    # the per-key drain (no switchable Java backend; process mode's drain_all) says it too
    h = Harness(Slow(), python_backend)
    try:
        for n in range(8):
            h.feed(f"k{n % 4}", {"n": n})
        with caplog.at_level("INFO", logger="flink_agents_py.flink"):
            h.end()
        assert by_key(h.out) == {f"k{i}": [i, i + 4] for i in range(4)}
        noted = [r.getMessage() for r in caplog.records if "input ended" in r.getMessage()]
        assert len(noted) == 1, noted
        assert "4 key(s) having runs in flight" in noted[0] and "savepoint" in noted[0]
    finally:
        h.close()


@pytest.mark.usefixtures("fast_group_timers")
def test_input_ending_with_every_run_finished_logs_nothing_of_it(pump_harness, caplog):
    h = pump_harness(Slow())
    for n in range(4):
        h.feed(f"k{n}", {"n": n})
    h.run_timers()  # every run completes before the input ends
    assert len(h.out) == 4
    with caplog.at_level("INFO", logger="flink_agents_py.flink"):
        h.end()
    assert not [r for r in caplog.records if "input ended" in r.getMessage()]
