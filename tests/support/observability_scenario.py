"""The observability tests' scenario, run by the local runner (``test_observability``) and
the Flink operator (``test_observability_flink``).

An orchestrator whose chat model asks, in one tool round, for the ``lookup`` tool and the
internal sub-agent ``child``, then answers; three records on three keys.
"""

from __future__ import annotations

from typing import Any

from flink_agents_py.api import Agent
from support import subagent_tool_agents as sa

__all__ = ["RECORDS", "orchestrator", "tool_round_script"]


def tool_round_script(req: Any) -> Any:
    """First round: call ``lookup`` and the sub-agent; then answer."""
    if not req.tool_results:
        return sa.calls(("t1", "lookup", {"q": req.last_user_text}),
                        ("t2", "_subagent_child", {"text": req.last_user_text}))
    return "done " + req.last_user_text


def orchestrator(child: Agent | None = None) -> Agent:
    """The orchestrator, its internal ``child`` (default: ``sa.Echo``) as a tool."""
    sa.reset()
    sa.SCRIPTS["orch"] = tool_round_script
    return sa.orchestrator(tools=["lookup"], subagents=["child"],
                           child=sa.internal(child or sa.Echo(), description="echoes",
                                             input_schema=sa.OBJECT_SCHEMA))


RECORDS = [{"key": f"k{i}", "ask": f"question {i}"} for i in range(3)]
"""Three records on three keys."""
