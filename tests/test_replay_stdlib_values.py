"""Standard-library values as durable call arguments and results, through crashes and restores.

``ctx.durable_execute(datetime.now, timezone.utc)`` failed: a ``timezone`` had no JSON form
for the call's identity (and the call was named ``?:datetime.now``). Arguments of such types
now count in the call's identity by value, results of them are recorded and come back, after
a restore, as the same type with the same value; records of builtin methods written under
their old name replay.
"""

from __future__ import annotations

import datetime
import decimal
import enum
import fractions
import ipaddress
import os
import pathlib
import subprocess
import sys
import textwrap
import uuid
import zoneinfo
from typing import Any

import pytest
from support.harness import KEY, call_of, drive_until, new_core, resume, snapshot_of
from support.probes import count, gate

from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import InMemoryKeyState
from flink_agents_py.runtime.recorder import _execution
from flink_agents_py.testing import check_replay_safety

pytestmark = pytest.mark.timeout(300)

UTC = datetime.timezone.utc


class Colour(enum.Enum):
    RED = "red"


VALUES: dict[str, Any] = {
    "timezone_utc": UTC,
    "timezone_named": datetime.timezone(datetime.timedelta(hours=5, minutes=30), "IST"),
    "timezone_offset": datetime.timezone(-datetime.timedelta(hours=3)),
    "zoneinfo": zoneinfo.ZoneInfo("Europe/Paris"),
    "decimal": decimal.Decimal("1.50"),
    "uuid": uuid.UUID("0f8fad5b-d9cb-469f-a165-70867728950e"),
    "path": pathlib.Path("/data/reviews.jsonl"),
    "pure_windows_path": pathlib.PureWindowsPath("C:/data/x.txt"),
    "date": datetime.date(2024, 5, 1),
    "time": datetime.time(12, 30, 1, 5),
    "aware_time": datetime.time(12, 30, tzinfo=datetime.timezone(datetime.timedelta(hours=2))),
    "datetime": datetime.datetime(2024, 5, 1, 12, 30, tzinfo=UTC),
    "timedelta": datetime.timedelta(days=-1, seconds=5, microseconds=7),
    "bytes": b"\x00\xffab",
    "frozenset": frozenset({"b", "a", "c"}),
    "set_of_tuples": {(1, "x"), (2, "y")},
    "fraction": fractions.Fraction(1, 3),
    "complex": complex(1.5, -2),
    "ip": ipaddress.ip_address("10.0.0.1"),
    "network": ipaddress.ip_network("2001:db8::/32"),
    "range": range(1, 10, 3),
}
"""Each type's value (an ``Enum`` member is its value, as before: ``test_an_enum``)."""


def make(name: str) -> Any:
    count(f"make:{name}")
    return VALUES[name]


def echo(value: Any) -> Any:
    count("echo")
    return value


def shown(value: Any) -> str:
    # a set's repr follows its hash table, which differs between equal sets built in
    # another order: show its members sorted
    text = repr(sorted(value, key=repr)) if isinstance(value, (set, frozenset)) else repr(value)
    return f"{type(value).__module__}.{type(value).__qualname__}:{text}"


