"""Durable waits on the local runner: ``ctx.wait_for``, ``ctx.sleep``, unmatched events.

The local runner delivers the connected outside events once the input records are worked off,
and skips time (``AdvanceTime``; the remaining timers at the end), so these run in
milliseconds and the same every time.
"""

from __future__ import annotations

import json
import pathlib

import pytest
from support import waits_agents as wa
from support.crash import read_counts

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    ExternalEvent,
    InputEvent,
    OutputEvent,
    RunnerContext,
    action,
)
from flink_agents_py.local import AdvanceTime
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import AgentCore, InMemoryKeyState


def _job(records, events, agent=None):
    return (AgentsExecutionEnvironment.local().from_list(records).connect(events)
            .apply(agent or wa.Approver()))


def _by_key(outputs):
    return {o["key"]: o for o in outputs}


def test_an_approval_releases_its_run_and_a_missing_one_times_out(tmp_path: pathlib.Path):
    d = str(tmp_path)
    records = [{"key": k, "dir": d, "timeout_s": 60} for k in ("a", "b", "c")]
    events = [{"key": "a", "correlation_id": "go-a", "payload": {"by": "ann"}},
              ExternalEvent(key="c", correlation_id="go-c", payload=7)]
    result = _job(records, events).run()
    out = _by_key(result.outputs)
    assert out["a"]["approved"] == {"by": "ann"}
    assert out["c"]["approved"] == 7
    assert "within 60 s" in out["b"]["timed_out"] and out["b"]["correlation_id"] == "go-b"
    assert result.errors == []
    # the call before the wait ran once per key, though each run re-entered when released
    assert {k: n for (who, k), n in read_counts(d).items()} == {"a": 1, "b": 1, "c": 1}
    assert result.counters["actions_reentered"] >= 3


@pytest.mark.parametrize(("events", "why"), [
    ([{"key": "a", "correlation_id": "go-a"}, {"key": "a", "correlation_id": "go-a"}],
     "no run of key 'a' is in flight"),
    ([{"key": "a", "correlation_id": "nope"}], "has no wait for it"),
    ([{"key": "zz", "correlation_id": "go-zz"}], "no run of key 'zz' is in flight"),
    ([AdvanceTime(61), {"key": "a", "correlation_id": "go-a"}], "no run of key 'a'"),
])
def test_an_event_for_no_waiter_goes_to_the_errors_named(events, why):
    result = _job([{"key": "a", "timeout_s": 60}], events).run()
    errors = [e for e in result.errors if e.action == "<outside>"]
    assert len(errors) == 1, result.errors
    err = errors[0]
    assert err.error_type == "UnmatchedEventError" and why in err.message
    assert err.execution_id.startswith("outside event ")
    assert err.input["correlation_id"] in err.message
    assert len(result.outputs) == 1  # the run itself completed (approved or timed out)


@pytest.mark.parametrize(("record_key", "event_key", "hint"), [
    (7, "7", "the number 7, send the event with that number as its key, not the string '7'"),
    ("7", 7, "the string '7', send the event with that string as its key, not the number 7"),
])
def test_an_event_keyed_by_the_keys_text_says_keys_are_typed(record_key, event_key, hint):
    # records keyed by an int customer id, approvals read from JSON with the id as text:
    # "no run of key '7' is in flight" while the run of key 7 waited
    result = _job([{"key": record_key, "timeout_s": 60}], [
        {"key": event_key, "correlation_id": f"go-{record_key}", "payload": 1}]).run()
    [err] = [e for e in result.errors if e.action == "<outside>"]
    assert "is in flight" in err.message and "keys are typed" in err.message, err.message
    assert hint in err.message, err.message


def test_an_event_no_wait_took_names_the_ids_the_run_waited_for():
    # a mistyped id ('go-A' for 'go-a') is held for a wait that never opens: the error
    # names what the run did wait for, so the typo shows
    result = _job([{"key": "a", "timeout_s": 60}], [
        {"key": "a", "correlation_id": "go-A", "payload": 1}]).run()
    [err] = [e for e in result.errors if e.action == "<outside>"]
    assert "'go-A'" in err.message
    assert "(the run waited for: 'go-a')" in err.message, err.message


