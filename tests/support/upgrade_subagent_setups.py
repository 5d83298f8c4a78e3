"""External sub-agent setups whose fields (an endpoint) a deploy changes.

Registered by class path (``support.upgrade_subagent_setups.Remote``); used by
``tests/test_upgrade_subagent_setups.py``.
"""

from __future__ import annotations

from typing import Any

from flink_agents_py.api import AsyncSubagentSetup, DeferredSubagentSetup, RunStatus, SubagentResult

RUNS: dict[str, dict[str, Any]] = {}
"""The async remote's runs, by ``session#call`` (it keeps them across restores)."""


class Remote(DeferredSubagentSetup):
    """A deferred sub-agent answering with its input and the endpoint it was sent to."""

    endpoint: str = "https://v1.example"

    def prepare(self, ctx: Any, input: Any, session_id: str, call_id: str) -> Any:
        endpoint = self.endpoint

        def call() -> SubagentResult:
            return SubagentResult.ok({"input": input, "endpoint": endpoint})

        return f"{session_id}#{call_id}", call, None


class Queue(AsyncSubagentSetup):
    """An async sub-agent: a run per submit, complete at once, answering with its endpoint."""

    endpoint: str = "https://v1.example"

    def call_submit_request(self, session_id: str, call_id: str, input: Any) -> None:
        RUNS[f"{session_id}#{call_id}"] = {"input": input, "endpoint": self.endpoint}

    def call_query_status(self, session_id: str, call_id: str) -> RunStatus:
        known = f"{session_id}#{call_id}" in RUNS
        return RunStatus.completed() if known else RunStatus.not_started()

    def call_fetch_result(self, session_id: str, call_id: str) -> SubagentResult:
        return SubagentResult.ok(RUNS[f"{session_id}#{call_id}"])
