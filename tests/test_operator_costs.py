"""What the Flink operator costs per record, and the limits it holds, without a MiniCluster.

``AgentOperator`` is driven the way PyFlink drives it (open, ``process_element`` per record
with the record's key current, timers, close) over fake keyed state that counts every call a
real job makes into Java: the counts are the behaviour (a state read or write per call), so
they are asserted exactly where the design promises them.
"""

from __future__ import annotations

import asyncio
import collections
import heapq
import pickle
import threading
import time
from typing import Any

import pytest

pytest.importorskip("pyflink")

from flink_agents_py.api import (  # noqa: E402
    Agent,
    InputEvent,
    OutputEvent,
    RunnerContext,
    WaitTimeoutError,
    action,
)
from flink_agents_py.plan import AgentPlan  # noqa: E402

CALL_S = 0.05


class Echo(Agent):
    @action(InputEvent)
    @staticmethod
    async def echo(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output={"key": ctx.key, "n": event.input["n"]}))


async def slow_call(n: int) -> int:
    await asyncio.sleep(CALL_S)
    return n


class Slow(Agent):
    @action(InputEvent)
    @staticmethod
    async def ask(event: InputEvent, ctx: RunnerContext) -> None:
        n = await ctx.durable_execute_async(slow_call, event.input["n"])
        ctx.send_event(OutputEvent(output={"key": ctx.key, "n": n}))


# -- fakes: keyed state and timers that count what a real job calls in Java ------------------
class Backend:
    def __init__(self) -> None:
        self.key: Any = None
        self.calls: collections.Counter[str] = collections.Counter()
        self.max_queued = 0


class FakeValue:
    def __init__(self, backend: Backend, name: str) -> None:
        self.backend, self.name, self.data = backend, name, {}

    def value(self) -> Any:
        self.backend.calls[f"{self.name}.value"] += 1
        return self.data.get(self.backend.key)

    def update(self, value: Any) -> None:
        self.backend.calls[f"{self.name}.update"] += 1
        self.data[self.backend.key] = value

    def clear(self) -> None:
        self.backend.calls[f"{self.name}.clear"] += 1
        self.data.pop(self.backend.key, None)


class FakeMap:
    def __init__(self, backend: Backend, name: str) -> None:
        self.backend, self.name = backend, name
        self.data: dict[Any, dict[Any, Any]] = collections.defaultdict(dict)

    def put(self, k: Any, v: Any) -> None:
        self.backend.calls[f"{self.name}.put"] += 1
        entries = self.data[self.backend.key]
        entries[k] = v
        self.backend.max_queued = max(self.backend.max_queued, len(entries))

    def get(self, k: Any) -> Any:
        self.backend.calls[f"{self.name}.get"] += 1
        return self.data[self.backend.key].get(k)

    def remove(self, k: Any) -> None:
        self.backend.calls[f"{self.name}.remove"] += 1
        self.data[self.backend.key].pop(k, None)


