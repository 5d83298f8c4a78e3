"""Replay you can upgrade (issue 28): call identity of every callable form, started calls that
finish before their action, replays that make fewer calls, strict replay, ``ctx.patched``.

Core-level restores (``support.harness``): a key's state is snapshotted mid-run through its
JSON form, as Flink restores keyed state, the code is "redeployed" by flipping a module switch,
and the snapshot resumes on a new ``AgentCore``.
"""

from __future__ import annotations

import functools
import logging
import operator
import socket
import threading
from typing import Any

import pytest
from support.harness import (
    KEY,
    call_of,
    drive_until,
    new_core,
    poll_until,
    resume,
    run_to_end,
    snapshot_of,
)
from support.probes import count, gate

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    ChatMessage,
    ChatModelSetup,
    InputEvent,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    action,
    qualified_name,
)
from flink_agents_py.integrations.chat_models import ScriptedChatModel
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import CallRecord, InMemoryKeyState, Journal
from flink_agents_py.runtime.recorder._identity import bound_state, stable_form
from flink_agents_py.runtime.recorder._outcomes import call_digest

pytestmark = pytest.mark.timeout(60)

SWITCH: dict[str, Any] = {"order": ("apple", "pear"), "form": "partial"}


@pytest.fixture(autouse=True)
def _first_deploy():
    SWITCH.update(order=("apple", "pear"), form="partial")


# -- fakes ---------------------------------------------------------------------------------
def price(item: str, qty: int = 1) -> str:
    count(f"price:{item}")
    return f"PRICE({item})x{qty}"


def price_apple() -> str:
    return price("apple")


def price_pear() -> str:
    return price("pear")


def chat_script(request: Any) -> str:
    count("model")
    return "chatted"


def gated(tag: str) -> str:
    count(f"gated:{tag}")
    assert gate().wait(10), "gate never opened"
    return tag


class Pricer:
    """Bound methods of two instances differ only in ``self.item``."""

    def __init__(self, item: str) -> None:
        self.item = item

    def price(self) -> str:
        return price(self.item)


class PriceOf:
    """A callable object whose state says what it prices."""

    def __init__(self, item: str) -> None:
        self.item = item

    def __call__(self) -> str:
        return price(self.item)


def _closure(item: str):
    def call() -> str:
        return price(item)
    return call


def _calls_fn(fn):
    def call() -> str:
        return fn()
    return call


def _literal_lambda(item: str):
    # two lambdas that differ only in a literal in their code
    return (lambda: price("apple")) if item == "apple" else (lambda: price("pear"))


class PriceTable:
    """``table[item]`` and ``table.price_of(item)`` price ``item``."""

    def __getitem__(self, item: str) -> str:
        return price(item)

    def price_of(self, item: str) -> str:
        return price(item)


def _retrying(fn):
    """A decorator as users write them: ``functools.wraps`` over a closure."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)
    return wrapper


FORMS = {
    "partial": lambda item: functools.partial(price, item),
    "partial_keyword": lambda item: functools.partial(price, item=item),
    "nested_partial": lambda item: functools.partial(functools.partial(price, item), qty=2),
    "lambda_default": lambda item: (lambda x=item: price(x)),
    "closure": _closure,
    "closure_over_function": lambda item: _calls_fn(price_apple if item == "apple"
                                                    else price_pear),
    "lambda_literal": _literal_lambda,
    "bound_method": lambda item: Pricer(item).price,
    "callable_object": PriceOf,
    "wraps_decorated_closure": lambda item: _retrying(_closure(item)),
    "closure_over_closure": lambda item: _calls_fn(_closure(item)),
    "staticmethod_object": lambda item: staticmethod(_closure(item)),
    "lru_cache_over_closure": lambda item: functools.lru_cache(maxsize=None)(_closure(item)),
    "itemgetter": lambda item: functools.partial(operator.itemgetter(item), PriceTable()),
    "methodcaller": lambda item: functools.partial(operator.methodcaller("price_of", item),
                                                   PriceTable()),
    "methodcaller_keyword": lambda item: functools.partial(
        operator.methodcaller("price_of", item=item), PriceTable()),
}


class Fanout(Agent):
    """One durable call per item, in ``SWITCH["order"]``, through the callable form
    ``SWITCH["form"]``; then a call that waits on the gate."""

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        make = FORMS[SWITCH["form"]]
        got = [await ctx.durable_execute_async(make(item)) for item in SWITCH["order"]]
        await ctx.durable_execute_async(gated, "g")
        ctx.send_event(OutputEvent(output=got))


def snapshot_at(plan: AgentPlan, ordinal: int, action_name: str = "go",
                record: dict[str, Any] | None = None) -> InMemoryKeyState:
    """Run one record until the calls before ``ordinal`` are recorded and call ``ordinal``
    has started (it waits on the gate); the key's state there, through its JSON form."""
    core = new_core(plan)
    try:
        state = InMemoryKeyState()
        res = core.on_input(KEY, record or {"key": KEY}, state)
        assert res.errors == [] and res.outputs == []
        drive_until(core, state, quiet=True, done=lambda s: (
            (c := call_of(s, action_name, ordinal)) is not None and not c.done))
        return snapshot_of(state, "json")
    finally:
        gate().set()
        core.close()


