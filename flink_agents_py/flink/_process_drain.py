"""The end of bounded input in process mode: every busy key of the subtask drained at once.

At the final watermark Flink fires each busy key's drain timer (``DRAIN_TIMESTAMP``) in one
loop, and in process mode the Python worker gets them in one bundle: timers that a callback
registers come back with the bundle's output, too late to fire in that loop. A drain that
finishes its own key before returning therefore finishes one key after another, and keys
stop overlapping their calls (ten keys of three 5 s calls: 150 s instead of 15 s).

PyFlink's Python state backend (``RemoteKeyedStateBackend``) acts on its current key, which
PyFlink itself sets before each element and timer (``Row(key)``), and so does its timer
service when a timer is registered. So the first drain timer to fire switches that key to
each busy key of the subtask in turn, advances the keys whose I/O completed, and switches
back: the keys' calls overlap as they do while input flows, and the other keys' drain timers,
when they fire, find nothing left to do. Writes made under a switched key stay in the
backend's state cache and are committed with the bundle, as PyFlink's own key changes are.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING, Any

from ._key_state import _FlinkKeyState

if TYPE_CHECKING:
    from ..runtime import StepResult
    from ._operator import AgentOperator

__all__ = ["python_state_backend", "drain_all"]


def python_state_backend(runtime_context: Any) -> Any:
    """PyFlink's Python keyed state backend, when the function runs in process mode.

    Args:
        runtime_context: the ``RuntimeContext`` given to ``open``.

    Returns:
        The backend (``set_current_key``/``get_current_key`` over ``Row(key)``), or ``None``
        (thread mode: the backend is a Java object, see ``_switching``; or a test double).
    """
    backend = getattr(runtime_context, "_keyed_state_backend", None)
    if backend is None or hasattr(backend, "_keyed_state_backend"):  # thread mode's wrapper
        return None
    if not (callable(getattr(backend, "set_current_key", None))
            and callable(getattr(backend, "get_current_key", None))):
        return None
    return backend


def drain_all(op: AgentOperator, key: Any, state: _FlinkKeyState, res: StepResult, ctx: Any,
              backend: Any) -> Generator[Any, None, None]:
    """Work every busy key of the subtask until none is left (see the module docstring).

    ``key`` (whose drain timer fired) was advanced once already (``res``); every other busy
    key is advanced once, then each key again as its I/O completes; when none completes
    within ``drain_poll_s``, every busy key is advanced once more (as the one-key drain
    did), so a run that can never finish is found and given up (``_drain_step``).

    Args:
        op: the operator (process mode).
        key: the current key (its identity).
        state: ``key``'s state for this callback.
        res: the result of advancing ``key``.
        ctx: the timer context (its timer service registers under the backend's key).
        backend: PyFlink's Python keyed state backend (``python_state_backend``).

    Yields:
        The outputs of every key, and ``(ERROR_TAG, error)`` pairs.
    """
    from pyflink.common import Row

    core = op.core
    assert core is not None
    home = backend.get_current_key()
    busy = [k for k in op._drain_at if k != key]  # busy keys: each has its drain timer
    if res.busy:
        busy.append(key)
    states = {key: state}
    current = key
    fresh = set(busy) - {key}  # not advanced yet in this drain
    try:
        while busy:
            due = [k for k in busy if k in fresh or core.has_deliveries(k)]
            if not due:  # (after ``drain_poll_s`` with nothing completed: every key)
                core.wait_any(op.options.drain_poll_s)
                due = [k for k in busy if core.has_deliveries(k)] or list(busy)
            for k in due:
                if k != current:
                    backend.set_current_key(Row(k))
                    op._key = current = k
                fresh.discard(k)
                st = states.get(k)
                if st is None:
                    st = states[k] = _FlinkKeyState(op, op._runs)
                step = yield from op._drain_step(k, st, core.advance(k, st), ctx)
                if not step.busy:
                    busy.remove(k)
                    op._drain_at.pop(k, None)  # its drain timer finds the key idle
                    op._backoff.pop(k, None)
                    op._poll_at.pop(k, None)
    finally:
        if current != key:
            backend.set_current_key(home)
            op._key = key