class PythonBackend:
    """PyFlink's process-mode state backend as the operator sees it: keys are ``Row(key)``."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.switches = 0

    def get_current_key(self) -> Any:
        from pyflink.common import Row

        return Row(self.backend.key)

    def set_current_key(self, key: Any) -> None:
        self.switches += 1
        self.backend.key = key[0]


class FakeRuntimeContext:
    def __init__(self, backend: Backend, python_backend: bool = False) -> None:
        self.backend = backend
        if python_backend:
            self._keyed_state_backend = PythonBackend(backend)

    def get_state(self, descriptor: Any) -> FakeValue:
        return FakeValue(self.backend, descriptor.name)

    def get_map_state(self, descriptor: Any) -> FakeMap:
        return FakeMap(self.backend, descriptor.name)

    def get_metrics_group(self) -> Any:
        raise RuntimeError("no metric group in this test")

    def get_index_of_this_subtask(self) -> int:
        return 0

    def get_attempt_number(self) -> int:
        return 0


class Timers:
    """Per-key timers as Flink keeps them (a set per key and domain: duplicates collapse)."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.processing: set[tuple[int, Any]] = set()
        self.due: list[tuple[int, int, Any]] = []  # a heap over ``processing`` (lazy deletes)
        self.event: set[tuple[int, Any]] = set()
        self.calls: collections.Counter[str] = collections.Counter()

    def current_processing_time(self) -> int:
        return time.time_ns() // 1_000_000

    def register_processing_time_timer(self, t: int) -> None:
        self.calls["register_processing"] += 1
        if (t, self.backend.key) not in self.processing:
            self.processing.add((t, self.backend.key))
            heapq.heappush(self.due, (t, id(self.backend.key), self.backend.key))

    def delete_processing_time_timer(self, t: int) -> None:
        self.calls["delete_processing"] += 1
        self.processing.discard((t, self.backend.key))

    def register_event_time_timer(self, t: int) -> None:
        self.calls["register_event"] += 1
        self.event.add((t, self.backend.key))

    def delete_event_time_timer(self, t: int) -> None:
        self.calls["delete_event"] += 1
        self.event.discard((t, self.backend.key))


class Ctx:
    def __init__(self, backend: Backend, timers: Timers) -> None:
        self.backend, self.timers = backend, timers

    def get_current_key(self) -> Any:
        return self.backend.key

    def timer_service(self) -> Timers:
        return self.timers