# -- defect 1: what a callable binds is part of its call's identity --------------------------
@pytest.mark.parametrize("form", sorted(FORMS))
def test_calls_through_any_callable_form_made_in_another_order_diverge(form, probes):
    """Recorded: c0 prices apple, c1 pear, through ``form``. Restored with the two swapped,
    c0 now binds what c1 bound: the action fails with a divergence instead of handing
    ``pear`` the recorded ``PRICE(apple)``."""
    SWITCH["form"] = form
    plan = AgentPlan.from_agent(Fanout())
    snap = snapshot_at(plan, 2)
    assert (probes["price:apple"], probes["price:pear"]) == (1, 1)
    SWITCH["order"] = ("pear", "apple")
    outputs, errors, core = resume(plan, snap)
    assert outputs == []  # no output made from a swapped answer
    [err] = errors
    assert err.error_type == "ReplayDivergenceError" and "r0/go/c0" in err.message
    assert "arguments are those recorded for r0/go/c1" in err.message
    assert (probes["price:apple"], probes["price:pear"]) == (1, 1)  # nothing ran again
    assert core.counters["replay_divergences"] == 1


@pytest.mark.parametrize("form", sorted(FORMS))
def test_calls_through_any_callable_form_in_the_same_order_replay_quietly(form, probes,
                                                                          caplog):
    SWITCH["form"] = form
    plan = AgentPlan.from_agent(Fanout())
    snap = snapshot_at(plan, 2)
    with caplog.at_level(logging.WARNING, logger="flink_agents_py.runtime"):
        outputs, errors, core = resume(plan, snap)
    assert errors == []
    qty = 2 if form == "nested_partial" else 1
    assert outputs == [[f"PRICE(apple)x{qty}", f"PRICE(pear)x{qty}"]]
    assert core.counters["calls_replayed"] == 2 and core.counters["calls_executed"] == 1
    assert not [r for r in caplog.records if "arguments changed" in r.getMessage()]
    assert (probes["price:apple"], probes["price:pear"]) == (1, 1)


def _digest(fn) -> str:
    return call_digest(fn, (), {}, "r0/go/c0")


def test_bound_state_is_a_stable_form_not_an_object_address():
    # two instances with the same state: the same digest (never id())
    assert _digest(Pricer("apple").price) == _digest(Pricer("apple").price)
    assert _digest(Pricer("apple").price) != _digest(Pricer("pear").price)
    assert _digest(PriceOf("apple")) == _digest(PriceOf("apple"))
    # a module-level function binds nothing: its digest is what it was before
    assert bound_state(price) is None
    assert bound_state(functools.partial(price, "apple")) is not None
    # a set bound in a closure is digested in a stable order
    assert stable_form({"b", "a", "c"}) == stable_form({"c", "b", "a"})


