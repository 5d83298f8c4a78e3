"""Replay divergence: a replay that makes another call than the one recorded is an error.

Every durable call record keeps its kind and target (``CallKind``); a replay reaching a
recorded identity with a call of another kind or target fails its action with
``ReplayDivergenceError`` on the error output and hands the recorded outcome to nobody.
Arguments-only changes replay the recorded outcome with a warning; records written before
kinds were kept replay unchecked. The framework's own calls are made in the same order live
and on replay (the cancel-then-call case), so a correct agent never diverges.

Core-level restores: a key's state is snapshotted mid-run through its JSON form (as Flink
restores keyed state, ``support.harness.snapshot_of(..., "json")``), the code is "redeployed" by
flipping a module switch, and the snapshot resumes on a new ``AgentCore``.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from support.harness import KEY, call_of, drive_until, new_core, resume, snapshot_of
from support.probes import count, gate
from support.subagent_agents import RunningPubsub

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    AgentsError,
    ChatMessage,
    ChatModelSetup,
    DeferredSubagentSetup,
    DurableExecutionError,
    InputEvent,
    InternalSubagent,
    OutputEvent,
    ReplayDivergenceError,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    SubagentResult,
    action,
    qualified_name,
)
from flink_agents_py.integrations.chat_models import ScriptedChatModel
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import CallKind, CallRecord, InMemoryKeyState, Journal, RunState

pytestmark = pytest.mark.timeout(60)

VERSION = {"v": 1}
BUILD = {"fail": False}


@pytest.fixture(autouse=True)
def _deployed_version():
    """The code as first deployed (counts and the gate are per test: ``probes``)."""
    VERSION["v"] = 1
    BUILD["fail"] = False


# -- fakes ---------------------------------------------------------------------------------
def step_a(x: int) -> str:
    count("step_a")
    return f"a-{x}"


def step_b(x: int) -> str:
    count("step_b")
    return f"b-{x}"


def gated(tag: str) -> str:
    count(f"gated:{tag}")
    assert gate().wait(10), "gate never opened"
    return tag


def chat_script(request: Any) -> str:
    count("model")
    return "chatted"


class Remote(DeferredSubagentSetup):
    """A deferred remote: ``prepare`` raises for ``{"raise": True}``; counts prepares."""

    def prepare(self, ctx: RunnerContext, input: Any, session_id: str, call_id: str):
        count("prepare")
        if input.get("raise"):
            raise ConnectionError("cannot reach the remote")

        def call() -> SubagentResult:
            count("deferred")
            return SubagentResult.ok({"echo": input})

        return f"{session_id}#{call_id}", call, None


class Flaky(DeferredSubagentSetup):
    """A setup that cannot be built while ``BUILD["fail"]`` is set (a transient fault)."""

    def model_post_init(self, _ctx: Any) -> None:
        if BUILD["fail"]:
            raise RuntimeError("config service unreachable")

    def prepare(self, ctx: RunnerContext, input: Any, session_id: str, call_id: str):
        return "k", (lambda: SubagentResult.ok("built")), None


class Child(Agent):
    """An internal sub-agent whose action makes a call that changes with ``VERSION``."""

    @action(InputEvent)
    @staticmethod
    async def run(event: InputEvent, ctx: RunnerContext) -> None:
        fn = step_a if VERSION["v"] == 1 else step_b
        first = await ctx.durable_execute_async(fn, 1)
        await ctx.durable_execute_async(gated, "child")
        ctx.send_event(OutputEvent(output={"first": first}))


# -- agents --------------------------------------------------------------------------------
class Switchable(Agent):
    """Call c0 depends on the deployed ``VERSION``; c1 waits on the gate."""

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        v = VERSION["v"]
        if v == 1:
            first = await ctx.durable_execute_async(step_a, 1)
        elif v == 2:  # another function at the same identity
            first = await ctx.durable_execute_async(step_b, 1)
        elif v == 3:  # the same function, other arguments
            first = await ctx.durable_execute_async(step_a, 2)
        elif v == 4:  # another kind of call: a chat
            first = (await ctx.chat("cm", [ChatMessage(content="hi")])).message.content
        elif v == 5:  # the action catches the error and tries to go on
            try:
                first = await ctx.durable_execute_async(step_b, 1)
            except Exception:  # noqa: BLE001 - what a careless action does
                first = "swallowed"
        elif v == 6:  # a synchronous durable call
            first = ctx.durable_execute(step_b, 1)
        else:  # the same first call; another one where a call had started (outcome unknown)
            first = await ctx.durable_execute_async(step_a, 1)
            await ctx.durable_execute_async(step_b, 2)
        second = await ctx.durable_execute_async(gated, "g")
        ctx.send_event(OutputEvent(output={"first": first, "second": second}))


def switchable() -> AgentPlan:
    agent = Switchable()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ResourceDescriptor(
        ScriptedChatModel, function=qualified_name(chat_script)))
    agent.add_resource("cm", ResourceType.CHAT_MODEL,
                       ResourceDescriptor(ChatModelSetup, connection="conn"))
    return AgentPlan.from_agent(agent)


def _snapshot_at_second_call(plan: AgentPlan, action_name: str = "go",
                             how: str = "json") -> InMemoryKeyState:
    """Run one record until ``action_name``'s c0 is recorded and c1 waits on the gate."""
    return _snapshot_at_call(plan, 1, action_name, how)


