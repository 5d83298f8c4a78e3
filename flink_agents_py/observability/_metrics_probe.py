"""``MetricsProbe``: ``AgentMetrics`` as the core's probe, counting each event directly.

When metrics are a core's only observer, the core reports to this probe instead of the
metrics' ``Observer`` hooks: events, outputs, runs, actions, chat events and durable calls
are counted inline (an echo record costs one method call per event and no per-key
bookkeeping), the clock is read once at each start and its reading is the token the core
hands back at the end. Keys with open calls or chats (``AgentMetrics._keys``) keep a track
(``_KeyTrack``): the chat and model of each chat event, the executed calls in flight. The
metrics' own direct hooks (``AgentMetrics`` beside other observers) count through the same
methods, so both paths count alike. Failed actions, abandoned calls and replay findings go
through the metrics' own bookkeeping.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, get_args

from ..api.internal import BuiltinEventType
from ..runtime import CallKind, Probe
from ..runtime.internal import CallCommand, event_parent
from ._ids import CHAT_ACTION, action_parent
from ._tracking import _KINDS, _KeyTrack

if TYPE_CHECKING:
    from ._metrics import AgentMetrics

__all__ = ["MetricsProbe"]

_NO_CHAT: tuple[None, None] = (None, None)
_SPARE_TRACKS = 1024
"""The most per-run tracks kept for reuse after their runs completed."""
_MODEL_CALL = CallKind.MODEL
"""Compared by identity first: a ``CallKind`` hashes in Python (``Enum.__hash__``)."""
_CHAT_REQUEST = BuiltinEventType("ChatRequestEvent")
_CHAT_RESPONSE = BuiltinEventType("ChatResponseEvent")
_TOOL_REQUEST = BuiltinEventType("ToolRequestEvent")
"""The built-in types (one object a name), compared by identity first: ``==`` on one is a
Python call (``BuiltinEventType.__eq__``), two or three a chat event otherwise."""


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
                 "run_limit", "on_failure", "chats_started", "chat_latency", "spare",
                 "push_runs", "push_due")

    def __init__(self, metrics: AgentMetrics, hooked_types: frozenset[str],
                 on_failure: Callable[[str], None]) -> None:
        self.metrics = metrics
        self.counters = metrics._counts  # (``events_processed``, ``runs_in_flight``: worked
        # out when ``metrics.counters`` is read, not counted here)
        self.events_by_type = metrics.labelled["events_processed_by_type"]
        self.hooked_types = hooked_types
        self.clock: Callable[[], float] = metrics.clock  # kept in step by ``AgentMetrics.clock``
        self.tracked = metrics._keys  # keys with open calls or chats
        self.spare = metrics._spare  # clean tracks for reuse
        self.actions_executed = metrics.labelled["actions_executed"]
        self.action_latency = metrics.latency["action_latency_ms"]
        self.chats_started = metrics.labelled["chats"]
        self.chat_latency = metrics.latency["chat_latency_ms"]
        runs = metrics.latency["run_latency_ms"]
        self.run_latency = runs.get(None) or metrics._distribution(runs, None)
        self.run_values = self.run_latency.values  # (the same list for its life)
        self.run_limit = self.run_latency.limit
        self.on_failure = on_failure
        self.push_runs: float = math.inf
        """The next push is due when ``runs_completed`` reaches this..."""
        self.push_due = math.inf
        """... or the clock this, whichever comes first (set at each push)."""

    def run_started(self, key: Any, seq: int) -> Any:
        """Count a run that started; its token is the clock's reading."""
        self.counters["runs_started"] += 1
        if self.tracked:
            self.tracked.pop(key, None)
        return self.clock()

    def input_dispatched(self, key: Any, seq: int, event: Any) -> Any:
        """``run_started`` and ``event_dispatched`` of its ``InputEvent``, counted at once."""
        now = self.clock()  # the token: the run's start
        self.counters["runs_started"] += 1
        if self.tracked:
            self.tracked.pop(key, None)
        etype = event.type
        if etype in self.hooked_types:  # (a chat or tool event's type: its bookkeeping too)
            self.event_dispatched(key, event)
        else:
            by = self.events_by_type
            try:
                by[etype] += 1
            except KeyError:
                by[etype] = 1
        return now

    def run_completed(self, key: Any, seq: int, token: Any) -> None:
        """Count a completed run (``token``: the clock at its start, or ``None``).

        Pushes to Flink when ``push_runs`` runs have completed or the clock passed
        ``push_due`` (``AgentMetrics.flush`` sets both; infinite without a metric group).
        """
        tracked = self.tracked
        if tracked:
            t = tracked.pop(key, None)
            if t is not None:  # its calls still open are abandoned, the track reused
                c = t._chats
                if t.calls or t.open or t.actions or c is None or c.chat_rounds:
                    try:
                        self.metrics._retire(key, t)
                    except Exception:  # noqa: BLE001 - metrics never fail the agent
                        self.on_failure("run_completed")
                        return
                elif len(self.spare) < _SPARE_TRACKS:  # ``_retire``, the usual case inline
                    c.event_chat.clear()
                    if c.chat_started:  # a chat never answered
                        c.chat_started.clear()
                    self.spare.append(t)
        counters = self.counters  # (``runs_in_flight``: started less timed, ``counters``)
        n = counters["runs_completed"] + 1
        counters["runs_completed"] = n
        if token is not None:
            now = self.clock()
            values = self.run_values
            values.append((now - token) * 1000.0)
            if len(values) >= self.run_limit:
                self.run_latency.fold()
            if n < self.push_runs and now < self.push_due:
                return
        elif n < self.push_runs and self.clock() < self.push_due:  # (not timed: restored)
            return
        try:  # ``AgentMetrics._maybe_flush`` inline, with the clock read above
            self.metrics.flush()
        except Exception:  # noqa: BLE001
            self.on_failure("run_completed")

    def event_dispatched(self, key: Any, event: Any, parent: str | None = None) -> None:
        """Count ``event`` by type; keep the chat bookkeeping of chat events.

        The chat bookkeeping is ``TrackingObserver.event_dispatched``'s, as far as metrics
        need it: each chat event's id is mapped to its chat and model, so that a model call
        (made by the chat action the event triggers) is labelled by the chat's setup; a chat
        is counted when requested and timed when answered.

        Args:
            key: the run's key.
            event: the event.
            parent: the execution that sent it (``None``: ``event_parent(event.id)``).
        """
        etype = event.type
        by = self.events_by_type  # (their sum: ``events_processed``)
        try:  # (a type seen before, the usual case: no call)
            by[etype] += 1
        except KeyError:
            by[etype] = 1
        if etype not in self.hooked_types:
            return
        try:
            tracked = self.tracked
            t = tracked.get(key)
            if t is None:  # ``AgentMetrics._track``
                spare = self.spare
                t = tracked[key] = spare.pop() if spare else _KeyTrack()
            c = t._chats or t._chat()
            event_chat = c.event_chat
            # (``is`` first; ``==`` only for a type that is no built-in object)
            if etype is _CHAT_REQUEST or (
                    type(etype) is not BuiltinEventType and etype == "ChatRequestEvent"):
                chat: str | None = event.id
                model = getattr(event, "model", None)
                c.chat_started[chat] = self.clock()  # type: ignore[index]
                label = model or "?"
                chats = self.chats_started
                chats[label] = chats.get(label, 0) + 1
            elif etype is _CHAT_RESPONSE or (  # no action it triggers needs its chat
                    type(etype) is not BuiltinEventType and etype == "ChatResponseEvent"):
                chat = getattr(event, "request_id", None)
                if not chat:
                    return
                model = event_chat.get(chat, _NO_CHAT)[1]
                start = c.chat_started.pop(chat, None)
                label = model or "?"
                if getattr(event, "error", None) is not None:
                    self.metrics._inc("chats_failed", 1, label)
                if start is not None:
                    d = self.chat_latency.get(label) or self.metrics._distribution(
                        self.chat_latency, label)
                    values = d.values
                    values.append((self.clock() - start) * 1000.0)
                    if len(values) >= d.limit:
                        d.fold()
                return
            elif etype is _TOOL_REQUEST or (
                    type(etype) is not BuiltinEventType and etype == "ToolRequestEvent"):
                parent = parent or event_parent(event.id)
                origin = action_parent(parent, CHAT_ACTION) if parent else None
                chat, model = event_chat.get(origin, _NO_CHAT) if origin else _NO_CHAT
                model = model or getattr(event, "model", None)
            else:  # ToolResponseEvent
                chat, model = event_chat.get(getattr(event, "request_id", ""), _NO_CHAT)
            if chat is not None or model is not None:
                event_chat[event.id] = (chat, model)
        except Exception:  # noqa: BLE001
            self.on_failure("event_dispatched")

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
                by[etype] = 1
        self.counters["outputs_emitted"] += 1

    def action_started(self, key: Any, execution_id: str, action: str, reentered: bool) -> Any:
        """Count a re-entered execution; the token is the clock's reading."""
        if reentered:
            try:
                self.metrics._inc("actions_reentered", 1, action)
            except Exception:  # noqa: BLE001
                self.on_failure("action_started")
        return self.clock()

    def action_finished(self, key: Any, execution_id: str, action: str,
                        error: BaseException | None, token: Any) -> None:
        """Count a completed execution and its time (``token``: the clock at its start)."""
        if error is not None or self.tracked:
            t = self.tracked.get(key)
            if error is not None or (t is not None and (t.calls or t.open)):
                try:  # a failed action, or one of a key with calls in flight
                    self.metrics._action_ended(key, t, execution_id, action, error, token)
                except Exception:  # noqa: BLE001
                    self.on_failure("action_finished")
                return
        by = self.actions_executed  # the usual case, inline (nothing of it to abandon)
        try:  # (an action seen before: no call)
            by[action] += 1
        except KeyError:
            by[action] = 1
        try:
            d = self.action_latency[action]
        except KeyError:
            d = self.metrics._distribution(self.action_latency, action)
        values = d.values
        values.append((self.clock() - token) * 1000.0)
        if len(values) >= d.limit:
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
            by[action] = 1
        try:
            d = self.action_latency[action]
        except KeyError:
            d = self.metrics._distribution(self.action_latency, action)
        values = d.values
        values.append(ms)
        if len(values) >= d.limit:
            d.fold()
        by = self.events_by_type  # ``output_dispatched``'s
        hooked = self.hooked_types
        for output in outputs:
            etype = output.type
            if etype in hooked:
                self.event_dispatched(key, output)
            else:
                try:
                    by[etype] += 1
                except KeyError:
                    by[etype] = 1
        counters = self.counters
        counters["outputs_emitted"] += len(outputs)
        if tracked and key in tracked:  # an output's chat bookkeeping: its general end
            self.run_completed(key, seq, token)
            return
        n = counters["runs_completed"] + 1  # ``run_completed``'s, with the reading above
        counters["runs_completed"] = n
        values = self.run_values
        values.append(ms)
        if len(values) >= self.run_limit:
            self.run_latency.fold()
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
        try:
            counters = self.counters
            if replayed:
                counters["durable_calls_replayed"] += 1
                return
            counters["durable_calls_executed"] += 1
            counters["calls_in_flight"] += 1
            of = command.call if type(command) in _OF_CALL else command  # kind, target
            call_kind = getattr(of, "kind", None)
            kind = "chat_model" if call_kind is _MODEL_CALL else _KINDS.get(
                call_kind, "function")  # type: ignore[arg-type]
            name: str | None = None
            tracked = self.tracked
            t = tracked.get(key)
            if t is None:  # ``AgentMetrics._track``
                spare = self.spare
                t = tracked[key] = spare.pop() if spare else _KeyTrack()
            if kind == "chat_model":
                c = t._chats
                if c is not None:  # the chat action's event: ``<event>/<action>/c<n>``
                    last = call_id.rfind("/")  # ``call_id.rsplit("/", 2)[0]``, no list
                    before = call_id.rfind("/", 0, last) if last > 0 else -1
                    event_id = call_id[:before] if before >= 0 else \
                        call_id[:last] if last >= 0 else call_id
                    name = c.event_chat.get(event_id, _NO_CHAT)[1]
                name = name or getattr(of, "target", None) or None
            elif kind != "function":
                name = getattr(of, "target", None) or None
            t.open[call_id] = (self.clock(), kind, name)
        except Exception:  # noqa: BLE001
            self.on_failure("call_started")

    def call_finished(self, key: Any, call_id: str, ok: bool, result: Any) -> None:
        """Count a durable call that ended (``result``: its recorded result when ok)."""
        try:
            t = self.tracked.get(key)
            entry = t.open.pop(call_id, None) if t is not None else None
            status = "ok" if ok else "failed"
            if entry is None:  # started before a restore (or replayed): its start not seen here
                self.metrics._count_call("unknown", None, status, result, None)
            else:
                start, kind, name = entry
                self.counters["calls_in_flight"] -= 1
                self.metrics._count_call(kind, name, status, result,
                                         (self.clock() - start) * 1000.0)
        except Exception:  # noqa: BLE001
            self.on_failure("call_finished")

    def replay_finding(self, key: Any, execution_id: str, kind: str, message: str) -> None:
        """The metrics' ``replay_finding``."""
        try:
            self.metrics.replay_finding(key, execution_id, kind, message)
        except Exception:  # noqa: BLE001
            self.on_failure("replay_finding")