def test_a_bound_value_with_no_stable_form_contributes_its_type_name_only():
    class Client:
        def __init__(self, region: str) -> None:
            self.region = region
            self.sock = socket.socket()
            self.lock = threading.Lock()

        def fetch(self) -> str:
            return self.region

    a, b, eu = Client("us"), Client("us"), Client("eu")
    try:
        assert stable_form(a.sock) == {"$type": "socket:socket"}
        assert stable_form(a.lock)["$type"].endswith("lock")
        assert _digest(a.fetch) == _digest(b.fetch)  # other socket, other lock: same identity
        assert _digest(a.fetch) != _digest(eu.fetch)  # the data it holds still counts
    finally:
        for c in (a, b, eu):
            c.sock.close()


def test_functions_in_a_closure_count_by_qualified_name_and_cycles_end():
    assert stable_form(price) == {"$fn": f"{__name__}:price"}
    loop: list[Any] = []
    loop.append(loop)
    assert stable_form(loop) is not None  # a cycle does not recurse forever

    class Custom:
        def __durable_identity__(self) -> str:
            return "pinned"

    assert stable_form(Custom()) == stable_form(Custom())
    assert "pinned" in str(stable_form(Custom()))


# -- defect 3: a started call finishes (and is recorded) before its action and run end -----
def notify(who: str) -> str:
    count(f"notify:{who}")
    assert gate().wait(10), "gate never opened"
    count(f"notified:{who}")
    return f"told {who}"


def quick(tag: str) -> str:
    count(f"quick:{tag}")
    return tag


class FireAndForget(Agent):
    """Starts ``notify`` and never awaits it; ``then`` awaits another call after it."""

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.durable_execute_async(notify, event.input["who"])  # started, never awaited
        if event.input.get("then"):
            await ctx.durable_execute_async(quick, "after")
        ctx.send_event(OutputEvent(output="sent"))


class PlainFireAndForget(Agent):
    """The same from a plain ``def`` action."""

    @action(InputEvent)
    @staticmethod
    def go(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.durable_execute_async(notify, event.input["who"])
        ctx.send_event(OutputEvent(output="sent"))


@pytest.mark.parametrize(("agent", "then"), [(FireAndForget, False), (FireAndForget, True),
                                             (PlainFireAndForget, False)],
                         ids=["returns_at_once", "after_a_later_await", "plain_def_action"])
def test_a_started_call_never_awaited_runs_and_is_recorded_before_the_run_ends(
        agent, then, probes):
    plan = AgentPlan.from_agent(agent())
    core = new_core(plan)
    try:
        state = InMemoryKeyState()
        res = core.on_input(KEY, {"key": KEY, "who": "ann", "then": then}, state)
        poll_until(core, state, lambda s: probes["notify:ann"] == 1 and (
            not then or (s.run is not None and call_of(s, "go", 1) is not None
                         and call_of(s, "go", 1).done)))
        # the action returned, but its call still runs: the run is not over
        assert res.outputs == [] and state.run is not None
        assert call_of(state, "go", 0) is not None and not call_of(state, "go", 0).done
        gate().set()
        outputs, errors = [], []
        while state.run is not None:
            assert core.wait_for(KEY, 10), "the started call never completed"
            step = core.advance(KEY, state)
            outputs += step.outputs
            errors += step.errors
        assert errors == [] and outputs == ["sent"]
        assert probes["notified:ann"] == 1
        assert core.counters["calls_executed"] == (2 if then else 1)
    finally:
        gate().set()
        core.close()


def test_a_started_call_never_awaited_runs_again_after_a_crash(probes):
    """Crash while the never-awaited call runs: the restored run re-enters the action, which
    starts the call again (at-least-once), and the run ends once it is recorded."""
    plan = AgentPlan.from_agent(FireAndForget())
    core = new_core(plan)
    try:
        state = InMemoryKeyState()
        core.on_input(KEY, {"key": KEY, "who": "bob"}, state)
        assert state.run is not None
        snap = snapshot_of(state, "json")  # the checkpoint: notify started, not recorded
    finally:
        core.close()  # the crash: notify's outcome never comes back
    gate().set()
    outputs, errors, new = resume(plan, snap)
    assert errors == [] and outputs == ["sent"]
    assert probes["notified:bob"] >= 1 and new.counters["calls_executed"] == 1
    assert snap.run is None


class LazyLeftAlone(Agent):
    """Makes a chat future and a lazy call and awaits neither."""

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.chat("cm", [ChatMessage(content="hi")])  # LAZY-CHAT
        ctx.send_event(OutputEvent(output="done"))


def _line_of(marker: str) -> int:
    with open(__file__) as f:
        return next(i for i, line in enumerate(f, 1) if marker in line
                    and "_line_of" not in line)


def test_a_lazy_chat_never_awaited_never_runs_and_is_warned_about_once_with_its_line(
        probes, caplog):
    agent = LazyLeftAlone()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ResourceDescriptor(
        ScriptedChatModel, function=qualified_name(chat_script)))
    agent.add_resource("cm", ResourceType.CHAT_MODEL,
                       ResourceDescriptor(ChatModelSetup, connection="conn"))
    with caplog.at_level(logging.WARNING, logger="flink_agents_py.runtime"):
        res = AgentsExecutionEnvironment.local().from_list(
            [{"key": "a"}, {"key": "b"}, {"key": "a"}]).apply(agent).run()
    assert res.errors == [] and res.outputs == ["done"] * 3
    assert probes["model"] == 0  # never dispatched (the seeds' contract)
    warned = [r.getMessage() for r in caplog.records if "never awaited" in r.getMessage()]
    assert len(warned) == 1  # once per line of code, not per run
    assert f"{__file__}:{_line_of('# LAZY-CHAT')}" in warned[0]
    assert "chat 'cm'" in warned[0]