def _snapshot_at_call(plan: AgentPlan, ordinal: int, action_name: str = "go",
                      how: str = "json") -> InMemoryKeyState:
    """Run one record until ``action_name``'s calls before ``ordinal`` are recorded and call
    ``ordinal`` waits on the gate."""
    core = new_core(plan)
    try:
        state = InMemoryKeyState()
        res = core.on_input(KEY, {"key": KEY}, state)
        assert res.errors == [] and res.outputs == []
        drive_until(core, state, quiet=True, done=lambda s: (
            (c := call_of(s, action_name, ordinal)) is not None and not c.done))
        return snapshot_of(state, how)  # type: ignore[arg-type]
    finally:
        gate().set()
        core.close()


# -- what a record keeps -------------------------------------------------------------------
def test_each_record_keeps_the_kind_and_target_of_its_call():
    plan = switchable()
    snap = _snapshot_at_second_call(plan)
    c0, c1 = call_of(snap, "go", 0), call_of(snap, "go", 1)
    assert (c0.kind, c0.target, c0.done) == (CallKind.FUNCTION, qualified_name(step_a), True)
    assert (c1.kind, c1.target, c1.done) == (CallKind.FUNCTION, qualified_name(gated), False)


def test_records_without_kind_from_older_state_still_restore():
    old = '{"digest": "d", "done": true, "ok": true, "value": "x"}'
    rec = CallRecord.model_validate_json(old)
    assert rec.kind is None and rec.target is None and rec.value == "x"
    assert CallRecord.from_json(old) == rec
    new = CallRecord(digest="d", kind=CallKind.TOOL, target="lookup", done=True)
    assert CallRecord.model_validate_json(new.model_dump_json()) == new
    assert CallRecord.from_json(new.to_json()) == new


class Recording(Journal):
    """A journal that keeps every record appended, by call id."""

    def __init__(self) -> None:
        self.records: dict[str, CallRecord] = {}

    def append(self, key: Any, call_id: str, record: CallRecord) -> None:
        self.records[call_id] = record.model_copy()


class EveryKind(Agent):
    """Makes a durable call of every kind the runtime records."""

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        await ctx.durable_execute_async(step_a, 1)                        # c0
        await ctx.chat("cm", [ChatMessage(content="hi")])                 # c1
        await (await ctx.submit_subagent("child", {"n": 1}))              # c2
        await (await ctx.submit_subagent("remote", {"n": 1}))             # c3
        handle = await ctx.submit_subagent("pubsub", {"n": 1})            # c4 (c5: submit)
        await handle.cancel()                                             # c6
        await ctx.submit_subagent("nope", 1)                              # c7
        ctx.send_event(OutputEvent(output="done"))


