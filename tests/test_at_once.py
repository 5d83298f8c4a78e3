"""The straight line of a one-action run (``runtime/core/_at_once.py``) changes nothing seen.

A run whose only triggered action returns at once skips the core's general dispatch, task
building, stepping and completion. Each program here runs twice through the core, once with
the straight line and once forced onto the general path, and everything observable is
compared: outputs, error records (key, position, action, message, traceback), every hook an
observer gets (event log, traces and metrics are built from these, with their event ids),
the metrics' counts, the core's counters and each key's stored state after every record (so
a checkpoint between any two records restores the same thing). The programs cover what the
straight line must hand over mid-way: memory, several events, an event that triggers an
action, durable calls (inline, awaited, never awaited), awaits the runtime refuses, actions
that raise or return a value, outputs the host's type refuses; and the plans it must not
take: several actions on ``InputEvent``, a listener on ``OutputEvent``, built-in actions.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import flink_agents_py
from flink_agents_py.api import (
    Agent,
    Event,
    InputEvent,
    OutputEvent,
    ResourceType,
    RunnerContext,
    action,
)
from flink_agents_py.observability import AgentMetrics
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import AgentCore
from flink_agents_py.runtime.core import _at_once
from flink_agents_py.runtime.core._observer import CompositeObserver, Observer
from flink_agents_py.runtime.recorder._state import InMemoryKeyState

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.filterwarnings("ignore::flink_agents_py.plan._action_checks.ActionReturnWarning"),
]


class Noted(Event):
    note: str = ""


class Unheard(Event):
    """An event type no action takes (dropped, with a warning)."""


def lookup(n: Any) -> str:
    return f"looked up {n}"


async def alookup(n: Any) -> str:
    return f"awaited {n}"


STASHED: list[RunnerContext] = []


def _behave(event: InputEvent, ctx: RunnerContext) -> Any:
    """What the input's ``do`` asks for, from a plain action (see ``Mixed``)."""
    data = event.input
    do = data.get("do", "echo")
    if do == "raise":
        raise ValueError(f"refused {data['n']}")
    if do == "stash":  # a context kept past its action: refused when used later
        STASHED[:] = [ctx]
    if do == "stale" and STASHED:
        STASHED[0].get_resource("none", ResourceType.CHAT_MODEL)  # refused: finished
    if do == "sensory":
        ctx.sensory_memory.set("seen", data["n"])
    if do == "short":
        count = ctx.short_term_memory.get("count") or 0
        ctx.short_term_memory.set("count", count + 1)
    if do == "call":
        data = {**data, "found": ctx.durable_execute(lookup, data["n"])}
    if do == "unawaited":
        ctx.durable_execute_async(alookup, data["n"])  # never awaited
    if do == "chain":
        ctx.send_event(Noted(note=str(data["n"])))
    if do == "unheard":
        ctx.send_event(Unheard())
    if do == "bad_output":
        ctx.send_event(OutputEvent(output={"key": ctx.key, "bad": True}))
    if do == "several":
        ctx.send_event(OutputEvent(output={"key": ctx.key, "first": data["n"]}))
    ctx.send_event(OutputEvent(output={"key": ctx.key, "echo": data}))
    if do == "raise_after":
        raise RuntimeError("after sending")
    return "a value" if do == "returns" else None


class Mixed(Agent):
    """One plain action on ``InputEvent`` that does what each input asks."""

    @action(InputEvent)
    @staticmethod
    def on_input(event: InputEvent, ctx: RunnerContext) -> Any:
        return _behave(event, ctx)

    @action(Noted)
    @staticmethod
    def on_noted(event: Noted, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output={"key": ctx.key, "noted": event.note}))


class MixedAsync(Agent):
    """``Mixed`` with an async action that may also await."""

    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: RunnerContext) -> Any:
        do = event.input.get("do")
        if do == "await":
            found = await ctx.durable_execute_async(alookup, event.input["n"])
            ctx.send_event(OutputEvent(output={"key": ctx.key, "found": found}))
            return None
        if do == "asyncio":
            await asyncio.sleep(0)  # refused: UnsupportedAwaitError
        if do == "asyncio_caught":
            try:
                await asyncio.sleep(0)
            except Exception as e:  # noqa: BLE001 - caught: the action goes on
                ctx.send_event(OutputEvent(output={"key": ctx.key, "caught": type(e).__name__}))
        return _behave(event, ctx)

    @action(Noted)
    @staticmethod
    def on_noted(event: Noted, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output={"key": ctx.key, "noted": event.note}))