# -- defect 4, strict replay and ctx.patched: code redeployed between checkpoint and restore --
def step_a(x: int) -> str:
    count("step_a")
    return f"a-{x}"


def step_b(x: int) -> str:
    count("step_b")
    return f"b-{x}"


VERSION = {"v": 1}


@pytest.fixture(autouse=True)
def _version_one():
    VERSION["v"] = 1


async def versioned(event: InputEvent, ctx: RunnerContext) -> None:
    """The action body of each deployed version (``VERSION["v"]``).

    1: step_a(1), step_b(2), gated.    2: step_a(1) only (fewer calls).
    3: step_a(7) (other arguments), step_b(2), gated.    4: strict=True on that call.
    5: patched("use-b"): step_b(1) instead of step_a(1); twice in one execution.
    6: deprecate_patch("use-b") then step_b(1).    7: the patch call removed: step_b(1).
    """
    v = VERSION["v"]
    if v == 1:
        first = await ctx.durable_execute_async(step_a, 1)
        await ctx.durable_execute_async(step_b, 2)
    elif v == 2:
        first = await ctx.durable_execute_async(step_a, 1)
        ctx.send_event(OutputEvent(output={"first": first, "second": None}))
        return
    elif v in (3, 4):
        first = await ctx.durable_execute_async(step_a, 7, strict=True if v == 4 else None)
        await ctx.durable_execute_async(step_b, 2)
    elif v == 5:
        new = ctx.patched("use-b")
        fn, arg = (step_b, 1) if new else (step_a, 1)
        first = await ctx.durable_execute_async(fn, arg)
        if not new:
            await ctx.durable_execute_async(step_b, 2)
        assert ctx.patched("use-b") is new  # the same answer for the whole execution
    elif v == 6:
        ctx.deprecate_patch("use-b")
        first = await ctx.durable_execute_async(step_b, 1)
    else:
        first = await ctx.durable_execute_async(step_b, 1)
    second = await ctx.durable_execute_async(gated, "g")
    ctx.send_event(OutputEvent(output={"first": first, "second": second}))


class Versioned(Agent):
    go = action(InputEvent)(staticmethod(versioned))


class StrictVersioned(Agent):
    replay = "strict"
    go = action(InputEvent)(staticmethod(versioned))


