"""The crash-everywhere checker over every agent of the tests and jobs that makes durable calls.

Each scenario is an agent, its inputs and what resets its fakes; ``check_replay_safety``
crashes it at every point a checkpoint could be taken, restores a new runtime from the state
there (through JSON, as Flink restores keyed state) and checks outputs, error records,
durable calls and divergences. Every scenario runs without and with a journal. The table of
all of them is printed at the end of the module (``-s`` or the terminal summary shows it).

Then the checker is shown to catch bad agents, so it cannot pass vacuously.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import import_module
from typing import Any

import pytest
from support.probes import count, current
from support.restorable_agents import SendsTwins, Twin

from flink_agents_py.api import (
    Agent,
    InputEvent,
    OutputEvent,
    RunnerContext,
    action,
)
from flink_agents_py.runtime import SqliteJournal
from flink_agents_py.testing import (
    CallCounter,
    ReplaySafetyReport,
    check_replay_safety,
    summary_table,
)

pytestmark = pytest.mark.timeout(120)

REPORTS: list[ReplaySafetyReport] = []


@dataclass
class Scenario:
    """An agent to check: ``make()`` builds it, ``inputs(d)`` its records in directory ``d``."""

    name: str
    make: Callable[[], Any]
    inputs: Callable[[str], list[Any]]
    reset: Callable[[], None] | None = None
    options: dict[str, Any] = field(default_factory=dict)


# -- scenario agents not found elsewhere -----------------------------------------------------
COUNTER = CallCounter()


def echo_call(tag: str) -> str:
    """A durable side call: counts, answers from its argument."""
    COUNTER.count(tag)
    return f"done-{tag}"


def failing_call(tag: str) -> str:
    """A durable side call that always fails."""
    COUNTER.count(tag)
    raise ConnectionError(f"{tag} unreachable")


class IdenticalSiblings(SendsTwins):
    """Two identical sibling events; each of their actions keeps its own calls."""

    @action(Twin)
    @staticmethod
    async def on_twin(event: Twin, ctx: RunnerContext) -> None:
        first = await ctx.durable_execute_async(echo_call, f"{ctx.key}:{event.id}:1")
        second = await ctx.durable_execute_async(echo_call, f"{ctx.key}:{event.id}:2")
        ctx.send_event(OutputEvent(output={"id": event.id, "first": first, "second": second}))


class FailuresAndRetries(Agent):
    """A call that fails and is retried by the action, then an action that fails outright."""

    @action(InputEvent)
    @staticmethod
    async def attempt(event: InputEvent, ctx: RunnerContext) -> None:
        errors = []
        for i in range(3):  # the action's own retry loop: each attempt is its own durable call
            try:
                await ctx.durable_execute_async(failing_call, f"{ctx.key}:try{i}")
            except ConnectionError as e:
                errors.append(str(e))
        done = await ctx.durable_execute_async(echo_call, f"{ctx.key}:fallback")
        ctx.send_event(OutputEvent(output={"errors": errors, "fallback": done}))
        if event.input.get("then_fail"):
            await ctx.durable_execute_async(echo_call, f"{ctx.key}:before-failure")
            raise ValueError(f"record {event.input['n']} is rejected")


# -- the scenarios ---------------------------------------------------------------------------
def _durability_inputs(d: str) -> list[Any]:
    open(os.path.join(d, "crashed"), "w").close()  # no "slow first attempt" in the fakes
    scenarios = ["after_output_before_run_complete", "mid_batch", "after_model_before_tool"]
    return [{"key": k, "dir": d, "scenario": s} for k, s in
            [("a", scenarios[0]), ("b", scenarios[1]), ("a", scenarios[2]), ("c", scenarios[0])]]


def _subgraph_inputs(d: str) -> list[Any]:
    return [{"key": k, "dir": d} for k in ("a", "b", "a")]


def _subagents_plan() -> Any:
    from support.subagent_agents import PLAN

    return PLAN


def _subagents_reset() -> None:
    probes = current()
    probes.reset()
    # nothing waits: every remote answers at once
    probes.open("child", "deferred", "async", "after", "child_started")


SUBAGENT_CALLS = [
    {"do": "call", "name": "echo", "input": {"n": 1}},
    {"do": "call", "name": "prompted", "input": {"product": "shoe", "audience": "runners"}},
    {"do": "call", "name": "output_then_more", "input": 1},
    {"do": "call", "name": "raiser", "input": 1},
    {"do": "call", "name": "stages", "input": 1},
    {"do": "call", "name": "remote", "input": {"mode": "ok"}, "after": True},
    {"do": "call", "name": "remote", "input": {"mode": "raise"}},
    {"do": "call", "name": "remote", "input": {"mode": "error"}},
    {"do": "call", "name": "pubsub", "input": {"n": 1}},
    {"do": "memory"}, {"do": "fail_with_sibling"}, {"do": "refused"},
    {"do": "after_completion"},
]
# not "cancel_internal": whether its child finishes before the cancel lands races (the two
# complete on different executor threads), so its output differs between runs by design
SUBAGENT_CANCELS = [{"do": "cancel_internal_before_start"}, {"do": "cancel_deferred"},
                    {"do": "cancel_async"}]


def _orchestrator(dispatch: str) -> Callable[[], Any]:
    def make() -> Any:
        from support import subagent_tool_agents as sta
        return sta.orchestrator(
            tools=["lookup", "shout"], subagents=["helper", "remote", "typed"],
            tool_dispatch=dispatch,
            helper=sta.internal(sta.Echo, description="echoes", input_schema=sta.OBJECT_SCHEMA),
            remote=sta.deferred("echo", description="a remote", input_schema=sta.OBJECT_SCHEMA),
            typed=sta.deferred("verdict_plus", cls=sta.TypedRemote, description="typed",
                               input_schema=sta.OBJECT_SCHEMA))
    return make


def _orchestrator_reset() -> None:
    from support import subagent_tool_agents as sta
    sta.reset()
    sta.SCRIPTS["orch"] = _orchestrator_script


def _orchestrator_script(request: Any) -> Any:
    from support import subagent_tool_agents as sta
    if not request.tool_results:
        return sta.calls(("l", "lookup", {"q": request.last_user_text}),
                         ("h", "_subagent_helper", {"text": "hi"}),
                         ("r", "_subagent_remote", {"text": "there"}),
                         ("t", "_subagent_typed", {"text": "rate"}),
                         ("s", "shout", {"text": request.last_user_text}))
    return {"results": sta.results_by_id(request)}


def _review_inputs(n: int) -> Callable[[str], list[Any]]:
    def inputs(d: str) -> list[Any]:
        from jobs.review_analysis import DEFAULT_INPUT, parse_line
        from jobs.review_analysis.advice import end_of_input_markers

        with open(DEFAULT_INPUT, encoding="utf-8") as f:
            records = [parse_line(i, line) for i, line in zip(range(n), f, strict=False)]
        return records + end_of_input_markers(records)
    return inputs


def _by_product(record: dict[str, Any]) -> Any:
    return record["id"]


def _review_agent(rating: str) -> Callable[[], Any]:
    def make() -> Any:
        from jobs.review_analysis import build_agent

        return build_agent("scripted", rating)
    return make


def _retry_agent() -> Any:
    from support.providers import FAST, flaky, probe_agent

    return probe_agent(flaky("checker-retry", fail_first=2), error_policy="retry", **FAST)


def _retry_reset() -> None:
    current().reset("checker-retry")


def _restorable_reset() -> None:
    from support.restorable_agents import ARG_VERSION

    ARG_VERSION["v"] = 1


def _identity_agent(dispatch: str) -> Callable[[], Any]:
    def make() -> Any:
        from support.tool_dispatch_agents import make_agent

        current().open("release")
        return make_agent(dispatch)
    return make


def _keyed(records: list[dict[str, Any]], prefix: str) -> list[dict[str, Any]]:
    return [{"key": f"{prefix}{i}", **r} for i, r in enumerate(records)]


SCENARIOS = [
    Scenario("durability: chat + 2 tools, audit after output",
             lambda: import_module("support.durability_agents").DurableChatAgent(),
             _durability_inputs),
    Scenario("subgraph: internal child, deferred, ctx.chat + tool",
             lambda: import_module("support.subgraph_agents").build(), _subgraph_inputs),
    Scenario("sub-agents: internal/deferred/async, failures, nested ctx.chat",
             _subagents_plan,
             lambda d: _keyed(SUBAGENT_CALLS, "k"), _subagents_reset),
    Scenario("async sub-agent whose remote run fails", _subagents_plan,
             # one record: the fake keeps remote runs by call id only, which repeats across keys
             lambda d: [{"key": "f", "do": "call", "name": "pubsub", "input": {"fail": True}}],
             _subagents_reset),
    Scenario("sub-agent handles with cancel", _subagents_plan,
             lambda d: _keyed(SUBAGENT_CANCELS, "c"), _subagents_reset),
    Scenario("sub-agents as tools, concurrent dispatch", _orchestrator("concurrent"),
             lambda d: [{"key": k, "ask": f"find {k}"} for k in ("a", "b")], _orchestrator_reset),
    Scenario("sub-agents as tools, serial dispatch", _orchestrator("serial"),
             lambda d: [{"key": k, "ask": f"find {k}"} for k in ("a", "b")], _orchestrator_reset),
    Scenario("nested sub-agent with ctx.chat + deferred + tool (e2e)",
             lambda: import_module("support.subagent_tool_agents").build_e2e(),
             lambda d: [{"key": k, "review": r, "sku": s} for k, r, s in
                        [("a", "great shoes", "S1"), ("b", "meh", "S22"), ("a", "great", "S3")]]),
    Scenario("tool chat, two tools",
             lambda: import_module("support.flink_agents_for_tests").tool_chat_agent(),
             lambda d: [{"key": f"k{n % 2}", "item": item} for n, item in
                        enumerate(["apple", "pear", "plum"])],
             # its output names the process it ran in (os.getpid()), by design
             options={"other_process": False}),
    Scenario("three tools, serial dispatch", _identity_agent("serial"),
             lambda d: [{"key": "a"}, {"key": "b"}]),
    Scenario("three tools, concurrent dispatch", _identity_agent("concurrent"),
             lambda d: [{"key": "a"}, {"key": "b"}]),
    Scenario("durable calls: sync, async, raising, memory",
             lambda: __import__("support.restorable_agents", fromlist=["Restorable"]).Restorable(),
             lambda d: [{"key": "a", "x": 1}, {"key": "a", "x": 2}, {"key": "b", "x": 3}],
             _restorable_reset),
    Scenario("identical sibling events", IdenticalSiblings,
             lambda d: [{"key": "a"}, {"key": "b"}], COUNTER.reset, {"ordered": False}),
    Scenario("failures and retries (action level)", FailuresAndRetries,
             lambda d: [{"key": "a", "n": 1}, {"key": "b", "n": 2, "then_fail": True},
                        {"key": "a", "n": 3, "then_fail": True}], COUNTER.reset),
    Scenario("chat with two tools, one record's action raises (trace agents)",
             lambda: import_module("support.trace_agents").shop(),
             lambda d: [{"key": f"k{n}", "n": n, "sku": f"sku-{n}"} for n in (0, 1, 83)]),
    Scenario("chat error policy retry", _retry_agent, lambda d: [{"key": "a", "q": "hi"}],
             _retry_reset),
    # keyed by product, as the job keys them (its records have no "key" field)
    Scenario("jobs: review analysis, direct, --model scripted", _review_agent("model"),
             _review_inputs(12), options={"key_selector": _by_product}),
    Scenario("jobs: review analysis, delegate, --model scripted", _review_agent("delegate"),
             _review_inputs(6), options={"key_selector": _by_product}),
]


def _defect_scenarios() -> list[Scenario]:
    """Helper H1's scenarios of the replay defects (``tests/support/replay_defect_agents.py``)."""
    try:
        from support import replay_defect_agents as rda
    except ImportError:
        return []
    def feed(inputs: list[Any]) -> Callable[[str], list[Any]]:
        return lambda d: list(inputs)

    return [Scenario(f"defect: {name}", make, feed(inputs))
            for name, make, inputs in getattr(rda, "SCENARIOS", [])]