def test_every_framework_call_records_what_made_it():
    gate().set()
    VERSION["v"] = 1
    agent = EveryKind()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ResourceDescriptor(
        ScriptedChatModel, function=qualified_name(chat_script)))
    agent.add_resource("cm", ResourceType.CHAT_MODEL,
                       ResourceDescriptor(ChatModelSetup, connection="conn"))
    agent.add_resource("child", ResourceType.AGENT,
                       ResourceDescriptor(InternalSubagent, agent=Child))
    agent.add_resource("remote", ResourceType.AGENT, ResourceDescriptor(Remote))
    agent.add_resource("pubsub", ResourceType.AGENT, ResourceDescriptor(RunningPubsub))
    journal = Recording()
    res = AgentsExecutionEnvironment.local(journal=journal).from_list([{"key": "k"}]).apply(
        agent).run()
    assert res.errors == [] and res.outputs == ["done"]
    got = {cid: (r.kind, r.target) for cid, r in journal.records.items()}
    mine = {cid.rsplit("/", 1)[1]: v for cid, v in got.items()
            if cid.rsplit("/", 1)[0] == "r0/go"}
    assert mine == {
        "c0": (CallKind.FUNCTION, qualified_name(step_a)),
        "c1": (CallKind.CHAT, "cm"),
        "c2": (CallKind.SUBAGENT, "child"),
        "c3": (CallKind.SUBAGENT_DEFERRED, "remote"),
        "c4": (CallKind.SUBAGENT_RESULT, "pubsub"),
        "c5": (CallKind.SUBAGENT_SUBMIT, "pubsub"),
        "c6": (CallKind.SUBAGENT_CANCEL, "pubsub"),
        "c7": (CallKind.SUBAGENT_REFUSED, "nope"),
    }
    # inside the chat: the built-in chat action's model call
    assert (CallKind.MODEL, "cm") in got.values()


# -- divergence ----------------------------------------------------------------------------
@pytest.mark.parametrize(("version", "now"), [
    (2, f"function '{qualified_name(step_b)}'"),
    (4, "chat 'cm'"),
    (5, f"function '{qualified_name(step_b)}'"),
    (6, f"function '{qualified_name(step_b)}'"),
], ids=["other_function", "other_kind", "caught_by_the_action", "sync_call"])
def test_a_call_of_another_kind_or_target_fails_the_action_with_divergence(version, now, probes):
    plan = switchable()
    snap = _snapshot_at_second_call(plan)
    assert probes["step_a"] == 1
    VERSION["v"] = version  # "redeployed" with changed code
    outputs, errors, core = resume(plan, snap)
    # the action fails on the error output; no output was made from a wrong answer
    assert outputs == []
    [err] = errors
    assert (err.action, err.error_type) == ("go", "ReplayDivergenceError")
    assert "r0/go/c0" in err.message and "'go'" in err.message
    assert f"recorded function '{qualified_name(step_a)}'" in err.message
    assert f"now calling {now}" in err.message
    # nothing ran in place of the recorded call, and nothing after it
    assert probes["step_b"] == 0 and probes["model"] == 0
    assert core.counters["calls_executed"] == 0
    assert core.counters["replay_divergences"] == 1
    assert snap.run is None  # the run completed (as failed); the key goes on


def test_a_started_call_without_outcome_diverges_too(probes):
    """Where the record says call c1 started (outcome unknown), another call at c1 would run
    in place of the one a reconciler or a retry must settle: a divergence."""
    plan = switchable()
    snap = _snapshot_at_second_call(plan)
    VERSION["v"] = 7
    outputs, errors, core = resume(plan, snap)
    assert outputs == []
    [err] = errors
    assert err.error_type == "ReplayDivergenceError" and "r0/go/c1" in err.message
    assert f"recorded function '{qualified_name(gated)}'" in err.message
    assert probes["step_b"] == 0 and core.counters["calls_executed"] == 0