def test_a_duplicate_and_a_late_event_are_told_apart_while_the_run_is_in_flight():
    """Two waits in one run: the first one's event again, and one after its timeout."""
    plan = AgentPlan.from_agent(_TwoWaits())
    core = AgentCore(plan)
    now = [0]
    core.clock_ms = lambda: now[0]
    core.open()
    try:
        state = InMemoryKeyState()
        res = core.on_input("k", {"key": "k"}, state)
        assert res.parked and not res.busy and res.timers == [5000]
        assert not core.is_live("k")  # nothing of a parked run is kept live
        now[0] = 3000
        res = core.on_outside_event("k", {"key": "k", "correlation_id": "first"}, state)
        assert res.parked and res.timers == [8000] and res.errors == []
        dup = core.on_outside_event("k", {"key": "k", "correlation_id": "first"}, state)
        assert dup.errors[0].error_type == "UnmatchedEventError"
        assert "a duplicate" in dup.errors[0].message and dup.parked
        assert core.on_timers("k", 7999, state) is None  # nothing due: nothing done
        now[0] = 8000
        res = core.on_timers("k", 8000, state)
        assert res is not None and res.outputs == [{"first": None, "second": "timeout"}]
        assert core.on_timers("k", 8001, state) is None  # nothing due: nothing done
    finally:
        core.close()


class _TwoWaits(wa.Agent):
    @wa.action(wa.InputEvent)
    @staticmethod
    async def on_input(event, ctx) -> None:
        first = await ctx.wait_for("first", timeout_s=5)
        try:
            second = await ctx.wait_for("second", timeout_s=5)
        except wa.WaitTimeoutError:
            second = "timeout"
        ctx.send_event(wa.OutputEvent(output={"first": first, "second": second}))


def test_a_record_for_a_key_whose_run_waits_queues_without_waking_the_run():
    core = AgentCore(AgentPlan.from_agent(wa.Approver()))
    core.open()
    try:
        state = InMemoryKeyState()
        core.on_input("k", {"n": 1}, state)
        while not (res := core.advance("k", state)).parked:  # the call before the wait
            core.wait_for("k", 5)
        entered = core.counters["actions_reentered"]
        res = core.on_input("k", {"n": 2}, state)
        assert res.parked and not res.busy and state.queued() == 1 and res.outputs == []
        assert core.counters["actions_reentered"] == entered  # not woken by the record
        res = core.on_outside_event("k", {"key": "k", "correlation_id": "go-k"}, state)
        while res.busy:  # the first run completes; the second starts, then waits in turn
            core.wait_for("k", 5)
            res = core.advance("k", state)
        assert res.parked and state.run is not None and state.run.seq == 1
    finally:
        core.close()


def test_late_event_in_the_run_that_timed_out_is_named_late():
    plan = AgentPlan.from_agent(_LateAgent())
    core = AgentCore(plan)
    now = [0]
    core.clock_ms = lambda: now[0]
    core.open()
    try:
        state = InMemoryKeyState()
        core.on_input("k", {"key": "k"}, state)
        now[0] = 1000
        res = core.on_timers("k", 1000, state)
        assert res is not None and res.parked  # the second wait is open
        late = core.on_outside_event("k", {"key": "k", "correlation_id": "quick"}, state)
        assert "late: the wait of call r0/on_input/c0 timed out" in late.errors[0].message
    finally:
        core.close()


class _LateAgent(wa.Agent):
    @wa.action(wa.InputEvent)
    @staticmethod
    async def on_input(event, ctx) -> None:
        try:
            await ctx.wait_for("quick", timeout_s=1)
        except wa.WaitTimeoutError:
            pass
        await ctx.wait_for("slow")


def test_bad_outside_events_are_named_and_the_job_goes_on():
    result = _job([{"key": "a", "timeout_s": 5}],
                  [42, {"key": "a"}, {"key": "a", "correlation_id": "go-a", "payload": 1}]).run()
    bad = [e for e in result.errors if e.error_type == "ExternalEventError"]
    assert [e.execution_id for e in bad] == ["outside event 0", "outside event 1"]
    assert "is a int" in bad[0].message and "correlation_id" in bad[1].message
    assert result.outputs[0]["approved"] == 1


def test_a_misspelt_payload_is_refused_not_delivered_as_none():
    # {"paylod": ...} was read as an event with no payload: the wait got None, silently
    result = _job([{"key": "a", "timeout_s": 5}], [
        {"key": "a", "correlation_id": "go-a", "paylod": {"ok": True}},
        {"customer": "a", "correlation_id": "go-a", "payload": 2},
        {"key": "a", "correlation_id": "go-a", "payload": 3, "by": "ann"}]).run()
    bad = [e for e in result.errors if e.error_type == "ExternalEventError"]
    assert [e.execution_id for e in bad] == ["outside event 0", "outside event 1"]
    assert "no 'payload' but 'paylod'" in bad[0].message, bad[0].message
    assert "'key', 'correlation_id' and 'payload'" in bad[1].message, bad[1].message
    assert "it has 'customer', 'correlation_id', 'payload'" in bad[1].message, bad[1].message
    assert result.outputs[0]["approved"] == 3  # extra fields beside a payload are fine