ALL = SCENARIOS + _defect_scenarios()


@pytest.fixture(scope="module", autouse=True)
def _print_table(request: pytest.FixtureRequest):
    yield
    if REPORTS:
        table = summary_table(REPORTS)
        reporter = request.config.pluginmanager.get_plugin("terminalreporter")
        capture = request.config.pluginmanager.get_plugin("capturemanager")
        if reporter is not None and capture is not None:
            with capture.global_and_fixture_disabled():
                reporter.write_line("\nreplay safety of the scenario agents:\n" + table)


@pytest.mark.parametrize("journal", [False, True], ids=["no-journal", "journal"])
@pytest.mark.parametrize("scenario", ALL, ids=[s.name for s in ALL])
def test_scenario_agent_is_replay_safe_at_every_crash_point(scenario: Scenario, journal: bool,
                                                            tmp_path):
    counter = itertools.count()
    factory = (lambda: SqliteJournal(str(tmp_path / f"journal-{next(counter)}.db"))) \
        if journal else None
    report = check_replay_safety(scenario.make(), scenario.inputs(str(tmp_path)),
                                 journal_factory=factory, reset=scenario.reset,
                                 name=scenario.name, **scenario.options)
    REPORTS.append(report)
    report.assert_ok()
    # not vacuous: the agent made durable calls and recoveries went through restored state
    assert report.calls > 0 and report.points_total > 2
    assert sum(p.executed + p.replayed for p in report.points) > 0


