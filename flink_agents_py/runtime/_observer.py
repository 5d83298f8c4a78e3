"""Observers: what the core reports as it runs (for metrics, event logs and traces).

The core calls these hooks on the host's thread, in order, and never reads the clock itself:
an observer that wants timings reads its own clock. Hooks must be fast and must not raise
(an exception from an observer is logged and ignored).
"""

from __future__ import annotations

from typing import Any

__all__ = ["Observer", "CompositeObserver"]


class Observer:
    """Base observer: every hook does nothing. Override what you need.

    Identities are those of the durability scheme: an event id (``r3/ask/e0``), an action
    execution id (``<event id>/<action>``) and a call id (``<execution id>/c<ordinal>``); a
    parent is the identity one level up (an event's parent is the execution that sent it).
    """

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

    def call_started(self, key: Any, call_id: str, function: str, replayed: bool) -> None:
        """A durable call was made; ``replayed`` when its recorded outcome is returned."""

    def call_finished(self, key: Any, call_id: str, ok: bool, result: Any) -> None:
        """A durable call's outcome was recorded (not called for replayed calls)."""

    def output_emitted(self, key: Any, output: Any, parent: str) -> None:
        """An ``OutputEvent``'s output left the agent."""


class CompositeObserver(Observer):
    """Forwards every hook to several observers, in order."""

    def __init__(self, *observers: Observer) -> None:
        self.observers = [o for o in observers if o is not None]

    def __getattribute__(self, name: str) -> Any:
        if name.startswith("_") or name == "observers" or not hasattr(Observer, name):
            return object.__getattribute__(self, name)
        targets = [getattr(o, name) for o in object.__getattribute__(self, "observers")]

        def fan_out(*args: Any, **kwargs: Any) -> None:
            for hook in targets:
                hook(*args, **kwargs)

        return fan_out
