"""The bound on a deferred external sub-agent's call: ``DeferredSubagentSetup.timeout_s``.

A deferred sub-agent's ``call()`` is the user's own code, blocking. Without a bound, one that
never returns holds its I/O slot and its key's later records for ever. With ``timeout_s``
set, the call runs in a thread of its own (a daemon thread: a call that never returns holds
neither the executor's thread pool nor the process at exit), and the durable call ends at the
deadline with a failed ``SubagentResult`` naming the sub-agent and the limit. That result is
the call's recorded outcome like any other: a replay after a restore gives it again without
calling the sub-agent. The deadline is kept in the run's waits (``#poll/<call id>``, status
``"polling"``, wall-clock milliseconds), as an async sub-agent's poll keeps its own: a call
started again after a restore (its reconciler, or the call itself) gets what is left of it.
"""

from __future__ import annotations

import asyncio
import contextvars
import math
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...api import SubagentResult
from ..recorder._state import RunState, WaitRecord
from ._commands import RunDeferred
from ._subgraph import POLL_PREFIX, checked_result

if TYPE_CHECKING:
    from ..recorder._execution import ActionExecution

__all__ = ["bounded_deferred"]


def bounded_deferred(
    run: RunState, ctx: ActionExecution, command: RunDeferred, runner: Callable[[], Any]
) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """What the I/O executor runs for the deferred call ``command`` of action ``ctx``.

    Args:
        run: the key's run (its waits keep the deadline across restores).
        ctx: the calling action's execution.
        command: the deferred call.
        runner: the setup's call (or its reconciler), from ``prepare_deferred``.

    Returns:
        ``(function, arguments)``: ``checked_result`` when the setup sets no ``timeout_s``,
        else ``_within`` with the call's deadline.
    """
    timeout_s = command.setup.timeout_s
    if timeout_s is None:
        return checked_result, (runner, command.name)
    call = command.call
    cid = POLL_PREFIX + call.call_id
    opened = run.waits.get(cid)
    if opened is None or opened.deadline_ms is None:
        opened = run.waits[cid] = WaitRecord(
            call_id=call.call_id,
            caller=ctx.execution_id,
            ordinal=call.ordinal,
            deadline_ms=time.time_ns() // 1_000_000 + math.ceil(timeout_s * 1000),
            timeout_s=timeout_s,
            status="polling",
        )
    return _within, (runner, command.name, timeout_s, opened.deadline_ms)


def timed_out(name: str, timeout_s: float) -> SubagentResult:
    """The failed result of a deferred call still running at its deadline.

    Returns:
        A failed ``SubagentResult`` naming the sub-agent and the limit.
    """
    return SubagentResult.failed(
        f"sub-agent {name!r}: the deferred call timed out: it had not returned after "
        f"timeout_s={timeout_s:g} s (counted from its first start, across restores); it "
        "was abandoned, and its outcome, if it ever returns, is ignored"
    )


async def _within(
    runner: Callable[[], Any], name: str, timeout_s: float, deadline_ms: int
) -> SubagentResult:
    """Run ``runner`` in a daemon thread; its checked result, or a timeout at the deadline.

    Returns:
        The call's checked result, or ``timed_out``'s failed result.

    Raises:
        BaseException: what the call raised (a fault of the setup), or ``TypeError`` when it
            returned no ``SubagentResult``.
    """
    left = (deadline_ms - time.time_ns() / 1e6) / 1000
    if left <= 0:  # its deadline passed (before a restore): it is not called again
        return timed_out(name, timeout_s)
    loop = asyncio.get_running_loop()
    done: asyncio.Future[SubagentResult] = loop.create_future()

    def settle(ok: bool, value: Any) -> None:
        if done.done():  # timed out already: its outcome is ignored
            return
        if ok:
            done.set_result(value)
        else:
            done.set_exception(value)

    def hand_over(ok: bool, value: Any) -> None:
        try:
            loop.call_soon_threadsafe(settle, ok, value)
        except RuntimeError:  # the executor's loop is closed (the job ended): nobody waits
            pass

    def run() -> None:
        try:
            value: Any = checked_result(runner, name)
        except StopIteration as e:  # (asyncio cannot carry one into a future)
            err = RuntimeError(f"sub-agent {name!r}: its call raised StopIteration")
            err.__cause__ = e
            hand_over(False, err)
        except BaseException as e:  # noqa: BLE001 - every failure is the call's outcome
            hand_over(False, e)
        else:
            hand_over(True, value)

    context = contextvars.copy_context()  # the durable call's own (``DURABLE_OWNER``)
    threading.Thread(
        target=context.run, args=(run,), daemon=True, name=f"flink-agents-deferred-{name}"
    ).start()
    try:
        return await asyncio.wait_for(asyncio.shield(done), left)
    except asyncio.TimeoutError:
        done.cancel()
        return timed_out(name, timeout_s)
