"""A deploy that changed an external sub-agent's setup (its endpoint) is a changed call.

A deferred or async sub-agent's call asks what its setup's fields say. Its record kept the
digest of the name and the input only, so a run restored after a deploy that pointed the
setup at another endpoint was handed the old endpoint's recorded answer without a word.
The record now keeps the digest of the setup's class and fields (not its description,
schema, timeout or poll interval): a change is the ``arguments changed`` warning, a
divergence in strict mode, a finding of ``check_upgrade_safety``.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import textwrap
from typing import Any

import pytest

from flink_agents_py.api import (
    Agent,
    InputEvent,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    action,
)
from flink_agents_py.testing import check_upgrade_safety

ROOT = pathlib.Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.timeout(180)

SAID = "the configuration of the sub-agent setup it calls changed"
SETUPS = "support.upgrade_subagent_setups"


class Caller(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        first = await (await ctx.submit_subagent("remote", {"text": "a"}))
        second = await (await ctx.submit_subagent("queue", {"text": "b"}))
        await ctx.durable_execute_async(str, "after")  # (so both answers are replayed)
        ctx.send_event(OutputEvent(output={"key": ctx.key, "got": [first.result, second.result]}))


class StrictCaller(Caller):
    replay = "strict"


def caller(
    strict: bool = False,
    remote: str = "https://v1.example",
    queue: str = "https://v1.example",
    poll_ms: int = 10,
) -> Agent:
    agent = StrictCaller() if strict else Caller()
    agent.add_resource(
        "remote",
        ResourceType.AGENT,
        ResourceDescriptor(clazz=f"{SETUPS}.Remote", description="r", endpoint=remote),
    )
    agent.add_resource(
        "queue",
        ResourceType.AGENT,
        ResourceDescriptor(
            clazz=f"{SETUPS}.Queue",
            description="q",
            endpoint=queue,
            status_poll_interval_millis=poll_ms,
        ),
    )
    return agent


RECORDS = [{"key": "a"}, {"key": "b"}]


@pytest.mark.parametrize(
    "change",
    [{"remote": "https://v2.example"}, {"queue": "https://v2.example"}],
    ids=["deferred", "async"],
)
def test_a_changed_endpoint_is_a_finding(change):
    report = check_upgrade_safety(caller(), caller(**change), RECORDS, other_process=False)
    assert any(SAID in f for f in report.findings), report.findings
    name = next(iter(change))
    assert all(f"({name})" in f for f in report.findings if SAID in f)


def test_what_does_not_change_the_call_is_safe():
    check_upgrade_safety(caller(), caller(poll_ms=50), RECORDS, other_process=False).assert_ok()


def test_strict_replay_diverges_naming_the_setup():
    report = check_upgrade_safety(
        caller(True), caller(True, remote="https://v2.example"), RECORDS, other_process=False
    )
    divergences = [f for f in report.findings if "ReplayDivergenceError" in f or "diverged" in f]
    assert any(SAID in f for f in divergences), report.findings


def test_a_record_written_before_the_setup_digest_is_not_compared():
    from flink_agents_py.runtime.recorder._call_changes import changed_defaults

    assert changed_defaults(".", "$agent=aaaaaaaa") == []
    assert changed_defaults("$agent=aaaaaaaa", "$agent=bbbbbbbb") == [("$agent", "configured")]


def test_a_users_own_setup_module(tmp_path):
    (tmp_path / "remotes.py").write_text(
        textwrap.dedent("""
        from flink_agents_py.api import DeferredSubagentSetup, SubagentResult

        class Translator(DeferredSubagentSetup):
            url: str = "https://eu.example"

            def prepare(self, ctx, input, session_id, call_id):
                url = self.url
                return f"{session_id}#{call_id}", lambda: SubagentResult.ok(url), None
    """)
    )
    (tmp_path / "check.py").write_text(
        textwrap.dedent("""
        import json
        from flink_agents_py.api import (Agent, InputEvent, OutputEvent, ResourceDescriptor,
            ResourceType, RunnerContext, action)
        from flink_agents_py.testing import check_upgrade_safety

        class Job(Agent):
            @action(InputEvent)
            @staticmethod
            async def go(event: InputEvent, ctx: RunnerContext) -> None:
                a = await (await ctx.submit_subagent("tr", {"t": 1}))
                b = await (await ctx.submit_subagent("tr", {"t": 2}))
                ctx.send_event(OutputEvent(output=[a.result, b.result]))

        def build(url):
            job = Job()
            job.add_resource("tr", ResourceType.AGENT, ResourceDescriptor(
                clazz="remotes.Translator", description="t", url=url))
            return job

        report = check_upgrade_safety(build("https://eu.example"), build("https://us.example"),
                                      [{"key": "k"}], other_process=False)
        print(json.dumps({"ok": report.ok, "findings": report.findings}))
    """)
    )
    proc = subprocess.run(
        [sys.executable, "check.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": f"{ROOT}:{tmp_path}", "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    assert not out["ok"] and any(SAID in f for f in out["findings"]), out