def test_arguments_only_change_replays_the_recorded_outcome_with_a_warning(caplog, probes):
    plan = switchable()
    snap = _snapshot_at_second_call(plan)
    VERSION["v"] = 3
    with caplog.at_level(logging.WARNING, logger="flink_agents_py.runtime"):
        outputs, errors, _ = resume(plan, snap)
    assert errors == []
    assert outputs == [{"first": "a-1", "second": "g"}]  # the recorded outcome
    assert probes["step_a"] == 1
    assert any("arguments changed" in r.getMessage() for r in caplog.records)


def test_records_without_kind_replay_by_identity_without_a_check(probes):
    plan = switchable()
    snap = _snapshot_at_second_call(plan)
    for rec in snap.run.inflight["r0/go"].calls.values():  # as written by an older version
        rec.kind, rec.target = None, None
    VERSION["v"] = 2
    outputs, errors, _ = resume(plan, snap)
    assert errors == []
    assert outputs == [{"first": "a-1", "second": "g"}]
    assert probes["step_b"] == 0


def test_divergence_inside_a_subagent_is_reported_and_fails_the_call(probes):
    class Parent(Agent):
        @action(InputEvent)
        @staticmethod
        async def go(event: InputEvent, ctx: RunnerContext) -> None:
            result = await (await ctx.submit_subagent("child", {"n": 1}))
            ctx.send_event(OutputEvent(output={"success": result.success,
                                               "error": result.error_message}))

    agent = Parent()
    agent.add_resource("child", ResourceType.AGENT,
                       ResourceDescriptor(InternalSubagent, agent=Child))
    plan = AgentPlan.from_agent(agent)
    snap = _snapshot_at_second_call(plan, action_name="run")
    VERSION["v"] = 2
    outputs, errors, _ = resume(plan, snap)
    [err] = errors  # reported on the error output, not only captured by the invocation
    assert err.action == "run" and err.error_type == "ReplayDivergenceError"
    assert "r0/go/c0/b/run/c0" in err.message
    [out] = outputs
    assert out["success"] is False and "ReplayDivergenceError" in out["error"]
    assert probes["step_b"] == 0


def test_replay_divergence_error_is_an_agents_error_exported_from_the_api():
    err = ReplayDivergenceError("r0/go/c1", "go", ("tool", "lookup"), ("function", "m:f"))
    assert isinstance(err, AgentsError) and isinstance(err, DurableExecutionError)
    assert (err.call_id, err.action, err.recorded, err.current) == (
        "r0/go/c1", "go", ("tool", "lookup"), ("function", "m:f"))
    import pickle

    assert str(pickle.loads(pickle.dumps(err))) == str(err)


def test_a_divergence_names_the_upgrade_recipe_ctx_patched():
    # a deploy that adds a call before a recorded one diverges: the message names the fix
    # the upgrade guide gives (ctx.patched), not only "drain in-flight runs"
    err = ReplayDivergenceError("r0/go/c0", "go", ("chat", "clerk"), ("function", "m:audit"))
    assert "ctx.patched('<change-id>')" in str(err)
    assert "drain" in str(err) and "keep the order of durable calls stable" in str(err)


# -- the framework's own calls are replay-deterministic ------------------------------------
class CancelThenGated(Agent):
    """Cancels an async call (awaited or not, by ``input["await"]``), then makes a call."""

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        handle = await ctx.submit_subagent("pubsub", {"n": 1})   # c0 (poll), c1 (submit)
        if event.input["await"]:
            await handle.cancel()                                # c2
        else:
            handle.cancel()                                      # c2, not awaited
        after = await ctx.durable_execute_async(gated, "after")  # c3
        result = await handle
        ctx.send_event(OutputEvent(output={"after": after, "cancelled": result.cancelled}))