class Twice(Agent):
    """Two actions on ``InputEvent``: never the straight line."""

    @action(InputEvent)
    @staticmethod
    def first(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output={"key": ctx.key, "first": event.input["n"]}))

    @action(InputEvent)
    @staticmethod
    async def second(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.sensory_memory.set("n", event.input["n"])
        ctx.send_event(OutputEvent(output={"key": ctx.key, "second": event.input["n"]}))


class Listening(Agent):
    """An action on ``OutputEvent`` too: the outputs go through the general dispatch."""

    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output={"key": ctx.key, "echo": event.input["n"]}))

    @action(OutputEvent)
    @staticmethod
    def on_output(event: OutputEvent, ctx: RunnerContext) -> None:
        ctx.short_term_memory.set("last", event.output)


DOS = [
    "echo",
    "raise",
    "sensory",
    "short",
    "call",
    "unawaited",
    "chain",
    "unheard",
    "bad_output",
    "several",
    "raise_after",
    "returns",
    "echo",
    "short",
    "stash",
    "stale",
]
ASYNC_DOS = [*DOS, "await", "asyncio", "asyncio_caught", "await", "echo"]


def _records(dos: list[str], keys: int = 3) -> list[dict[str, Any]]:
    return [{"key": f"k{i % keys}", "n": i, "do": do} for i, do in enumerate(dos * 2)]


class Hooks(Observer):
    """Every hook the core calls, as plain data, in order."""

    hooks_never_raise = True

    def __init__(self) -> None:
        self.seen: list[Any] = []

    def run_started(self, key: Any, seq: int) -> None:
        self.seen.append(("run_started", key, seq))

    def run_completed(self, key: Any, seq: int) -> None:
        self.seen.append(("run_completed", key, seq))

    def event_dispatched(self, key: Any, event: Any, parent: str | None) -> None:
        self.seen.append(
            ("event", key, event.id, event.type, parent, event.model_dump(mode="json"))
        )

    def action_started(self, key: Any, execution_id: str, action: str, reentered: bool) -> None:
        self.seen.append(("action_started", key, execution_id, action, reentered))

    def action_finished(
        self, key: Any, execution_id: str, action: str, error: BaseException | None
    ) -> None:
        self.seen.append(("action_finished", key, execution_id, action, repr(error)))

    def call_started(self, key: Any, call_id: str, command: Any, replayed: bool) -> None:
        self.seen.append(("call_started", key, call_id, str(command), replayed))

    def call_finished(self, key: Any, call_id: str, ok: bool, result: Any) -> None:
        self.seen.append(("call_finished", key, call_id, ok, repr(result)))

    def output_emitted(self, key: Any, output: Any, parent: str) -> None:
        self.seen.append(("output", key, json.dumps(output, sort_keys=True), parent))


class _Logged(logging.Handler):
    """The package's log lines at WARNING and above, as plain data."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.seen: list[tuple[str, str, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.seen.append((record.name, record.levelname, record.getMessage()))


def _refuse_bad(output: Any) -> None:
    if isinstance(output, dict) and output.get("bad"):
        raise TypeError("the host's type has no field 'bad'")


def _stored(state: InMemoryKeyState) -> Any:
    return (
        state.run.to_stored() if state.run is not None else None,
        json.dumps(state.memory, sort_keys=True),
        state.queued(),
    )


def _latency_counts(snapshot: dict[str, Any]) -> Any:
    """The metrics' snapshot with each latency summary reduced to its count (timings vary)."""

    def counts(v: Any) -> Any:
        if isinstance(v, dict) and "count" in v:
            return v["count"]
        return {k: counts(x) for k, x in v.items()} if isinstance(v, dict) else v

    return {k: (counts(v) if k == "latency_ms" else v) for k, v in snapshot.items()}


@contextlib.contextmanager
def _general_path(general: bool = True) -> Iterator[None]:
    """The straight lines off (``_at_once.AT_ONCE``) for the block, when ``general``."""
    saved = _at_once.AT_ONCE
    if general:
        _at_once.AT_ONCE = False
    try:
        yield
    finally:
        _at_once.AT_ONCE = saved


def _drive(
    agent: Agent, records: list[dict[str, Any]], *, at_once: bool, output_check: Any = None
) -> dict[str, Any]:
    """Run ``records`` through a core; everything observable, in order."""
    with _general_path(not at_once):
        return _driven(agent, records, at_once=at_once, output_check=output_check)


