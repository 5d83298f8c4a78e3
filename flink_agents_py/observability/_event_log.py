"""The event log: one JSON line per run, event, action execution, durable call and output.

Every record has ``ts`` (epoch seconds), ``kind``, ``key`` (its JSON form,
``runtime.key_json``: a tuple an array, a ``UUID`` ``{"uuid": "..."}``) and, except the
header, ``id`` and ``parent`` (the identity one level up, so a run reads as a tree: run ->
input event -> action -> durable call (chat, model call, tool, sub-agent) -> events -> ...
-> output):

- ``log_opened``: ``host``, ``level``, ``pid``, ``agent`` (its class name), ``lineage``
  (the job's token, shared by its attempts and restores), and on Flink ``subtask`` and
  ``attempt``
  (a restarted job appends to the same file; a new header marks each attempt).
- ``run_started`` / ``run_completed``: ``id`` ``r<seq>``, ``seq``, (``duration_ms``).
- ``event``: ``type``, ``parent`` (the execution that sent it, the call that bootstrapped
  it, or ``null`` for a run's input), ``chat``/``model`` for chat events, a summary of its
  fields, ``data`` (its fields; ``verbose``, or always for inputs and outputs).
- ``action_started`` / ``action_finished``: ``action``, ``reentered``; ``status``
  (``ok``/``failed``), ``error``, ``traceback``, ``duration_ms``.
- ``call_started`` / ``call_finished``: ``call_kind`` (``chat``, ``chat_model``, ``tool``,
  ``subagent``, ``function``), ``name``, ``function``, ``replayed``; ``status`` (``ok``,
  ``failed``, ``abandoned``), ``duration_ms``, ``error``, ``traceback``, and per kind
  ``model``/``chat``/``round``/``usage``/``tool_calls``/``finish_reason``, ``tool``,
  ``tool_error``, ``success``; ``result`` (``verbose``). A replayed call has no
  ``call_finished``.
- ``output``: ``parent`` (the ``OutputEvent``), ``output``.

``traceback`` (text) is where a failure happened: on a failed action, a failed call, a tool
call whose tool raised (``tool_error``), a failed sub-agent call, and a ``ChatResponseEvent``
with ``error``; for a failure that crossed a boundary (a tool, a model call, a sub-agent's
action, a restore) it holds the original failure's frames first (see ``runtime._failures``).
It is redacted and keeps its end when longer than ``max_traceback_chars``.

Payloads are redacted (``Redactor``) and then truncated (``max_chars``) before they are
written; once a secret is known (``api.register_secret``: an API key read from
``api_key_env``...), every string of every record is masked before it reaches the sink, so
the trace and the OpenTelemetry spans built from the log never see it. Levels: ``off``
(nothing), ``standard`` (every record; payloads of inputs, outputs and errors only),
``verbose`` (also every event's fields and every call's result).
"""

from __future__ import annotations

import os
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Literal

import orjson

from ..api.internal import (
    BuiltinEventType,
    described,
    has_known_secret,
    mask_value,
    registered_secret_count,
)
from ..runtime.internal import failure_text, key_json
from ._ids import chat_response_of, parse_result
from ._payload import Redactor, to_loggable, truncate
from ._tracking import CallInfo, TrackingObserver

__all__ = ["EventLog", "EventLogObserver", "EventLogSink", "FileSink", "MemorySink", "LEVELS",
           "read_event_log"]

Level = Literal["off", "standard", "verbose"]
LEVELS = ("off", "standard", "verbose")