def test_an_event_whose_payload_has_no_json_form_is_refused_and_the_wait_goes_on():
    result = _job([{"key": "a", "timeout_s": 5}],
                  [{"key": "a", "correlation_id": "go-a", "payload": {1, 2}},
                   {"key": "a", "correlation_id": "go-a", "payload": [1, 2]}]).run()
    [bad] = result.errors
    assert bad.error_type == "ExternalEventError" and bad.execution_id == "outside event 0"
    assert "the payload of outside event 0" in bad.message
    assert result.outputs[0]["approved"] == [1, 2]  # the second, good event released it


def test_sleep_ends_on_the_virtual_clock_in_deadline_order(tmp_path: pathlib.Path):
    records = [{"key": "long", "sleep_s": 3600}, {"key": "short", "sleep_s": 5}]
    result = _job(records, [], wa.Sleeper()).run()
    assert [o["key"] for o in result.outputs] == ["short", "long"]
    assert result.errors == []


def test_waits_still_open_when_all_input_ends_time_out():
    result = _job([{"key": "a"}], []).run()  # no timeout: waits until the input ends
    assert "before the end of input" in result.outputs[0]["timed_out"]


def test_a_second_record_of_the_key_waits_behind_the_parked_run():
    records = [{"key": "a", "n": 1, "timeout_s": 9}, {"key": "a", "n": 2, "timeout_s": 9}]
    events = [{"key": "a", "correlation_id": "go-a", "payload": "first"}]
    result = _job(records, events).run()
    assert [(o["n"], "approved" in o) for o in result.outputs] == [(1, True), (2, False)]


@pytest.mark.parametrize(("how", "says"), [
    ("empty", "non-empty string"), ("hash", "not starting with '#'"),
    ("timeout", "timeout_s must be a positive number"), ("huge", "at most 1e+09"),
    ("sleep", "ctx.sleep's seconds must be a positive number"),
    ("twice", "already waits for correlation id 'same'"),
])
def test_wrong_waits_fail_the_action_with_a_usage_error(how, says):
    result = AgentsExecutionEnvironment.local().from_list([{"key": how, "how": how}]).apply(
        wa.BadWaits()).run()
    assert [e.error_type for e in result.errors] == ["UsageError"]
    assert says in result.errors[0].message and "on_input" in result.errors[0].message


def test_a_crash_while_runs_wait_loses_nothing(tmp_path: pathlib.Path):
    """Stop the job while every run waits, restore its snapshot (through JSON) on a new job."""
    d = str(tmp_path)
    records = [{"key": k, "dir": d, "timeout_s": 30} for k in ("a", "b", "c")]
    events = [AdvanceTime(10), {"key": "a", "correlation_id": "go-a", "payload": "yes"},
              {"key": "b", "correlation_id": "go-b", "payload": "ok"}]
    seen: list[int] = []  # outputs after each host callback, in a run without logs
    _job([{**r, "dir": ""} for r in records], events).run(
        on_step=lambda job: seen.append(len(job.result.outputs)))
    crash_at = seen.index(1) + 1  # the callback after which a's output is out
    snaps = []

    def on_step(job):
        snaps.append(job.snapshot())

    crashed = _job(records, events).run(on_step=on_step, max_steps=crash_at)
    assert not crashed.completed and [o["key"] for o in crashed.outputs] == ["a"]
    snap = json.loads(json.dumps(snaps[-1]))
    assert snap["clock_ms"] == 10_000 and snap["outside_position"] == 2
    parked = [k for k in snap["keys"] if k["run"] is not None]
    assert sorted(k["key"] for k in parked) == ["b", "c"]
    assert all(k["run"]["parked"] for k in parked)

    second = _job(records, events).restore(snap).run()
    out = _by_key(second.outputs)
    assert set(out) == {"b", "c"} and out["b"]["approved"] == "ok"
    assert "within 30 s" in out["c"]["timed_out"]
    assert second.errors == []
    assert {k: n for (who, k), n in read_counts(d).items()} == {"a": 1, "b": 1, "c": 1}


