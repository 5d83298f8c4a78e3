"""``MetricsProbe``: ``AgentMetrics`` as the core's probe, counting each event directly.

When metrics are a core's only observer, the core reports to this probe instead of the
metrics' ``Observer`` hooks: events, outputs, runs, actions, chat events and durable calls
are counted inline (an echo record costs one method call per event and no per-key
bookkeeping). The clock is read at each start and end the runtime cannot vouch for, and its
reading is the token the core hands back at the end; hooks that follow an action's end with
only the runtime's bookkeeping between (the dispatch of its events, the start of the actions
they trigger, the run's end) share that end's reading (``Probe.reading``). Keys with open
calls or chats (``AgentMetrics._keys``) keep a track for the run: a list ``[chats, calls,
actions]`` (``new_track``) of three dicts, made with no call and dropped at the run's end.
The metrics' own direct hooks (``AgentMetrics`` beside other observers) count through the
same methods, so both paths count alike. Failed actions, abandoned calls and replay
findings go through the metrics' own bookkeeping.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, get_args

from ..api.internal import BuiltinEventType
from ..runtime import CallKind, Probe
from ..runtime.internal import CallCommand, event_parent
from ._ids import CHAT_ACTION, action_parent
from ._labels import add_label
from ._tracking import _KINDS

if TYPE_CHECKING:
    from ._metrics import AgentMetrics

__all__ = ["MetricsProbe", "new_track"]

_NO_CHAT: tuple[None, None, None] = (None, None, None)
_MODEL_CALL = CallKind.MODEL
"""Compared by identity first: a ``CallKind`` hashes in Python (``Enum.__hash__``)."""
_CHAT_REQUEST = BuiltinEventType("ChatRequestEvent")
_CHAT_RESPONSE = BuiltinEventType("ChatResponseEvent")
_TOOL_REQUEST = BuiltinEventType("ToolRequestEvent")
"""The built-in types (one object a name), compared by identity first: ``==`` on one is a
Python call (``BuiltinEventType.__eq__``), two or three a chat event otherwise."""
_FIRST_MODEL_CALL = f"/{CHAT_ACTION}/c0"
"""How the usual model call's id ends: the first call of the chat action its event
triggered (``<event id>/_chat_model_action/c0``)..."""
_FIRST_CUT = -len(_FIRST_MODEL_CALL)
"""... and where its event id ends (compared by slice: no call)."""


def new_track() -> list[dict[str, Any]]:
    """A key's track for its run in flight: ``[chats, calls, actions]``.

    ``chats``: ``event id -> (chat id, model, start)`` for the chat's request (``start``:
    the clock when it was dispatched, ``None`` once timed) and each chat or tool event of
    it (``start`` ``None``); ``calls``: the executed durable calls in flight, ``call id ->
    (start, kind, label)``; ``actions``: the executions started, ``execution id -> start``
    (only ``AgentMetrics``' own hooks, which get no token back, keep them). The hot paths
    write the literal ``[{}, {}, {}]`` instead of calling this.

    Returns:
        An empty track.
    """
    return [{}, {}, {}]


def _reading_their_call() -> frozenset[type]:
    """The command classes whose ``kind`` and ``target`` are those of their ``call``.

    Their properties are read off the call directly (two Python calls fewer per call).

    Returns:
        The classes.
    """
    classes = get_args(CallCommand)
    kind, target = classes[0].kind, classes[0].target
    return frozenset(c for c in classes if c.kind is kind and c.target is target)


_OF_CALL = _reading_their_call()


class MetricsProbe(Probe):
    """The probe of one ``AgentMetrics`` (see the module docstring).

    Args:
        metrics: the metrics it counts into.
        hooked_types: event types whose chat bookkeeping the metrics keep.
        on_failure: logs a failure of the metrics' bookkeeping (never raised to the core).
    """

    __slots__ = ("metrics", "counters", "events_by_type", "hooked_types", "clock", "tracked",
                 "actions_executed", "action_latency", "run_latency", "run_values",
                 "on_failure", "chats_started", "chat_latency",
                 "push_runs", "push_due")

    def __init__(self, metrics: AgentMetrics, hooked_types: frozenset[str],
                 on_failure: Callable[[str], None]) -> None:
        self.metrics = metrics
        self.counters = metrics._counts  # (``events_processed``, ``runs_in_flight``: worked
        # out when ``metrics.counters`` is read, not counted here)
        self.events_by_type = metrics.labelled["events_processed_by_type"]
        self.hooked_types = hooked_types
        self.clock: Callable[[], float] = metrics.clock  # kept in step by ``AgentMetrics.clock``
        self.reading: float | None = None  # (``Probe.reading``: set by ``action_finished``)
        self.tracked: dict[Any, list[dict[str, Any]]] = metrics._keys  # keys with open calls
        # or chats: their tracks (``new_track``)
        self.actions_executed = metrics.labelled["actions_executed"]
        self.action_latency = metrics.latency["action_latency_ms"]
        self.chats_started = metrics.labelled["chats"]
        self.chat_latency = metrics.latency["chat_latency_ms"]
        runs = metrics.latency["run_latency_ms"]
        self.run_latency = runs.get(None) or metrics._distribution(runs, None)
        self.run_values = self.run_latency.values  # (the same list for its life)
        self.on_failure = on_failure
        self.push_runs: float = math.inf
        """The next push is due when ``runs_completed`` reaches this..."""
        self.push_due = math.inf
        """... or the clock this, whichever comes first (set at each push)."""

    def run_started(self, key: Any, seq: int) -> Any:
        """Count a run that started; its token is the clock's reading."""
        self.counters["runs_started"] += 1
        tracked = self.tracked
        if tracked and key in tracked:  # (a track its last run left: dropped)
            del tracked[key]
        self.reading = None
        return self.clock()

    def input_dispatched(self, key: Any, seq: int, event: Any) -> Any:
        """``run_started`` and ``event_dispatched`` of its ``InputEvent``, counted at once."""
        now = self.clock()  # the token: the run's start
        self.reading = None  # (its action's code may run next, with no hook before it)
        self.counters["runs_started"] += 1
        tracked = self.tracked
        if tracked and key in tracked:  # (a track its last run left: dropped)
            del tracked[key]
        etype = event.type
        if etype in self.hooked_types:  # (a chat or tool event's type: its bookkeeping too)
            self.event_dispatched(key, event)
        else:
            by = self.events_by_type
            try:
                by[etype] += 1
            except KeyError:
                add_label(by, etype)
        return now

    def run_completed(self, key: Any, seq: int, token: Any) -> None:
        """Count a completed run (``token``: the clock at its start, or ``None``).

        Its end is the reading its last action's end kept (``Probe.reading``), else the
        clock's. Pushes to Flink when ``push_runs`` runs have completed or the clock passed
        ``push_due`` (``AgentMetrics.flush`` sets both; infinite without a metric group).
        """
        now = self.reading
        if now is None:
            now = self.clock()
        tracked = self.tracked
        if tracked and key in tracked:  # its track is dropped; its calls still open abandoned
            t = tracked[key]
            del tracked[key]
            if t[1]:
                try:
                    self.metrics._retire(t, now)
                except Exception:  # noqa: BLE001 - metrics never fail the agent
                    self.on_failure("run_completed")
                    return
        counters = self.counters  # (``runs_in_flight``: started less timed, ``counters``)
        n = counters["runs_completed"] + 1
        counters["runs_completed"] = n
        if token is not None:
            self.run_values.append((now - token) * 1000.0)
            runs = self.run_latency
            runs.room -= 1
            if runs.room <= 0:
                runs.fold()
        if n < self.push_runs and now < self.push_due:
            return
        try:  # ``AgentMetrics._maybe_flush`` inline, with the reading above
            self.metrics.flush()
        except Exception:  # noqa: BLE001
            self.on_failure("run_completed")

    def event_triggered(self, key: Any, event: Any, action: str | None = None, *,
                        parent: str | None = None) -> Any:
        """Count ``event``, keep a chat event's bookkeeping, and start ``action`` if given.

        With ``action``, that action's start is counted too (``Probe.event_triggered``).
        This is also the probe's ``event_dispatched`` (the same method, called without an
        action). The chat bookkeeping is ``TrackingObserver.event_dispatched``'s, as far as
        metrics need it: each chat event's id is mapped to its chat and model, so that a
        model call (made by the chat action the event triggers) is labelled by the chat's
        setup; a chat is counted when requested and timed when answered. Each time is the
        reading an action's end kept (``Probe.reading``), else the clock's.

        Args:
            key: the run's key.
            event: the event.
            action: the one action it triggers, started now (``None``: only dispatched).
            parent: the execution that sent it (``None``: ``event_parent(event.id)``).

        Returns:
            The action's token (its start), or ``None`` without an action.
        """
        etype = event.type
        by = self.events_by_type  # (their sum: ``events_processed``)
        try:  # (a type seen before, the usual case: no call)
            by[etype] += 1
        except KeyError:
            add_label(by, etype)
        if etype in self.hooked_types:
            try:
                tracked = self.tracked
                if key in tracked:
                    chats = tracked[key][0]
                else:  # (``new_track``)
                    chats = {}
                    tracked[key] = [chats, {}, {}]
                # (``is`` first; ``==`` only for a type that is no built-in object)
                if etype is _CHAT_REQUEST or (
                        type(etype) is not BuiltinEventType and etype == "ChatRequestEvent"):
                    chat: str | None = event.id
                    try:
                        model = event.model
                    except AttributeError:
                        model = None
                    now = self.reading
                    if now is None:
                        now = self.clock()
                    chats[chat] = (chat, model, now)  # type: ignore[index]
                    label = model or "?"
                    started = self.chats_started
                    try:
                        started[label] += 1
                    except KeyError:
                        add_label(started, label)
                elif etype is _CHAT_RESPONSE or (  # no action it triggers needs its chat
                        type(etype) is not BuiltinEventType and etype == "ChatResponseEvent"):
                    try:
                        chat = event.request_id
                    except AttributeError:
                        chat = None
                    asked = chats.get(chat, _NO_CHAT) if chat else None
                    if asked is not None:
                        label = asked[1] or "?"
                        try:
                            error = event.error
                        except AttributeError:
                            error = None
                        if error is not None:
                            self.metrics._inc("chats_failed", 1, label)
                        start = asked[2]
                        if start is not None:  # (timed once)
                            chats[chat] = (asked[0], asked[1], None)  # type: ignore[index]
                            now = self.reading
                            if now is None:
                                now = self.clock()
                            try:
                                d = self.chat_latency[label]
                            except KeyError:
                                d = self.metrics._distribution(self.chat_latency, label)
                            d.values.append((now - start) * 1000.0)
                            d.room -= 1
                            if d.room <= 0:
                                d.fold()
                else:
                    if etype is _TOOL_REQUEST or (
                            type(etype) is not BuiltinEventType and etype == "ToolRequestEvent"):
                        parent = parent or event_parent(event.id)
                        origin = action_parent(parent, CHAT_ACTION) if parent else None
                        chat, model, _ = chats.get(origin, _NO_CHAT) if origin else _NO_CHAT
                        model = model or getattr(event, "model", None)
                    else:  # ToolResponseEvent
                        chat, model, _ = chats.get(getattr(event, "request_id", ""), _NO_CHAT)
                    if chat is not None or model is not None:
                        chats[event.id] = (chat, model, None)
            except Exception:  # noqa: BLE001
                self.on_failure("event_dispatched")
        if action is None:
            return None
        now = self.reading  # (the end of the action that sent it, ``Probe.reading``)
        if now is None:
            return self.clock()
        self.reading = None  # (the action's code runs next)
        return now

    event_dispatched = event_triggered

    def output_emitted(self, key: Any, output: Any, event_id: str) -> None:
        """Count an output that left the agent."""
        self.counters["outputs_emitted"] += 1

    def output_dispatched(self, key: Any, event: Any) -> None:
        """Count an ``OutputEvent`` and its output (``event_dispatched``, ``output_emitted``)."""
        etype = event.type
        if etype in self.hooked_types:  # (a chat event's type: its bookkeeping too)
            self.event_dispatched(key, event)
        else:
            by = self.events_by_type
            try:
                by[etype] += 1
            except KeyError:
                add_label(by, etype)
        self.counters["outputs_emitted"] += 1

    def action_started(self, key: Any, execution_id: str, action: str, reentered: bool) -> Any:
        """Count a re-entered execution; the token is its start: the reading kept, if any."""
        now = self.reading  # (the end of the action that sent its event, ``Probe.reading``)
        if now is None:
            now = self.clock()
        else:
            self.reading = None  # (its code runs next)
        if reentered:
            try:
                self.metrics._inc("actions_reentered", 1, action)
            except Exception:  # noqa: BLE001
                self.on_failure("action_started")
        return now

    def action_finished(self, key: Any, execution_id: str, action: str,
                        error: BaseException | None, token: Any) -> None:
        """Count a completed execution and its time (``token``: the clock at its start).

        The reading is kept for what follows (``Probe.reading``) unless it failed (its
        failure is logged before its run can end).
        """
        now = self.clock()
        tracked = self.tracked
        if error is not None or (tracked and key in tracked and tracked[key][1]):
            self.reading = None
            try:  # a failed action, or one of a key with calls in flight
                self.metrics._action_ended(tracked.get(key), execution_id, action, error,
                                           token, now)
            except Exception:  # noqa: BLE001
                self.on_failure("action_finished")
            return
        self.reading = now
        by = self.actions_executed  # the usual case, inline (nothing of it to abandon)
        try:  # (an action seen before: no call)
            by[action] += 1
        except KeyError:
            add_label(by, action)
        try:
            d = self.action_latency[action]
        except KeyError:
            d = self.metrics._distribution(self.action_latency, action)
        d.values.append((now - token) * 1000.0)
        d.room -= 1
        if d.room <= 0:
            d.fold()

    def run_at_once(self, key: Any, seq: int, event: Any, execution_id: str, action: str,
                    outputs: list[Any], token: Any) -> None:
        """Count a run whose one action returned at once, and time it, with one clock read.

        What ``action_finished``, ``output_dispatched`` of each output and ``run_completed``
        count, in one call: the action and its run both started at ``token`` (the core
        starts the action right after reporting the run's start, with no clock read of its
        own: ``Probe.run_at_once``) and ended at one reading, so ``action_latency_ms`` and
        ``run_latency_ms`` get the same measured value for such a run.
        """
        if token is None:  # (not timed: each hook)
            Probe.run_at_once(self, key, seq, event, execution_id, action, outputs, token)
            return
        tracked = self.tracked
        if tracked and key in tracked:  # (its input's chat bookkeeping: each hook but the start)
            self.action_finished(key, execution_id, action, None, token)
            for output in outputs:
                self.output_dispatched(key, output)
            self.run_completed(key, seq, token)
            return
        now = self.clock()
        ms = (now - token) * 1000.0
        by = self.actions_executed  # ``action_finished``'s usual case
        try:
            by[action] += 1
        except KeyError:
            add_label(by, action)
        try:
            d = self.action_latency[action]
        except KeyError:
            d = self.metrics._distribution(self.action_latency, action)
        d.values.append(ms)
        d.room -= 1
        if d.room <= 0:
            d.fold()
        by = self.events_by_type  # ``output_dispatched``'s
        hooked = self.hooked_types
        emitted = 0
        for output in outputs:
            emitted += 1
            etype = output.type
            if etype in hooked:
                self.event_dispatched(key, output)
            else:
                try:
                    by[etype] += 1
                except KeyError:
                    add_label(by, etype)
        counters = self.counters
        counters["outputs_emitted"] += emitted
        if tracked and key in tracked:  # an output's chat bookkeeping: its general end
            self.reading = now
            self.run_completed(key, seq, token)
            return
        n = counters["runs_completed"] + 1  # ``run_completed``'s, with the reading above
        counters["runs_completed"] = n
        self.run_values.append(ms)
        runs = self.run_latency
        runs.room -= 1
        if runs.room <= 0:
            runs.fold()
        if n < self.push_runs and now < self.push_due:
            return
        try:
            self.metrics.flush()
        except Exception:  # noqa: BLE001
            self.on_failure("run_completed")

    def call_started(self, key: Any, call_id: str, command: Any, replayed: bool) -> None:
        """Count a durable call; an executed one is kept open on its key's track.

        A model call is labelled by its chat's setup (else by its target), a tool or
        sub-agent call by its target; a function's name is not a label of any metric.
        """
        self.reading = None  # (called from its action's step: its code goes on)
        try:
            counters = self.counters
            if replayed:
                counters["durable_calls_replayed"] += 1
                return
            counters["durable_calls_executed"] += 1
            counters["calls_in_flight"] += 1
            if type(command) in _OF_CALL:  # its kind and target: its call's
                of = command.call
                call_kind = of.kind
            else:
                of = command
                call_kind = getattr(command, "kind", None)
            tracked = self.tracked
            if key in tracked:
                t = tracked[key]
            else:  # (``new_track``)
                t = tracked[key] = [{}, {}, {}]
            name: str | None = None
            if call_kind is _MODEL_CALL:
                kind = "chat_model"
                chats = t[0]
                if chats:  # the chat action's event: ``<event>/<action>/c<n>``
                    if call_id[_FIRST_CUT:] == _FIRST_MODEL_CALL:  # (its first, the usual)
                        event_id = call_id[:_FIRST_CUT]
                    else:  # ``call_id.rsplit("/", 2)[0]``, no list
                        last = call_id.rfind("/")
                        before = call_id.rfind("/", 0, last) if last > 0 else -1
                        event_id = call_id[:before] if before >= 0 else \
                            call_id[:last] if last >= 0 else call_id
                    name = chats.get(event_id, _NO_CHAT)[1]
                name = name or getattr(of, "target", None) or None
            else:
                kind = _KINDS.get(call_kind, "function")
                if kind != "function":
                    name = getattr(of, "target", None) or None
            t[1][call_id] = (self.clock(), kind, name)
        except Exception:  # noqa: BLE001
            self.on_failure("call_started")

    def call_finished(self, key: Any, call_id: str, ok: bool, result: Any) -> None:
        """Count a durable call that ended (``result``: its recorded result when ok).

        Pushes to Flink when due (as ``run_completed``), with this hook's reading.
        """
        now = self.clock()
        self.reading = None  # (its action resumes next)
        try:
            tracked = self.tracked
            entry = tracked[key][1].pop(call_id, None) if key in tracked else None
            status = "ok" if ok else "failed"
            metrics = self.metrics
            if entry is None:  # started before a restore (or replayed): its start not seen here
                metrics._count_call("unknown", None, status, result, None)
            else:
                start, kind, name = entry
                self.counters["calls_in_flight"] -= 1
                metrics._count_call(kind, name, status, result, (now - start) * 1000.0)
            if self.counters["runs_completed"] >= self.push_runs or now >= self.push_due:
                metrics.flush()  # (``_maybe_flush``, with the reading above)
        except Exception:  # noqa: BLE001
            self.on_failure("call_finished")

    def replay_finding(self, key: Any, execution_id: str, kind: str, message: str) -> None:
        """The metrics' ``replay_finding``."""
        try:
            self.metrics.replay_finding(key, execution_id, kind, message)
        except Exception:  # noqa: BLE001
            self.on_failure("replay_finding")
