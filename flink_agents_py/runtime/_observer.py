"""Observers: what the core reports as it runs (for metrics, event logs and traces).

The core calls these hooks on the host's thread, in order, and never reads the clock itself:
an observer that wants timings reads its own clock. Hooks must be fast and must not raise
(an exception from an observer is logged and ignored).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._commands import CallCommand

__all__ = ["Observer", "CompositeObserver", "SafeObserver", "CoreTally", "event_parent"]

log = logging.getLogger("flink_agents_py.runtime")


def event_parent(event_id: str) -> str | None:
    """The execution that sent the event ``event_id`` (``None`` for an input event).

    Args:
        event_id: e.g. ``r3/ask/e0`` (sent by execution ``r3/ask``).

    Returns:
        The parent identity, or ``None`` when the id has no ``/``.
    """
    return event_id.rsplit("/", 1)[0] if "/" in event_id else None


@dataclass(slots=True, eq=False)
class CoreTally:
    """What the core counts and times itself for its single observer, instead of its hooks.

    An observer that sets ``tally`` (and ``hooks_never_raise``) and is the core's only
    observer gets, per event, action and output, the counts below kept inline by the core
    in place of the hooks ``event_dispatched``, ``output_emitted``, ``action_started`` and
    ``action_finished`` (which the core then does not call; the run and call hooks stay).
    Metrics use it: seven hook calls per echo record become two, plus one callback per
    action. The callables must not raise.

    Attributes:
        counters: the core adds 1 to ``"events_processed"`` per event dispatched and to
            ``"outputs_emitted"`` per ``OutputEvent`` output that left the agent.
        events_by_type: the core adds 1 to ``events_by_type[event.type]`` per event.
        hooked_types: event types for which ``on_event(key, event)`` is called too (after
            counting; ``event_parent(event.id)`` is the ``parent`` of ``event_dispatched``).
        on_event: see ``hooked_types``.
        clock: read by the core when an action execution starts (monotonic seconds).
        action_ended: ``(key, execution_id, action, error, started)`` when an action
            execution completed; ``started`` is what ``clock`` read when it started.
        action_reentered: ``(key, execution_id, action)`` when an action execution rebuilt
            after a restore starts (before it runs).
    """

    counters: dict[str, int]
    events_by_type: dict[str, int]
    hooked_types: frozenset[str]
    on_event: Callable[[Any, Any], None]
    clock: Callable[[], float]
    action_ended: Callable[[Any, str, str, BaseException | None, float], None]
    action_reentered: Callable[[Any, str, str], None]


class Observer:
    """Base observer: every hook does nothing. Override what you need.

    Identities are those of the durability scheme: an event id (``r3/ask/e0``), an action
    execution id (``<event id>/<action>``) and a call id (``<execution id>/c<ordinal>``); a
    parent is the identity one level up (an event's parent is the execution that sent it).

    Attributes:
        hooks_never_raise: set ``True`` on an observer whose hooks catch (and log) their own
            exceptions: the core then calls it directly instead of through ``SafeObserver``.
        tally: a ``CoreTally`` the core keeps instead of calling the per-event and
            per-action hooks (used only with ``hooks_never_raise``, when this observer is
            the core's only one; ``None``: every hook is called).
    """

    hooks_never_raise = False
    tally: CoreTally | None = None

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
