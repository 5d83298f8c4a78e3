"""Observers: what the core reports as it runs (for metrics, event logs and traces).

The core calls these hooks on the host's thread, in order, and never reads the clock for
them: an observer that wants timings reads its own clock (a ``CoreTally`` hands the core the
clock to time runs and actions with). Hooks must be fast and must not raise
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
    observer gets, per event, action, run and output, the counts below kept inline by the
    core in place of the hooks ``event_dispatched``, ``output_emitted``, ``action_started``,
    ``action_finished``, ``run_started`` and ``run_completed`` (which the core then does not
    call; the durable call hooks stay). Metrics use it: an echo record then costs no call
    into the observer at all. The callables must not raise.

    A distribution here is anything with a ``values`` list, a ``limit`` and a ``fold()``
    (``observability.Distribution``): the core appends a value in milliseconds, then calls
    ``fold()`` once ``len(values) >= limit``.

    Attributes:
        counters: the core adds 1 to ``"events_processed"`` per event dispatched, to
            ``"outputs_emitted"`` per ``OutputEvent`` output that left the agent, to
            ``"runs_started"`` and ``"runs_in_flight"`` per run started, and (unless it
            calls ``run_ended``) to ``"runs_completed"`` per run completed, taking 1 from
            ``"runs_in_flight"`` while that is above 0 (a restored run was not counted).
        events_by_type: the core adds 1 to ``events_by_type[event.type]`` per event.
        hooked_types: event types for which ``on_event(key, event)`` is called too (after
            counting; ``event_parent(event.id)`` is the ``parent`` of ``event_dispatched``).
        on_event: see ``hooked_types``.
        clock: read by the core when a run or an action execution starts and completes
            (monotonic seconds).
        tracked: keys the observer keeps more about (open calls, chats): the core hands
            their completed actions to ``action_ended`` and their completed runs to
            ``run_ended``, and drops a key from it when the key's next run starts.
        actions_executed: the core adds 1 to ``actions_executed[action]`` per action
            execution that completed without an error (a failed one goes to
            ``action_ended``).
        action_latency: each action's distribution of execution times (ms), by name;
            ``new_action_latency(action)`` makes (and keeps) one that is missing.
        new_action_latency: see ``action_latency``.
        run_latency: the distribution of run times (ms), start to completion, for the runs
            started in this process.
        action_ended: ``(key, execution_id, action, error, started)`` for an action
            execution of a tracked key, or one that failed; ``started`` is what ``clock``
            read when it started.
        run_ended: ``(key, started)`` for a completed run of a tracked key, in place of the
            counting above; ``started`` is what ``clock`` read when the run started, or
            ``None`` (started in another process).
        after_run: called after each completed run is counted inline (e.g. to push metrics
            to Flink every so many runs), or ``None``.
        action_reentered: ``(key, execution_id, action)`` when an action execution rebuilt
            after a restore starts (before it runs).
    """

    counters: dict[str, int]
    events_by_type: dict[str, int]
    hooked_types: frozenset[str]
    on_event: Callable[[Any, Any], None]
    clock: Callable[[], float]
    tracked: dict[Any, Any]
    actions_executed: dict[str, int]
    action_latency: dict[Any, Any]
    new_action_latency: Callable[[str], Any]
    run_latency: Any
    action_ended: Callable[[Any, str, str, BaseException | None, float], None]
    run_ended: Callable[[Any, float | None], None]
    after_run: Callable[[], None] | None
    action_reentered: Callable[[Any, str, str], None]

    def action_done(self, key: Any, execution_id: str, action: str,
                    error: BaseException | None, started: float) -> None:
        """Count an action execution that completed (``started``: ``clock`` at its start)."""
        if error is not None or (self.tracked and key in self.tracked):
            self.action_ended(key, execution_id, action, error, started)
            return
        by = self.actions_executed  # the usual case, inline
        by[action] = by.get(action, 0) + 1
        d = self.action_latency.get(action) or self.new_action_latency(action)
        values = d.values
        values.append((self.clock() - started) * 1000.0)
        if len(values) >= d.limit:
            d.fold()

    def run_begun(self, key: Any) -> float:
        """Count a run that started; returns ``clock()``, to hand to ``run_done``."""
        counters = self.counters
        counters["runs_started"] += 1
        counters["runs_in_flight"] += 1
        if self.tracked:
            self.tracked.pop(key, None)
        return self.clock()

    def run_done(self, key: Any, started: float | None) -> None:
        """Count a completed run (``started``: ``clock`` at its start, or ``None``)."""
        if self.tracked and key in self.tracked:
            self.run_ended(key, started)
            return
        counters = self.counters
        counters["runs_completed"] += 1
        if counters["runs_in_flight"] > 0:  # a restored run was not counted as started
            counters["runs_in_flight"] -= 1
        if started is not None:
            d = self.run_latency
            values = d.values
            values.append((self.clock() - started) * 1000.0)
            if len(values) >= d.limit:
                d.fold()
        if self.after_run is not None:
            self.after_run()


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

        ``command`` says what the call is (``runtime.core._commands``): its ``kind``
        (``CallKind``), ``target`` (function, model, tool or sub-agent name) and display
        name ``function`` (also its ``str()``: ``chat:<setup>``, ``module:qualname``...).
        """

    def call_finished(self, key: Any, call_id: str, ok: bool, result: Any) -> None:
        """A durable call's outcome was recorded (not called for replayed calls)."""

    def output_emitted(self, key: Any, output: Any, parent: str) -> None:
        """An ``OutputEvent``'s output left the agent."""

    def replay_finding(self, key: Any, execution_id: str, kind: str, message: str) -> None:
        """A replay went on past something that may be wrong (logged as a warning).

        ``kind`` is ``"arguments_changed"`` (a call replayed a recorded outcome with other
        arguments) or ``"unreached_calls"`` (a re-entered execution completed without making
        calls it had recorded); ``message`` names the calls. In strict replay mode these are
        ``ReplayDivergenceError`` failures instead (see ``action_finished``).
        """


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