def test_a_replay_that_makes_fewer_calls_than_recorded_is_flagged(probes, caplog):
    plan = AgentPlan.from_agent(Versioned())
    snap = snapshot_at(plan, 2)  # c0 step_a and c1 step_b recorded; c2 gated started
    VERSION["v"] = 2
    from flink_agents_py.runtime import Observer

    class Keep(Observer):
        def __init__(self) -> None:
            self.found: list[tuple[str, str, str]] = []

        def replay_finding(self, key, execution_id, kind, message):
            self.found.append((execution_id, kind, message))

    keep = Keep()
    with caplog.at_level(logging.WARNING, logger="flink_agents_py.runtime"):
        outputs, errors, core = resume(plan, snap, observer=keep)
    assert errors == [] and outputs == [{"first": "a-1", "second": None}]  # lenient: goes on
    [(execution_id, kind, message)] = keep.found
    assert (execution_id, kind) == ("r0/go", "unreached_calls")
    assert "r0/go/c1" in message and "r0/go/c2" in message and "step_b" in message
    assert any("fewer durable calls than were recorded" in r.getMessage()
               and "r0/go/c2" in r.getMessage() for r in caplog.records)
    assert core.counters["replay_unreached_calls"] == 1


def test_in_strict_mode_a_replay_that_makes_fewer_calls_is_an_error(probes):
    plan = AgentPlan.from_agent(StrictVersioned())
    snap = snapshot_at(plan, 2)
    VERSION["v"] = 2
    outputs, errors, _ = resume(plan, snap)
    assert outputs == []
    [err] = errors
    assert err.error_type == "ReplayDivergenceError"
    assert "r0/go/c1" in err.message and "r0/go/c2" in err.message


@pytest.mark.parametrize(("agent", "version", "strict"), [
    (Versioned, 3, False), (Versioned, 4, True), (StrictVersioned, 3, True),
    ("instance", 3, True)], ids=["lenient", "strict_call", "strict_class", "strict_instance"])
def test_changed_arguments_replay_with_a_warning_unless_strict(agent, version, strict, probes,
                                                               caplog):
    if agent == "instance":
        made = Agent(replay="strict")
        made.add_action("go", [InputEvent], versioned)
    else:
        made = agent()
    plan = AgentPlan.from_agent(made)
    snap = snapshot_at(plan, 2)
    VERSION["v"] = version
    with caplog.at_level(logging.WARNING, logger="flink_agents_py.runtime"):
        outputs, errors, core = resume(plan, snap)
    if strict:
        assert outputs == []
        [err] = errors
        assert err.error_type == "ReplayDivergenceError" and "r0/go/c0" in err.message
        assert "strict replay" in err.message and "other arguments" in err.message
    else:
        assert errors == [] and outputs == [{"first": "a-1", "second": "g"}]  # as recorded
        assert core.counters["replay_arguments_changed"] == 1
        assert any("arguments changed" in r.getMessage() for r in caplog.records)
    assert probes["step_a"] == 1  # recorded once, never run again


def test_a_bad_replay_mode_is_refused_naming_it():
    from flink_agents_py.api import UsageError

    with pytest.raises(UsageError, match="Agent\\(replay=...\\).*'lenient'.*'strict'"):
        Agent(replay="loose")

    class Loose(Agent):
        replay = "sometimes"
        go = action(InputEvent)(staticmethod(versioned))

    with pytest.raises(UsageError, match="Loose.replay"):
        AgentPlan.from_agent(Loose())
    assert AgentPlan.from_agent(StrictVersioned()).config["replay"] == "strict"
    assert "replay" not in AgentPlan.from_agent(Versioned()).config


def test_patched_keeps_old_runs_on_the_old_branch_and_new_runs_on_the_new(probes):
    plan = AgentPlan.from_agent(Versioned())
    old = snapshot_at(plan, 2)  # recorded by version 1: step_a(1), step_b(2)
    VERSION["v"] = 5
    outputs, errors, _ = resume(plan, old)
    assert errors == [] and outputs == [{"first": "a-1", "second": "g"}]  # the old branch
    assert (probes["step_a"], probes["step_b"]) == (1, 1)  # both replayed, none ran again
    gate().clear()
    new = snapshot_at(plan, 1)  # a new run under version 5: the marker, then step_b(1)
    assert probes["step_b"] == 2
    [rec] = [r for r in new.run.inflight.values()]
    assert rec.calls["patch:use-b"].value is True
    outputs, errors, _ = resume(plan, new)
    assert errors == [] and outputs == [{"first": "b-1", "second": "g"}]
    assert probes["step_b"] == 2 and probes["step_a"] == 1  # replayed


