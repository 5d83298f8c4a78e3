"""The spend of a model call counts when the action that received its answer then fails.

A per-key budget's spend reached the key's entry (``_budget.<setup>``, keyed state) only
when the chat's action completed (``commit_memory``): an action that failed after its call
was answered (here the chat's own action, whose answer event the chain limit refuses, and
a structured chat whose three calls were all answered before it failed) left the spend in
the in-process ledger alone. A restore (or the ledger dropping the key) forgot it, and an
input that failed each chat after its call spent without limit. Now a failed action's
answered calls are merged into the key's entry as it fails (``_completion.commit_spend``),
once: a restore at any point counts each call once, as the fault-free run does.

The agent is a user's module written to a temporary directory: a record with ``hops``
reaches its chat through that many extra actions, so the chat's action sends its answer
past ``EventChainLimitError.LIMIT`` (3) and fails; a record without hops is answered.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
from typing import Any

import pytest

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.runtime import _key_spend
from flink_agents_py.testing import check_replay_safety

pytestmark = pytest.mark.timeout(180)

USER_AGENT = """
from flink_agents_py.api import (Agent, Budget, ChatMessage, ChatModelConnection, ChatModelSetup,
                                 ChatRequestEvent, ChatResponse, ChatResponseEvent, Event,
                                 EventChainLimitError, InputEvent, MessageRole, OutputEvent,
                                 ResourceDescriptor, ResourceType, RunnerContext, TokenUsage,
                                 action)

EventChainLimitError.LIMIT = 3
CALLS = []


class Metered(ChatModelConnection):
    def chat(self, messages, **kwargs):
        CALLS.append(messages[-1].content)
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content="not json"),
                            usage=TokenUsage(input_tokens=10, output_tokens=5))


class Hop(Event):
    pass


def _ask(ctx, record):
    schema = {"type": "object"} if record.get("schema") else None
    ctx.send_event(ChatRequestEvent(model="model", output_schema=schema,
                                    messages=[ChatMessage(content=str(record["q"]))]))


class Spender(Agent):
    @action(InputEvent)
    @staticmethod
    def go(event, ctx: RunnerContext) -> None:
        record = event.input
        if record.get("hops"):
            ctx.send_event(Hop(attributes={"record": record, "left": record["hops"]}))
        else:
            _ask(ctx, record)

    @action(Hop)
    @staticmethod
    def hop(event, ctx: RunnerContext) -> None:
        left = event.attributes["left"] - 1
        if left:
            ctx.send_event(Hop(attributes={"record": event.attributes["record"], "left": left}))
        else:
            _ask(ctx, event.attributes["record"])

    @action(ChatResponseEvent)
    @staticmethod
    def done(event, ctx: RunnerContext) -> None:
        if event.error is not None:
            out = event.error.split(":")[0]
        else:
            spent = event.response.metadata["budget"]["spent"]
            out = spent["input"] + spent["output"]
        ctx.send_event(OutputEvent(output={"key": ctx.key, "got": out}))


class Caller(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event, ctx: RunnerContext) -> None:
        result = await (await ctx.submit_subagent("kid", event.input))
        ctx.send_event(OutputEvent(output={"key": ctx.key, "ok": result.success}))


def caller(max_tokens=1000):
    from flink_agents_py.api import InternalSubagent

    agent = Caller()
    agent.add_resource("kid", ResourceType.AGENT, ResourceDescriptor(
        InternalSubagent, agent=spender(max_tokens), description="spends",
        input_schema='{"type":"object"}'))
    return agent


def spender(max_tokens=1000):
    agent = Spender()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ResourceDescriptor(Metered))
    agent.add_resource("model", ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="conn", output_retries=2,
        budget=Budget(max_tokens=max_tokens)))
    return agent
"""


@pytest.fixture
def user(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The user's module, imported from a temporary directory outside the repository."""
    from flink_agents_py.api import EventChainLimitError

    (tmp_path / "my_failing_spender.py").write_text(USER_AGENT)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(EventChainLimitError, "LIMIT", EventChainLimitError.LIMIT)  # undone
    sys.modules.pop("my_failing_spender", None)
    import my_failing_spender  # type: ignore[import-not-found]

    yield my_failing_spender
    sys.modules.pop("my_failing_spender", None)


