"""Observers: what the core reports as it runs (for metrics, event logs and traces).

The core calls these hooks on the host's thread, in order, and never reads the clock itself:
an observer that wants timings reads its own clock. Hooks must be fast and must not raise
(an exception from an observer is logged and ignored).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._commands import CallCommand

__all__ = ["Observer", "CompositeObserver", "SafeObserver"]

log = logging.getLogger("flink_agents_py.runtime")


class Observer:
    """Base observer: every hook does nothing. Override what you need.

    Identities are those of the durability scheme: an event id (``r3/ask/e0``), an action
    execution id (``<event id>/<action>``) and a call id (``<execution id>/c<ordinal>``); a
    parent is the identity one level up (an event's parent is the execution that sent it).

    Attributes:
        hooks_never_raise: set ``True`` on an observer whose hooks catch (and log) their own
            exceptions: the core then calls it directly instead of through ``SafeObserver``.
    """

    hooks_never_raise = False

    def run_started(self, key: Any, seq: int) -> None:
        """A run started for ``key`` (input number ``seq`` of that key)."""

    def run_completed(self, key: Any, seq: int) -> None:
        """The run ``seq`` of ``key`` completed."""

    def event_dispatched(self, key: Any, event: Any, parent: str | None) -> None:
        """``event`` was routed to its actions; ``parent`` is the execution that sent it."""

    def action_started(self, key: Any, execution_id: str, action: str, reentered: bool) -> None:
        """An action execution started (``reentered``: rebuilt after a restore)."""

    def action_finished(self, key: Any, execution_id: str, action: str,
                        error: BaseException | None) -> None:
        """An action execution completed (``error`` is set when it failed)."""

    def call_started(self, key: Any, call_id: str, command: CallCommand, replayed: bool) -> None:
        """A durable call was made; ``replayed`` when its recorded outcome is returned.

        ``command`` says what the call is (``runtime._commands``): its ``kind``
        (``CallKind``), ``target`` (function, model, tool or sub-agent name) and display
        name ``function`` (also its ``str()``: ``chat:<setup>``, ``module:qualname``...).
        """

    def call_finished(self, key: Any, call_id: str, ok: bool, result: Any) -> None:
        """A durable call's outcome was recorded (not called for replayed calls)."""

    def output_emitted(self, key: Any, output: Any, parent: str) -> None:
        """An ``OutputEvent``'s output left the agent."""


class CompositeObserver(Observer):
    """Forwards every hook to several observers, in order."""

    def __init__(self, *observers: Observer) -> None:
        self.observers = [o for o in observers if o is not None]

    def __getattribute__(self, name: str) -> Any:
        if name.startswith("_") or name == "observers" \
                or not callable(getattr(Observer, name, None)):
            return object.__getattribute__(self, name)
        targets = [getattr(o, name) for o in object.__getattribute__(self, "observers")]

        def fan_out(*args: Any, **kwargs: Any) -> None:
            for hook in targets:
                hook(*args, **kwargs)

        return fan_out


class SafeObserver(Observer):
    """Calls an observer's hooks, logging (never raising) what they throw.

    Args:
        inner: the observer to call.
    """

    def __init__(self, inner: Observer) -> None:
        self._inner = inner
        for name in dir(Observer):  # wrapped once: hooks are on the hot path
            if not name.startswith("_") and callable(getattr(Observer, name)):
                setattr(self, name, self._safe(name, getattr(inner, name)))

    @staticmethod
    def _safe(name: str, hook: Callable[..., Any]) -> Callable[..., None]:
        def safe(*args: Any, **kwargs: Any) -> None:
            try:
                hook(*args, **kwargs)
            except Exception:
                log.exception("observer hook %s failed", name)

        return safe