def test_deprecate_patch_then_removing_it_keeps_the_calls_in_place(probes):
    plan = AgentPlan.from_agent(Versioned())
    VERSION["v"] = 5
    patched_run = snapshot_at(plan, 1)
    for version in (6, 7):  # deprecate_patch, then the patch call removed altogether
        VERSION["v"] = version
        outputs, errors, _ = resume(plan, snapshot_of(patched_run, "json"))
        assert errors == [] and outputs == [{"first": "b-1", "second": "g"}]
    assert probes["step_b"] == 1  # replayed each time: no call shifted by the marker


def test_deprecate_patch_refuses_a_run_recorded_before_the_patch(probes):
    plan = AgentPlan.from_agent(Versioned())
    old = snapshot_at(plan, 2)
    VERSION["v"] = 6
    outputs, errors, _ = resume(plan, old)
    assert outputs == []
    [err] = errors
    assert err.error_type == "ReplayDivergenceError"
    assert "r0/go/patch:use-b" in err.message and "old branch" in err.message
    assert probes["step_b"] == 1  # nothing ran in the old branch's place


def test_patched_rejects_a_bad_change_id():
    class Bad(Agent):
        @action(InputEvent)
        @staticmethod
        async def go(event: InputEvent, ctx: RunnerContext) -> None:
            ctx.patched("")

    res = AgentsExecutionEnvironment.local().from_list([{"key": "a"}]).apply(Bad()).run()
    [err] = res.errors
    assert err.error_type == "UsageError" and "non-empty string" in err.message
    assert "r0/go" in err.message


def test_objects_inside_a_bound_object_count_by_type_and_identity_never_fails_a_call():
    class Pool:
        def __init__(self) -> None:
            self.connections: dict[str, int] = {}

    class Session:
        def __init__(self, region: str) -> None:
            self.region = region
            self.pool = Pool()

        def get(self) -> str:
            return self.region

    used, fresh = Session("eu"), Session("eu")
    used.pool.connections["host"] = 3  # state that changes as the session is used
    assert _digest(used.get) == _digest(fresh.get)
    assert _digest(used.get) != _digest(Session("us").get)

    class Broken:
        def __durable_identity__(self) -> str:
            raise RuntimeError("no identity today")

        def __call__(self) -> str:
            return "x"

    assert _digest(Broken()) == _digest(Broken())  # counts by its type; the call goes on


class DictJournal(Journal):
    """A journal in a dict (what a crashed attempt appended, looked up at recovery)."""

    def __init__(self) -> None:
        self.records: dict[tuple[Any, str], CallRecord] = {}

    def append(self, key: Any, call_id: str, record: CallRecord) -> None:
        self.records[(key, call_id)] = record.model_copy(deep=True)

    def lookup(self, key: Any, call_id: str) -> CallRecord | None:
        return self.records.get((key, call_id))


def test_calls_journaled_after_the_checkpoint_and_not_reached_are_flagged_too(probes):
    plan = AgentPlan.from_agent(StrictVersioned())
    journal = DictJournal()
    core = new_core(plan, journal=journal)
    try:
        state = InMemoryKeyState()
        core.on_input(KEY, {"key": KEY}, state)
        drive_until(core, state, quiet=True, done=lambda s: (
            (c := call_of(s, "go", 2)) is not None and not c.done))
        snap = snapshot_of(state, "json")
    finally:
        gate().set()
        core.close()
    rec = next(iter(snap.run.inflight.values()))
    del rec.calls["1"], rec.calls["2"]  # the checkpoint was taken before c1 was recorded
    assert (KEY, "r0/go/c1") in journal.records
    VERSION["v"] = 2
    outputs, errors, _ = resume(plan, snap, journal=journal)
    [err] = errors
    assert err.error_type == "ReplayDivergenceError" and "r0/go/c1" in err.message