def _forget_ledgers(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a new process has: no in-process ledger of any key (only the snapshot)."""
    monkeypatch.setattr(_key_spend, "_LEDGERS", type(_key_spend._LEDGERS)())


def _entry(job: Any, key: str) -> Any:
    [state] = [k for k in job.snapshot()["keys"] if k["key"] == key]
    return state["memory"].get("_budget", {}).get("model")


def test_a_failed_chats_spend_is_in_the_keys_entry_as_a_fault_free_runs_is(user):
    failing = [{"key": "a", "q": 1, "hops": 2}, {"key": "a", "q": 2, "schema": 1, "hops": 2}]
    job = AgentsExecutionEnvironment.local().from_list(failing).apply(user.spender())
    res = job.run()
    assert [e.error_type for e in res.errors] == ["EventChainLimitError"] * 2
    assert res.outputs == []
    assert len(user.CALLS) == 4  # one call, then a structured chat asked three times
    fault_free = [{k: v for k, v in r.items() if k != "hops"} for r in failing]
    clean = AgentsExecutionEnvironment.local().from_list(fault_free).apply(user.spender())
    assert [o["got"] for o in clean.run().outputs] == [15, "StructuredOutputError"]
    assert _entry(job, "a") == _entry(clean, "a")
    assert _entry(job, "a")["input"] == 40 and _entry(job, "a")["output"] == 20


def test_a_restored_key_is_refused_once_failed_chats_spent_its_budget(user, monkeypatch):
    records = [{"key": "a", "q": i, "hops": 2} for i in range(2)]
    job = AgentsExecutionEnvironment.local().from_list(records).apply(user.spender(30))
    assert len(job.run().errors) == 2
    snapshot = json.loads(json.dumps(job.snapshot()))
    _forget_ledgers(monkeypatch)
    again = (
        AgentsExecutionEnvironment.local()
        .from_list([*records, {"key": "a", "q": 9}, {"key": "b", "q": 9}])
        .apply(user.spender(30))
    )
    res = again.restore(snapshot).run()
    assert res.errors == []
    assert sorted((o["key"], o["got"]) for o in res.outputs) == [
        ("a", "BudgetExceededError"),
        ("b", 15),
    ]
    assert len(user.CALLS) == 3  # the refused chat never reached the model


def test_each_failed_call_counts_once_after_a_restore_at_every_point(user):
    records = [
        {"key": "a", "q": 1, "hops": 2},
        {"key": "a", "q": 2, "schema": 1, "hops": 2},
        {"key": "a", "q": 3},
    ]
    [last] = (
        AgentsExecutionEnvironment.local().from_list(records).apply(user.spender()).run().outputs
    )
    assert last == {"key": "a", "got": 5 * 15}  # four failed calls and its own, once each
    report = check_replay_safety(user.spender(), records)
    report.assert_ok()


USER_RUN = """
import json, sys
from flink_agents_py import AgentsExecutionEnvironment
from my_failing_spender import CALLS, spender

first = [{"key": "a", "q": i, "hops": 2} for i in range(2)]
if sys.argv[1] == "fail":
    job = AgentsExecutionEnvironment.local().from_list(first).apply(spender(30))
    result = job.run()
    json.dump(job.snapshot(), open("snapshot.json", "w"))
else:
    job = AgentsExecutionEnvironment.local().from_list(first + [{"key": "a", "q": 9}]).apply(
        spender(30))
    result = job.restore(json.load(open("snapshot.json"))).run()
print(json.dumps({"got": [o["got"] for o in result.outputs], "calls": len(CALLS),
                  "errors": [e.error_type for e in result.errors]}))
"""


def test_as_a_user_runs_it_a_new_process_refuses_what_failed_chats_spent(tmp_path: pathlib.Path):
    (tmp_path / "my_failing_spender.py").write_text(USER_AGENT)
    (tmp_path / "run.py").write_text(USER_RUN)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(pathlib.Path(__file__).resolve().parents[1])

    def run(step: str) -> dict[str, Any]:
        done = subprocess.run(
            [sys.executable, "run.py", step],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    assert run("fail") == {
        "got": [],
        "calls": 2,
        "errors": ["EventChainLimitError", "EventChainLimitError"],
    }
    # before: answered (the spend of the two failed chats was only in the dead process)
    assert run("restore") == {"got": ["BudgetExceededError"], "calls": 0, "errors": []}


CUT_AGENT = """
from flink_agents_py.api import (Agent, Budget, ChatMessage, ChatModelConnection, ChatModelSetup,
                                 ChatResponse, InputEvent, MessageRole, OutputEvent,
                                 ResourceDescriptor, ResourceType, RunnerContext, TokenUsage,
                                 ToolCall, action)

CALLS = []


class Cut(ChatModelConnection):
    \"\"\"Answers with a tool call cut at the output token limit: refused, but paid for.\"\"\"

    def chat(self, messages, **kwargs):
        CALLS.append(1)
        return ChatResponse(
            message=ChatMessage(role=MessageRole.ASSISTANT, content="",
                                tool_calls=[ToolCall(id="t", name="f", arguments={})]),
            finish_reason="length", usage=TokenUsage(input_tokens=10, output_tokens=5))


class Asker(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event, ctx: RunnerContext) -> None:
        try:
            await ctx.chat("model", [ChatMessage(content=str(event.input["q"]))])
            out = "answered"
        except Exception as e:
            out = str(e).split(":")[0]
        ctx.send_event(OutputEvent(output=out))


def asker(policy="fail"):
    agent = Asker()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ResourceDescriptor(Cut))
    agent.add_resource("model", ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="conn", error_policy=policy, budget=Budget(max_tokens=30)))
    return agent
