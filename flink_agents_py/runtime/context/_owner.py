"""A context used by another action than its own: refused.

A ``RunnerContext``, the memories and memory sets taken from it, and the vector-store views
it hands out speak for one action execution: its key, its run, its record of durable calls.
An action that keeps one (in a module global, on its agent: a memory set fetched once and
reused, as Flink Agents warns against) and uses it in a later action would read and write
the first action's key's memory, send events as it and record calls in its record, while
that action is still running (awaiting a call; keys run concurrently). The core steps one
action at a time and marks which (``EVENT_ID_SOURCE``, set to the stepped execution's event
id source): what is used while another execution is stepped is refused here. Used after
its execution finished, it is refused already (``ActionExecution.check_live``).
"""

from __future__ import annotations

from typing import Any

from ...api import NotInActionContextError
from ...api.internal import EVENT_ID_SOURCE
from .._keys import key_text
from ..core._stepper import DURABLE_OWNER

__all__ = ["refuse_foreign"]


def refuse_foreign(owner: Any, what: str, clock: Any = None) -> None:
    """Refuse ``what`` of ``owner``'s context while another action execution is stepped.

    Args:
        owner: the ``ActionExecution`` the context belongs to (``None``: given by ``clock``).
        what: what was used, for the message (``"ctx.send_event"``).
        clock: the ``MemoryClock`` of the execution a memory belongs to (a memory holds its
            clock, not its execution).

    Raises:
        NotInActionContextError: naming the execution running (never the owner's key: the
            running action may be another key's).
    """
    running = getattr(EVENT_ID_SOURCE.get(), "__self__", None)  # the stepped execution
    if running is owner and running is not None:  # the common case first: its own action
        return
    if running is None:  # in a durable call's function: another key's context is refused
        durable = DURABLE_OWNER.get()
        if durable is None and clock is not None:  # a memory with no action at all stepped
            raise NotInActionContextError(
                f"{what} was used outside any action (after its action finished, or from "
                "a thread of the program's own): a memory taken from a RunnerContext is valid "
                "only while the action it was passed to runs; read and write it there")
        if durable is None or _same_key(durable, owner, clock):
            return
        running = durable
    elif running is owner or (clock is not None and getattr(running, "_clock", None) is clock):
        return
    raise NotInActionContextError(
        f"{what} of another action execution's context was used by action execution "
        f"{getattr(running, 'execution_id', '?')}: a RunnerContext, the memories and memory "
        "sets taken from it and the resources it returned are valid only in the action they "
        "were passed to (they speak for its key and its run); take them from the ctx of the "
        "action that uses them, each time, instead of keeping them between actions")


def _same_key(durable: Any, owner: Any, clock: Any) -> bool:
    """Whether the execution whose durable function runs has ``owner``'s key.

    A function reaching a context of its own key (a tool given the calling action's memory)
    is left as it was; one of another key's is refused. Keys are told apart as keyed state
    tells them (``1``, ``True`` and ``"1"`` are three keys).

    Returns:
        Whether both have one key.
    """
    theirs = owner.key if owner is not None else getattr(clock, "key", None)
    return bool(_identity(durable.key) == _identity(theirs))


def _identity(key: Any) -> Any:
    try:
        return key_text(key)
    except Exception:  # noqa: BLE001 - a key only the pickle encoding takes
        return (type(key).__qualname__, repr(key))
