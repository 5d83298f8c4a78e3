"""``TrackingObserver``: the core's hooks turned into richer callbacks with timings.

The core reports bare identities; this base class keeps, per key and only for the run in
flight, what is needed to say more: when each run, action, chat and durable call started
(read from the observer's own clock), which chat (and chat model setup) a model call belongs
to and which round of that chat it is, and which calls are still open. It forgets a key's
bookkeeping when the run completes, so its memory is bounded by the work in flight.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..api.internal import BuiltinEventType
from ..runtime import CallKind, Observer
from ._ids import CHAT_ACTION, action_parent, call_parent

__all__ = ["TrackingObserver", "CallInfo"]


_KINDS = {
    CallKind.FUNCTION: "function",
    CallKind.CHAT: "chat",
    CallKind.MODEL: "chat_model",
    CallKind.TOOL: "tool",
    CallKind.SUBAGENT: "subagent",
    CallKind.SUBAGENT_DEFERRED: "subagent",
    CallKind.SUBAGENT_RESULT: "subagent",
    # the framework's requests around an async sub-agent, and a refused submit: functions
    CallKind.SUBAGENT_SUBMIT: "function",
    CallKind.SUBAGENT_CANCEL: "function",
    CallKind.SUBAGENT_REFUSED: "function",
}
"""``CallInfo.kind`` of each ``CallKind``."""


def _kind_and_name(command: Any) -> tuple[str, str | None]:
    """``CallInfo``'s kind and name from the call's command (its kind and target)."""
    kind = _KINDS.get(getattr(command, "kind", None), "function")  # type: ignore[arg-type]
    if kind == "function":
        return kind, str(command) or None
    return kind, getattr(command, "target", None) or None


@dataclass
class CallInfo:
    """A durable call as the observers see it.

    Attributes:
        call_id: its identity (``<execution id>/c<n>``).
        parent: the action execution that made it.
        function: the call's display name (``chat:<setup>``, ``subagent:<name>``,
            ``module:qualname``...).
        kind: ``chat`` / ``chat_model`` / ``tool`` / ``subagent`` / ``function``, from the
            call's command (its ``CallKind``).
        name: the setup, model, tool, sub-agent or function name.
        call_kind: the call's ``CallKind`` (``None`` for a call started before a restore).
        replayed: answered from its record, not executed.
        model: for a model call, the chat model setup it went to.
        chat: for a model call, the id of its chat's ``ChatRequestEvent``.
        round: for a model call, its number within the chat (1, 2, ...).
        started: the observer's clock when it started.
    """

    call_id: str
    parent: str
    function: str
    kind: str
    name: str | None
    replayed: bool
    model: str | None = None
    chat: str | None = None
    round: int | None = None
    started: float = 0.0
    call_kind: CallKind | None = None


class _ChatTrack:
    __slots__ = ("event_chat", "chat_started", "chat_rounds")

    def __init__(self) -> None:
        self.event_chat: dict[str, tuple[str | None, str | None]] = {}
        self.chat_started: dict[str, float] = {}
        self.chat_rounds: dict[str, int] = {}


class _KeyTrack:
    """One key's run in flight; what only chats need is made when a chat is seen."""

    __slots__ = ("run_started", "actions", "calls", "_chats")

    def __init__(self) -> None:
        self.run_started: float | None = None
        self.actions: dict[str, float] = {}
        self.calls: dict[str, CallInfo] = {}
        self._chats: _ChatTrack | None = None

    def _chat(self) -> _ChatTrack:
        c = self._chats
        if c is None:
            c = self._chats = _ChatTrack()
        return c

    @property
    def event_chat(self) -> dict[str, tuple[str | None, str | None]]:
        """The chat and model each event belongs to, by event id."""
        return self._chat().event_chat

    @property
    def chat_started(self) -> dict[str, float]:
        """When each open chat started, by chat id."""
        return self._chat().chat_started

    @property
    def chat_rounds(self) -> dict[str, int]:
        """The model calls each open chat made so far, by chat id."""
        return self._chat().chat_rounds


