"""A run limit met inside a sub-agent or a chat is the record's error, whatever its caller does.

A ``CallLimitError`` (or ``EventChainLimitError``) failing an action of an internal
sub-agent or of a chat (its tool or model call) was its invocation's failure only: the
caller got a failed result and, when it coped with it (an output saying the call failed)
and made no further call, the record ended with no error record at all; the limit surfaced
only if the caller called again. Each is now an error record of the record's run, naming
the action that met the limit, as a replay divergence is.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import textwrap

import pytest
from support.run_limit_agents import parent, shop

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import CallLimitError, EventChainLimitError
from flink_agents_py.testing import check_replay_safety

ROOT = pathlib.Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.timeout(180)


def _errors(result) -> list[tuple[str, int, str, str]]:
    return sorted((e.key, e.seq, e.execution_id, e.error_type) for e in result.errors)


def test_a_sub_agent_past_the_call_limit_is_its_records_error(monkeypatch):
    monkeypatch.setattr(CallLimitError, "LIMIT", 5)
    records = [{"key": "a", "do": "calls"}, {"key": "b", "do": "calls"}]
    result = AgentsExecutionEnvironment.local().from_list(records).apply(parent()).run()
    assert sorted(o["key"] for o in result.outputs) == ["a", "b"]
    assert not any(o["ok"] for o in result.outputs)
    assert _errors(result) == [
        ("a", 0, "r0/go/c0/b/go", "CallLimitError"),
        ("b", 0, "r0/go/c0/b/go", "CallLimitError"),
    ]
    report = check_replay_safety(parent(), records, other_process=False)
    assert report.ok, report.table


def test_a_sub_agent_past_the_event_chain_limit_is_its_records_error(monkeypatch):
    monkeypatch.setattr(EventChainLimitError, "LIMIT", 20)
    records = [{"key": "a", "do": "chain"}]
    result = AgentsExecutionEnvironment.local().from_list(records).apply(parent()).run()
    assert result.outputs == [{"key": "a", "ok": False}]
    [error] = result.errors
    assert (error.key, error.action, error.error_type) == ("a", "again", "EventChainLimitError")


def test_a_chats_tool_round_past_the_call_limit_is_its_records_error(monkeypatch):
    monkeypatch.setattr(CallLimitError, "LIMIT", 6)
    result = AgentsExecutionEnvironment.local().from_list([{"key": "a"}]).apply(shop()).run()
    assert result.outputs == [{"key": "a", "got": "ChatResponseError"}]
    assert [(e.key, e.error_type) for e in result.errors] == [("a", "CallLimitError")]
    assert "more than 6 durable calls" in result.errors[0].message


def test_a_users_script_whose_sub_agent_fans_out(tmp_path):
    script = tmp_path / "user_job.py"
    script.write_text(
        textwrap.dedent("""
        import json
        from flink_agents_py import AgentsExecutionEnvironment
        from flink_agents_py.api import (Agent, CallLimitError, InputEvent, InternalSubagent,
            OutputEvent, ResourceDescriptor, ResourceType, RunnerContext, action)

        CallLimitError.LIMIT = 3

        def fetch(i):
            return i

        class Crawler(Agent):
            @action(InputEvent)
            @staticmethod
            async def crawl(event: InputEvent, ctx: RunnerContext) -> None:
                pages = [await ctx.durable_execute_async(fetch, i) for i in range(10)]
                ctx.send_event(OutputEvent(output=pages))

        class Boss(Agent):
            @action(InputEvent)
            @staticmethod
            async def start(event: InputEvent, ctx: RunnerContext) -> None:
                result = await (await ctx.submit_subagent("crawler", event.input))
                ctx.send_event(OutputEvent(output={"key": ctx.key, "ok": result.success}))

        boss = Boss()
        boss.add_resource("crawler", ResourceType.AGENT,
                          ResourceDescriptor(InternalSubagent, agent=Crawler, description="c"))
        result = AgentsExecutionEnvironment.local().from_list([{"key": "k"}]).apply(boss).run()
        print(json.dumps({"outputs": result.outputs,
                          "errors": [[e.key, e.action, e.error_type] for e in result.errors]}))
    """)
    )
    proc = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out == {
        "outputs": [{"key": "k", "ok": False}],
        "errors": [["k", "crawl", "CallLimitError"]],
    }