"""


@pytest.mark.parametrize("policy", ["fail", "ignore"])
def test_a_refused_answer_is_paid_for_and_counts_against_the_budget(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, policy: str
):
    # the provider answers, then the answer is refused (a tool call cut at the token limit):
    # before, the refusal was raised inside the budgeted call, nothing counted it, and all
    # five chats called the model against a budget of two calls
    (tmp_path / "my_cut_model.py").write_text(CUT_AGENT)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("my_cut_model", None)
    import my_cut_model  # type: ignore[import-not-found]

    records = [{"key": "a", "q": i} for i in range(5)]
    job = AgentsExecutionEnvironment.local().from_list(records).apply(my_cut_model.asker(policy))
    res = job.run()
    if policy == "fail":  # ("ignore" makes each failure, the refusals too, an empty answer)
        assert res.outputs == ["ProviderError"] * 2 + ["BudgetExceededError"] * 3
    assert len(my_cut_model.CALLS) == 2
    assert _entry(job, "a")["input"] == 20
    report = check_replay_safety(my_cut_model.asker(policy), records)
    report.assert_ok()
    sys.modules.pop("my_cut_model", None)


def test_a_subagents_failed_chat_counts_in_the_callers_key_across_a_restore(user, monkeypatch):
    # the sub-agent's chat action fails as it sends its answer (the chain is one action
    # deeper under the caller): the call's spend is the caller's key's, in keyed state
    records = [{"key": "a", "q": i, "hops": 1} for i in range(2)]
    job = AgentsExecutionEnvironment.local().from_list(records).apply(user.caller(30))
    assert job.run().outputs == [{"key": "a", "ok": False}] * 2
    [state] = job.snapshot()["keys"]
    assert state["memory"]["_budget"]["kid/model"]["input"] == 20
    snapshot = json.loads(json.dumps(job.snapshot()))
    _forget_ledgers(monkeypatch)
    again = AgentsExecutionEnvironment.local().from_list([*records, {"key": "a", "q": 9}])
    res = again.apply(user.caller(30)).restore(snapshot).run()
    assert res.outputs == [{"key": "a", "ok": False}]
    assert len(user.CALLS) == 2  # refused by the budget: the model is not called again


GIVEN_UP = """
import json, sys
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.runtime.core._inbox import Inbox
from my_failing_spender import CALLS, spender

# a broken invariant, as the runtime's own tests make it: the outcome of key "lost"'s second
# model call never reaches the core, so its run can never finish and is given up
put, SEEN = Inbox.put, []


def dropping(self, key, item):
    if key == "lost":
        SEEN.append(item)
        if len(SEEN) == 2:
            return
    put(self, key, item)


Inbox.put = dropping
records = [{"key": "lost", "q": 1, "schema": 1}]
job = AgentsExecutionEnvironment.local().from_list(records).apply(spender())
res = job.run()
[state] = job.snapshot()["keys"]
print(json.dumps({"errors": [e.error_type for e in res.errors], "calls": len(CALLS),
                  "entry": state["memory"].get("_budget", {}).get("model")}))
"""


def test_a_given_up_runs_answered_calls_count_in_the_keys_entry(tmp_path: pathlib.Path):
    # the structured chat's first call was answered (its answer not valid: asked again),
    # the second's outcome is lost: the run is given up, the first call's spend stays
    (tmp_path / "my_failing_spender.py").write_text(USER_AGENT)
    (tmp_path / "given_up.py").write_text(GIVEN_UP)
    env = {**os.environ, "PYTHONPATH": str(pathlib.Path(__file__).resolve().parents[1])}
    done = subprocess.run(
        [sys.executable, "given_up.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["errors"] == ["UnfinishedRunError"] and got["calls"] == 2
    assert (got["entry"]["input"], got["entry"]["output"]) == (10, 5)
