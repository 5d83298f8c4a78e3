"""The core's working objects: live action executions, one callback's step, deliveries.

A delivery is completed I/O waiting in its key's inbox. All are live objects: none of them
enters keyed state.
"""

from __future__ import annotations

import collections
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

from ...api import Event
from ...plan import ActionPlan
from ..context._calls import DurableCall
from ..context._memory import MemoryLoader
from ..recorder._execution import ActionExecution
from ..recorder._state import KeyState, RunState
from ._results import StepResult

__all__ = ["Task", "Step", "Delivery", "memories"]


@dataclass(slots=True)
class Task:
    """A live action execution: its action, triggering event, context and coroutine."""

    action: ActionPlan
    event: Event
    ctx: ActionExecution
    coro: Coroutine[Any, Any, Any] | None = None
    started: bool = False
    reentered: bool = False
    waiting: DurableCall | None = None
    token: Any = None  # the probe's token of its start (``Probe.action_started``)
    ending: tuple[BaseException | None] | None = None  # returned (or raised), with this error
    refused: BaseException | None = None  # restored and cannot replay: fails, never runs


@dataclass(slots=True)
class Step:
    """What one ``advance`` works on: the key, its state and run, the result, the ready queue.

    ``key`` is the key's value (what actions, outputs and errors see); ``identity`` what the
    host keys it by (the core's inbox and I/O executor), see ``AgentCore``'s ``key_value``.
    """

    key: Any
    state: KeyState
    run: RunState
    res: StepResult
    live: dict[str, Task]
    ready: collections.deque[Task]
    identity: Any


@dataclass(slots=True)
class Delivery:
    """A call's outcome from the I/O executor, waiting in its key's inbox."""

    ctx: ActionExecution
    call: DurableCall
    ok: bool
    value: Any


def memories(state: KeyState, run: RunState, env: str | None
             ) -> tuple[MemoryLoader, dict[str, Any], MemoryLoader]:
    """Loaders of ``env``'s short-term memory, its sensory memory, the key's memory.

    Returns:
        The three (``env`` ``None``: the agent's own memories).
    """
    if env is None:
        return (lambda: state.memory), run.sensory, (lambda: state.memory)
    inv = run.invocations[env]
    return (lambda: inv.memory), inv.sensory, (lambda: state.memory)
