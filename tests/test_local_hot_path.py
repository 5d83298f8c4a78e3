"""The local runner's per-record path: what it skips must not change what a user sees.

The echo path builds the input event without validation, makes sensory memory and event
ids' bookkeeping only on use, formats error locations only on failure and reuses metrics
bookkeeping across runs; these tests pin the results those shortcuts must keep.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pydantic
import pytest

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent, Event, InputEvent, OutputEvent, RunnerContext, action
from flink_agents_py.runtime.core._results import _FAST_INPUT, _construct_input, input_event

pytestmark = pytest.mark.timeout(60)

ROOT = Path(__file__).resolve().parents[1]


def test_input_event_is_what_model_construct_builds():
    # a field added to InputEvent (or to Event) must keep the fast construction on: the slow
    # one calls pydantic's model_construct, which inspects each default factory's signature
    assert _FAST_INPUT, "InputEvent's fields changed: update _results._construct_input"
    fast = _construct_input("r3", {"a": 1}, {"key": "k", "n": [1, 2]})
    slow = InputEvent.model_construct(id="r3", type="InputEvent", attributes={"a": 1},
                                      input={"key": "k", "n": [1, 2]})
    assert type(fast) is InputEvent
    assert fast == slow
    assert fast.model_fields_set == slow.model_fields_set
    assert fast.model_dump() == slow.model_dump()
    assert fast.model_dump_json() == slow.model_dump_json()
    with pytest.raises(pydantic.ValidationError):
        fast.input = 1  # type: ignore[misc]  # still frozen


def test_input_event_input_is_a_copy_of_the_stored_record():
    stored = {"key": "k", "items": [{"x": 1}]}
    event, data = input_event("r0", stored)
    assert event.input == stored == data["input"] and event.input is not data["input"]
    event.input["items"][0]["x"] = 2  # an action that mutates what it got
    assert stored == {"key": "k", "items": [{"x": 1}]} == data["input"]


class _Bad:
    pass


class TwoStepAgent(Agent):
    """Sensory memory written by one action, read by the next; a bad event on request."""

    @action(InputEvent)
    @staticmethod
    async def first(event: InputEvent, ctx: RunnerContext) -> None:
        if event.input.get("bad"):
            ctx.send_event(Event(type="Bad", attributes={"x": _Bad()}))
            return
        ctx.sensory_memory.set("seen", event.input["n"])
        ctx.send_event(Event(type="Next", attributes={"n": event.input["n"]}))

    @action("Next")
    @staticmethod
    async def second(event: Event, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output={"key": ctx.key, "n": event.attributes["n"],
                                           "sensory": ctx.sensory_memory.get("seen"),
                                           "id": event.id}))


def _run(records: list[Any], **options: Any) -> Any:
    return (AgentsExecutionEnvironment.local(**options).from_list(records)
            .apply(TwoStepAgent()).run())


def test_sensory_memory_and_event_ids_across_actions():
    res = _run([{"key": "a", "n": 1}, {"key": "a", "n": 2}, {"key": "b", "n": 3}])
    assert not res.errors
    assert res.outputs == [
        {"key": "a", "n": 1, "sensory": 1, "id": "r0/first/e0"},
        {"key": "a", "n": 2, "sensory": 2, "id": "r1/first/e0"},
        {"key": "b", "n": 3, "sensory": 3, "id": "r0/first/e0"},
    ]


def test_an_event_with_no_json_form_fails_its_sender_naming_event_and_sender():
    res = _run([{"key": "a", "bad": True}, {"key": "a", "n": 1}])
    assert [e.action for e in res.errors] == ["first"]
    err = res.errors[0]
    assert err.error_type == "SerializationError"
    assert "event Bad sent by r0/first" in err.message and "_Bad" in err.message
    assert res.outputs == [{"key": "a", "n": 1, "sensory": 1, "id": "r1/first/e0"}]


def test_an_input_with_no_json_form_is_refused_naming_its_key():
    res = _run([{"key": "a", "n": _Bad()}, {"key": "a", "n": 1}])
    assert [(e.action, e.key) for e in res.errors] == [("<input>", "a")]
    assert "input record of key 'a'" in res.errors[0].message
    assert res.outputs == [{"key": "a", "n": 1, "sensory": 1, "id": "r0/first/e0"}]


def test_metrics_count_every_run_when_bookkeeping_is_reused():
    n, keys = 500, 7
    res = _run([{"key": f"k{i % keys}", "n": i} for i in range(n)])
    assert len(res.outputs) == n and not res.errors
    m = res.metrics
    assert m["runs_started"] == m["runs_completed"] == n
    assert m["runs_in_flight"] == 0
    assert m["actions_executed"] == {"first": n, "second": n}
    assert m["latency_ms"]["run"]["count"] == n
    assert m["latency_ms"]["action"]["first"]["count"] == n


USER_MODULE = '''
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action


class Echo(Agent):
    @action(InputEvent)
    @staticmethod
    async def echo(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output={"key": ctx.key, "echo": event.input}))


if __name__ == "__main__":
    records = [{"key": f"k{i % 10}", "n": i} for i in range(2000)]
    res = AgentsExecutionEnvironment.local().from_list(records).apply(Echo()).run()
    assert not res.errors, res.errors
    assert [o["echo"] for o in res.outputs if o["key"] == "k3"] == [
        r for r in records if r["key"] == "k3"]
    print(len(res.outputs), res.metrics["runs_completed"])
'''


def test_echo_from_a_users_own_module(tmp_path):
    (tmp_path / "my_echo.py").write_text(textwrap.dedent(USER_MODULE))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "my_echo.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["2000", "2000"]


class SnapshotAgent(Agent):
    """Sends an event, then changes what it sent; sends an output holding NaN on request."""

    @action(InputEvent)
    @staticmethod
    async def first(event: InputEvent, ctx: RunnerContext) -> None:
        if event.input.get("nan"):
            ctx.send_event(OutputEvent(output={"x": float("nan")}))
            return
        payload = {"items": [1]}
        ctx.send_event(Event(type="Next", attributes={"payload": payload}))
        out = {"items": [1]}
        ctx.send_event(OutputEvent(output=out))
        payload["items"].append(2)  # after sending: the next action sees what was sent
        out["items"].append(2)  # an output is the object itself, as before

    @action("Next")
    @staticmethod
    async def second(event: Event, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output={"seen": event.attributes["payload"]}))


def test_a_sent_event_is_a_snapshot_and_a_bad_output_fails_its_sender():
    res = (AgentsExecutionEnvironment.local().from_list([{"key": "a"}, {"key": "a", "nan": 1}])
           .apply(SnapshotAgent()).run())
    assert res.outputs == [{"items": [1, 2]}, {"seen": {"items": [1]}}]
    assert [(e.action, e.error_type) for e in res.errors] == [("first", "SerializationError")]
    assert "event OutputEvent sent by r1/first" in res.errors[0].message


@pytest.mark.parametrize("value", [
    {}, {"a": [1, 2.5, None, True, "s", (1, 2)]}, {"a": {"b": {"c": []}}},
    {"a": float("nan")}, {"a": float("inf")}, {"a": {1, 2}}, {"a": {"b": _Bad()}},
    {"a": {1: "x"}}, {"a": b"bytes"}, {"a": [InputEvent(input=1)]},
])
def test_the_cheap_event_check_never_passes_what_event_json_refuses(value):
    from flink_agents_py.api import SerializationError
    from flink_agents_py.runtime._serde import event_is_plain, event_json

    event = OutputEvent.model_construct(id="e", type="OutputEvent", attributes={}, output=value)
    try:
        event_json(event, "event")
    except SerializationError:
        assert not event_is_plain(event)
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    assert not event_is_plain(OutputEvent.model_construct(id="e", type="OutputEvent",
                                                          attributes={}, output=cyclic))