def _driven(
    agent: Agent, records: list[dict[str, Any]], *, at_once: bool, output_check: Any = None
) -> dict[str, Any]:
    hooks, metrics, logged = Hooks(), AgentMetrics(), _Logged()
    logging.getLogger("flink_agents_py").addHandler(logged)
    core = AgentCore(
        AgentPlan.from_agent(agent),
        observer=CompositeObserver(hooks, metrics),
        output_check=output_check,
    )
    if not at_once:
        core._single = None  # forced onto the general path
    core.open()
    states: dict[str, InMemoryKeyState] = {}
    seen: list[Any] = []
    try:
        for i, record in enumerate(records):
            key = record["key"]
            state = states.setdefault(key, InMemoryKeyState())
            res = core.on_input(key, dict(record), state, where=f"record {i}", fresh=True)
            results = [res]
            while state.run is not None:  # an awaited call on the I/O executor
                seen.append(("waiting", key, _stored(state)))  # (a checkpoint could be here)
                if not core.has_deliveries(key):
                    core.wait_for(key, 5.0)
                assert core.has_deliveries(key), f"the run of record {i} never ends"
                results.append(core.advance(key, state))
            for r in results:
                seen.append(("outputs", json.dumps(r.outputs, sort_keys=True, default=repr)))
                seen.append(("errors", [e.model_dump() for e in r.errors]))
            seen.append(("state", key, _stored(state)))
        taken = core._single is not None
    finally:
        core.close()
        logging.getLogger("flink_agents_py").removeHandler(logged)
    return {
        "logged": logged.seen,
        "seen": seen,
        "hooks": hooks.seen,
        "counters": dict(core.counters),
        "metrics": _latency_counts(metrics.snapshot()),
        "taken": taken,
    }


@pytest.mark.parametrize(
    "agent,dos,check,taken",
    [
        (Mixed, DOS, None, True),
        (MixedAsync, ASYNC_DOS, None, True),
        (Mixed, DOS, _refuse_bad, True),
        (MixedAsync, ASYNC_DOS, _refuse_bad, True),
        (Twice, ["echo"] * 6, None, False),
        (Listening, ["echo"] * 6, None, True),
    ],
)
def test_the_straight_line_and_the_general_path_are_seen_the_same(agent, dos, check, taken):
    records = _records(dos)
    fast = _drive(agent(), records, at_once=True, output_check=check)
    general = _drive(agent(), records, at_once=False, output_check=check)
    assert fast["taken"] is taken
    assert fast["seen"] == general["seen"]
    assert fast["logged"] == general["logged"]
    assert fast["hooks"] == general["hooks"]
    assert fast["counters"] == general["counters"]
    assert fast["metrics"] == general["metrics"]


def test_the_programs_do_what_each_input_asks():
    """The comparison above compares real behaviour: outputs, errors, memory and calls."""
    out = _drive(MixedAsync(), _records(ASYNC_DOS, keys=1), at_once=True, output_check=_refuse_bad)
    outputs = [json.loads(v) for k, v, *_ in out["seen"] if k == "outputs"]
    flat = [o for batch in outputs for o in batch]
    errors = [e for k, v, *_ in out["seen"] if k == "errors" for e in v]
    assert {"key": "k0", "noted": "6"} in flat
    assert any(o.get("echo", {}).get("found") == "looked up 4" for o in flat)
    assert {"key": "k0", "found": "awaited 16"} in flat
    assert {"key": "k0", "caught": "UnsupportedAwaitError"} in flat
    kinds = {(e["seq"], e["action"], e["error_type"]) for e in errors}
    assert (1, "on_input", "ValueError") in kinds and (10, "on_input", "RuntimeError") in kinds
    assert (17, "on_input", "UnsupportedAwaitError") in kinds
    stale = [e for e in errors if e["seq"] == 15]
    assert stale[0]["error_type"] == "NotInActionContextError"
    assert "after action execution r14/on_input finished" in stale[0]["message"]
    assert (8, "on_input", "TypeError") in kinds  # the output the host's type refused
    assert all(e["key"] == "k0" and e["input"] for e in errors)
    last_state = [s for k, *s in out["seen"] if k == "state"][-1]
    assert json.loads(last_state[1][1]) == {"count": 4}  # four "short" inputs, all kept
    assert out["counters"]["actions_failed"] == 2 * 4
    assert any("'Unheard' trigger no action" in m for *_, m in out["logged"])
    assert any("refused 1" in m for *_, m in out["logged"])  # the failure's log line