# -- tools that need approval ----------------------------------------------------------------
def test_a_tool_call_is_held_until_approved_and_a_refusal_is_the_tools_result(
        tmp_path: pathlib.Path, monkeypatch):
    from flink_agents_py.api import ApprovalRequest

    monkeypatch.setenv("WAITS_TEST_DIR", str(tmp_path))
    records = [{"key": k, "to": f"{k}@x.org"} for k in ("yes", "no", "silent")]
    job = AgentsExecutionEnvironment.local().from_list(records)

    def answers():  # read once the input is worked off: the requests are out by then
        for out in list(job.result.outputs):
            req = ApprovalRequest.of(out)
            if req is not None and req.key == "yes":
                yield req.approve(by="ann")
            elif req is not None and req.key == "no":
                yield req.reject("not to this customer")

    result = job.connect(answers()).apply(wa.make_mailer(timeout_s=600)).run()
    requests = [ApprovalRequest.of(o) for o in result.outputs if ApprovalRequest.of(o)]
    assert sorted(r.key for r in requests) == ["no", "silent", "yes"]  # one each, no repeats
    req = next(r for r in requests if r.key == "yes")
    assert (req.tool, req.arguments, req.tool_call_id, req.timeout_s) == (
        "send_email", {"to": "yes@x.org", "body": "hello"}, "t1", 600)
    assert req.approval_id.startswith("approval:")
    answers_by_key = {o["key"]: o["answer"] for o in result.outputs if "answer" in o}
    assert answers_by_key["yes"] == "sent to yes@x.org"  # the tool's text result
    assert "rejected by its reviewer: not to this customer" in answers_by_key["no"]
    assert "was not approved" in answers_by_key["silent"] and "within 600 s" in \
        answers_by_key["silent"]
    assert result.errors == []
    # the tool ran for the approved call only, once
    assert read_counts(str(tmp_path)) == {("email", "yes@x.org"): 1}



def test_a_call_whose_arguments_could_not_be_read_asks_no_approval(tmp_path, monkeypatch):
    from flink_agents_py.api import ApprovalRequest

    monkeypatch.setenv("WAITS_TEST_DIR", str(tmp_path))
    result = (AgentsExecutionEnvironment.local().from_list([{"key": "g", "to": "garbled"}])
              .apply(wa.make_mailer(timeout_s=600)).run())
    assert [o for o in result.outputs if ApprovalRequest.of(o)] == []  # no one is asked
    [answer] = [o["answer"] for o in result.outputs if "answer" in o]
    assert answer.startswith("Error: ValueError: tool 'send_email' was called with arguments "
                             "that are not JSON"), answer
    assert result.errors == [] and read_counts(str(tmp_path)) == {}


@pytest.mark.parametrize("payload", [{"approved": "true"}, {"approved": 1}, "yes", None, 1,
                                     {"reason": "ok"}])
def test_an_approval_answer_that_cannot_be_read_is_refused_and_the_call_stays_held(
        tmp_path: pathlib.Path, monkeypatch, payload):
    # before: read as a rejection, silently (a reviewer's broken answers went unnoticed)
    from flink_agents_py.api import ApprovalRequest

    monkeypatch.setenv("WAITS_TEST_DIR", str(tmp_path))
    job = AgentsExecutionEnvironment.local().from_list([{"key": "k", "to": "k@x.org"}])

    def answers():
        [req] = [r for o in list(job.result.outputs) if (r := ApprovalRequest.of(o))]
        yield {"key": "k", "correlation_id": req.approval_id, "payload": payload}
        yield req.approve(by="ann")  # the call was still held: this answer releases it

    result = job.connect(answers()).apply(wa.make_mailer(timeout_s=600)).run()
    [error] = result.errors
    assert (error.key, error.error_type, error.execution_id) == (
        "k", "ExternalEventError", "outside event 0")
    assert f"is {payload.get('approved') if isinstance(payload, dict) else payload!r}" \
        in error.message and "not true or false" in error.message
    assert "the call stays held" in error.message
    answers_by_key = {o["key"]: o["answer"] for o in result.outputs if "answer" in o}
    assert answers_by_key == {"k": "sent to k@x.org"}
    assert read_counts(str(tmp_path)) == {("email", "k@x.org"): 1}


class _WaitsForAnApprovalLikeId(Agent):
    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output=await ctx.wait_for("approval:mine", timeout_s=60)))


def test_a_wait_for_takes_any_payload_even_under_an_approval_like_id():
    # only a held tool call's approval is checked; ``ctx.wait_for`` hands over any payload
    result = AgentsExecutionEnvironment.local().from_list([{"key": "k"}]).connect(
        [{"key": "k", "correlation_id": "approval:mine", "payload": "yes"}]).apply(
        _WaitsForAnApprovalLikeId()).run()
    assert result.outputs == ["yes"] and result.errors == []