class Values(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        name = event.input["name"]
        made = await ctx.durable_execute_async(make, name)  # a result of the type
        again = ctx.durable_execute(echo, made)  # an argument of it, and its result
        ctx.send_event(OutputEvent(output=[name, shown(made), shown(again)]))


def test_each_value_round_trips_through_every_crash_point():
    records = [{"key": name, "name": name} for name in VALUES]
    report = check_replay_safety(Values(), records, other_process=False)
    report.assert_ok()  # every recovery's outputs are the fault-free run's
    assert report.outputs_compared > 0
    got = {out[0]: out[1:] for out in _collect(Values(), records)}
    for name, value in VALUES.items():
        assert got[name] == [shown(value), shown(value)], name


def _collect(agent: Agent, records: list[dict[str, Any]]) -> list[Any]:
    from flink_agents_py import AgentsExecutionEnvironment

    job = AgentsExecutionEnvironment.local().from_list(records).apply(agent)
    return job.collect()


class Clock(Agent):
    replay = "strict"

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        zone = datetime.timezone(datetime.timedelta(hours=event.input["hours"]))
        now = ctx.durable_execute(datetime.datetime.now, zone)
        epoch = ctx.durable_execute(datetime.datetime.fromtimestamp, 0, zone)
        ctx.send_event(OutputEvent(output=[str(now.utcoffset()), epoch.isoformat()]))


def test_datetime_now_with_a_timezone_is_recorded_and_replayed():
    records = [{"key": "a", "hours": 1}, {"key": "b", "hours": -3}]
    report = check_replay_safety(Clock(), records, other_process=False)
    report.assert_ok()
    assert report.outputs_compared > 0
    epochs = sorted(out[1] for out in _collect(Clock(), records))
    assert epochs == ["1969-12-31T21:00:00-03:00", "1970-01-01T01:00:00+01:00"]


class TwoZones(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        zones = event.input["zones"]
        got = [await ctx.durable_execute_async(echo, VALUES[z]) for z in zones]
        ctx.send_event(OutputEvent(output=[shown(g) for g in got]))


def test_values_count_in_the_identity_by_value():
    """Two calls that differ only in a ``timezone`` (or a ``Path``) made in another order
    after a restore diverge instead of swapping their results."""
    from flink_agents_py.testing import check_upgrade_safety

    class Swapped(Agent):
        @action(InputEvent)
        @staticmethod
        async def go(event: InputEvent, ctx: RunnerContext) -> None:
            got = [
                await ctx.durable_execute_async(echo, VALUES[z])
                for z in reversed(event.input["zones"])
            ]
            ctx.send_event(OutputEvent(output=[shown(g) for g in got]))

    for pair in (
        ["timezone_utc", "timezone_offset"],
        ["path", "pure_windows_path"],
        ["frozenset", "set_of_tuples"],
        ["time", "aware_time"],
    ):
        report = check_upgrade_safety(
            TwoZones(), Swapped(), [{"key": "a", "zones": pair}], other_process=False
        )
        assert report.divergences > 0, (pair, report.table)


def test_an_enum_member_and_a_set_keep_what_they_were():
    """An ``Enum`` result is its value (on the first run as on a replay, as before); a
    ``set`` result comes back a ``set``; elsewhere (an event, memory) a set is refused as
    before (use a list)."""
    from flink_agents_py.api import SerializationError
    from flink_agents_py.runtime._serde import from_json_value, to_json_value

    def result(value: Any) -> Any:
        return from_json_value(to_json_value(value, "a result", tag_values=True))

    assert result(Colour.RED) == "red"
    assert result({"b", "a"}) == {"a", "b"} and type(result({1})) is set
    with pytest.raises(SerializationError, match="use a list"):
        to_json_value({"a"}, "a memory value")


def test_a_bound_value_keeps_its_identity_form():
    """What a callable binds keeps the form records written before were digested with (a
    partial of a ``Path``: its type and repr, not the new tag)."""
    from flink_agents_py.runtime.recorder._identity import stable_form

    assert stable_form(pathlib.PurePosixPath("/x")) == {
        "$type": "pathlib:PurePosixPath",
        "value": "PurePosixPath('/x')",
    }
    assert stable_form([datetime.timedelta(1)]) == [
        {"$type": "datetime:timedelta", "value": "datetime.timedelta(days=1)"}
    ]


def gated(tag: str) -> str:
    count(f"gated:{tag}")
    assert gate().wait(10), "gate never opened"
    return tag


class Epoch(Agent):
    replay = "strict"

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        got = ctx.durable_execute(datetime.datetime.fromtimestamp, 0, UTC)
        upper = ctx.durable_execute("apple".upper)
        await ctx.durable_execute_async(gated, "end")
        ctx.send_event(OutputEvent(output=[got.isoformat(), upper]))


def _old_name(fn: Any) -> str:
    """``fn_name`` as it was: a builtin method with no module of its own is ``?:``."""
    return f"{getattr(fn, '__module__', None) or '?'}:{fn.__qualname__}"


def test_a_builtin_method_recorded_under_its_old_name_replays(monkeypatch, probes):
    plan = AgentPlan.from_agent(Epoch())
    with monkeypatch.context() as m:
        m.setattr(_execution, "_fn_name", _old_name)
        core = new_core(plan)
        try:
            state = InMemoryKeyState()
            core.on_input(KEY, {"key": KEY}, state)
            drive_until(
                core,
                state,
                quiet=True,
                done=lambda s: (c := call_of(s, "go", 2)) is not None and not c.done,
            )
            assert call_of(state, "go", 0).target == "?:datetime.fromtimestamp"
            assert call_of(state, "go", 1).target == "?:str.upper"
            snap = snapshot_of(state, "json")
        finally:
            gate().set()
            core.close()
    outputs, errors, _core = resume(plan, snap)
    assert errors == []
    assert outputs == [["1970-01-01T00:00:00+00:00", "APPLE"]]


def test_a_new_record_names_the_builtin_methods_module(probes):
    core = new_core(AgentPlan.from_agent(Epoch()))
    gate().set()
    try:
        state = InMemoryKeyState()
        core.on_input(KEY, {"key": KEY}, state)
        drive_until(core, state, quiet=True, done=lambda s: call_of(s, "go", 1) is not None)
        assert call_of(state, "go", 0).target == "datetime:datetime.fromtimestamp"
        assert call_of(state, "go", 1).target == "builtins:str.upper"
    finally:
        core.close()


USER_MODULE = """
import datetime
import pathlib
import sys

from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents_py.testing import check_replay_safety


def since(start, zone):
    return datetime.datetime(2024, 1, 1, tzinfo=zone) - start


class Report(Agent):
    replay = "strict"

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        zone = datetime.timezone(datetime.timedelta(hours=event.input["hours"]), "HERE")
        start = ctx.durable_execute(datetime.datetime.fromtimestamp, 0, zone)
        took = await ctx.durable_execute_async(since, start, zone)
        where = ctx.durable_execute(pathlib.Path, "out", event.input["key"])
        ctx.send_event(OutputEvent(output=[type(took).__name__, took.days,
                                           type(where).__name__, str(where)]))


if __name__ == "__main__":
    report = check_replay_safety(Report(), [{"key": "a", "hours": 2}, {"key": "b", "hours": 0}])
    print(report.table)
    from flink_agents_py import AgentsExecutionEnvironment

    records = [{"key": "a", "hours": 2}, {"key": "b", "hours": 0}]
    print(AgentsExecutionEnvironment.local().from_list(records).apply(Report()).collect())
    sys.exit(0 if report.ok else 1)
"""


def test_a_users_module_records_and_replays_them(tmp_path):
    """From a user's own folder, restores in other processes (other hash seeds) too."""
    (tmp_path / "my_report.py").write_text(textwrap.dedent(USER_MODULE))
    root = pathlib.Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root)}
    proc = subprocess.run(
        [sys.executable, "my_report.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "['timedelta', 19722, 'PosixPath', 'out/a']" in proc.stdout
    assert "result                      ok" in proc.stdout


def build(year: int) -> Any:
    """Makes its values at call time (under the crash checker, ``datetime.datetime`` is its
    watching stand-in)."""
    return [
        datetime.datetime(year, 1, 2, tzinfo=UTC),
        datetime.date(year, 3, 4),
        datetime.datetime.fromtimestamp(0, UTC),
    ]


class Builds(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        made = await ctx.durable_execute_async(build, 2024)
        ctx.send_event(OutputEvent(output=[shown(v) for v in made]))


def test_the_crash_checker_records_datetimes_made_under_its_watch():
    """The checker's clock watch stood ``datetime.datetime`` in with a subclass: a
    ``datetime(...)`` made in a durable call was of it and had no stored form there (a
    failure the job never has), and ``datetime.now`` was named after the stand-in."""
    report = check_replay_safety(Builds(), [{"key": "a"}], other_process=False)
    report.assert_ok()
    assert report.errors == 0
    from flink_agents_py.runtime.recorder._outcomes import fn_name
    from flink_agents_py.testing import _sentinel

    with _sentinel._reads_wrapped([]):
        assert datetime.datetime is not _sentinel._DATETIME  # (watched)
        assert fn_name(datetime.datetime.now) == "datetime:datetime.now"
        assert type(datetime.datetime(2024, 1, 1)) is _sentinel._DATETIME
        assert isinstance(_sentinel._DATETIME(2024, 1, 1), datetime.datetime)
