"""PyFlink's own ``env.execute()`` on an environment agents were applied in reads their errors.

``agents.execute()`` reads the error output of an agent whose ``errors_datastream()`` the
program never took back to the program on a local MiniCluster (``_unread_errors``). A Flink
user writes ``env.execute()``, PyFlink's, as every PyFlink job ends: then the failed records
went to the TaskManager's log file only, and the console said nothing (an action that raised
on two records of five: three outputs and not a word). So the environment given to
``AgentsExecutionEnvironment.flink(env)`` has its ``execute`` run as ``agents.execute()``
when agents were applied since its last run, and as PyFlink's otherwise.
"""

from __future__ import annotations

import functools
import threading
from typing import TYPE_CHECKING, Any

from ._collections import accept_pickled_collections

if TYPE_CHECKING:
    from ._builder import FlinkExecutionEnvironment

__all__ = ["adopt_environment"]

_MARK = "_flink_agents_py_agent_environments"
_ROUTING = threading.local()
"""Set while a routed ``execute`` runs: ``agents.execute()`` calling ``env.execute`` again
gets PyFlink's."""


def adopt_environment(env: Any, agents: FlinkExecutionEnvironment) -> None:
    """Set up ``env`` for the agents ``agents`` applies in it.

    ``env.from_collection`` takes ``type_info=Types.PICKLED_BYTE_ARRAY()``
    (``accept_pickled_collections``), and ``env.execute(job_name)`` runs as
    ``agents.execute(job_name)`` while agents applied since the last run are in the job (the
    agents of every ``AgentsExecutionEnvironment.flink(env)`` over this ``env``). Idempotent
    per pair.

    Args:
        env: a PyFlink ``StreamExecutionEnvironment``.
        agents: the environment the agents are applied in.
    """
    accept_pickled_collections(env)
    adopted: list[FlinkExecutionEnvironment] | None = getattr(env, _MARK, None)
    if adopted is None:
        adopted = []
        original = env.execute

        @functools.wraps(original)
        def execute(job_name: str | None = None) -> Any:
            routed = next((a for a in adopted if a._applied), None)
            if routed is None or getattr(_ROUTING, "on", False):
                return original(job_name)
            routed._applied = [b for a in adopted for b in a._applied]
            for other in adopted:
                if other is not routed:
                    other._applied = []
            _ROUTING.on = True
            try:
                return routed.execute(job_name or "Flink Streaming Job")
            finally:
                _ROUTING.on = False

        env.execute = execute
        setattr(env, _MARK, adopted)
    if not any(a is agents for a in adopted):
        adopted.append(agents)
