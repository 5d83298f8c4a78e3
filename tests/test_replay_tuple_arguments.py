"""A tuple and a list passed to a durable call are other arguments, though their JSON is one.

A durable call's digest is made of its arguments' JSON form, where a tuple is a list, so
``describe((1, 2))`` and ``describe([1, 2])`` had one identity: code that made them in
another order after a restore was handed each the other's recorded outcome without a word
(``describe`` answers ``tuple`` for the one and ``list`` for the other). The argument shape
now keeps which of the arguments' lists were tuples (``_binding.sequence_kinds``): a
reordering diverges, another kind alone is the ``arguments changed`` warning (strict: a
divergence), and a record written before the shape kept them replays as it did.

Core-level restores (``support.harness``), and a user's program run from a temporary
directory outside the repository (``check_upgrade_safety`` on two versions of its module).
"""

from __future__ import annotations

import functools
import logging
import os
import pathlib
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from support.harness import KEY, call_of, drive_until, new_core, resume, snapshot_of
from support.probes import count, gate

from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import InMemoryKeyState
from flink_agents_py.runtime.recorder._binding import sequence_kinds
from flink_agents_py.runtime.recorder._outcomes import argument_shape, call_digest

pytestmark = pytest.mark.timeout(120)

SWITCH: dict[str, Any] = {"args": [((1, 2),), ([1, 2],)], "strict": None}


@pytest.fixture(autouse=True)
def _first_deploy():
    SWITCH.update(args=[((1, 2),), ([1, 2],)], strict=None)


def describe(*values: Any, **named: Any) -> str:
    """What it was given: the types (a tuple and a list answer otherwise)."""
    count(f"describe:{values!r}:{sorted(named.items())!r}")
    return ",".join(type(v).__name__ for v in [*values, *named.values()])


def gated(tag: str) -> str:
    count(f"gated:{tag}")
    assert gate().wait(10), "gate never opened"
    return tag


class Describer(Agent):
    """One durable call for each of ``SWITCH["args"]``, then a gated call, then the output."""

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        got = []
        for args in SWITCH["args"]:
            if isinstance(args, dict):
                got.append(
                    await ctx.durable_execute_async(describe, strict=SWITCH["strict"], **args)
                )
            else:
                got.append(
                    await ctx.durable_execute_async(describe, *args, strict=SWITCH["strict"])
                )
        await ctx.durable_execute_async(gated, "g")
        ctx.send_event(OutputEvent(output=got))


def snapshot(plan: AgentPlan) -> InMemoryKeyState:
    """The key's state (through its JSON form) once the gated call has started."""
    ordinal = len(SWITCH["args"])
    core = new_core(plan)
    try:
        state = InMemoryKeyState()
        res = core.on_input(KEY, {"key": KEY}, state)
        assert res.errors == [] and res.outputs == []
        drive_until(
            core,
            state,
            quiet=True,
            done=lambda s: (c := call_of(s, "go", ordinal)) is not None and not c.done,
        )
        return snapshot_of(state, "json")
    finally:
        gate().set()
        core.close()


def stops(route: Any, name: str = "") -> str:
    return type(route).__name__


def test_a_tuple_and_a_list_of_one_json_form_have_one_digest_and_other_shapes():
    digests = {call_digest(stops, args, {}, "r0/go/c0") for args in [((1, 2),), ([1, 2],)]}
    assert len(digests) == 1  # (the digest is what records written before compare)
    shapes = [argument_shape(stops, args, {}) for args in [((1, 2),), ([1, 2],)]]
    assert [sequence_kinds(s) for s in shapes] == ["T", "L"]
    nested = argument_shape(stops, ([(1,), [2, (3,)]],), {"name": "n"})
    assert sequence_kinds(nested) == "LTLT"  # in walk order
    assert sequence_kinds(argument_shape(stops, ([b"a", bytearray(b"a")],), {})) == "LYA"
    bound = argument_shape(functools.partial(stops, (1,)), (), {"name": [2]})
    assert sequence_kinds(bound) == "L|T"  # the arguments', then what the partial binds
    plain = argument_shape(stops, ("x",), {"name": "n"})
    assert plain is not None and sequence_kinds(plain) == "" and plain.count("/") < 7


