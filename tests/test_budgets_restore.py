"""An agent budget across a restore: the subtask starts from what its keys recorded.

An agent budget (``scope="agent"``) is counted in the operator, shared by the subtask's keys;
each call also writes the subtask's spend into its key's keyed memory. A restored subtask
adopted that spend only from a key that called again: keys that had spent and never called
again were forgotten, so new keys after a restore spent the whole share anew. Now the host
reads every restored key's entry before the first call (the local runner from its snapshot,
the Flink operator, in thread mode, from keyed state at its first callback).

The budget: three calls of 15 tokens (``support.budget_restore_agents``). Two keys spend two
of them, the job is "crashed" and restored, then three new keys ask: one is answered, two
are refused. Before the change all three were answered (five calls of a three-call budget).
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest
from support import budget_restore_agents as bra
from support.crash import crash_environment

from flink_agents_py import AgentsExecutionEnvironment

pytestmark = pytest.mark.timeout(240)


def _outcomes(outputs: list[dict]) -> dict[str, object]:
    return {o["key"]: o.get("spent", o.get("refused")) for o in outputs if o["key"] != "hold"}


USER_AGENT = """
from flink_agents_py.api import (Agent, Budget, ChatMessage, ChatModelConnection, ChatModelSetup,
                                 ChatResponse, InputEvent, MessageRole, OutputEvent,
                                 ResourceDescriptor, ResourceType, RunnerContext, TokenUsage,
                                 action)


class Metered(ChatModelConnection):
    def chat(self, messages, **kwargs):
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content="ok"),
                            usage=TokenUsage(input_tokens=10, output_tokens=5))


class Spender(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        try:
            r = await ctx.chat("model", [ChatMessage(content=event.input["key"])])
        except Exception as e:
            out = "budget" if "BudgetExceededError" in str(e) else repr(e)
        else:
            spent = r.metadata["budget"]["spent"]
            out = spent["input"] + spent["output"]
        ctx.send_event(OutputEvent(output={"key": event.input["key"], "got": out}))


def spender():
    agent = Spender()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ResourceDescriptor(Metered))
    agent.add_resource("model", ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="conn", budget=Budget(max_tokens=45, scope="agent")))
    return agent
"""

USER_RUN = """
import json, sys
from flink_agents_py import AgentsExecutionEnvironment
from my_spender import spender

first = [{"key": k} for k in ("a0", "a1")]
if sys.argv[1] == "crash":  # two keys spend, then the process ends: its snapshot stays
    job = AgentsExecutionEnvironment.local().from_list(first).apply(spender())
    result = job.run()
    json.dump(job.snapshot(), open("snapshot.json", "w"))
else:  # a new process restores it; three keys that never spent ask
    records = first + [{"key": k} for k in ("a2", "a3", "a4")]
    job = AgentsExecutionEnvironment.local().from_list(records).apply(spender())
    result = job.restore(json.load(open("snapshot.json"))).run()
print(json.dumps({"got": {o["key"]: o["got"] for o in result.outputs},
                  "errors": len(result.errors)}))
"""


def in_any_order(result: dict) -> tuple[list[str], list[str], int]:
    """A run's keys, its outputs' spends (or ``budget``) sorted, and its error count."""
    got = result["got"]
    return sorted(got), sorted(str(v) for v in got.values()), result["errors"]


def test_a_restored_local_job_starts_an_agent_budget_from_the_spend_its_keys_recorded(
        tmp_path: pathlib.Path):
    # as a user runs it: their module and script in their own directory, two processes
    (tmp_path / "my_spender.py").write_text(USER_AGENT)
    (tmp_path / "run.py").write_text(USER_RUN)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}

    def run(step: str) -> dict:
        done = subprocess.run([sys.executable, "run.py", step], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    # keys run side by side: which one is answered first (and so spent which share) is
    # the executor's order, so each run is compared as the spends it made, in any order
    assert in_any_order(run("crash")) == (["a0", "a1"], ["15", "30"], 0)
    assert in_any_order(run("restore")) == (["a2", "a3", "a4"], ["45", "budget", "budget"], 0)


USER_JOURNAL_RUN = """
import json, os, sys
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent, ChatMessage, InputEvent, OutputEvent, RunnerContext, action
from flink_agents_py.runtime import SqliteJournal
from my_spender import spender


def die():  # the process dies after a0's call was answered and journaled
    os._exit(3)