@pytest.mark.parametrize("awaited", [True, False], ids=["awaited", "not_awaited"])
@pytest.mark.parametrize("how", ["deepcopy", "json"])
def test_cancel_then_call_after_restore_gives_the_call_its_own_result(awaited, how, probes):
    """The cancel is made again on replay (from its record), so the next call keeps its
    own identity: it is not handed the cancel's outcome, and no divergence is raised."""
    agent = CancelThenGated()
    agent.add_resource("pubsub", ResourceType.AGENT, ResourceDescriptor(RunningPubsub))
    plan = AgentPlan.from_agent(agent)
    core = new_core(plan)
    try:
        state = InMemoryKeyState()
        core.on_input(KEY, {"key": KEY, "await": awaited}, state)
        drive_until(core, state, quiet=True, done=lambda s: (
            (c := call_of(s, "go", 3)) is not None and not c.done
            and call_of(s, "go", 2).done))
        cancel = call_of(state, "go", 2)
        assert (cancel.kind, cancel.target) == (CallKind.SUBAGENT_CANCEL, "pubsub")
        snap = snapshot_of(state, how)  # type: ignore[arg-type]
    finally:
        gate().set()
        core.close()
    outputs, errors, _ = resume(plan, snap)
    assert errors == []
    assert outputs == [{"after": "after", "cancelled": True}]
    assert (probes["submit"], probes["cancel"]) == (1, 1)  # replayed, not sent again


def test_deferred_prepare_failure_is_recorded_and_replayed(probes):
    class PrepareFails(Agent):
        @action(InputEvent)
        @staticmethod
        async def go(event: InputEvent, ctx: RunnerContext) -> None:
            try:
                await (await ctx.submit_subagent("remote", {"raise": True}))  # c0
                got = "no error"
            except ConnectionError as e:
                got = str(e)
            after = await ctx.durable_execute_async(gated, "after")          # c1
            ctx.send_event(OutputEvent(output={"prepare": got, "after": after}))

    agent = PrepareFails()
    agent.add_resource("remote", ResourceType.AGENT, ResourceDescriptor(Remote))
    plan = AgentPlan.from_agent(agent)
    snap = _snapshot_at_second_call(plan)
    failed = call_of(snap, "go", 0)
    assert failed.done and not failed.ok and "ConnectionError" in failed.error_type
    outputs, errors, _ = resume(plan, snap)
    assert errors == []
    assert outputs == [{"prepare": "cannot reach the remote", "after": "after"}]
    assert probes["prepare"] == 1  # not prepared again on replay


def test_refused_submit_takes_its_identity_and_replays_its_refusal():
    """A submit refused because its setup could not be built (a transient fault) is
    recorded: after a restore where it builds, the caller still sees the refusal it saw,
    and the calls after it keep their identities."""

    class Refused(Agent):
        @action(InputEvent)
        @staticmethod
        async def go(event: InputEvent, ctx: RunnerContext) -> None:
            r = await (await ctx.submit_subagent("flaky", {"n": 1}))          # c0
            after = await ctx.durable_execute_async(gated, "after")         # c1
            ctx.send_event(OutputEvent(output={"success": r.success, "after": after}))

    agent = Refused()
    agent.add_resource("flaky", ResourceType.AGENT, ResourceDescriptor(Flaky))
    BUILD["fail"] = True
    plan = AgentPlan.from_agent(agent)
    snap = _snapshot_at_second_call(plan)
    assert call_of(snap, "go", 0).kind is CallKind.SUBAGENT_REFUSED
    BUILD["fail"] = False  # the fault is gone after the restart
    outputs, errors, _ = resume(plan, snap)
    assert errors == []
    assert outputs == [{"success": False, "after": "after"}]