# -- the checker catches bad agents ------------------------------------------------------------
def next_ticket() -> int:
    """An external counter: a new number each call."""
    return count("ticket")


class NonDurableSideEffect(Agent):
    """Takes a ticket outside a durable call, then waits for a durable call: a replay takes
    a new ticket, so the output changes."""

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        ticket = next_ticket()  # not durable: runs again when the action re-enters
        done = await ctx.durable_execute_async(echo_call, f"{ctx.key}:work")
        ctx.send_event(OutputEvent(output={"ticket": ticket, "done": done}))


SEEN: set[str] = set()


def call_a(key: str) -> str:
    return f"a-{key}"


def call_b(key: str) -> str:
    return f"b-{key}"


class ChangesCallOrder(Agent):
    """Calls ``call_a`` first the first time it runs for a key, ``call_b`` first after that:
    a replay makes a different call at a recorded identity."""

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        first, second = (call_b, call_a) if ctx.key in SEEN else (call_a, call_b)
        SEEN.add(ctx.key)
        x = await ctx.durable_execute_async(first, ctx.key)
        y = await ctx.durable_execute_async(second, ctx.key)
        ctx.send_event(OutputEvent(output=[x, y]))


def test_checker_catches_a_side_effect_outside_durable_calls():
    report = check_replay_safety(NonDurableSideEffect(), [{"key": "a"}, {"key": "b"}])
    assert not report.ok
    assert report.mismatches > 0
    assert any("outputs mismatch" in f and "ticket" in f for f in report.findings)
    with pytest.raises(AssertionError, match="not replay-safe") as info:
        report.assert_ok()
    assert "crash points tried" in str(info.value)