class EventLogSink(ABC):
    """Where event log records go. Subclass and implement ``write`` (and ``flush``/``close``).

    A subclass without ``write`` cannot be instantiated (Python's ``TypeError`` naming it).

    A sink given to a Flink job is pickled to every operator subtask, which calls ``open``
    on its copy first.
    """

    def open(self, subtask: int | None = None, attempt: int | None = None) -> EventLogSink:
        """Prepare to write.

        Args:
            subtask: the Flink subtask's index (``None`` locally).
            attempt: the Flink subtask's attempt number (``None`` locally).

        Returns:
            The sink to write to (``self`` by default).
        """
        return self

    @abstractmethod
    def write(self, record: dict[str, Any]) -> None:
        """Take one record (JSON-ready: redacted and truncated already)."""

    def flush(self) -> None:  # noqa: B027 - an optional hook, not an abstract method
        """Push buffered records out (nothing to push by default)."""

    def close(self) -> None:
        """Flush and release resources."""
        self.flush()


class MemorySink(EventLogSink):
    """Keeps the records in a list (``records``); for tests and notebooks."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def write(self, record: dict[str, Any]) -> None:
        self.records.append(record)


def _default(value: Any) -> Any:
    return repr(value)


class FileSink(EventLogSink):
    """JSON lines appended to a file; buffered, flushed every ``flush_interval_s`` or 64 KiB.

    A record written to an empty buffer arms a timer (a thread) that flushes it
    ``flush_interval_s`` later, so the records of an operator that went idle (a stream
    between records) reach the file without waiting for the next record or the job's end.

    On Flink each subtask writes its own file: ``{subtask}`` and ``{attempt}`` in ``path``
    are replaced, and a path without ``{subtask}`` gets ``-<subtask>`` before its suffix
    (``events.jsonl`` -> ``events-0.jsonl``). Attempts of a subtask append to one file.
    """

    def __init__(self, path: str | os.PathLike[str], flush_interval_s: float = 1.0,
                 buffer_bytes: int = 65536) -> None:
        self.path = str(Path(path).expanduser().absolute())
        self.flush_interval_s = flush_interval_s
        self.buffer_bytes = buffer_bytes
        self._file: Any = None
        self._buf: list[bytes] = []
        self._size = 0
        self._last_flush = 0.0
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.update(_file=None, _buf=[], _size=0, _lock=None, _timer=None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()
        self._timer = None

    @staticmethod
    def subtask_path(path: str, subtask: int | None, attempt: int | None) -> str:
        """``path`` for one subtask (see the class docstring)."""
        if subtask is None:
            return path.replace("{subtask}", "0").replace("{attempt}", str(attempt or 0))
        if "{subtask}" not in path:
            p = Path(path)
            suffix = "".join(p.suffixes) if p.suffixes else ""
            stem = p.name[: len(p.name) - len(suffix)] if suffix else p.name
            path = str(p.with_name(f"{stem}-{{subtask}}{suffix}"))
        return path.replace("{subtask}", str(subtask)).replace("{attempt}", str(attempt or 0))

    def open(self, subtask: int | None = None, attempt: int | None = None) -> FileSink:
        sink = FileSink(self.subtask_path(self.path, subtask, attempt), self.flush_interval_s,
                        self.buffer_bytes)
        sink._file = open_log_file(sink.path, "ab")  # closed by close()
        sink._last_flush = time.monotonic()
        return sink

    def write(self, record: dict[str, Any]) -> None:
        line = orjson.dumps(record, default=_default,
                            option=orjson.OPT_NON_STR_KEYS | orjson.OPT_APPEND_NEWLINE)
        with self._lock:
            self._buf.append(line)
            self._size += len(line)
            if self._size >= self.buffer_bytes or \
                    time.monotonic() - self._last_flush >= self.flush_interval_s:
                self._flush_locked()
            elif self._timer is None and self._file is not None:
                self._arm()

    def _arm(self) -> None:
        """Flush what is buffered ``flush_interval_s`` from now (on a timer thread)."""
        timer = self._timer = threading.Timer(self.flush_interval_s, self._on_timer)
        timer.daemon = True
        timer.start()

    def _on_timer(self) -> None:
        with self._lock:
            self._timer = None
            try:
                self._flush_locked()
            except Exception:  # noqa: BLE001 - a full disk: the next write or close says so
                pass

    def _flush_locked(self) -> None:
        if self._file is None:
            return
        if self._buf:
            self._file.write(b"".join(self._buf))
            self._buf.clear()
            self._size = 0
        self._file.flush()
        self._last_flush = time.monotonic()

    def flush(self) -> None:
        with self._lock:
            self._flush_locked()

    def close(self) -> None:
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            self._flush_locked()
            if self._file is not None:
                self._file.close()
                self._file = None


class EventLog:
    """How to write the event log (picklable; each host opens its own ``EventLogObserver``).

    Args:
        path: the JSON lines file (appended to); on Flink one file per subtask (see
            ``FileSink``). Give ``path`` or ``sink``.
        level: ``"off"``, ``"standard"`` (default) or ``"verbose"``.
        max_chars: the longest JSON form of one payload (input, output, event fields, call
            result) or error text kept; longer ones are cut (``<= 0``: no limit).
        redact_fields: more field names whose values are replaced by ``"[REDACTED]"``, on
            top of secret-looking names (``api_key``, ``authorization``, ``password``,
            ``secret``, ``token``...; see ``Redactor``).
        sink: where records go instead of a file (an ``EventLogSink``).
        max_traceback_chars: the longest ``traceback`` kept (its end is kept; ``<= 0``: no
            limit beyond the runtime's own bound).
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, level: Level = "standard",
                 max_chars: int = 2000, redact_fields: Iterable[str] = (),
                 sink: EventLogSink | None = None, max_traceback_chars: int = 8000) -> None:
        if level not in LEVELS:
            raise ValueError(f"event log level must be one of {LEVELS}, not {level!r}")
        if (path is None) == (sink is None) and level != "off":
            raise ValueError("give the event log a path or a sink (one of them)")
        self.level = level
        self.max_chars = max_chars
        self.redact_fields = tuple(redact_fields)
        self.max_traceback_chars = max_traceback_chars
        self.sink = sink if sink is not None else (FileSink(path) if path is not None else None)

    @classmethod
    def of(cls, value: EventLog | str | os.PathLike[str] | EventLogSink | None) -> EventLog | None:
        """An ``EventLog`` from what a host option accepts: an ``EventLog``, a path, a sink."""
        if value is None or isinstance(value, EventLog):
            return value
        if isinstance(value, EventLogSink):
            return cls(sink=value)
        return cls(value)

    def open(self, host: str = "local", subtask: int | None = None,
             attempt: int | None = None, agent: str = "",
             lineage: str = "") -> EventLogObserver | None:
        """Open the sink and return the observer writing to it (``None`` when ``off``).

        Args:
            host: ``"local"`` or ``"flink"`` (written in the ``log_opened`` header).
            subtask: the Flink subtask index.
            attempt: the Flink attempt number.
            agent: the agent's name, written in the header (traces name runs by it).
            lineage: the job's token (``""``: none), written in the header: every attempt
                of a job shares it and another job has another, so a trace keeps the runs
                of two jobs appending to one file apart and derives stable span ids.

        Returns:
            The observer, or ``None`` at level ``off``.
        """
        if self.level == "off" or self.sink is None:
            return None
        sink = self.sink.open(subtask, attempt)
        obs = EventLogObserver(sink, level=self.level, max_chars=self.max_chars,
                               redactor=Redactor(self.redact_fields),
                               max_traceback_chars=getattr(self, "max_traceback_chars", 8000))
        header: dict[str, Any] = {"ts": time.time(), "kind": "log_opened", "host": host,
                                  "level": self.level, "pid": os.getpid()}
        if agent:
            header["agent"] = agent
        if lineage:
            header["lineage"] = lineage
        if subtask is not None:
            header.update(subtask=subtask, attempt=attempt)
        sink.write(header)
        return obs


