"""The stand-in event loop active while the core steps an action's coroutine.

Actions are stepped by the operator, not by asyncio. While one is stepped, this loop is set
as the thread's running loop, so asyncio code that needs a loop (``asyncio.sleep``,
``asyncio.gather``, ``create_task``...) fails at once with ``UnsupportedAwaitError``, a type
the core recognises, instead of an unrelated ``RuntimeError``.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
from collections.abc import Callable, Iterator
from typing import Any, NoReturn

from ...api import UnsupportedAwaitError
from ...api.internal import EVENT_ID_SOURCE

__all__ = ["DURABLE_FUNCTION", "DURABLE_OWNER", "not_stepping", "STEPPING_LOOP",
           "leave_stepping", "running_loop", "set_running_loop", "run_inline"]

DURABLE_FUNCTION: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "flink_agents_py_durable_function", default=None)
"""The name of the durable call's function running in this context (``None`` outside one).

Set while ``run_inline`` runs a ``ctx.durable_execute`` function and while the I/O executor
runs a function (in its worker thread, or in the task of an ``async`` one): a durable call
made from there is part of that call, whose one result is recorded (see
``context._nested``)."""

DURABLE_OWNER: contextvars.ContextVar[Any] = contextvars.ContextVar(
    "flink_agents_py_durable_owner", default=None)
"""The action execution whose durable call's function runs in this context (``None``
outside one, or when the runner did not say): what it reaches of another key's context is
refused (``context._owner``)."""

_HINT = (
    "actions are stepped by the operator, not by an asyncio event loop: await only the "
    "futures a RunnerContext returns (one after another; asyncio.gather and tasks over them "
    "cannot be made durable), and run other async code through ctx.durable_execute_async(...)"
)


class _StepperLoop(asyncio.AbstractEventLoop):
    def _refuse(self, what: str) -> NoReturn:
        raise UnsupportedAwaitError(f"{what} inside an action: {_HINT}")

    def create_future(self) -> Any:
        self._refuse("an asyncio future (asyncio.sleep, an asyncio primitive...)")

    def create_task(self, coro: Any, **kwargs: Any) -> Any:
        if asyncio.iscoroutine(coro):
            coro.close()
        self._refuse("an asyncio task (asyncio.gather, asyncio.create_task...)")

    def call_soon(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        self._refuse("a loop callback")

    call_later = call_at = call_soon_threadsafe = call_soon  # type: ignore[assignment]

    def run_in_executor(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        self._refuse("loop.run_in_executor")

    def time(self) -> float:
        self._refuse("the event loop clock")

    def get_debug(self) -> bool:
        return False

    def is_running(self) -> bool:
        return True

    def is_closed(self) -> bool:
        return False


_LOOP = _StepperLoop()  # type: ignore[abstract]  # only what actions reach is defined
_get_running = asyncio.events._get_running_loop  # bound once: called twice per host callback
_set_running = asyncio.events._set_running_loop
STEPPING_LOOP: asyncio.AbstractEventLoop = _LOOP
"""The stand-in loop: the running loop while the core steps actions (``AgentCore.advance``
sets it, once per callback, and gives back the one that ran before: ``leave_stepping``)."""
running_loop: Callable[[], asyncio.AbstractEventLoop | None] = _get_running
"""The running loop, if any (``asyncio.events._get_running_loop``)."""
set_running_loop: Callable[[asyncio.AbstractEventLoop | None], None] = _set_running
"""Make a loop the running one (``asyncio.events._set_running_loop``)."""


leave_stepping: Callable[[asyncio.AbstractEventLoop | None], None] = _set_running
"""Make ``previous`` (the running loop before ``STEPPING_LOOP`` was set) the running loop again."""


@contextlib.contextmanager
def not_stepping() -> Iterator[None]:
    """Lift the stand-in loop for the block (user code that runs its own asyncio loop)."""
    previous = asyncio.events._get_running_loop()
    asyncio.events._set_running_loop(None)
    try:
        yield
    finally:
        asyncio.events._set_running_loop(previous)


def run_inline(name: str, call: Callable[[], Any], owner: Any = None) -> Any:
    """Run a synchronous durable call's function (or its reconciler) in the action's thread.

    It takes no event ids (nothing it builds is replayed) and runs with the stand-in loop
    lifted (it may run an asyncio loop of its own).

    Args:
        name: the function's ``module:qualname``, for the error.
        call: runs the function with its arguments.
        owner: the action execution making the call (``DURABLE_OWNER`` meanwhile).

    Returns:
        What it returned.

    Raises:
        TypeError: when it returned a coroutine (an ``async`` function given to
            ``ctx.durable_execute``): the coroutine is closed, never run, and the error says
            to await ``ctx.durable_execute_async`` instead.
        Exception: whatever the function raised.
    """
    token = EVENT_ID_SOURCE.set(None)
    inside = DURABLE_FUNCTION.set(name)
    owned = DURABLE_OWNER.set(owner)
    try:
        with not_stepping():
            value = call()
    finally:
        DURABLE_OWNER.reset(owned)
        DURABLE_FUNCTION.reset(inside)
        EVENT_ID_SOURCE.reset(token)
    if inspect.iscoroutine(value):
        value.close()
        raise TypeError(f"ctx.durable_execute({name}) got a coroutine: {name} is async; "
                        f"write 'await ctx.durable_execute_async({name.rpartition(':')[2]}, ...)'"
                        " in an async action")
    return value