RECEIPTS = itertools.count()


def issue_receipt(key: str) -> dict[str, Any]:
    """A durable call's function whose result differs each time it runs (a real payment's)."""
    return {"key": key, "receipt": next(RECEIPTS)}


class ReceiptTaker(Agent):
    @action(InputEvent)
    @staticmethod
    async def pay(event: InputEvent, ctx: RunnerContext) -> None:
        receipt = await ctx.durable_execute_async(issue_receipt, ctx.key)
        ctx.send_event(OutputEvent(output=receipt))


def test_a_mismatch_names_the_in_flight_call_that_returned_another_result():
    # before, the finding said only "outputs mismatch: key 'a' #0: got ..., fault-free ...":
    # nothing said that the agent is fine and its durable call's function is not repeatable
    report = check_replay_safety(ReceiptTaker(), [{"key": "a"}], other_process=False)
    assert not report.ok
    mismatches = [f for f in report.findings if "outputs mismatch: key 'a'" in f]
    assert mismatches, report.findings
    assert all("call r0/pay/c0 (test_crash_checker:issue_receipt) was in flight at the point, "
               "ran again after the restore" in f for f in mismatches), mismatches
    assert all("return the same result for the same arguments" in f for f in mismatches)


def test_a_mismatch_of_code_outside_durable_calls_names_no_call():
    report = check_replay_safety(NonDurableSideEffect(), [{"key": "a"}], other_process=False)
    mismatches = [f for f in report.findings if "outputs mismatch" in f]
    assert mismatches and not any("in flight at the point" in f for f in mismatches)


def test_checker_catches_a_call_order_that_changes_on_replay():
    SEEN.clear()
    report = check_replay_safety(ChangesCallOrder(), [{"key": "a"}],
                                 reset=lambda: None)
    assert not report.ok
    found = report.findings
    assert report.divergences > 0, found  # the replay fails with ReplayDivergenceError
    assert any("diverged at durable call r0/go/c0" in f for f in found), found


class ForgetfulJournal(SqliteJournal):
    """A journal that loses what it was given: lookups find nothing."""

    def lookup(self, key: Any, call_id: str) -> Any:
        return None


def test_checker_catches_calls_executed_again_despite_a_journal(tmp_path):
    counter = itertools.count()
    report = check_replay_safety(
        IdenticalSiblings(), [{"key": "a"}], reset=COUNTER.reset, ordered=False,
        journal_factory=lambda: ForgetfulJournal(str(tmp_path / f"j{next(counter)}.db")))
    assert report.unexpected > 0
    assert any("journaled by the crashed attempt, executed again" in f
               for f in report.findings)