def test_a_patch_marker_is_journaled_and_answers_a_recovery_from_the_journal(probes):
    plan = AgentPlan.from_agent(Versioned())
    VERSION["v"] = 5
    journal = DictJournal()
    core = new_core(plan, journal=journal)
    try:
        state = InMemoryKeyState()
        core.on_input(KEY, {"key": KEY}, state)
        drive_until(core, state, quiet=True, done=lambda s: (
            (c := call_of(s, "go", 1)) is not None and not c.done))
        snap = snapshot_of(state, "json")
    finally:
        gate().set()
        core.close()
    assert journal.records[(KEY, "r0/go/patch:use-b")].value is True
    rec = next(iter(snap.run.inflight.values()))
    rec.calls.clear()  # the checkpoint was taken before any of it: the journal has it all
    outputs, errors, _ = resume(plan, snap, journal=journal)
    assert errors == [] and outputs == [{"first": "b-1", "second": "g"}]
    assert probes["step_b"] == 1  # answered from the journal, on the same branch


def test_the_frameworks_own_calls_are_digested_by_name_and_arguments_only():
    from flink_agents_py.runtime._knowledge import durable_target

    wrapped = durable_target("vector_store[docs].query", Pricer("apple").price)
    assert bound_state(wrapped) is None  # a framework wrapper: its label is its identity
    assert _digest(wrapped) == _digest(durable_target("vector_store[docs].query",
                                                      Pricer("pear").price))


def refuse(who: str) -> str:
    raise ConnectionError(f"cannot reach {who}")