@pytest.mark.parametrize(
    "recorded",
    [
        [((1, 2),), ([1, 2],)],
        [({"at": (1, 2)},), ({"at": [1, 2]},)],  # inside a dict
        [([(1, 2), [3]],), ([[1, 2], (3,)],)],  # nested
        [{"where": (1, 2)}, {"where": [1, 2]}],  # by keyword
        [(b"xy",), (bytearray(b"xy"),)],  # bytes and a bytearray: one JSON form too
    ],
    ids=["positional", "in_a_dict", "nested", "keyword", "bytes"],
)
def test_a_tuple_and_a_list_made_in_another_order_diverge(recorded, probes):
    """Recorded: c0 with the tuple, c1 with the list. Restored with the two swapped: c0
    diverges naming c1, instead of handing the list's call the tuple's answer."""
    SWITCH["args"] = recorded
    plan = AgentPlan.from_agent(Describer())
    snap = snapshot(plan)
    SWITCH["args"] = recorded[::-1]
    outputs, errors, core = resume(plan, snap)
    assert outputs == []
    [err] = errors
    assert err.error_type == "ReplayDivergenceError" and "r0/go/c0" in err.message
    assert "arguments are those recorded for r0/go/c1" in err.message
    assert core.counters["replay_divergences"] == 1
    assert sum(v for k, v in probes.counts().items() if k.startswith("describe:")) == 2


def test_the_same_order_replays_the_recorded_answers_quietly(probes, caplog):
    plan = AgentPlan.from_agent(Describer())
    snap = snapshot(plan)
    SWITCH["strict"] = True
    with caplog.at_level(logging.WARNING, logger="flink_agents_py.runtime"):
        outputs, errors, _core = resume(plan, snap)
    assert errors == [] and outputs == [["tuple", "list"]]
    assert not [r for r in caplog.records if "was recorded" in r.getMessage()]
    assert probes["describe:((1, 2),):[]"] == 1 and probes["describe:([1, 2],):[]"] == 1


def test_a_tuple_made_a_list_is_the_arguments_changed_warning(probes, caplog):
    SWITCH["args"] = [((1, 2),)]
    plan = AgentPlan.from_agent(Describer())
    snap = snapshot(plan)
    SWITCH["args"] = [([1, 2],)]
    with caplog.at_level(logging.WARNING, logger="flink_agents_py.runtime"):
        outputs, errors, core = resume(plan, snap)
    assert errors == [] and outputs == [["tuple"]]  # the recorded answer, by identity
    [warning] = [r.getMessage() for r in caplog.records if "tuple was recorded" in r.getMessage()]
    assert "r0/go/c0" in warning and "a list where a tuple was recorded" in warning
    assert core.counters["replay_arguments_changed"] == 1


def test_a_tuple_made_a_list_diverges_in_strict_mode(probes):
    SWITCH["args"] = [((1, 2),)]
    plan = AgentPlan.from_agent(Describer())
    snap = snapshot(plan)
    SWITCH.update(args=[([1, 2],)], strict=True)
    outputs, errors, _core = resume(plan, snap)
    assert outputs == []
    [err] = errors
    assert err.error_type == "ReplayDivergenceError"
    assert "strict replay" in err.message and "a list where a tuple was recorded" in err.message


def test_records_written_before_the_kinds_were_kept_replay_as_before(probes, caplog):
    """A record whose shape has no eighth part (an earlier version's) is not compared on it:
    no new warning, nor a divergence in strict mode, after the library's upgrade."""
    plan = AgentPlan.from_agent(Describer())
    snap = snapshot(plan)
    assert snap.run is not None
    for rec in snap.run.inflight.values():
        for call in rec.calls.values():
            if call.shape and sequence_kinds(call.shape):
                call.shape = call.shape.rsplit("/", 1)[0]
    SWITCH["strict"] = True
    with caplog.at_level(logging.WARNING, logger="flink_agents_py.runtime"):
        outputs, errors, _core = resume(plan, snap)
    assert errors == [] and outputs == [["tuple", "list"]]
    assert not [r for r in caplog.records if "arguments" in r.getMessage()]


ROUTES = """
def route(stops):
    return "closed loop" if isinstance(stops, tuple) else "open path"
"""

VERSION_1 = """
from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action

from routes import route


class Router(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        a = await ctx.durable_execute_async(route, ("x", "y"))
        b = await ctx.durable_execute_async(route, ["x", "y"])
        c = await ctx.durable_execute_async(route, "end")
        ctx.send_event(OutputEvent(output=[a, b, c]))
"""