def test_the_tool_decorator_declares_approval():
    from flink_agents_py.api import FunctionTool, qualified_name, tool

    def wire(amount: int) -> str:
        """Wire money."""
        return "ok"

    marked = FunctionTool.from_function(tool(wire, requires_approval=True,
                                             approval_timeout_s=30))
    assert marked.requires_approval and marked.approval_timeout_s == 30
    with pytest.raises(ValueError, match="approval_timeout_s"):
        tool(wire, approval_timeout_s=0)
    for odd in (True, False, 0, -1, float("nan"), float("inf")):  # a descriptor's too
        with pytest.raises(ValueError, match="approval_timeout_s"):
            FunctionTool(func=qualified_name(wire), approval_timeout_s=odd)
    assert FunctionTool(func=qualified_name(wire), approval_timeout_s=2).approval_timeout_s == 2


def test_an_agent_that_waits_is_replay_safe_at_every_crash_point():
    from flink_agents_py.testing import check_replay_safety

    report = check_replay_safety(wa.Approver(), [{"key": "a", "timeout_s": 5}, {"key": "b"}])
    assert report.ok, report
    assert len(report.points) >= 5 and report.outputs == 2


USER_MODULE = '''
from flink_agents_py.api import (Agent, InputEvent, OutputEvent, RunnerContext,
                                 WaitTimeoutError, action)


class Refunds(Agent):
    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        order = event.input["order"]
        try:
            paid = await ctx.wait_for(f"paid-{order}", timeout_s=900)
            status = f"paid {paid['amount']}"
        except WaitTimeoutError:
            status = "expired"
        await ctx.sleep(60)
        ctx.send_event(OutputEvent(output={"order": order, "status": status}))
'''

USER_SCRIPT = '''
import json
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.local import AdvanceTime
from refunds import Refunds

orders = [{"key": "ann", "order": 1}, {"key": "bob", "order": 2}, {"key": "cy", "order": 3}]
events = [{"key": "ann", "correlation_id": "paid-1", "payload": {"amount": 5}},
          AdvanceTime(950),  # bob's wait timed out at 900 s; he sleeps until 960 s
          {"key": "bob", "correlation_id": "paid-2", "payload": {"amount": 7}}]
result = AgentsExecutionEnvironment.local().from_list(orders).connect(events).apply(
    Refunds()).run()
print(json.dumps({"outputs": sorted(result.outputs, key=lambda o: o["order"]),
                  "errors": [[e.error_type, e.message] for e in result.errors]}))
'''


