"""An agent calling an async (pub/sub) external sub-agent, and its crash failpoint.

Importable by Flink workers. The remote keeps its runs as files under ``<dir>/runs``, so a
restarted attempt sees what the crashed one submitted, as a real service would. On the
first attempt (no ``crashed`` marker) a run never completes, so the job is crashed while
its caller polls it; after the restore it completes at the next poll. Every request the
remote receives appends ``<who> <key>`` to ``<dir>/calls.log`` (``support.crash``).
"""

from __future__ import annotations

import os
from typing import Any

from flink_agents_py.api import (
    Agent,
    AsyncSubagentSetup,
    InputEvent,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    RunStatus,
    SubagentResult,
    action,
)
from support.crash import CrashOnceBase, count_call, first_attempt

__all__ = ["AsyncRemote", "Caller", "CrashWhilePolling", "build"]


def _run_file(d: str, session_id: str, call_id: str) -> str:
    name = f"{session_id}#{call_id}".replace("/", "_").replace('"', "")
    return os.path.join(d, "runs", name)


class AsyncRemote(AsyncSubagentSetup):
    """Runs kept as files: ``submit`` writes one, ``status`` reads it, ``fetch`` answers."""

    directory: str = ""

    def call_submit_request(self, session_id: str, call_id: str, input: Any) -> None:
        count_call(self.directory, "submit", input["key"])
        os.makedirs(os.path.join(self.directory, "runs"), exist_ok=True)
        with open(_run_file(self.directory, session_id, call_id), "w") as f:
            f.write(input["key"])

    def call_query_status(self, session_id: str, call_id: str) -> RunStatus:
        path = _run_file(self.directory, session_id, call_id)
        if not os.path.exists(path):
            return RunStatus.not_started()
        if first_attempt(self.directory):
            return RunStatus.running()
        return RunStatus.completed()

    def call_fetch_result(self, session_id: str, call_id: str) -> SubagentResult:
        key = open(_run_file(self.directory, session_id, call_id)).read()
        count_call(self.directory, "fetch", key)
        return SubagentResult.ok({"remote": key, "run": f"{session_id}#{call_id}"})


class Caller(Agent):
    """Submits one remote run per real record (``pad`` records pass without a call)."""

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        if event.input.get("pad"):
            return
        handle = await ctx.submit_subagent("remote", {"key": ctx.key})
        result = await handle
        ctx.send_event(
            OutputEvent(output={"key": ctx.key, "result": result.result, "error": result.error})
        )


def build(d: str) -> Caller:
    agent = Caller()
    agent.add_resource(
        "remote",
        ResourceType.AGENT,
        ResourceDescriptor(
            clazz="support.async_remote_agents.AsyncRemote",
            directory=d,
            status_poll_interval_millis=100,
            description="remote",
            input_schema='{"type":"object"}',
        ),
    )
    return agent


class CrashWhilePolling(CrashOnceBase):
    """Crash the job once, at a record, after a completed checkpoint covers ``key``'s
    recorded submit (its run then being polled).

    Args:
        d: the test's directory.
        key: the key to watch.
    """

    def __init__(self, d: str, key: str) -> None:
        super().__init__(d)
        self.key = key

    def __call__(self, point: str, key: Any, info: dict[str, Any]) -> None:
        if not self.first_attempt():
            return
        if point == "call_recorded" and key == self.key:
            self.note(info["call_id"])
        elif point == "element" and self.seen and self.checkpointed_since(max(self.seen.values())):
            self.crash(
                f"seen {sorted(self.seen)}",
                f"injected crash: {sorted(self.seen)} checkpointed, the run polled",
            )