CHECK = """
import sys
from flink_agents_py.testing import check_upgrade_safety
import router_v1, router_v2

report = check_upgrade_safety(router_v1.Router(), router_v2.Router(), [{"key": "k"}],
                              other_process=False)
print("OK" if report.ok else "FINDINGS")
for finding in report.findings:
    print(finding)
"""


def test_a_users_program_swapping_a_tuple_and_a_list_is_reported(tmp_path: pathlib.Path):
    """Run the way a user runs it: their own modules, outside the repository."""
    (tmp_path / "routes.py").write_text(textwrap.dedent(ROUTES))
    (tmp_path / "router_v1.py").write_text(textwrap.dedent(VERSION_1))
    (tmp_path / "router_v2.py").write_text(
        textwrap.dedent(VERSION_1).replace(
            'a = await ctx.durable_execute_async(route, ("x", "y"))\n'
            '        b = await ctx.durable_execute_async(route, ["x", "y"])',
            'a = await ctx.durable_execute_async(route, ["x", "y"])\n'
            '        b = await ctx.durable_execute_async(route, ("x", "y"))',
        )
    )
    (tmp_path / "check.py").write_text(textwrap.dedent(CHECK))
    root = pathlib.Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(tmp_path)])}
    done = subprocess.run(
        [sys.executable, "check.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=100,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "FINDINGS", done.stdout
    assert any(
        "diverged at durable call r0/go/c0" in line
        and "arguments are those recorded for r0/go/c1" in line
        for line in lines
    )


class PartialDescriber(Agent):
    """The calls of ``Describer`` through ``functools.partial``: the tuple is bound."""

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        got = [
            await ctx.durable_execute_async(functools.partial(describe, *args))
            for args in SWITCH["args"]
        ]
        await ctx.durable_execute_async(gated, "g")
        ctx.send_event(OutputEvent(output=got))


def test_a_tuple_and_a_list_bound_by_a_partial_made_in_another_order_diverge(probes):
    plan = AgentPlan.from_agent(PartialDescriber())
    snap = snapshot(plan)
    SWITCH["args"] = SWITCH["args"][::-1]
    outputs, errors, _core = resume(plan, snap)
    assert outputs == []
    [err] = errors
    assert err.error_type == "ReplayDivergenceError" and "r0/go/c0" in err.message
    assert "arguments are those recorded for r0/go/c1" in err.message


class Client:
    """A client whose first call turns its (empty) list of pages into a tuple."""

    def __init__(self) -> None:
        self.pages: list[Any] | tuple[Any, ...] = []

    def fetch(self, page: int) -> int:
        count(f"fetch:{page}")
        self.pages = ()
        return page


class Fetcher(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        client = Client()
        got = [await ctx.durable_execute_async(client.fetch, page) for page in (1, 1)]
        await ctx.durable_execute_async(gated, "g")
        ctx.send_event(OutputEvent(output=got))


def test_a_bound_list_a_call_made_a_tuple_replays_quietly(probes, caplog):
    """Live, the second call's client holds a tuple; restored, the first call is not run
    again, so it holds the list recorded for the first: its state lags, not a reordering."""
    plan = AgentPlan.from_agent(Fetcher())
    SWITCH["args"] = [(), ()]  # (``snapshot`` waits for the third call, the gated one)
    snap = snapshot(plan)
    with caplog.at_level(logging.WARNING, logger="flink_agents_py.runtime"):
        outputs, errors, _core = resume(plan, snap)
    assert errors == [] and outputs == [[1, 1]]
    assert not [r for r in caplog.records if "was recorded" in r.getMessage()]
    assert probes["fetch:1"] == 2  # each ran once, live


def test_many_tuples_keep_a_bounded_shape_and_are_still_told_apart(probes):
    """A call given thousands of rows as tuples keeps a digest of their kinds, not one
    letter per row, in keyed state; swapped with the same rows as lists, it still diverges."""
    rows = [(n, n + 1) for n in range(2000)]
    shape = argument_shape(stops, (rows,), {})
    assert shape is not None and len(shape) < 200
    assert sequence_kinds(shape) != sequence_kinds(
        argument_shape(stops, ([list(r) for r in rows],), {})
    )
    SWITCH["args"] = [(rows,), ([list(r) for r in rows],)]
    plan = AgentPlan.from_agent(Describer())
    snap = snapshot(plan)
    SWITCH["args"] = SWITCH["args"][::-1]
    outputs, errors, _core = resume(plan, snap)
    assert outputs == []
    [err] = errors
    assert "arguments are those recorded for r0/go/c1" in err.message