def test_a_run_state_round_trips_kinds_through_json():
    plan = switchable()
    snap = _snapshot_at_second_call(plan, how="deepcopy")
    again = RunState.model_validate_json(snap.run.model_dump_json())
    assert again.inflight["r0/go"].calls["0"].kind is CallKind.FUNCTION


# -- as a user sees it: their own module, outside the repository -----------------------------
USER_AGENT = '''
from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action


def fetch_stock(sku):
    return {{"sku": sku, "units": 3}}


def fetch_price(sku):
    return {{"sku": sku, "price": 9.5}}


class Pricing(Agent):
    @action(InputEvent)
    @staticmethod
    async def rate(event: InputEvent, ctx: RunnerContext) -> None:
        first = await ctx.durable_execute_async({first}, event.input["sku"])
        second = await ctx.durable_execute_async(fetch_price, event.input["sku"])
        ctx.send_event(OutputEvent(output={{"first": first, "second": second}}))
'''

USER_RUN = '''
import json, sys
from flink_agents_py import AgentsExecutionEnvironment
from my_pricing import Pricing

job = AgentsExecutionEnvironment.local().from_list([{"key": "B01", "sku": "B01"}]).apply(Pricing())
if sys.argv[1] == "crash":
    job.run(max_steps=2)  # the process dies after the first call was recorded
    json.dump(job.snapshot(), open("checkpoint.json", "w"))
else:
    result = job.restore(json.load(open("checkpoint.json"))).run()
    print(json.dumps({"outputs": result.outputs,
                      "errors": [e.model_dump(mode="json") for e in result.errors]}))
'''


def test_a_user_sees_the_divergence_on_the_error_output(tmp_path):
    import json
    import subprocess
    import sys

    def deploy(first: str) -> None:
        (tmp_path / "my_pricing.py").write_text(USER_AGENT.format(first=first))

    def python(*args: str) -> str:
        done = subprocess.run([sys.executable, "run.py", *args], cwd=tmp_path, timeout=120,
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return done.stdout

    (tmp_path / "run.py").write_text(USER_RUN)
    deploy("fetch_stock")
    python("crash")
    snapshot = json.loads((tmp_path / "checkpoint.json").read_text())
    [call] = [c for k in snapshot["keys"] for a in k["run"]["inflight"].values()
              for c in a["calls"].values() if c["done"]]
    assert (call["kind"], call["target"]) == ("function", "my_pricing:fetch_stock")

    deploy("fetch_price")  # redeployed with the calls reordered
    got = json.loads(python("restore").splitlines()[-1])
    assert got["outputs"] == []
    [err] = got["errors"]
    assert err["error_type"] == "ReplayDivergenceError" and err["action"] == "rate"
    assert ("recorded function 'my_pricing:fetch_stock', now calling function "
            "'my_pricing:fetch_price'") in err["message"]
    assert "r0/rate/c0" in err["message"]

    deploy("fetch_stock")  # the code that made the checkpoint: restores fine
    got = json.loads(python("restore").splitlines()[-1])
    assert got["errors"] == []
    assert got["outputs"] == [{"first": {"sku": "B01", "units": 3},
                               "second": {"sku": "B01", "price": 9.5}}]


# -- divergence inside the built-in tool call action -----------------------------------------
def lookup_a(sku: str) -> str:
    """Look a sku up."""
    count("lookup_a")
    return f"a:{sku}"


def gated_b(sku: str) -> str:
    """Look a sku up, slowly."""
    count("gated_b")
    assert gate().wait(10), "gate never opened"
    return f"b:{sku}"


def two_tools_script(request: Any) -> Any:
    from flink_agents_py.api import MessageRole, ToolCall

    if not request.tool_results:
        return ChatMessage(role=MessageRole.ASSISTANT, tool_calls=[
            ToolCall(id="1", name="lookup_a", arguments={"sku": "s"}),
            ToolCall(id="2", name="gated_b", arguments={"sku": "s"})])
    return "answered"


def tool_chat(tools: list[str]) -> AgentPlan:
    from support import replay_defect_agents as rda
    agent = rda.Orchestrator()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ResourceDescriptor(
        ScriptedChatModel, function=qualified_name(two_tools_script)))
    for t in tools:
        agent.add_resource(t, ResourceType.TOOL, globals()[t])
    agent.add_resource("om", ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="conn", tools=tools, tool_dispatch="serial"))
    return AgentPlan.from_agent(agent)