def open_log_file(path: str, mode: str, what: str = "the event log") -> Any:
    """Open ``path`` (its folder created) or raise the error saying which log it is for.

    Args:
        path: the file.
        mode: ``"ab"`` or ``"a"`` (text, UTF-8).
        what: the log, as the error names it.

    Returns:
        The open file.

    Raises:
        OSError: of the same type and errno, naming ``what`` and ``path`` (a folder that is
            a file, a file that is a folder, no permission).
    """
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        return open(path, mode, encoding=None if "b" in mode else "utf-8")  # noqa: SIM115
    except OSError as e:
        reason = e.strerror or str(e)
        if isinstance(e, FileExistsError):
            reason = "a file is where its folder should be"
        raise type(e)(e.errno, f"cannot write {what} at {path}: {reason}", e.filename) from e


def _holds_secret(record: dict[str, Any]) -> bool:
    """Whether a known secret is anywhere in ``record`` (one search over its JSON form)."""
    try:
        text = orjson.dumps(record, default=_default, option=orjson.OPT_NON_STR_KEYS).decode()
    except Exception:  # noqa: BLE001 - e.g. an integer too big: walk it instead
        return True
    return has_known_secret(text)


def _error_text(error: BaseException) -> str:
    return described(error)


def _utf8(text: str) -> str:
    r"""Make ``text`` valid UTF-8 text.

    A failure's message may hold a lone surrogate (a file name Python decoded with
    ``surrogateescape``, as ``os.listdir`` does with bytes that are not UTF-8); it has no
    UTF-8 form, so the record holding it could not be written (the sink's JSON encoder
    refuses it) and was lost.

    Returns:
        ``text``, each lone surrogate written as its escape (``\udce9``).
    """
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


