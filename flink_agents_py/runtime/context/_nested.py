"""What the context does when called from inside a durable call's function.

A durable call's function (``ctx.durable_execute(fn)``, ``ctx.durable_execute_async(fn)``)
runs once and its one result is recorded; a replay returns that result without running it.
A durable call made from inside the function is part of the outer call: it runs there as a
plain call of its function and is not recorded on its own (the outer result covers it), as
a step called from a step is in DBOS. Recording it would take a call identity of the action
that a replay, which does not run the outer function, never takes again: every later durable
call of the action would then be handed the outcome recorded for the one before it.

What cannot be part of a function's one result (an event sent, a chat, a sub-agent call, a
wait, a sleep, a versioning marker) is refused there with a ``UsageError``: a replay would
not do it again, and the function may be running in a worker thread.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any

from ...api import UsageError
from ..core._stepper import DURABLE_FUNCTION

__all__ = ["inside_durable_function", "run_nested", "run_nested_async", "refuse_nested"]


def inside_durable_function() -> str | None:
    """The name of the durable call's function this code runs in, if any.

    Returns:
        ``module:qualname`` (or the function's qualified name on the I/O executor), or
        ``None`` in the action itself.
    """
    return DURABLE_FUNCTION.get()


def run_nested(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``ctx.durable_execute`` inside a durable call's function: call ``fn`` as it is.

    Returns:
        What ``fn`` returned (a coroutine of an ``async`` ``fn`` is awaited by the caller).
    """
    return fn(*args, **kwargs)


async def run_nested_async(fn: Callable[..., Any], args: tuple[Any, ...],
                           kwargs: dict[str, Any]) -> Any:
    """``ctx.durable_execute_async`` inside a durable call's (``async``) function.

    An ``async`` ``fn`` is awaited on the running loop; a plain one runs in the loop's
    default thread pool (it may block), still inside the outer call.

    Returns:
        What ``fn`` returned.
    """
    if inspect.iscoroutinefunction(fn):
        return await fn(*args, **kwargs)
    outer = DURABLE_FUNCTION.get()

    def in_outer() -> Any:
        token = DURABLE_FUNCTION.set(outer)  # in the pool's thread, until it returns
        try:
            return fn(*args, **kwargs)
        finally:
            DURABLE_FUNCTION.reset(token)

    result = await asyncio.get_running_loop().run_in_executor(None, in_outer)
    if inspect.isawaitable(result):
        result = await result
    return result


def refuse_nested(what: str) -> None:
    """Refuse ``what`` (``ctx.send_event``...) inside a durable call's function.

    Raises:
        UsageError: when called inside one, naming ``what`` and the function.
    """
    outer = DURABLE_FUNCTION.get()
    if outer is not None:
        raise UsageError(
            f"{what} called inside the function of a durable call ({outer}): the function "
            "runs once and only its result is recorded, so a replay, which returns that "
            f"result without running it, would not do the {what} again; return what it "
            f"needs from the function and call {what} in the action")