class DiesAfterItsChat(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        key = event.input["key"]
        try:
            r = await ctx.chat("model", [ChatMessage(content=key)])
        except Exception as e:
            out = "budget" if "BudgetExceededError" in str(e) else repr(e)
        else:
            spent = r.metadata["budget"]["spent"]
            out = spent["input"] + spent["output"]
            if sys.argv[1] == "crash":
                ctx.durable_execute(die)
        ctx.send_event(OutputEvent(output={"key": key, "got": out}))


agent = DiesAfterItsChat()
for kind, resources in spender().resources.items():
    for name, descriptor in resources.items():
        agent.add_resource(name, kind, descriptor)
journal = SqliteJournal("journal.db", retention_s=3600)
# no checkpoint covers a0: after the crash the source replays it, the journal answers it
records = [{"key": k} for k in (("a0",) if sys.argv[1] == "crash" else
                                ("a0", "a1", "a2", "a3"))]
result = AgentsExecutionEnvironment.local(journal=journal).from_list(records).apply(agent).run()
print(json.dumps({"got": {o["key"]: o["got"] for o in result.outputs},
                  "errors": len(result.errors)}))
"""


def test_a_call_answered_from_the_journal_counts_against_the_agent_budget(
        tmp_path: pathlib.Path):
    # a0's call was answered and journaled, then the process died before a0's action ended
    # (no checkpoint: nothing in keyed state). The restarted job hands a0 the journaled answer
    # without asking the model; that spend (15 of 45 tokens) must still count in the subtask,
    # or the budget's share is spent anew by the keys after it (a1, a2, a3 all answered).
    (tmp_path / "my_spender.py").write_text(USER_AGENT)
    (tmp_path / "run.py").write_text(USER_JOURNAL_RUN)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}

    def run(step: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "run.py", step], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=120)

    crashed = run("crash")
    assert crashed.returncode == 3, crashed.stderr[-3000:]
    done = run("restart")
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["got"].pop("a0") == 15  # its journaled answer, with the spend it recorded
    assert in_any_order(got) == (["a1", "a2", "a3"], ["30", "45", "budget"], 0)


@pytest.mark.flink
def test_a_restored_minicluster_job_starts_an_agent_budget_from_the_spend_its_keys_recorded(
        tmp_path: pathlib.Path):
    pytest.importorskip("pyflink")
    from pyflink.common import Types, WatermarkStrategy
    from pyflink.datastream.connectors.number_seq import NumberSequenceSource


    d = tmp_path / "job"
    env = crash_environment(d, interval_ms=200, restart_attempts=2)
    base = str(d)
    records = (env.from_source(NumberSequenceSource(0, bra.LAST),
                               WatermarkStrategy.no_watermarks(), "seq")
               .map(bra.pace, output_type=Types.LONG())
               .filter(bra.Pick(base))
               .map(lambda n: bra.record_of(base, n), output_type=Types.PICKLED_BYTE_ARRAY()))
    agents = AgentsExecutionEnvironment.flink(env, failpoint=bra.CrashWhenSpent(base))
    out = agents.from_datastream(records).apply(bra.spender()).to_datastream()
    with out.execute_and_collect("budget-restore") as rows:
        outputs = list(rows)
    assert (d / "crashed").exists(), "the failpoint never fired: the scenario did not play out"
    assert _outcomes(outputs) == {"a0": 15, "a1": 30, "a2": 45,
                                  "a3": "budget", "a4": "budget"}


def test_a_restored_job_starts_a_subagents_agent_budget_from_the_spend_its_keys_recorded():
    # the setup of an internal sub-agent: its spend is the key's (``_budget.kid/model``)
    from test_budgets_spend_kept import caller

    from flink_agents_py.api import Budget

    agent = caller(Budget(max_tokens=45, scope="agent"))
    job = AgentsExecutionEnvironment.local().from_list([{"key": "a", "n": 2}]).apply(agent)
    # each call's outputs: the subtask's input tokens after its chat
    assert job.run().outputs == [{"key": "a", "got": [[10], [20]]}]
    snapshot = json.loads(json.dumps(job.snapshot()))

    later = [{"key": "a", "n": 2}] + [{"key": k, "n": 1} for k in "bcd"]
    restored = (AgentsExecutionEnvironment.local().from_list(later)
                .apply(caller(Budget(max_tokens=45, scope="agent"))).restore(snapshot).run())
    got = {o["key"]: o["got"] for o in restored.outputs}
    assert got["b"] == [[30]]  # 20 adopted from key a, then its own 10
    assert all("BudgetExceededError" in str(got[k][0]) for k in "cd"), got
