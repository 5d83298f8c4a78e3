"""A key's spend is counted whole, whoever spends it: chats at once, and sub-agents' chats.

A per-key budget's spend lived in the memory of the action that drove the chat: each chat
read it when it started and wrote back what it saw plus its own call when it completed. Two
chats of one key running at once both read the same spend, and the last to complete wrote
its own sum over the other's: a key that fanned out chats (several ``ChatRequestEvent`` sent
at once) spent double its budget, and every later check started from the smaller figure.
Inside an internal sub-agent the chat's memory is the call's own, isolated and dropped when
the call ends: a budget of the sub-agent's setup started from nothing at every call and was
never reached. These tests pin that every call's spend is added to the key's entry, in the
key's memory, whatever ran the chat and in whatever order the chats completed.
"""

from __future__ import annotations

from typing import Any

import pytest
from test_budgets import Metered

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    Budget,
    ChatMessage,
    ChatModelSetup,
    ChatRequestEvent,
    ChatResponseEvent,
    InputEvent,
    InternalSubagent,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    action,
)
from flink_agents_py.testing import check_replay_safety

pytestmark = pytest.mark.timeout(120)


def _with_model(agent: Agent, budget: Budget, delay_s: float = 0.0) -> Agent:
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION,
                       ResourceDescriptor(Metered, label="big", delay_s=delay_s))
    agent.add_resource("model", ResourceType.CHAT_MODEL,
                       ResourceDescriptor(ChatModelSetup, connection="conn", budget=budget))
    return agent


class FanOut(Agent):
    """Sends ``n`` chats at once; outputs each answer's error, and the spend its call saw
    plus its own when the question was ``"last"`` (what the key had spent before it)."""

    @action(InputEvent)
    @staticmethod
    def ask(event: InputEvent, ctx: RunnerContext) -> None:
        for i in range(event.input["n"]):
            ctx.send_event(ChatRequestEvent(model="model", messages=[
                ChatMessage(content=f"{event.input['q']}-{i}")]))

    @action(ChatResponseEvent)
    @staticmethod
    def answer(event: ChatResponseEvent, ctx: RunnerContext) -> None:
        out: dict[str, Any] = {"key": ctx.key, "error": event.error}
        r = event.response
        if r is not None and r.message.content.startswith("ok: last"):
            out["spent"] = r.metadata["budget"]["spent"]["input"]
        ctx.send_event(OutputEvent(output=out))


def fan_out(budget: Budget, delay_s: float = 0.05) -> FanOut:
    return _with_model(FanOut(), budget, delay_s)  # type: ignore[return-value]


class Child(Agent):
    """One chat; outputs the tokens spent as the answer says, or the error's type."""

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        try:
            r = await ctx.chat("model", [ChatMessage(content=str(event.input["i"]))])
            out: Any = r.metadata["budget"]["spent"]["input"]
        except Exception as e:  # noqa: BLE001 - the refusal is the answer here
            out = str(e)
        ctx.send_event(OutputEvent(output=out))


class Caller(Agent):
    """Calls the child ``n`` times, one after the other; outputs what each call gave."""

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        got = []
        for i in range(event.input["n"]):
            result = await (await ctx.submit_subagent("kid", {"i": i}))
            got.append(result.result if result.success else result.error_message)
        ctx.send_event(OutputEvent(output={"key": ctx.key, "got": got}))


def caller(budget: Budget) -> Caller:
    agent = Caller()
    agent.add_resource("kid", ResourceType.AGENT, ResourceDescriptor(
        InternalSubagent, agent=_with_model(Child(), budget), description="asks once",
        input_schema='{"type":"object"}'))
    return agent


def _run(agent: Agent, records: list[dict[str, Any]]):
    return AgentsExecutionEnvironment.local().from_list(records).apply(agent).run()


def test_chats_of_one_key_running_at_once_all_count(probes):
    # 15 tokens a call against 40: of three chats at once the first goes alone, then each
    # goes while the key's spend plus the call in flight is below 40 (the third crosses it,
    # as a call made after the others would); their 45 tokens are all counted, so the next
    # record's chats are refused, naming the budget and the key
    res = _run(fan_out(Budget(max_tokens=40)),
               [{"key": "a", "q": 1, "n": 3}, {"key": "a", "q": 2, "n": 3}])
    assert res.errors == []
    first, second = res.outputs[:3], res.outputs[3:]
    assert [o["error"] for o in first] == [None] * 3
    assert [o["error"] for o in second] == [
        "BudgetExceededError: the budget of chat model 'model' for key 'a' is spent: "
        "tokens 45 of 40"] * 3
    assert probes["big"] == 3


def test_a_budget_of_a_subagents_setup_counts_the_keys_spend_across_calls(probes):
    res = _run(caller(Budget(max_tokens=40)), [{"key": "a", "n": 5}, {"key": "a", "n": 1},
                                                {"key": "b", "n": 1}])
    assert res.errors == []
    of_a = [o["got"] for o in res.outputs if o["key"] == "a"]  # in input order
    refused = ("BudgetExceededError: the budget of chat model 'model' for key 'a' is spent: "
               "tokens 45 of 40")
    assert of_a == [[[10], [20], [30], [refused], [refused]], [[refused]]]
    assert [o["got"] for o in res.outputs if o["key"] == "b"] == [[[10]]]  # its own budget
    assert probes["big"] == 4


def test_the_keys_spend_is_counted_once_after_a_restore_at_every_point(probes):
    budget = Budget(max_tokens=40)
    report = check_replay_safety(caller(budget), [{"key": "a", "n": 4}, {"key": "a", "n": 1}])
    report.assert_ok()
    # chats at once, far from the limit (a restore between two chats of a record may let
    # the re-made one see its sibling's spend, which may change a decision at the limit):
    # the last chat sees every earlier call counted once, whatever the crash point
    records = [{"key": "a", "q": 1, "n": 2}, {"key": "a", "q": 2, "n": 3},
               {"key": "a", "q": "last", "n": 1}]
    agent = fan_out(Budget(max_tokens=10_000), delay_s=0.0)
    [last] = [o["spent"] for o in _run(agent, records).outputs if "spent" in o]
    assert last == 6 * 10  # 10 input tokens a call, each of the six calls counted once
    report = check_replay_safety(agent, records, ordered=False)
    report.assert_ok()
    assert report.outputs == 6

