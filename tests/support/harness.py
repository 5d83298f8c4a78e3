"""Core-level restore harness: an ``AgentCore`` driven on an ``InMemoryKeyState``.

The restore tests run a record on a core until a chosen point, copy the key's state there as
a checkpoint would (``snapshot_of``: a deep copy, or a JSON round trip as a host that keeps state
as JSON, like Flink, restores it), then resume that copy on a new core (``resume``).
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable
from typing import Any, Literal

from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import AgentCore, InMemoryKeyState, RunState

__all__ = ["KEY", "Done", "call_of", "drive_until", "json_copy", "new_core", "poll_until",
           "records_of", "resume", "run_to_end", "snapshot_of"]

KEY = "k1"
"""The record key the harness drives by default."""

Done = Callable[[InMemoryKeyState], bool]


def new_core(plan: AgentPlan, **kwargs: Any) -> AgentCore:
    """An opened ``AgentCore(plan, **kwargs)``."""
    core = AgentCore(plan, **kwargs)
    core.open()
    return core


def drive_until(core: AgentCore, state: InMemoryKeyState, done: Done, *, quiet: bool = False,
                key: Any = KEY) -> None:
    """Advance ``key`` each time its I/O completes (within 10 s) until ``done(state)``.

    No step may fail; with ``quiet``, none may output either.
    """
    while not done(state):
        assert core.wait_for(key, 10), "no I/O completed for the key"
        res = core.advance(key, state)
        if quiet:
            assert res.errors == [] and res.outputs == []
        else:
            assert res.errors == []


def poll_until(core: AgentCore, state: InMemoryKeyState, done: Done, timeout_s: float = 60,
               *, key: Any = KEY) -> None:
    """Advance ``key`` as its I/O completes until ``done(state)`` (may watch fake counters).

    ``done`` must hold within ``timeout_s``; no step may fail or output.
    """
    deadline = time.monotonic() + timeout_s
    while not done(state):
        assert time.monotonic() < deadline, "the run never reached the snapshot point"
        if core.wait_for(key, 0.01):
            res = core.advance(key, state)
            assert res.errors == [] and res.outputs == []


def run_to_end(core: AgentCore, state: InMemoryKeyState, *, key: Any = KEY
               ) -> tuple[list[Any], list[Any]]:
    """Advance ``key`` until it is idle; its ``(outputs, errors)`` on the way."""
    res = core.advance(key, state)
    outputs, errors = list(res.outputs), list(res.errors)
    while res.busy:
        assert core.wait_for(key, 10), "no I/O completed for the key"
        res = core.advance(key, state)
        outputs.extend(res.outputs)
        errors.extend(res.errors)
    return outputs, errors


def json_copy(state: InMemoryKeyState) -> InMemoryKeyState:
    """What a host that keeps state as JSON (like Flink) restores."""
    restored = InMemoryKeyState()
    assert state.run is not None
    restored.run = RunState.from_stored(state.run.to_stored())
    restored.memory = json.loads(json.dumps(state.memory))
    return restored


def snapshot_of(state: InMemoryKeyState, how: Literal["deepcopy", "json"] = "deepcopy"
             ) -> InMemoryKeyState:
    """A checkpoint of ``state``: a deep copy, or a JSON round trip (``json_copy``)."""
    return copy.deepcopy(state) if how == "deepcopy" else json_copy(state)


def resume(plan: AgentPlan, state: InMemoryKeyState, *, key: Any = KEY, **kwargs: Any
           ) -> tuple[list[Any], list[Any], AgentCore]:
    """Run the restored ``state`` to the end on a new ``AgentCore(plan, **kwargs)``, closed
    after; ``(outputs, errors, the new core)`` (its counters stay readable)."""
    new = new_core(plan, **kwargs)
    try:
        outputs, errors = run_to_end(new, state, key=key)
    finally:
        new.close()
    return outputs, errors, new


def records_of(state: InMemoryKeyState, action: str) -> list[Any]:
    """The in-flight records of ``action`` in the key's run."""
    assert state.run is not None
    return [r for r in state.run.inflight.values() if r.action == action]


def call_of(state: InMemoryKeyState, action: str, ordinal: int) -> Any:
    """Call ``ordinal`` recorded by the first in-flight record of ``action`` (``None``: none)."""
    recs = records_of(state, action)
    return recs[0].calls.get(str(ordinal)) if recs else None