def test_a_users_own_module_waits_from_its_own_directory(tmp_path: pathlib.Path):
    import subprocess
    import sys

    (tmp_path / "refunds.py").write_text(USER_MODULE)
    (tmp_path / "main.py").write_text(USER_SCRIPT)
    root = pathlib.Path(__file__).resolve().parents[1]
    python = root / ".venv" / "bin" / "python"
    proc = subprocess.run([str(python if python.exists() else sys.executable), "main.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["outputs"] == [{"order": 1, "status": "paid 5"},
                              {"order": 2, "status": "expired"},
                              {"order": 3, "status": "expired"}]
    [(kind, message)] = got["errors"]  # bob paid after his wait had timed out
    assert kind == "UnmatchedEventError" and "'paid-2'" in message
    assert "late: the wait of call r0/on_input/c0 timed out" in message


def test_an_at_tool_approval_holds_calls_however_the_tool_is_declared(tmp_path, monkeypatch):
    """A descriptor naming an ``@tool(requires_approval=True)`` function, no approval args."""
    monkeypatch.setenv("WAITS_TEST_DIR", str(tmp_path))
    result = AgentsExecutionEnvironment.local().from_list([{"key": "x", "to": "x@y.org"}]).apply(
        wa.make_decorated_mailer()).run()
    from flink_agents_py.api import ApprovalRequest

    [req] = [r for o in result.outputs if (r := ApprovalRequest.of(o))]
    assert req.timeout_s == 600 and req.tool == "send_email"
    [answer] = [o["answer"] for o in result.outputs if "answer" in o]
    assert "was not approved" in answer  # no answer came: never sent
    assert read_counts(str(tmp_path)) == {}


def test_a_yaml_tool_declares_approval(tmp_path):
    from flink_agents_py.api import FunctionTool, ResourceType
    from flink_agents_py.yaml import load_agent

    text = """
    agents:
      - name: mailer
        actions:
          - {name: go, function: "support.waits_agents:note", on: [InputEvent]}
        tools:
          - {name: send_email, function: "support.waits_agents:send_email", requires_approval: true,
             approval_timeout_s: 30}
          - {name: plain, function: "support.waits_agents:send_email"}
    """
    import textwrap

    agent = load_agent(textwrap.dedent(text))
    tools = {name: FunctionTool(**desc.arguments) for kind, name, desc in agent._resources
             if kind is ResourceType.TOOL}
    assert tools["send_email"].approval() == (True, 30.0)
    assert tools["plain"].approval() == (False, None)


def test_outside_events_reach_keys_by_their_stable_encoding_and_errors_show_the_key():
    # 1, True and "1" are three keys (the stable key encoding): each event wakes its own run,
    # and an unmatched event's error names the key as the selector gave it
    records = [{"key": k, "timeout_s": 60} for k in (1, True, "1")]
    events = [{"key": True, "correlation_id": "go-True", "payload": "t"},
              {"key": 1, "correlation_id": "go-1", "payload": "i"},
              {"key": 2, "correlation_id": "go-2"}]
    result = _job(records, events).run()
    by_type = {(type(o["key"]).__name__, str(o["key"])): o for o in result.outputs}
    assert by_type[("bool", "True")]["approved"] == "t"
    assert by_type[("int", "1")]["approved"] == "i"
    assert "timed_out" in by_type[("str", "1")]
    [err] = [e for e in result.errors if e.action == "<outside>"]
    assert err.key == 2 and "no run of key 2 is in flight" in err.message


# -- events that arrive before their wait opens ----------------------------------------------
def test_an_event_before_its_wait_opens_is_held_and_claimed_when_the_wait_opens():
    # 'second-a' arrives while the run waits for 'first-a': held in the run's keyed state,
    # then taken by the wait as it opens; 'stray-a' is held too, and named when the run ends
    events = [{"key": "a", "correlation_id": "second-a", "payload": 2},
              {"key": "a", "correlation_id": "stray-a", "payload": "s"},
              {"key": "a", "correlation_id": "first-a", "payload": 1}]
    result = _job([{"key": "a", "timeout_s": 60}], events, wa.TwoSteps()).run()
    assert result.outputs == [{"key": "a", "first": 1, "second": 2}]
    [err] = result.errors
    assert err.error_type == "UnmatchedEventError" and err.execution_id == "outside event 1"
    assert "'stray-a'" in err.message and "the run ended without waiting for it" in err.message
    assert err.input == {"key": "a", "correlation_id": "stray-a", "payload": "s"}


def test_an_early_event_is_given_up_after_its_hold_time():
    from flink_agents_py.runtime.core._waits import EARLY_HOLD_S

    events = [{"key": "a", "correlation_id": "second-a", "payload": 2},
              AdvanceTime(EARLY_HOLD_S + 1),
              {"key": "a", "correlation_id": "first-a", "payload": 1}]
    result = _job([{"key": "a"}], events, wa.TwoSteps()).run()  # no timeouts
    assert result.outputs == [{"key": "a", "first": 1, "second": "timeout"}]
    [err] = result.errors
    assert f"none opened within {EARLY_HOLD_S} s" in err.message and "'second-a'" in err.message


def test_a_run_holds_a_bounded_number_of_early_events():
    from flink_agents_py.runtime.core._waits import EARLY_MAX

    events = [{"key": "a", "correlation_id": f"n{i}"} for i in range(EARLY_MAX + 1)]
    result = _job([{"key": "a", "timeout_s": 5}], events).run()
    refused = [e for e in result.errors if f"holds {EARLY_MAX} early events" in e.message]
    assert [e.execution_id for e in refused] == [f"outside event {EARLY_MAX}"]
    ended = [e for e in result.errors if "the run ended without waiting" in e.message]
    assert len(ended) == EARLY_MAX and len(result.errors) == EARLY_MAX + 1


def test_an_early_event_survives_a_crash_and_is_claimed_after_the_restore():
    events = [{"key": "a", "correlation_id": "second-a", "payload": 2},
              {"key": "a", "correlation_id": "first-a", "payload": 1}]
    snaps = []
    crashed = _job([{"key": "a"}], events, wa.TwoSteps()).run(
        on_step=lambda job: snaps.append(job.snapshot()),
        max_steps=3)  # the record, its note, the early event
    assert not crashed.completed
    snap = json.loads(json.dumps(snaps[-1]))
    [entry] = snap["keys"]
    assert entry["run"]["waits"]["second-a"]["status"] == "early"
    result = _job([{"key": "a"}], events, wa.TwoSteps()).restore(snap).run()
    assert result.outputs == [{"key": "a", "first": 1, "second": 2}] and result.errors == []


# -- outside events between the records (local runner) --------------------------------------
def test_interleaved_events_arrive_while_other_records_still_flow(monkeypatch, tmp_path):
    from flink_agents_py.api import ApprovalRequest
    from flink_agents_py.local import AfterRecords

    monkeypatch.setenv("WAITS_TEST_DIR", str(tmp_path))
    records = [{"key": k, "to": f"{k}@x.org"} for k in ("yes", "no", "later")]
    job = AgentsExecutionEnvironment.local().from_list(records)
    positions = []  # records in when each output came out

    def answers():  # read as they are due: the request of 'yes' is out after one record
        yield AfterRecords(1)
        [req] = [r for o in job.result.outputs if (r := ApprovalRequest.of(o))]
        yield req.approve(by="ann")
        yield AfterRecords(2)
        yield next(r for o in job.result.outputs
                   if (r := ApprovalRequest.of(o)) and r.key == "no").reject("no")

    def on_step(j):
        positions.extend([j.snapshot()["position"]] * (len(j.result.outputs) - len(positions)))

    result = job.connect(answers(), interleaved=True).apply(wa.make_mailer()).run(
        on_step=on_step)
    shown = [(o["key"], "answer" in o) if "answer" in o else (o["key"], False)
             for o in result.outputs]
    assert shown == [("yes", False), ("yes", True), ("no", False), ("no", True),
                     ("later", False), ("later", True)]
    # 'yes' was released after the first record, before the second came in; 'no' after two
    assert positions == [1, 1, 2, 2, 3, 3]
    answers_by_key = {o["key"]: o["answer"] for o in result.outputs if "answer" in o}
    assert "sent to yes" in answers_by_key["yes"] and "rejected" in answers_by_key["no"]
    assert "was not approved" in answers_by_key["later"]


def test_interleaved_events_are_placed_by_after_records_and_restore_from_a_snapshot():
    from flink_agents_py.local import AfterRecords

    records = [{"key": k, "timeout_s": 60} for k in ("a", "b", "c")]
    events = [{"key": "a", "correlation_id": "go-a", "payload": 0},  # before any record:
              AfterRecords(1), {"key": "a", "correlation_id": "go-a", "payload": 1},
              AdvanceTime(61), AfterRecords(3), {"key": "c", "correlation_id": "go-c"}]
    seen = []
    full = _job(records, []).connect(events, interleaved=True).run(
        on_step=lambda j: seen.append(len(j.result.outputs)))
    out = _by_key(full.outputs)
    assert out["a"]["approved"] == 1 and out["c"]["approved"] is None
    assert "within 60 s" in out["b"]["timed_out"]  # b came in at 61 s; c was released first
    [err] = full.errors  # 'go-a' came before a's record: no run of key 'a' in flight
    assert err.execution_id == "outside event 0" and "no run of key 'a'" in err.message
    assert [o["key"] for o in full.outputs] == ["a", "c", "b"]
    # crash after a's output, restore: the items already delivered are not delivered again
    snaps = []
    crashed = _job(records, []).connect(events, interleaved=True).run(
        on_step=lambda j: snaps.append(j.snapshot()), max_steps=seen.index(1) + 1)
    snap = json.loads(json.dumps(snaps[-1]))
    rest = _job(records, []).connect(events, interleaved=True).restore(snap).run()
    assert [o["key"] for o in crashed.outputs + rest.outputs] == ["a", "c", "b"]
    assert rest.errors == [] and _by_key(rest.outputs)["c"]["approved"] is None


# -- replay safety with outside events --------------------------------------------------------
def test_replay_safety_feeds_outside_events_and_time_and_crashes_at_each():
    from flink_agents_py.testing import check_replay_safety

    records = [{"key": "a", "timeout_s": 5}, {"key": "b", "timeout_s": 50}, {"key": "c"}]
    events = [{"key": "a", "correlation_id": "go-a", "payload": "yes"},
              {"key": "b", "correlation_id": "stray-b"},  # held, named when b's run ends
              AdvanceTime(10),
              {"key": "b", "correlation_id": "go-b", "payload": {"by": "ann"}}]
    report = check_replay_safety(wa.Approver(), records, events=events)
    assert report.ok, report
    assert report.outputs == 3 and report.errors == 1
    no_events = check_replay_safety(wa.Approver(), records, other_process=False)
    assert report.points_total > no_events.points_total  # each delivery is a crash point


def test_the_approval_agent_is_replay_safe_with_its_approvals_and_rejections():
    from flink_agents_py.api import ApprovalRequest
    from flink_agents_py.testing import check_replay_safety

    records = [{"key": k, "to": f"{k}@x.org"} for k in ("yes", "no", "silent")]
    first = AgentsExecutionEnvironment.local().from_list(records).apply(
        wa.make_mailer(timeout_s=600)).run()  # the approval ids, as the runs name them
    requests = {r.key: r for o in first.outputs if (r := ApprovalRequest.of(o))}
    events = [requests["yes"].approve(by="ann"), AdvanceTime(60),
              requests["no"].reject("not this one")]
    report = check_replay_safety(wa.make_mailer(timeout_s=600), records, events=events,
                                 other_process=False)  # its agent class is local to a function
    assert report.ok, report
    assert report.outputs == 3 and report.errors == 0  # an answer per key
    assert report.points_total >= 10 and len(report.points) == report.points_total
    answered = AgentsExecutionEnvironment.local().from_list(records).connect(events).apply(
        wa.make_mailer(timeout_s=600)).run()
    answers = {o["key"]: o["answer"] for o in answered.outputs if "answer" in o}
    assert "sent to yes" in answers["yes"] and "not this one" in answers["no"]
    assert "was not approved" in answers["silent"]


# -- the runs_waiting gauge -------------------------------------------------------------------
def test_runs_waiting_gauge_follows_parked_runs_in_the_metrics():
    from flink_agents_py.observability import AgentMetrics

    metrics = AgentMetrics()
    core = AgentCore(AgentPlan.from_agent(wa.Approver()), observer=metrics)
    core.gauges = metrics.counters
    core.open()
    try:
        states = {k: InMemoryKeyState() for k in ("a", "b", "c")}
        for k, state in states.items():
            core.on_input(k, {"n": 1}, state)
            while not core.advance(k, state).parked:
                core.wait_for(k, 5)
        assert metrics.snapshot()["runs_waiting"] == 3
        res = core.on_outside_event("b", {"key": "b", "correlation_id": "go-b"}, states["b"])
        assert metrics.snapshot()["runs_waiting"] == 2
        while res.busy:
            core.wait_for("b", 5)
            res = core.advance("b", states["b"])
        assert metrics.snapshot()["runs_waiting"] == 2 and states["b"].run is None
        core.on_timers("a", 0, states["a"], end_of_input=True)
        assert metrics.snapshot()["runs_waiting"] == 1
    finally:
        core.close()


def test_runs_waiting_in_the_local_metrics_through_a_crash_and_restore():
    records = [{"key": k, "timeout_s": 30} for k in ("a", "b", "c")]
    events = [{"key": "a", "correlation_id": "go-a"}]
    snaps = []
    crashed = _job(records, events).run(on_step=lambda j: snaps.append(j.snapshot()),
                                        max_steps=6)  # 3 records and their notes: all wait
    assert crashed.metrics["runs_waiting"] == 3 and crashed.counters["runs_waiting"] == 3
    done = _job(records, events).restore(snaps[-1]).run()
    assert done.metrics["runs_waiting"] == 0 and len(done.outputs) == 3


def test_bench_p6_core_part_runs_in_the_quick_bench():
    import bench.__main__ as bench_main
    from bench import _waits

    assert "waits" in bench_main.ALL and bench_main.config(True)["waits"]["flink_runs"] == 0
    data, table = _waits.bench_waits({"core_runs": 200, "flink_runs": 0})
    [row] = data["rows"]
    assert row["ok"] and row["live_runs"] == 0 and "P6" in table.text()


def test_an_early_event_for_the_next_queued_run_of_the_key_goes_on_to_that_run():
    # b's second record is queued behind its first run; its event comes while the first waits
    records = [{"key": "b", "n": 1, "timeout_s": 9}, {"key": "b", "n": 2, "timeout_s": 99}]
    events = [{"key": "b", "correlation_id": "stray-b"},
              {"key": "b", "correlation_id": "later-b", "payload": "for run 2"},
              {"key": "b", "correlation_id": "first-b", "payload": "1st"}]
    result = _job(records, events, _NextRun()).run()
    assert [o.get("got") for o in result.outputs] == ["1st", "for run 2"]
    [err] = result.errors  # held through both runs, claimed by neither
    assert "'stray-b'" in err.message and "the run ended without waiting for it" in err.message


class _NextRun(wa.Agent):
    @wa.action(wa.InputEvent)
    @staticmethod
    async def on_input(event, ctx) -> None:
        cid = "first-b" if event.input["n"] == 1 else "later-b"
        got = await ctx.wait_for(cid, timeout_s=event.input["timeout_s"])
        ctx.send_event(wa.OutputEvent(output={"n": event.input["n"], "got": got}))