def test_checker_catches_recorded_calls_executed_again(monkeypatch):
    from flink_agents_py.local import _runner

    load = _runner._KeyState.load

    def lossy_load(self, run, *args):  # a host that loses the recorded outcomes on restore
        if run is not None:
            for rec in run.inflight.values():
                rec.calls.clear()
        load(self, run, *args)

    monkeypatch.setattr(_runner._KeyState, "load", lossy_load)
    report = check_replay_safety(IdenticalSiblings(), [{"key": "a"}], reset=COUNTER.reset,
                                 ordered=False)
    assert any("recorded before the point, executed again" in f for f in report.findings)


def test_checker_compares_result_types_not_only_values():
    from pydantic import BaseModel

    from flink_agents_py.testing import shape

    class Verdict(BaseModel):
        score: int

    assert shape(Verdict(score=1)) != shape({"score": 1})
    assert shape((1, 2)) != shape([1, 2]) and shape(1) != shape(1.0)
    assert shape({"a": [Verdict(score=2)]}) == shape({"a": [Verdict(score=2)]})


def test_max_points_samples_evenly_and_keeps_the_ends():
    report = check_replay_safety(FailuresAndRetries(), [{"key": "a", "n": 1}],
                                 reset=COUNTER.reset, max_points=3)
    points = [p.point for p in report.points]
    assert len(points) == 3 and points[0] == 0 and points[-1] == report.points_total - 1
    report.assert_ok()


# -- the way a user runs it: their own module, their own pytest, outside this repository -------
USER_AGENT = '''
"""A user's agent: asks a model (which may call a stock tool), then records an audit entry."""
from flink_agents_py.api import (Agent, ChatMessage, ChatModelSetup, InputEvent, OutputEvent,
                                 ResourceDescriptor, ResourceType, RunnerContext, action)

AUDIT = []


def lookup_stock(sku: str) -> dict:
    """Units in stock for a product.

    Args:
        sku: the product's SKU.
    """
    return {"sku": sku, "units": len(sku)}


def audit(key: str, answer: str) -> str:
    AUDIT.append((key, answer))
    return f"audited {key}"


class StockAgent(Agent):
    @action(InputEvent)
    @staticmethod
    async def ask(event: InputEvent, ctx: RunnerContext) -> None:
        reply = await ctx.chat("model", [ChatMessage(content=event.input["question"])])
        note = await ctx.durable_execute_async(audit, ctx.key, reply.message.content)
        ctx.send_event(OutputEvent(output={"answer": reply.message.content, "audit": note}))


def build(connection) -> StockAgent:
    agent = StockAgent()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, connection)
    agent.add_resource("model", ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="conn", tools=["lookup_stock"]))
    agent.add_resource("lookup_stock", ResourceType.TOOL, lookup_stock)
    return agent
'''

USER_TEST = '''
import itertools
import json

from flink_agents_py.runtime import SqliteJournal
from flink_agents_py.testing import check_replay_safety, model_from_turns, tool_call

import stock_agent

INPUTS = [{"key": "a", "question": "stock of SKU-1?"}, {"key": "b", "question": "SKU-22?"},
          {"key": "a", "question": "again?"}]


def model():
    return model_from_turns([
        tool_call("lookup_stock", sku="SKU-1"),
        lambda req: "units: " + str(json.loads(req.tool_results[0].content)["units"]),
    ])


def test_stock_agent_is_replay_safe():
    report = check_replay_safety(stock_agent.build(model()), INPUTS,
                                 reset=stock_agent.AUDIT.clear)
    print(report.table)
    report.assert_ok()
    assert report.calls == 15  # per record: ctx.chat, 2 model calls, the tool, the audit


def test_stock_agent_is_exactly_once_with_a_journal(tmp_path):
    n = itertools.count()
    report = check_replay_safety(
        stock_agent.build(model()), INPUTS, reset=stock_agent.AUDIT.clear,
        journal_factory=lambda: SqliteJournal(str(tmp_path / f"j{next(n)}.db")))
    report.assert_ok()
    assert report.reexecutions == 0
'''


def test_a_user_checks_their_own_agent_from_their_own_directory(tmp_path):
    import subprocess
    import sys
    import textwrap

    project = tmp_path / "user_project"
    project.mkdir()
    (project / "stock_agent.py").write_text(textwrap.dedent(USER_AGENT))
    (project / "test_stock_agent.py").write_text(textwrap.dedent(USER_TEST))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTEST_ADDOPTS")}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider"],
                          cwd=project, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "2 passed" in proc.stdout
    assert "replay safety of StockAgent: 3 input records, 2 keys" in proc.stdout
    assert "result                      ok" in proc.stdout