class FailingFireAndForget(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.durable_execute_async(refuse, "mailer")
        ctx.send_event(OutputEvent(output="sent"))


def test_a_started_call_never_awaited_that_fails_is_recorded_and_warned_about(caplog):
    with caplog.at_level(logging.WARNING, logger="flink_agents_py.runtime"):
        res = AgentsExecutionEnvironment.local().from_list([{"key": "a"}]).apply(
            FailingFireAndForget()).run()
    assert res.errors == [] and res.outputs == ["sent"]
    [warned] = [r.getMessage() for r in caplog.records if "never awaited and failed" in
                r.getMessage()]
    assert "r0/go/c0" in warned and "ConnectionError: cannot reach mailer" in warned


class SyncFanout(Agent):
    """``Fanout`` with synchronous ``durable_execute`` calls."""

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        make = FORMS[SWITCH["form"]]
        got = [ctx.durable_execute(make(item)) for item in SWITCH["order"]]
        await ctx.durable_execute_async(gated, "g")
        ctx.send_event(OutputEvent(output=got))


def test_synchronous_calls_through_a_partial_made_in_another_order_diverge(probes):
    plan = AgentPlan.from_agent(SyncFanout())
    snap = snapshot_at(plan, 2)
    SWITCH["order"] = ("pear", "apple")
    outputs, errors, _ = resume(plan, snap)
    assert outputs == []
    [err] = errors
    assert err.error_type == "ReplayDivergenceError" and "recorded for r0/go/c1" in err.message


def test_through_a_journal_a_partial_call_never_gets_another_calls_outcome(probes):
    """The checkpoint holds no record of the calls, the journal holds both: restored with the
    calls swapped, no call gets the other's outcome (its partial's arguments are part of the
    digest), and neither runs a second time: the journal's entries are the restored run's
    own (its crashed attempt made them), so the swap diverges as it does in keyed state."""
    plan = AgentPlan.from_agent(Fanout())
    journal = DictJournal()
    core = new_core(plan, journal=journal)
    try:
        state = InMemoryKeyState()
        core.on_input(KEY, {"key": KEY}, state)
        drive_until(core, state, quiet=True, done=lambda s: (
            (c := call_of(s, "go", 2)) is not None and not c.done))
        snap = snapshot_of(state, "json")
    finally:
        gate().set()
        core.close()
    next(iter(snap.run.inflight.values())).calls.clear()
    SWITCH["order"] = ("pear", "apple")
    outputs, errors, _ = resume(plan, snap, journal=journal)
    assert outputs == []
    [err] = errors
    assert err.error_type == "ReplayDivergenceError" and "recorded for r0/go/c1" in err.message
    assert (probes["price:apple"], probes["price:pear"]) == (1, 1)


def test_a_bad_strict_argument_is_refused_naming_the_execution():
    class Bad(Agent):
        @action(InputEvent)
        @staticmethod
        async def go(event: InputEvent, ctx: RunnerContext) -> None:
            await ctx.durable_execute_async(step_a, 1, strict="yes")

    res = AgentsExecutionEnvironment.local().from_list([{"key": "a"}]).apply(Bad()).run()
    [err] = res.errors
    assert err.error_type == "UsageError" and "strict=" in err.message and "r0/go" in err.message


def test_standard_library_values_bound_by_a_partial_count_by_value():
    import decimal
    import pathlib

    def digest_of(*bound: Any) -> str:
        return _digest(functools.partial(price, *bound))

    assert digest_of(decimal.Decimal("1.5")) == digest_of(decimal.Decimal("1.5"))
    assert digest_of(decimal.Decimal("1.5")) != digest_of(decimal.Decimal("2.5"))
    assert digest_of(pathlib.PurePosixPath("/a")) != digest_of(pathlib.PurePosixPath("/b"))


def test_callable_forms_that_wrap_functions_are_stable_and_cycles_end():
    """The forms a decorator or the operator module makes: the same state, the same
    digest in every process (never an address); a self-referencing closure ends."""
    for make in (lambda: _retrying(_closure("apple")), lambda: operator.itemgetter("a", 1),
                 lambda: operator.methodcaller("price_of", "apple", qty=2),
                 lambda: staticmethod(_closure("apple"))):
        assert _digest(make()) == _digest(make())
    assert _digest(operator.attrgetter("a")) != _digest(operator.attrgetter("b"))

    def recursive():
        return recursive()

    assert stable_form(recursive)["$fn"].endswith("recursive")
    deep = _closure("apple")
    for _ in range(50):  # past MAX_DEPTH: the name only, never a RecursionError
        deep = _calls_fn(deep)
    assert _digest(deep) == _digest(deep)


# -- an in-flight action the new code no longer has ------------------------------------------
class FanoutRenamed(Agent):
    """``Fanout``'s calls in an action of another name: runs in flight in ``go`` cannot
    resume in it."""

    @action(InputEvent)
    @staticmethod
    async def go_v2(event: InputEvent, ctx: RunnerContext) -> None:
        got = [await ctx.durable_execute_async(price, item) for item in SWITCH["order"]]
        ctx.send_event(OutputEvent(output=got))


def test_a_restored_action_the_new_code_removed_is_a_divergence_naming_it_and_the_fix(probes):
    """Restored into code without the in-flight action ``go``: that key's run fails with a
    ``ReplayDivergenceError`` on the error output (key, position, the action, the fix), not
    a bare ``KeyError`` that stops the job; another key keeps running."""
    SWITCH["form"] = "partial"
    snap = snapshot_at(AgentPlan.from_agent(Fanout()), 2)
    new = new_core(AgentPlan.from_agent(FanoutRenamed()))
    try:
        outputs, errors = run_to_end(new, snap)
        other = InMemoryKeyState()
        new.on_input("other", {"key": "other"}, other)
        more, more_errors = run_to_end(new, other, key="other")
    finally:
        new.close()
    assert outputs == []
    [err] = errors
    assert err.error_type == "ReplayDivergenceError"
    assert (err.key, err.seq, err.action) == (KEY, 0, "go")
    assert "'go'" in err.message and "no action of that name" in err.message
    assert "ctx.patched" in err.message and "keep" in err.message
    assert more_errors == [] and more == [["PRICE(apple)x1", "PRICE(pear)x1"]]
    assert new.counters["replay_divergences"] == 1