def test_a_tool_removed_between_checkpoint_and_restore_diverges_in_the_tool_round():
    """Tool calls take identities in request order; with ``lookup_a`` removed, ``gated_b``
    would take ``lookup_a``'s recorded identity: the tool round fails with a divergence
    instead of handing ``gated_b`` the result of ``lookup_a``."""
    old_plan = tool_chat(["lookup_a", "gated_b"])
    snap = _snapshot_at_second_call(old_plan, action_name="_tool_call_action")
    assert call_of(snap, "_tool_call_action", 0).target == "lookup_a"
    outputs, errors, core = resume(tool_chat(["gated_b"]), snap)
    [err] = errors
    assert (err.action, err.error_type) == ("_tool_call_action", "ReplayDivergenceError")
    assert "recorded tool 'lookup_a', now calling tool 'gated_b'" in err.message
    [out] = outputs  # the chat failed for its caller; nothing answered from a wrong result
    assert out["answer"] is None and "ReplayDivergenceError" in out["error"]
    assert core.counters["calls_executed"] == 0  # gated_b did not run in lookup_a's place


# -- calls made in another order ---------------------------------------------------------------
ORDER = {"items": ["apple", "fig"]}


def priced(item: str) -> str:
    count(f"priced:{item}")
    return f"price of {item}"


class Fanout(Agent):
    """One call per item, in ``ORDER``'s order (as a loop over a set would make them), then
    a call that waits on the gate."""

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        answers = {item: await ctx.durable_execute_async(priced, item)
                   for item in ORDER["items"]}
        await ctx.durable_execute_async(gated, "g")
        ctx.send_event(OutputEvent(output=answers))


def test_calls_made_in_another_order_diverge_instead_of_swapping_results(probes):
    """Recorded: c0 = priced("apple"), c1 = priced("fig"). After the restore the action makes
    them in the other order (a set's order can change between processes): c0 now has the
    arguments recorded for c1, so handing it c0's outcome would give "fig" the price of
    "apple". The action fails with a divergence instead."""
    ORDER["items"] = ["apple", "fig"]
    plan = AgentPlan.from_agent(Fanout())
    snap = _snapshot_at_call(plan, 2)
    ORDER["items"] = ["fig", "apple"]
    outputs, errors, core = resume(plan, snap)
    assert outputs == []
    [err] = errors
    assert err.error_type == "ReplayDivergenceError" and "r0/go/c0" in err.message
    assert "arguments are those recorded for r0/go/c1" in err.message
    assert "another order" in err.message
    assert core.counters["replay_divergences"] == 1
    assert probes["priced:apple"] == 1 and probes["priced:fig"] == 1  # nothing ran again


def test_a_restored_call_with_arguments_no_call_recorded_keeps_the_warning(caplog, probes):
    """An argument that changed harmlessly matches no other record: the recorded outcome is
    replayed with the warning, as documented."""
    ORDER["items"] = ["apple", "fig"]
    plan = AgentPlan.from_agent(Fanout())
    snap = _snapshot_at_call(plan, 2)
    ORDER["items"] = ["apple ", "fig"]  # trailing whitespace: not another call's arguments
    with caplog.at_level(logging.WARNING, logger="flink_agents_py.runtime"):
        outputs, errors, _ = resume(plan, snap)
    assert errors == []
    assert outputs == [{"apple ": "price of apple", "fig": "price of fig"}]
    assert any("arguments changed" in r.getMessage() for r in caplog.records)