class Harness:
    """An operator on fake state; ``feed`` records, ``run_timers`` until idle, ``end``."""

    def __init__(self, agent: Agent, python_backend: bool = False, **options: Any) -> None:
        from flink_agents_py.flink import AgentOperator

        self.backend = Backend()
        self.timers = Timers(self.backend)
        self.ctx = Ctx(self.backend, self.timers)
        self.op = AgentOperator(AgentPlan.from_agent(agent), metrics=False, **options)
        self.runtime_context = FakeRuntimeContext(self.backend, python_backend)
        self.op.open(self.runtime_context)
        self.out: list[Any] = []
        self.waiting_seen: list[int] = []

    def feed(self, key: Any, record: Any) -> None:
        self.backend.key = key
        self.out.extend(self.op.process_element(record, self.ctx))
        self.waiting_seen.append(getattr(self.op.core.executor, "waiting", 0))

    def fire(self, t: int, key: Any) -> None:
        self.backend.key = key
        self.out.extend(self.op.on_timer(t, self.ctx))

    def run_timers(self, timeout_s: float = 10) -> None:
        """Fire processing-time timers as they fall due, until none is left."""
        deadline = time.monotonic() + timeout_s
        while self.timers.processing:
            assert time.monotonic() < deadline, "timers never ran out"
            t, _, key = heapq.heappop(self.timers.due)
            if (t, key) not in self.timers.processing:
                continue  # deleted
            wait = (t - time.time_ns() // 1_000_000) / 1000
            if wait > 0:
                time.sleep(wait)
            self.timers.processing.discard((t, key))
            self.fire(t, key)

    def end(self) -> None:
        """The final watermark: every event-time timer fires (and those it registers)."""
        while self.timers.event:
            t, key = min(self.timers.event, key=lambda tk: tk[0])
            self.timers.event.discard((t, key))
            self.fire(t, key)

    def close(self) -> None:
        self.op.close()


@pytest.fixture
def harness():
    made: list[Harness] = []

    def make(agent: Agent, python_backend: bool = False, **options: Any) -> Harness:
        made.append(Harness(agent, python_backend, **options))
        return made[-1]

    yield make
    for h in made:
        h.close()


# -- keyed state ---------------------------------------------------------------------------
def test_a_run_done_in_one_callback_reads_run_and_tail_and_writes_only_the_tail(harness):
    h = harness(Echo())
    h.feed("a", {"n": 1})
    assert h.out == [{"key": "a", "n": 1}]
    calls = dict(h.backend.calls)
    calls.pop("agent-memory.value", None)  # the core may still look at memory (not written)
    assert calls == {"agent-run.value": 1, "agent-queue-tail.value": 1,
                     "agent-queue-tail.update": 1}
    h.feed("a", {"n": 2})  # the key's second record: its sequence number goes on
    assert h.backend.calls["agent-queue-tail.update"] == 2
    assert h.op._tail_state.data["a"] == 2
    # the operator remembers what keyed state holds for a key it left idle: nothing read
    assert h.backend.calls["agent-run.value"] == 1
    assert h.backend.calls["agent-queue-tail.value"] == 1
    assert not h.timers.calls  # no wake-up for a run that did not outlive its callback


def test_a_key_forgotten_among_many_idle_keys_is_read_from_state_again(harness, monkeypatch):
    from flink_agents_py.flink import _key_state

    monkeypatch.setattr(_key_state, "IDLE_KEYS", 2)
    h = harness(Echo())
    for key in ("a", "b", "c"):  # "a" is forgotten when "c" goes idle
        h.feed(key, {"n": 1})
    h.feed("a", {"n": 2})
    h.feed("c", {"n": 2})
    assert h.out[-2:] == [{"key": "a", "n": 2}, {"key": "c", "n": 2}]
    assert h.backend.calls["agent-run.value"] == 4  # a, b, c, then a again
    assert h.op._tail_state.data == {"a": 2, "b": 1, "c": 2}  # sequence numbers go on


def test_a_run_that_outlives_its_callback_is_in_state_until_it_completes(harness):
    h = harness(Slow())
    h.feed("a", {"n": 1})
    assert h.out == []
    run = h.op._run_state.data["a"]
    assert '"seq":0' in run.replace(" ", "")
    h.feed("a", {"n": 2})  # queued behind the run: only now does the queue state see a record
    assert h.backend.calls["agent-queue.put"] == 1
    assert h.op._tail_state.data["a"] == 2 and list(h.op._queue_state.data["a"]) == [1]
    # the queue's head is the input after the run in flight (run.seq + 1): never written
    assert not h.op._head_state.data and not h.backend.calls["agent-queue-head.update"]
    h.run_timers()
    assert h.out == [{"key": "a", "n": 1}, {"key": "a", "n": 2}]
    assert "a" not in h.op._run_state.data  # cleared once the last run completed
    assert h.backend.calls["agent-run.clear"] == 1
    assert h.op._queue_state.data["a"] == {}


def test_state_reads_are_cached_within_a_callback(harness):
    h = harness(Slow())
    for n in range(3):
        h.feed("a", {"n": n})
    # per callback at most one read of each value (3 callbacks so far)
    for name in ("agent-run", "agent-queue-tail", "agent-queue-head"):
        assert h.backend.calls[f"{name}.value"] <= 3, (name, dict(h.backend.calls))
    h.run_timers()
    assert [o["n"] for o in h.out] == [0, 1, 2]


# -- wake-ups ------------------------------------------------------------------------------
def test_drain_timer_registered_once_per_busy_period_and_deleted_when_idle(harness):
    h = harness(Slow())
    for n in range(4):
        h.feed("a", {"n": n})
    assert h.timers.calls["register_event"] == 1
    assert len([k for _, k in h.timers.processing if k == "a"]) == 1  # one pending poll
    h.run_timers()
    assert [o["n"] for o in h.out] == [0, 1, 2, 3]
    assert h.timers.calls["register_event"] == 1 and h.timers.calls["delete_event"] == 1
    assert not h.timers.event and not h.timers.processing


def test_end_of_input_drains_every_busy_key(harness):
    h = harness(Slow())
    for n in range(12):
        h.feed(f"k{n % 4}", {"n": n})
    h.end()  # processing-time timers are dropped at the end of input
    by: dict[str, list[int]] = collections.defaultdict(list)
    for o in h.out:
        by[o["key"]].append(o["n"])
    assert by == {f"k{i}": [n for n in range(12) if n % 4 == i] for i in range(4)}


def test_a_key_whose_call_waits_for_a_slot_is_not_polled_every_millisecond(harness):
    # one slot, eight keys: the last key's call waits ~7 calls (~350 ms) before it runs
    h = harness(Slow(), max_in_flight=1, max_waiting_calls=100)
    h.feed("warm", {"n": -1})  # one completed call: the executor knows how long calls take
    h.run_timers()
    h.op.stats.clear()
    for n in range(8):
        h.feed(f"k{n}", {"n": n})
    h.run_timers()
    assert sorted(o["n"] for o in h.out) == [-1, *range(8)]
    # a 1 ms poll, backing off to 20 ms, would take ~20 polls per key here
    assert h.op.stats["timer_callbacks"] <= 8 * 4, dict(h.op.stats)


async def held_call(n: int) -> int:
    await asyncio.sleep(3600)  # far longer than the test: nothing completes
    return n


class Held(Agent):
    @action(InputEvent)
    @staticmethod
    async def ask(event: InputEvent, ctx: RunnerContext) -> None:
        n = await ctx.durable_execute_async(held_call, event.input["n"])
        ctx.send_event(OutputEvent(output={"key": ctx.key, "n": n}))


def test_keys_waiting_on_calls_that_do_not_complete_are_polled_at_a_bounded_rate(harness):
    # 400 keys, every call running and none completing: a per-key backoff capped at 20 ms
    # would poll ~20,000 times a second; the cap grows with the keys waiting (0.5 ms each).
    keys = 400
    h = harness(Held(), max_in_flight=keys, max_waiting_calls=keys)
    for n in range(keys):
        h.feed(f"k{n}", {"n": n})
    h.op.stats.clear()
    window_s, t0 = 1.5, time.monotonic()
    while time.monotonic() - t0 < window_s:  # fire timers as they fall due, for the window
        t, _, key = heapq.heappop(h.timers.due)
        if (t, key) not in h.timers.processing:
            continue
        wait = (t - time.time_ns() // 1_000_000) / 1000
        if wait > 0:
            time.sleep(wait)
        h.timers.processing.discard((t, key))
        h.fire(t, key)
    elapsed_ms = (time.monotonic() - t0) * 1000
    polls = h.op.stats["idle_polls"]
    assert h.out == [] and polls > 0
    # the backoff doubles 1, 2, 4, ... up to keys * 0.5 ms = 200 ms: at most ~8 polls per key
    # to get there, then one per 200 ms
    ramp = keys * 8
    assert polls <= ramp + keys * elapsed_ms / (keys * 0.5), (polls, elapsed_ms)
    assert len(h.timers.processing) == keys  # still exactly one poll timer per waiting key


# -- resource limits -----------------------------------------------------------------------
def test_a_hot_key_never_queues_more_than_its_limit(harness):
    h = harness(Slow(), max_queued_per_key=3)
    for n in range(20):
        h.feed("hot", {"n": n})
        assert len(h.op._queue_state.data["hot"]) <= 3
    assert h.backend.max_queued <= 3
    assert h.op.stats["input_waits"] > 0
    h.end()
    assert [o["n"] for o in h.out] == list(range(20))  # complete and in input order


def test_calls_waiting_for_a_slot_stay_bounded(harness):
    h = harness(Slow(), max_in_flight=2, max_waiting_calls=3)
    for n in range(30):
        h.feed(f"k{n}", {"n": n})
    assert max(h.waiting_seen) <= 3, h.waiting_seen
    h.end()
    assert sorted(o["n"] for o in h.out) == list(range(30))


# -- options -------------------------------------------------------------------------------
def test_options_name_what_is_out_of_range():
    from flink_agents_py.runtime import HostOptions

    with pytest.raises(ValueError, match="max_queued_per_key"):
        HostOptions(max_queued_per_key=0)
    with pytest.raises(ValueError, match="max_in_flight"):
        HostOptions(max_in_flight=0)
    with pytest.raises(TypeError, match="max_inflight"):
        HostOptions().replace(max_inflight=3)
    with pytest.raises(Exception):  # noqa: B017 - frozen
        HostOptions().max_in_flight = 3  # type: ignore[misc]


def test_environment_keywords_become_one_options_object():
    from flink_agents_py.flink import AgentOperator, FlinkExecutionEnvironment
    from flink_agents_py.local import LocalExecutionEnvironment
    from flink_agents_py.runtime import HostOptions

    env = FlinkExecutionEnvironment(object(), max_in_flight=7, max_queued_per_key=5,
                                    metrics=False)
    assert env.options == HostOptions(max_in_flight=7, max_queued_per_key=5, metrics=False)
    env.max_in_flight = 9  # Flink Agents' NUM_ASYNC_THREADS sets it this way
    assert env.options.max_in_flight == 9
    op = AgentOperator(AgentPlan.from_agent(Echo()), env.options)
    assert op.options is env.options
    assert pickle.loads(pickle.dumps(env.options)) == env.options
    local = LocalExecutionEnvironment(max_in_flight=3, metrics=False)
    assert local.options == HostOptions(max_in_flight=3, metrics=False)
    assert LocalExecutionEnvironment(options=local.options).options is local.options
    with pytest.raises(TypeError, match="not both"):
        LocalExecutionEnvironment(max_in_flight=5, options=local.options)


def test_input_held_by_a_limit_is_taken_after_drain_poll_s_when_calls_do_not_complete(harness):
    # calls that never complete: a wait "until a slot frees" would hold the task thread (and
    # with it every checkpoint barrier) forever; each record is held at most drain_poll_s
    h = harness(Held(), max_in_flight=1, max_waiting_calls=1, max_queued_per_key=1,
                drain_poll_s=0.2)
    for n in range(3):
        h.feed(f"k{n}", {"n": n})  # k0 runs, k1 waits for the slot, k2 is over the limit
    h.feed("k0", {"n": 3})  # queued behind k0's run
    h.feed("k0", {"n": 4})  # k0's queue is at its limit
    assert h.op.stats["input_wait_timeouts"] >= 2, dict(h.op.stats)
    assert h.out == []
    assert len(h.op._queue_state.data["k0"]) <= 3



@pytest.mark.timeout(60)  # the drain used to wait for such a run for good
def test_end_of_input_gives_up_a_run_that_can_never_finish_with_an_error_record(harness,
                                                                               monkeypatch):
    # process mode: the drain finishes one key after another, blocking on each
    h = harness(Slow())
    core = h.op.core
    put, lost = core._inbox.put, []

    def dropping(k: Any, item: Any) -> None:  # the first outcome of "lost" never arrives
        if k == "lost" and not lost:
            lost.append(item)
            return
        put(k, item)

    monkeypatch.setattr(core._inbox, "put", dropping)
    h.feed("lost", {"n": 1})
    h.feed("lost", {"n": 2})  # queued behind the run that cannot finish
    h.feed("ok", {"n": 3})
    h.end()
    assert len(lost) == 1
    errors = [o[1] for o in h.out if isinstance(o, tuple)]
    outputs = sorted((o["key"], o["n"]) for o in h.out if not isinstance(o, tuple))
    assert outputs == [("lost", 2), ("ok", 3)]  # the input behind it still ran
    assert [(e["key"], e["seq"], e["action"], e["error_type"]) for e in errors] == [
        ("lost", 0, "ask", "UnfinishedRunError")]
    assert "the run of key 'lost' (input 0) could not finish at the end of input" in \
        errors[0]["message"]
    assert "waits for function call r0/ask/c0" in errors[0]["message"]
    assert h.op.stats["runs_abandoned"] == 1
    assert not h.op._run_state.data.get("lost") and not h.op._queue_state.data["lost"]
    assert not h.timers.event  # no drain timer left behind


@pytest.mark.timeout(60)
def test_the_end_of_input_waits_for_the_calls_of_a_none_or_falsy_key(harness):
    # process mode: None is a record key like any other, so a call of key None in flight
    # keeps its run busy, not stuck (such a run was given up while its call ran)
    h = harness(Slow())
    keys = [None, 0, ""]
    for n, key in enumerate(keys):
        h.feed(key, {"n": n})
        h.feed(key, {"n": n + 10})  # queued behind the run in flight
    h.end()
    assert [o for o in h.out if isinstance(o, tuple)] == []
    assert sorted(((o["key"], o["n"]) for o in h.out), key=repr) == sorted(
        [(k, n) for n, k in enumerate(keys)] + [(k, n + 10) for n, k in enumerate(keys)],
        key=repr)
    assert h.op.stats["runs_abandoned"] == 0


TOGETHER = threading.Barrier(3, timeout=30)


def together(n: int) -> int:
    TOGETHER.wait()  # passes only when three keys' calls run at once
    return n


class Together(Agent):
    @action(InputEvent)
    @staticmethod
    async def ask(event: InputEvent, ctx: RunnerContext) -> None:
        n = await ctx.durable_execute_async(slow_call, event.input["n"])
        m = await ctx.durable_execute_async(together, n)
        ctx.send_event(OutputEvent(output={"key": ctx.key, "n": m}))


@pytest.mark.timeout(60)
def test_process_mode_end_of_input_works_every_busy_key_at_once(harness):
    # PyFlink's Python state backend: the first drain timer switches its key to each busy
    # key (their second calls meet at a barrier), writes land under each key, and the
    # timer's own key is current again when the callback returns
    TOGETHER.reset()
    h = harness(Together(), python_backend=True)
    for n, key in enumerate(["a", "b", "c"]):
        h.feed(key, {"n": n})
        h.feed(key, {"n": n + 10})  # queued behind the run in flight
    fired: list[Any] = []
    while h.timers.event:
        t, key = min(h.timers.event, key=lambda tk: tk[0])
        h.timers.event.discard((t, key))
        h.fire(t, key)
        fired.append((key, h.backend.key))
    assert sorted((o["key"], o["n"]) for o in h.out) == [
        ("a", 0), ("a", 10), ("b", 1), ("b", 11), ("c", 2), ("c", 12)]
    assert all(k == current for k, current in fired)  # switched back every time
    assert h.runtime_context._keyed_state_backend.switches >= 4
    assert not any(h.op._run_state.data.values())  # every run done, under its own key
    assert all(not q for q in h.op._queue_state.data.values())
    assert h.op.stats["runs_abandoned"] == 0


class SlowThenWait(Agent):
    @action(InputEvent)
    @staticmethod
    async def ask(event: InputEvent, ctx: RunnerContext) -> None:
        n = await ctx.durable_execute_async(slow_call, event.input["n"])
        try:
            got = await ctx.wait_for(f"go-{ctx.key}")
        except WaitTimeoutError as e:
            got = str(e)
        ctx.send_event(OutputEvent(output={"key": ctx.key, "n": n, "got": got}))


@pytest.mark.timeout(60)
def test_a_run_that_parks_during_the_end_of_input_drain_times_out_there(harness):
    # process mode: the drain works the key until its run waits for an outside event only;
    # the parked run gets its end-of-input timer there too, so its wait times out
    h = harness(SlowThenWait())
    h.feed("a", {"n": 7})
    h.end()
    assert [(o["key"], o["n"], "before the end of input" in o["got"]) for o in h.out] == [
        ("a", 7, True)]
    assert not h.op._run_state.data.get("a")