class EventLogObserver(TrackingObserver):
    """Writes the event log records (see the module docstring) to ``sink``.

    Args:
        sink: an opened sink.
        level: ``"standard"`` or ``"verbose"``.
        max_chars: payload limit (see ``EventLog``).
        redactor: secret redaction (default: the built-in secret names only).
        clock: monotonic seconds for durations; ``wall_clock`` for ``ts``.
        max_traceback_chars: the longest ``traceback`` kept (see ``EventLog``).
    """

    def __init__(self, sink: EventLogSink, *, level: Level = "standard", max_chars: int = 2000,
                 redactor: Redactor | None = None, clock: Callable[[], float] | None = None,
                 wall_clock: Callable[[], float] | None = None,
                 max_traceback_chars: int = 8000) -> None:
        super().__init__(clock)
        self.sink = sink
        self.verbose = level == "verbose"
        self.max_chars = max_chars
        self.redact = redactor or Redactor()
        self.wall_clock = wall_clock or time.time
        self.max_traceback_chars = max_traceback_chars

    # -- helpers --------------------------------------------------------------------------
    def _payload(self, value: Any) -> Any:
        return truncate(self.redact(to_loggable(value)), self.max_chars)

    def _text(self, value: str) -> str:
        """An error's text: redacted, written as UTF-8 can hold it, cut to ``max_chars``."""
        return truncate(_utf8(self.redact.text(value)), self.max_chars)

    def _traceback(self, fields: dict[str, Any], text: Any) -> None:
        """Add ``traceback`` (redacted, its end kept) when ``text`` is one."""
        if not isinstance(text, str) or not text:
            return
        text = _utf8(self.redact.text(text))
        limit = self.max_traceback_chars
        if 0 < limit < len(text):
            text = f"[... {len(text) - limit} chars omitted ...]\n{text[len(text) - limit:]}"
        fields["traceback"] = text

    def _write(self, kind: str, key: Any, **fields: Any) -> None:
        record = {"ts": round(self.wall_clock(), 6), "kind": kind,
                  "key": to_loggable(key_json(key))}  # a UUID key as {"uuid": "..."}
        record.update(fields)
        if registered_secret_count() and _holds_secret(record):  # the last line: keys, names...
            record = mask_value(record)
        self.sink.write(record)

    def close(self) -> None:
        """Flush and close the sink."""
        self.sink.close()

    # -- callbacks -----------------------------------------------------------------------
    def on_run_started(self, key: Any, run: str, seq: int) -> None:
        self._write("run_started", key, id=run, parent=None, seq=seq)

    def on_run_completed(self, key: Any, run: str, seq: int, duration_ms: float | None) -> None:
        self._write("run_completed", key, id=run, parent=None, seq=seq, duration_ms=duration_ms)

    def on_event(self, key: Any, event: Any, parent: str | None, chat: str | None,
                 model: str | None) -> None:
        etype = getattr(event, "type", "?")
        fields: dict[str, Any] = {"id": event.id, "parent": parent, "type": etype}
        if chat is not None:
            fields["chat"] = chat
        if model is not None:
            fields["model"] = model
        name = str.__str__(etype) if type(etype) is BuiltinEventType else etype
        if name == "InputEvent":  # (``name``: plain text, no Python ``__eq__`` a test)
            fields["data"] = {"input": self._payload(getattr(event, "input", None))}
        elif name == "OutputEvent":
            fields["data"] = {"output": self._payload(getattr(event, "output", None))}
        elif name == "ToolRequestEvent":
            fields["tool_calls"] = [c.name for c in getattr(event, "tool_calls", [])]
        elif name == "ToolResponseEvent":
            fields["request_id"] = getattr(event, "request_id", None)
            failed = [r for r in getattr(event, "responses", {}).values() if not r.ok]
            if failed:
                fields["failed_tools"] = [r.name for r in failed]
                # refused before any call ran (no such tool, its injected arguments): no call
                # record says so, this does
                refused = [f"{r.name}: {r.error}" for r in failed if not r.traceback]
                if refused:
                    fields["refused_tools"] = [self._text(t) for t in refused]
        elif name == "ChatResponseEvent":
            fields["request_id"] = getattr(event, "request_id", None)
            error = getattr(event, "error", None)
            if error is not None:
                fields["error"] = self._text(error)
                self._traceback(fields, getattr(event, "traceback", None))
        if self.verbose and "data" not in fields:
            try:
                data = event.to_json()
            except Exception:  # noqa: BLE001 - a log must not fail the run
                data = repr(event)
            if isinstance(data, dict):
                data = {k: v for k, v in data.items() if k not in ("id", "type")}
            fields["data"] = self._payload(data)
        self._write("event", key, **fields)

    def on_chat_finished(self, key: Any, chat: str, model: str | None, error: str | None,
                         duration_ms: float | None) -> None:
        pass  # the ChatResponseEvent record says it; the trace takes the timing from events

    def on_action_started(self, key: Any, execution_id: str, action: str, parent: str,
                          reentered: bool) -> None:
        self._write("action_started", key, id=execution_id, parent=parent, action=action,
                    reentered=reentered)

    def on_action_finished(self, key: Any, execution_id: str, action: str, parent: str,
                           error: BaseException | None, duration_ms: float | None) -> None:
        fields: dict[str, Any] = {"id": execution_id, "parent": parent, "action": action,
                                  "status": "ok" if error is None else "failed",
                                  "duration_ms": duration_ms}
        if error is not None:
            fields["error"] = self._text(_error_text(error))
            self._traceback(fields, failure_text(error))
        self._write("action_finished", key, **fields)

    def _call_fields(self, call: CallInfo) -> dict[str, Any]:
        fields: dict[str, Any] = {"id": call.call_id, "parent": call.parent,
                                  "call_kind": call.kind, "name": call.name}
        if call.kind == "chat_model":
            fields.update(model=call.model, chat=call.chat, round=call.round)
        return fields

    def on_call_started(self, key: Any, call: CallInfo) -> None:
        self._write("call_started", key, **self._call_fields(call), function=call.function,
                    replayed=call.replayed)

    def on_call_finished(self, key: Any, call: CallInfo, status: str, result: Any,
                         duration_ms: float | None) -> None:
        fields = self._call_fields(call)
        fields.update(status=status, duration_ms=duration_ms)
        if status == "failed":
            fields["error"] = self._text(str(result))
            self._traceback(fields, getattr(result, "traceback", None))
        elif status == "ok":
            cls, data = parse_result(result)
            response = chat_response_of(result) if call.kind in ("chat_model", "unknown") \
                else None
            if response is not None:
                fields["call_kind"] = "chat_model"
                usage = response.get("usage") or {}
                fields["usage"] = {"input_tokens": usage.get("input_tokens", 0),
                                   "output_tokens": usage.get("output_tokens", 0)}
                fields["provider_model"] = response.get("model")
                fields["finish_reason"] = response.get("finish_reason")
                calls = (response.get("message") or {}).get("tool_calls") or []
                if calls:
                    fields["tool_calls"] = [c.get("name") for c in calls if isinstance(c, dict)]
                _flow_fields(fields, response.get("metadata"))
            elif cls == "ToolResult" and isinstance(data, dict) and call.kind in ("tool",
                                                                                  "unknown"):
                fields["call_kind"] = "tool"
                fields["tool"] = data.get("name")
                fields["name"] = fields["name"] or data.get("name")
                if data.get("ok") is False:
                    fields["tool_error"] = self._text(str(data.get("error")))
                    self._traceback(fields, data.get("traceback"))
            elif cls == "SubagentResult" and isinstance(data, dict):
                fields["success"] = bool(data.get("success"))
                if data.get("cancelled"):
                    fields["cancelled"] = True
                if not data.get("success"):
                    fields["error"] = self._text(str(data.get("error_message")))
                    self._traceback(fields, data.get("traceback"))
            if self.verbose:
                fields["result"] = self._payload(result)
        self._write("call_finished", key, **fields)

    def on_output(self, key: Any, output: Any, parent: str) -> None:
        self._write("output", key, id=parent + "/out", parent=parent,
                    output=self._payload(output))


