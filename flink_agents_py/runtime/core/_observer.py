"""Observers: what the core reports as it runs (for metrics, event logs and traces).

The core reports to one ``Probe``, a method per event called once at each site, on the
host's thread, in order; it never reads the clock for it. Metrics implement the probe
directly; any other ``Observer`` is reached through an ``ObserverProbe``, which calls its
hooks. Hooks must be fast and must not raise (an exception from an observer's hook is logged
and ignored).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._commands import CallCommand

__all__ = ["Observer", "CompositeObserver", "SafeObserver", "Probe", "ObserverProbe", "probe_of",
           "event_parent"]

log = logging.getLogger("flink_agents_py.runtime")


def event_parent(event_id: str) -> str | None:
    """The execution that sent the event ``event_id`` (``None`` for an input event).

    Args:
        event_id: e.g. ``r3/ask/e0`` (sent by execution ``r3/ask``).

    Returns:
        The parent identity, or ``None`` when the id has no ``/``.
    """
    return event_id.rsplit("/", 1)[0] if "/" in event_id else None


class Probe:
    """What the core reports as it runs: one method per event, called once at each site.

    The core calls its probe on the host's thread, in order, and never reads the clock for
    it. ``run_started`` and ``action_started`` return a token (anything, e.g. a clock
    reading) that the core hands back to ``run_completed`` and ``action_finished`` for the
    same run or execution (``None`` for a run started in another callback it did not keep,
    or in another process). Methods must be fast and must not raise.

    Metrics implement it directly (``AgentMetrics.probe``); every other ``Observer`` is
    reached through ``ObserverProbe``. Identities are as for ``Observer``.

    Attributes:
        reading: a clock reading the probe may keep for the hooks that follow the one which
            read it, when only the runtime's bookkeeping runs between them (e.g. an action's
            end, the dispatch of its events, the start of the action one of them triggers,
            the run's end). The core never reads it, and sets it to ``None`` at the start
            of each host callback and before it resumes an action's code, so that no kept
            reading outlives either; a probe clears it before an action's code runs
            (``action_started``, ``input_dispatched``, ``call_started``,
            ``call_finished``).
    """

    __slots__ = ("reading",)
    reading: Any

    def run_started(self, key: Any, seq: int) -> Any:
        """A run started for ``key`` (input number ``seq``); returns its token."""
        return None

    def input_dispatched(self, key: Any, seq: int, event: Any) -> Any:
        """``run_started`` then ``event_dispatched`` of the run's ``InputEvent``, in one call.

        The core calls it when a run starts from a queued input (a run restored from state
        reports neither); a probe may do both at once.

        Returns:
            ``run_started``'s token.
        """
        token = self.run_started(key, seq)
        self.event_dispatched(key, event)
        return token

    def run_completed(self, key: Any, seq: int, token: Any) -> None:
        """The run ``seq`` of ``key`` completed (``token``: ``run_started``'s, or ``None``)."""

    def event_dispatched(self, key: Any, event: Any) -> None:
        """``event`` was routed to its actions (its parent is ``event_parent(event.id)``)."""

    def output_emitted(self, key: Any, output: Any, event_id: str) -> None:
        """An ``OutputEvent``'s output left the agent."""

    def output_dispatched(self, key: Any, event: Any) -> None:
        """``event_dispatched`` then ``output_emitted`` of an ``OutputEvent``, in one call.

        The core calls it for an output it lets through as it is (no declared output type to
        check it against); a probe may count both at once.
        """
        self.event_dispatched(key, event)
        self.output_emitted(key, event.output, event.id)

    def action_started(self, key: Any, execution_id: str, action: str, reentered: bool) -> Any:
        """An action execution started (``reentered``: rebuilt after a restore); its token."""
        return None

    def action_finished(self, key: Any, execution_id: str, action: str,
                        error: BaseException | None, token: Any) -> None:
        """An action execution completed (``error`` set when it failed)."""

    def run_at_once(self, key: Any, seq: int, event: Any, execution_id: str, action: str,
                    outputs: list[Any], token: Any) -> None:
        """A run whose one action returned at once and sent only outputs, reported whole.

        Stands for what the core reports of such a run after ``input_dispatched``:
        ``action_started`` (not re-entered), ``action_finished`` (no error), then
        ``output_dispatched`` of each output, then ``run_completed`` with ``token``; this
        default calls exactly those, in that order. The core calls it (in place of them)
        only on a probe that overrides it, for a run its straight line finished
        (``runtime/core/_at_once.py``); an override promises that the action of such a run
        starts with its run: the core then does not call ``action_started`` for it, and
        hands ``token`` (``input_dispatched``'s) as the action's token to ``action_finished``
        when the action leaves the simple case and the general code finishes it.

        Args:
            key: the run's key.
            seq: its input number.
            event: its ``InputEvent`` (already reported by ``input_dispatched``).
            execution_id: the action's execution id.
            action: the action's name.
            outputs: the ``OutputEvent`` s the action sent, in order (each let through
                as it is).
            token: ``input_dispatched``'s token.
        """
        started = self.action_started(key, execution_id, action, False)
        self.action_finished(key, execution_id, action, None, started)
        for output in outputs:
            self.output_dispatched(key, output)
        self.run_completed(key, seq, token)

    def event_triggered(self, key: Any, event: Any, action: str) -> Any:
        """``event_dispatched`` then ``action_started`` of the one action it triggers.

        The core calls it, in place of those two, for an event a finishing action sent when
        it starts the one action that event triggers in the same frame
        (``runtime/core/_at_once.py``: ``dispatch_emitted``); the execution is
        ``<event id>/<action>``, not re-entered. This default calls exactly those two.

        Args:
            key: the run's key.
            event: the event.
            action: the action it triggers.

        Returns:
            ``action_started``'s token.
        """
        self.event_dispatched(key, event)
        return self.action_started(key, f"{event.id}/{action}", action, False)

    def call_started(self, key: Any, call_id: str, command: CallCommand, replayed: bool) -> None:
        """A durable call was made (see ``Observer.call_started``)."""

    def call_finished(self, key: Any, call_id: str, ok: bool, result: Any) -> None:
        """A durable call's outcome was recorded (see ``Observer.call_finished``)."""

    def replay_finding(self, key: Any, execution_id: str, kind: str, message: str) -> None:
        """A replay went on past something that may be wrong (see ``Observer``)."""


class ObserverProbe(Probe):
    """The probe of an ``Observer``: each event becomes the observer's hook.

    Args:
        observer: the observer (made safe by the caller when its hooks may raise).
    """

    __slots__ = ("observer",)

    def __init__(self, observer: Observer) -> None:
        self.observer = observer

    def run_started(self, key: Any, seq: int) -> Any:
        self.observer.run_started(key, seq)
        return None

    def run_completed(self, key: Any, seq: int, token: Any) -> None:
        self.observer.run_completed(key, seq)

    def event_dispatched(self, key: Any, event: Any) -> None:
        self.observer.event_dispatched(key, event, event_parent(event.id))

    def output_emitted(self, key: Any, output: Any, event_id: str) -> None:
        self.observer.output_emitted(key, output, event_id)

    def action_started(self, key: Any, execution_id: str, action: str, reentered: bool) -> Any:
        self.observer.action_started(key, execution_id, action, reentered)
        return None

    def action_finished(self, key: Any, execution_id: str, action: str,
                        error: BaseException | None, token: Any) -> None:
        self.observer.action_finished(key, execution_id, action, error)

    def call_started(self, key: Any, call_id: str, command: CallCommand, replayed: bool) -> None:
        self.observer.call_started(key, call_id, command, replayed)

    def call_finished(self, key: Any, call_id: str, ok: bool, result: Any) -> None:
        self.observer.call_finished(key, call_id, ok, result)

    def replay_finding(self, key: Any, execution_id: str, kind: str, message: str) -> None:
        self.observer.replay_finding(key, execution_id, kind, message)


def probe_of(observer: Observer | None) -> Probe | None:
    """The probe the core reports to for ``observer`` (``None``: nothing observes it).

    An observer that offers its own ``probe`` (metrics) is reached through it; any other
    through an ``ObserverProbe``, with its hooks made safe unless ``hooks_never_raise``.

    Returns:
        The probe, or ``None``.
    """
    if observer is None:
        return None
    own = getattr(observer, "probe", None)
    if own is not None:
        return own  # type: ignore[no-any-return]
    return ObserverProbe(observer if observer.hooks_never_raise else SafeObserver(observer))


class Observer:
    """Base observer: every hook does nothing. Override what you need.

    Identities are those of the durability scheme: an event id (``r3/ask/e0``), an action
    execution id (``<event id>/<action>``) and a call id (``<execution id>/c<ordinal>``); a
    parent is the identity one level up (an event's parent is the execution that sent it).

    Attributes:
        hooks_never_raise: set ``True`` on an observer whose hooks catch (and log) their own
            exceptions: the core then calls it directly instead of through ``SafeObserver``.
        probe: a ``Probe`` the core reports to instead of this observer's hooks (used when
            this observer is the core's only one; ``None``: the core reaches the hooks
            through an ``ObserverProbe``).
    """

    hooks_never_raise = False
    probe: Probe | None = None

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