def test_a_restored_key_goes_on_the_same_on_either_path():
    """A key's state taken after a record and restored gives the same later records."""
    records = [
        {"key": "k", "n": i, "do": do}
        for i, do in enumerate(["short", "echo", "short", "await", "raise", "short"])
    ]
    results = []
    for at_once in (True, False):
        with _general_path(not at_once):
            results.append(_restored_outputs(records, at_once))
    assert results[0] == results[1]
    assert results[0][-1][2] == {"count": 3}


def _restored_outputs(records: list[dict[str, Any]], at_once: bool) -> list[Any]:
    """The outputs, errors and memory of ``records[3:]`` after a restore from the third's."""
    first = _driven(MixedAsync(), records[:3], at_once=at_once)
    stored = [s for k, *s in first["seen"] if k == "state"][-1][1]
    core = AgentCore(AgentPlan.from_agent(MixedAsync()))
    if not at_once:
        core._single = None
    core.open()
    try:
        state = InMemoryKeyState()
        state.memory = json.loads(stored[1])
        outs = []
        for r in records[3:]:
            res = core.on_input("k", dict(r), state)
            while state.run is not None:
                core.wait_for("k", 5.0)
                assert core.has_deliveries("k"), "the run never ends"
                res.outputs.extend(core.advance("k", state).outputs)
            outs.append((res.outputs, [e.error_type for e in res.errors], state.memory))
    finally:
        core.close()
    return outs


def test_a_plan_the_straight_line_cannot_take_is_never_given_to_it(monkeypatch):
    monkeypatch.setattr(_at_once, "AT_ONCE", False)
    assert _drive(Mixed(), _records(["echo"]), at_once=True)["taken"] is False
    monkeypatch.setattr(_at_once, "AT_ONCE", True)
    assert _drive(Mixed(), _records(["echo"]), at_once=True)["taken"] is True


def test_a_users_module_run_from_elsewhere_gives_the_same_on_either_path(tmp_path: Path):
    """The local runner, from a user's own module outside the repository."""
    (tmp_path / "my_echo.py").write_text(
        textwrap.dedent("""
        import sys
        from flink_agents_py import AgentsExecutionEnvironment
        from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
        from flink_agents_py.runtime.core import _at_once

        class Echo(Agent):
            @action(InputEvent)
            @staticmethod
            async def echo(event: InputEvent, ctx: RunnerContext) -> None:
                if event.input["n"] % 3 == 0:
                    ctx.short_term_memory.set("third", event.input["n"])
                if event.input["n"] == 4:
                    raise ValueError("four")
                ctx.send_event(OutputEvent(output={"key": ctx.key, "n": event.input["n"]}))

        _at_once.AT_ONCE = sys.argv[1] == "on"
        records = [{"key": f"k{i % 2}", "n": i} for i in range(8)]
        env = AgentsExecutionEnvironment.local()
        result = env.from_list(records).apply(Echo()).run()
        print(sorted(map(repr, result.outputs)))
        print([(e.key, e.seq, e.action, e.error_type, e.message) for e in result.errors])
    """)
    )
    root = Path(flink_agents_py.__file__).parents[1]
    outs = []
    for mode in ("on", "off"):
        proc = subprocess.run(
            [sys.executable, "my_echo.py", mode],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
            env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        outs.append(proc.stdout)
    assert outs[0] == outs[1]
    assert "'n': 7" in outs[0] and "('k0', 2, 'echo', 'ValueError', 'four')" in outs[0]


class Exiting(Agent):
    """An action that ends the process (``SystemExit`` is not an action's failure)."""

    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        if event.input["do"] == "await_exit":
            await ctx.durable_execute_async(alookup, 1)
        raise SystemExit(3)


@pytest.mark.parametrize("do", ["exit", "await_exit"])
def test_an_action_that_ends_the_process_leaves_the_same_run_behind(do):
    """``SystemExit`` leaves ``advance`` on either path, with the same run and live task."""
    left = []
    for at_once in (True, False):
        with _general_path(not at_once):
            left.append(_left_behind(do, at_once))
    assert left[0] == left[1]


def _left_behind(do: str, at_once: bool) -> Any:
    """What ``Exiting`` leaves behind: the key's state, its live task and the counters."""
    core = AgentCore(AgentPlan.from_agent(Exiting()))
    if not at_once:
        core._single = None
    core.open()
    try:
        state = InMemoryKeyState()
        try:
            core.on_input("k", {"key": "k", "do": do}, state)
            core.wait_for("k", 5.0)
            core.advance("k", state)
        except SystemExit as e:
            assert e.code == 3
        else:
            pytest.fail("SystemExit did not leave the core")
        task = core._live["k"]["r0/on_input"]
        return (_stored(state), task.started, task.coro is not None, dict(core.counters))
    finally:
        core.close()