def read_event_log(paths: Iterable[str | os.PathLike[str]],
                   skipped: list[tuple[str, int]] | None = None) -> list[dict[str, Any]]:
    """Every record of the given event log files, in file order (bad lines are skipped).

    Args:
        paths: the files.
        skipped: when given, gets ``(path, line number)`` of every line skipped: not JSON
            (cut short by a crash or a job still writing, damaged) or not a JSON object.

    Returns:
        The records.
    """
    records: list[dict[str, Any]] = []
    for path in paths:
        with open(path, "rb") as f:
            for number, line in enumerate(f, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    rec = orjson.loads(line)
                except orjson.JSONDecodeError:
                    rec = None
                if isinstance(rec, dict):
                    records.append(rec)
                elif skipped is not None:
                    skipped.append((str(path), number))
    return records


def _flow_fields(fields: dict[str, Any], metadata: Any) -> None:
    """Copy what flow control and budgets said about a model call into its log record.

    ``throttled`` and ``flow_wait_s`` (held by flow control), ``model_setup`` (a fallback
    answered), ``cached`` (the connection answered from its cache of identical requests, as
    the local model does at temperature 0) and ``budget`` (the key's budget decision and its
    spend after the call, without a sliding window's list of calls).
    """
    if not isinstance(metadata, dict):
        return
    for name in ("throttled", "flow_wait_s", "model_setup", "cached"):
        if name in metadata:
            fields[name] = metadata[name]
    budget = metadata.get("budget")
    if isinstance(budget, dict):
        spent = budget.get("spent")
        if isinstance(spent, dict):
            spent = {k: v for k, v in spent.items() if k != "calls"}
        fields["budget"] = {**budget, "spent": spent}