class TrackingObserver(Observer):
    """An ``Observer`` that calls the ``on_*`` methods below with timings and context.

    Subclasses override the ``on_*`` methods; durations are in milliseconds, ``None`` when
    the start was not seen by this process (e.g. a run restored from a checkpoint).

    Args:
        clock: monotonic seconds (default ``time.perf_counter``); tests pass a fake.
    """

    def __init__(self, clock: Callable[[], float] | None = None) -> None:
        self.clock = clock or time.perf_counter
        self._keys: dict[Any, Any] = {}
        """The run in flight of each key seen: its ``_KeyTrack`` (``AgentMetrics``' own
        hooks keep a plain list there instead, ``_metrics_probe.new_track``)."""

    # -- callbacks for subclasses --------------------------------------------------------
    def on_run_started(self, key: Any, run: str, seq: int) -> None:
        """A run started."""

    def on_run_completed(self, key: Any, run: str, seq: int, duration_ms: float | None) -> None:
        """A run completed."""

    def on_event(self, key: Any, event: Any, parent: str | None, chat: str | None,
                 model: str | None) -> None:
        """An event was dispatched (``chat``/``model``: the chat it belongs to, if any)."""

    def on_chat_finished(self, key: Any, chat: str, model: str | None, error: str | None,
                         duration_ms: float | None) -> None:
        """A chat's ``ChatResponseEvent`` was dispatched."""

    def on_action_started(self, key: Any, execution_id: str, action: str, parent: str,
                          reentered: bool) -> None:
        """An action execution started."""

    def on_action_finished(self, key: Any, execution_id: str, action: str, parent: str,
                           error: BaseException | None, duration_ms: float | None) -> None:
        """An action execution finished."""

    def on_call_started(self, key: Any, call: CallInfo) -> None:
        """A durable call started (or was replayed: ``call.replayed``)."""

    def on_call_finished(self, key: Any, call: CallInfo, status: str, result: Any,
                         duration_ms: float | None) -> None:
        """A durable call ended.

        ``status`` is ``ok``, ``failed`` or ``abandoned`` (its action or run ended first, so
        the outcome will never be recorded).
        """

    def on_output(self, key: Any, output: Any, parent: str) -> None:
        """An output left the agent."""

    # -- the core's hooks ------------------------------------------------------------------
    def _track(self, key: Any) -> _KeyTrack:
        t = self._keys.get(key)
        if t is None:
            t = self._keys[key] = _KeyTrack()
        return t

    def _ms(self, start: float | None) -> float | None:
        if start is None:
            return None
        return round((self.clock() - start) * 1000.0, 3)

    def run_started(self, key: Any, seq: int) -> None:
        t = self._keys[key] = _KeyTrack()
        t.run_started = self.clock()
        self.on_run_started(key, f"r{seq}", seq)

    def run_completed(self, key: Any, seq: int) -> None:
        t = self._keys.pop(key, None) or _KeyTrack()
        if t.calls:
            for call in list(t.calls.values()):
                self._abandon(key, t, call)
        self.on_run_completed(key, f"r{seq}", seq, self._ms(t.run_started))

    def event_dispatched(self, key: Any, event: Any, parent: str | None) -> None:
        t = self._track(key)
        etype = getattr(event, "type", "")
        if type(etype) is BuiltinEventType:  # compared as plain text: ``==`` on the type
            etype = str.__str__(etype)  # is a Python call, up to five an event otherwise
        chat: str | None = None
        model: str | None = None
        if etype == "ChatRequestEvent":
            chat, model = event.id, getattr(event, "model", None)
            t.chat_started[chat] = self.clock()
            t.chat_rounds.setdefault(chat, 0)
        elif etype == "ToolRequestEvent":
            origin = action_parent(parent, CHAT_ACTION) if parent else None
            chat, model = t.event_chat.get(origin, (None, None)) if origin else (None, None)
            model = model or getattr(event, "model", None)
        elif etype == "ToolResponseEvent":
            chat, model = t.event_chat.get(getattr(event, "request_id", ""), (None, None))
        elif etype == "ChatResponseEvent":
            chat = getattr(event, "request_id", None)
            model = t.event_chat.get(chat, (None, None))[1] if chat else None
        if chat is not None or model is not None:
            t.event_chat[event.id] = (chat, model)
        self.on_event(key, event, parent, chat, model)
        if etype == "ChatResponseEvent" and chat:
            t.chat_rounds.pop(chat, None)
            self.on_chat_finished(key, chat, model, getattr(event, "error", None),
                                  self._ms(t.chat_started.pop(chat, None)))

    def action_started(self, key: Any, execution_id: str, action: str, reentered: bool) -> None:
        self._track(key).actions[execution_id] = self.clock()
        self.on_action_started(key, execution_id, action, action_parent(execution_id, action),
                               reentered)

    def action_finished(self, key: Any, execution_id: str, action: str,
                        error: BaseException | None) -> None:
        t = self._track(key)
        start = t.actions.pop(execution_id, None)
        if t.calls:
            self._abandon_calls_of(key, t, execution_id)
        self.on_action_finished(key, execution_id, action, action_parent(execution_id, action),
                                error, self._ms(start))

    def call_started(self, key: Any, call_id: str, command: Any, replayed: bool) -> None:
        t = self._track(key)
        kind, name = _kind_and_name(command)
        info = CallInfo(call_id=call_id, parent=call_parent(call_id), function=str(command),
                        kind=kind, name=name, replayed=replayed, started=self.clock(),
                        call_kind=getattr(command, "kind", None))
        if kind == "chat_model":
            event_id = action_parent(info.parent, CHAT_ACTION)
            info.chat, info.model = t.event_chat.get(event_id, (None, None))
            info.model = info.model or name
            info.name = info.model
            if info.chat is not None:
                info.round = t.chat_rounds.get(info.chat, 0) + 1
                t.chat_rounds[info.chat] = info.round
        if not replayed:
            t.calls[call_id] = info
        self.on_call_started(key, info)

    def call_finished(self, key: Any, call_id: str, ok: bool, result: Any) -> None:
        t = self._track(key)
        info = t.calls.pop(call_id, None)
        if info is None:  # started before a restore: its start was not seen here
            info = CallInfo(call_id=call_id, parent=call_parent(call_id), function="",
                            kind="unknown", name=None, replayed=False)
            start = None
        else:
            start = info.started
        self.on_call_finished(key, info, "ok" if ok else "failed", result, self._ms(start))

    def output_emitted(self, key: Any, output: Any, parent: str) -> None:
        self.on_output(key, output, parent)

    def _abandon_calls_of(self, key: Any, t: _KeyTrack, execution_id: str) -> None:
        """Report the open calls the action execution ``execution_id`` made as abandoned."""
        prefix = execution_id + "/c"
        for call in [c for c in t.calls.values() if c.call_id.startswith(prefix)
                     and "/" not in c.call_id[len(prefix):]]:
            self._abandon(key, t, call)

    def _abandon(self, key: Any, t: _KeyTrack, call: CallInfo) -> None:
        t.calls.pop(call.call_id, None)
        self.on_call_finished(key, call, "abandoned", None, self._ms(call.started))

    # -- introspection ---------------------------------------------------------------------
    def open_calls(self) -> int:
        """Executed durable calls whose outcome has not been recorded yet."""
        return sum(len(t.calls) for t in self._keys.values())
