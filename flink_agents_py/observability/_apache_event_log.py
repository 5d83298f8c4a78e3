r"""Apache Flink Agents' file event log: the files its ``baseLogDir`` option makes, here.

A program ported from Apache Flink Agents 0.3 that sets ``baseLogDir`` (``agents_env.
get_config().set(AgentConfigOptions.BASE_LOG_DIR, path)``, ``set_str("baseLogDir", path)``,
or ``agent: {baseLogDir: path}`` in a Flink ``config.yaml``) and then reads the files, as
Apache's docs and its own tests do, finds them here in the same layout and form (read in
Apache Flink Agents 0.3.1: ``FileEventLogger``, ``EventLogRecordJsonSerializer``,
``JsonTruncator``, ``core_options.py``, its ``python_event_logging_test.py``):

- one file per subtask, ``{baseLogDir}/events-{jobId}-{taskName}-{subtaskId}.log``
  (``taskName`` with ``\ / : * ? " < > |`` as ``_``), appended to; ``eventLoggerType``
  ``"file"`` without ``baseLogDir`` writes to ``{tmp}/flink-agents``. On the local runner
  ``jobId`` is a new id per run, ``taskName`` the agent's name and ``subtaskId`` 0; on Flink
  they are the job's, the task's and the subtask's (a process-mode worker, which cannot read
  the job id, writes the job's lineage token instead).
- one JSON object per line (``prettyPrint``: indented, no longer one per line), per event:
  ``{"timestamp": ISO-8601, "logLevel": "STANDARD", "eventType": "_input_event", "event":
  {"eventType", "id", "attributes": {...}, "type"}}``. The built-in events have Apache's
  type names (``_input_event``, ``_output_event``, ``_chat_request_event``,
  ``_chat_response_event``, ``_tool_request_event``, ``_tool_response_event``,
  ``_context_retrieval_request_event``, ``_context_retrieval_response_event``) and their
  fields in ``attributes`` as Apache's events hold them (``attributes["input"]``; a tool
  call as ``{"id", "type": "function", "function": {"name", "arguments"}}``); another
  event keeps its type and attributes.
- ``event-log.level`` (``OFF``, ``STANDARD``, ``VERBOSE``), ``event-log.type.<TYPE>.level``
  (a dotted type without its own level takes its nearest parent's: ``shop`` for
  ``shop.order_placed``, as Apache's ``EventLogLevelResolver``),
  and at ``STANDARD`` the truncation of ``event-log.standard.max-string-length`` (2000),
  ``max-array-elements`` (20) and ``max-depth`` (5) as Apache's ``JsonTruncator`` does it
  (``{"truncatedString": ..., "omittedChars": n}``...; the event's ``eventType``, ``id`` and
  ``attributes`` are never truncated).

Secrets never reach the files: values under secret-looking names are ``"[REDACTED]"`` and
known secrets (``api.register_secret``) are masked, as in our own event log (``Redactor``).
Our event log (``EventLog``) is another file, unchanged; both can be on.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import tempfile
import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..api.internal import (
    EVENT_CLASS_KEY,
    FLINK_AGENTS_NAMES,
    has_known_secret,
    mask_value,
    registered_secret_count,
)
from ..runtime import Observer
from ._apache_trace_log import TraceSpec, event_metadata, run_of, trace_detail
from ._event_log import open_log_file
from ._payload import Redactor, to_loggable

__all__ = ["ApacheEventLog", "ApacheEventLogObserver", "APACHE_EVENT_TYPES", "APACHE_KEYS"]

APACHE_EVENT_TYPES = FLINK_AGENTS_NAMES
"""Our built-in event types and Apache Flink Agents' names of them."""

APACHE_KEYS = ("baseLogDir", "eventLoggerType", "prettyPrint", "event-log.", "trace-log.")
"""The configuration keys (or key prefixes) of Apache's event log."""

_LEVELS = ("OFF", "STANDARD", "VERBOSE")
_TASK_NAME_UNSAFE = re.compile(r'[\\/:*?"<>|]')
_PROTECTED = frozenset({"eventType", "id", "attributes"})


def _level(value: Any, where: str) -> str:
    text = str(getattr(value, "value", value)).upper()
    if text not in _LEVELS:
        raise ValueError(f"{where} must be one of {list(_LEVELS)}, not {value!r}")
    return text


@dataclass(frozen=True)
class ApacheEventLog:
    """How to write Apache Flink Agents' file event log (picklable; see the module doc).

    Attributes:
        base_dir: the folder of the files (made absolute where this is built).
        level: ``"OFF"``, ``"STANDARD"`` or ``"VERBOSE"``.
        type_levels: the level of single event types (Apache's type names).
        max_string_length: at ``STANDARD``, the longest string kept (``0``: any).
        max_array_elements: at ``STANDARD``, the most elements of a list kept (``0``: any).
        max_depth: at ``STANDARD``, the deepest object kept whole (``0``: any).
        pretty_print: write each record indented over several lines.
        trace: Flink Agents' file Trace Log (``trace-log.*``), written beside it or alone
            (``base_dir`` ``None``: no event log).
    """

    base_dir: str | None
    level: str = "STANDARD"
    type_levels: tuple[tuple[str, str], ...] = ()
    max_string_length: int = 2000
    max_array_elements: int = 20
    max_depth: int = 5
    pretty_print: bool = False
    trace: TraceSpec | None = None

    @classmethod
    def from_config(cls, values: Mapping[str, Any]) -> ApacheEventLog | None:
        """The log Apache Flink Agents' options ask for, or ``None`` when they ask for none.

        Args:
            values: configuration values by key (``baseLogDir``, ``eventLoggerType``,
                ``prettyPrint``, ``event-log.*``).

        Returns:
            The log: ``baseLogDir`` set, or ``eventLoggerType`` ``"file"`` (then in
            ``{tmp}/flink-agents``); ``None`` otherwise (Apache's SLF4J logger writes to
            Flink's log, which has no counterpart here).

        Raises:
            ValueError: for a level that is not ``OFF``, ``STANDARD`` or ``VERBOSE``.
        """
        trace = TraceSpec.from_config(values)
        base = values.get("baseLogDir")
        kind = str(getattr(values.get("eventLoggerType"), "value",
                           values.get("eventLoggerType") or "")).lower()
        if base in (None, "") and kind != "file":
            return None if trace is None else cls(base_dir=None, level="OFF", trace=trace)
        base = str(base) if base not in (None, "") else \
            os.path.join(tempfile.gettempdir(), "flink-agents")
        prefix, suffix = "event-log.type.", ".level"
        types = tuple(sorted(
            (k[len(prefix):-len(suffix)], _level(v, k)) for k, v in values.items()
            if k.startswith(prefix) and k.endswith(suffix)))
        return cls(
            base_dir=str(Path(base).expanduser().absolute()),
            level=_level(values.get("event-log.level", "STANDARD"), "event-log.level"),
            type_levels=types,
            max_string_length=int(values.get("event-log.standard.max-string-length", 2000)),
            max_array_elements=int(values.get("event-log.standard.max-array-elements", 20)),
            max_depth=int(values.get("event-log.standard.max-depth", 5)),
            pretty_print=str(values.get("prettyPrint", False)).lower() == "true",
            trace=trace)

    def file_path(self, job_id: str, task_name: str, subtask: int,
                  prefix: str = "events") -> str:
        """The file of one subtask: ``{base_dir}/events-{jobId}-{taskName}-{subtaskId}.log``.

        ``prefix`` ``"traces"``: the Trace Log's, in its own folder.

        Returns:
            The path.
        """
        name = f"{prefix}-{job_id}-{_TASK_NAME_UNSAFE.sub('_', task_name)}-{subtask}.log"
        base = self.trace.base_dir if prefix == "traces" and self.trace else self.base_dir
        return os.path.join(base or ".", name)

    def open(self, *, job_id: str, task_name: str, subtask: int = 0, agent: str = ""
             ) -> ApacheEventLogObserver | None:
        """Open the subtask's files (appended to) and return the observer writing them.

        Returns:
            The observer; ``None`` when every level is ``OFF`` and there is no Trace Log.
        """
        events = self.base_dir is not None and not (
            self.level == "OFF" and all(level == "OFF" for _, level in self.type_levels))
        if not events and self.trace is None:
            return None
        return ApacheEventLogObserver(
            self, self.file_path(job_id, task_name, subtask) if events else None,
            None if self.trace is None else
            self.file_path(job_id, task_name, subtask, "traces"), agent or task_name)


def _tool_call(call: Any) -> Any:
    """A tool call as Apache's events hold it: ``{"id", "type", "function": {...}}``."""
    if isinstance(call, dict) and "name" in call and "function" not in call:
        return {"id": call.get("id"), "type": "function",
                "function": {"name": call["name"], "arguments": call.get("arguments")}}
    return call


def apache_event(event: Any) -> tuple[str, dict[str, Any]]:
    """An event's Apache type and its ``event`` object (``eventType``, ``id``, ...).

    Returns:
        The type, and the object (not yet redacted).
    """
    try:
        data = to_loggable(event.to_json())
    except Exception:  # noqa: BLE001 - a log must not fail the run
        data = {"type": getattr(event, "type", "?"), "id": getattr(event, "id", ""),
                "attributes": {"repr": repr(event)}}
    data.pop(EVENT_CLASS_KEY, None)  # our class tag, not a field Flink Agents writes
    ours = str(data.pop("type", getattr(event, "type", "?")))
    etype = APACHE_EVENT_TYPES.get(ours, ours)
    event_id = data.pop("id", "")
    attributes = dict(data.pop("attributes", None) or {})
    attachments = data.pop("attachments", None)
    data.pop("$class", None)
    attributes.update(data)  # typed fields: Apache's events hold them in attributes
    if isinstance(attributes.get("tool_calls"), list):
        attributes["tool_calls"] = [_tool_call(c) for c in attributes["tool_calls"]]
    node: dict[str, Any] = {"eventType": etype, "id": event_id, "attributes": attributes}
    if attachments:
        node["attachments"] = attachments
    node["type"] = etype
    return etype, node


class _Truncator:
    """Apache's ``JsonTruncator``: strings, lists and depth cut at ``STANDARD``."""

    def __init__(self, spec: ApacheEventLog | TraceSpec) -> None:
        self.strings = spec.max_string_length
        self.items = spec.max_array_elements
        self.depth = spec.max_depth

    def text(self, value: str) -> Any:
        if self.strings <= 0 or len(value) <= self.strings:
            return value
        return {"truncatedString": value[:self.strings] + "...",
                "omittedChars": len(value) - self.strings}

    def listed(self, value: list[Any], depth: int) -> Any:
        kept = [self.value(v, depth) for v in value]
        if self.items <= 0 or len(kept) <= self.items:
            return kept
        return {"truncatedList": kept[:self.items], "omittedElements": len(kept) - self.items}

    def value(self, value: Any, depth: int) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return self.listed(value, depth + 1)
        if isinstance(value, dict):
            return self.obj(value, depth, top=False)
        return value

    def obj(self, node: dict[str, Any], depth: int, top: bool) -> dict[str, Any]:
        protected = _PROTECTED if top else frozenset()
        if self.depth > 0 and depth >= self.depth:
            nested = [k for k, v in node.items()
                      if k not in protected and isinstance(v, (dict, list))]
            kept = {k: (v if k in protected or not isinstance(v, str) else self.text(v))
                    for k, v in node.items() if k not in nested}
            return {"truncatedObject": kept, "omittedFields": len(nested)} if nested else kept
        out: dict[str, Any] = {}
        for k, v in node.items():
            out[k] = v if k in protected else \
                self.value(v, depth) if not isinstance(v, dict) else self.obj(v, depth + 1, False)
        return out


class ApacheEventLogObserver(Observer):
    """Writes one record per dispatched event to one subtask's file (see the module doc).

    Also writes Flink Agents' Trace Log (``_apache_trace_log``) when its spec has one.

    Args:
        spec: the log's options.
        path: the event log's file (appended to), or ``None`` (the Trace Log only).
        trace_path: the Trace Log's file, or ``None``.
        agent: the agent's name (the Trace Log's ``agentName``).
    """

    def __init__(self, spec: ApacheEventLog, path: str | None, trace_path: str | None = None,
                 agent: str = "") -> None:
        self.spec = spec
        self.path = path
        self.redact = Redactor()
        self.truncator = _Truncator(spec)
        self.levels = dict(spec.type_levels)
        self._resolved: dict[str, str] = {}
        self._file: Any = None if path is None else \
            open_log_file(path, "a", "the Flink Agents event log")  # close()
        self._lock = threading.Lock()
        self.agent = agent
        self._trace: Any = None if trace_path is None or spec.trace is None else \
            open_log_file(trace_path, "a", "the Flink Agents trace log")
        self._trace_cut = _Truncator(spec.trace) if spec.trace is not None else None
        self._details: dict[tuple[str, str], str] = {}

    def _level_of(self, etype: str) -> str:
        """The level of ``etype``: its own, else its nearest dotted parent's, else the log's.

        As Apache's ``EventLogLevelResolver``: ``event-log.type.shop.level`` sets the level
        of ``shop.order_placed`` and ``shop.refund.asked`` too.

        Returns:
            ``"OFF"``, ``"STANDARD"`` or ``"VERBOSE"``.
        """
        name, level = etype, self.levels.get(etype)
        while level is None and name.rfind(".") > 0:
            name = name[:name.rfind(".")]
            level = self.levels.get(name)
        level = level or self.spec.level
        if len(self._resolved) < 4096:  # types are few; a bound all the same
            self._resolved[etype] = level
        return level

    def record(self, event: Any) -> dict[str, Any] | None:
        """The record of ``event`` (``None`` when its level is ``OFF``).

        Returns:
            The record, redacted and masked, truncated at ``STANDARD``.
        """
        etype, node = apache_event(event)
        level = self._resolved.get(etype) or self._level_of(etype)
        if level == "OFF":
            return None
        node = self.redact(node)
        if level == "STANDARD":
            node = self.truncator.obj(node, 1, top=True)
        now = datetime.datetime.now(datetime.timezone.utc)
        record = {"timestamp": now.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
                  "logLevel": level, "eventType": etype, "event": node}
        if registered_secret_count() and has_known_secret(json.dumps(record, default=str)):
            record = mask_value(record)
        return record

    def event_dispatched(self, key: Any, event: Any, parent: str | None) -> None:
        """Write the event's record (flushed at once: Apache's readers read while it runs)."""
        if self._trace is not None:
            self._trace_event(key, event, parent)
        if self._file is None:
            return
        record = self.record(event)
        if record is None:
            return
        text = json.dumps(record, ensure_ascii=False, default=str,
                          indent=2 if self.spec.pretty_print else None)
        with self._lock:
            if self._file is not None:
                self._file.write(text + "\n")
                self._file.flush()

    def _detail(self, entity_type: str, name: str) -> str:
        found = self._details.get((entity_type, name))
        if found is None:
            assert self.spec.trace is not None
            found = trace_detail(self.spec.trace, entity_type, name)
            if len(self._details) < 4096:  # names are few; a bound all the same
                self._details[(entity_type, name)] = found
        return found

    def _trace_write(self, key: Any, run_event: str, entity_type: str, name: str,
                     detail: str, fields: dict[str, Any]) -> None:
        """Write one Trace Log record (``attributes`` redacted, truncated at ``STANDARD``)."""
        now = datetime.datetime.now(datetime.timezone.utc)
        record: dict[str, Any] = {
            "timestamp": now.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "detail": detail, "inputRunId": run_of(str(key), run_event),
            "businessKey": str(key), "agentName": self.agent, "entityType": entity_type,
            "entityName": name, **fields}
        attributes = self.redact(record.get("attributes", {}))
        if detail == "STANDARD" and self._trace_cut is not None:
            attributes = self._trace_cut.obj(attributes, 1, top=False)
        record["attributes"] = attributes
        if registered_secret_count() and has_known_secret(json.dumps(record, default=str)):
            record = mask_value(record)
        assert self.spec.trace is not None
        text = json.dumps(record, ensure_ascii=False, default=str,
                          indent=2 if self.spec.trace.pretty_print else None)
        with self._lock:
            if self._trace is not None:
                self._trace.write(text + "\n")
                self._trace.flush()

    def _trace_event(self, key: Any, event: Any, parent: str | None) -> None:
        etype, node = apache_event(event)
        detail = self._detail("event", etype)
        if detail != "OFF":
            event_id = str(node.get("id", ""))
            attributes = node.get("attributes", {})
            if isinstance(attributes.get("request_id"), str):  # an event id: as eventId
                attributes = {**attributes, "request_id": f"{key}:{attributes['request_id']}"}
            self._trace_write(key, event_id, "event", etype, detail, {
                "entityMetadata": event_metadata(str(key), event_id, parent),
                "attributes": attributes})

    def _trace_action(self, key: Any, execution_id: str, action: str, status: str) -> None:
        detail = self._detail("action", action)
        if detail != "OFF":
            text = str(key)  # ids after the key's text, as ``event_metadata`` writes them
            self._trace_write(key, execution_id, "action", action, detail, {
                "executionId": f"{text}:{execution_id}",
                "entityMetadata": {"triggerEventId": f"{text}:{execution_id.rpartition('/')[0]}"},
                "status": status, "attributes": {}})

    def action_started(self, key: Any, execution_id: str, action: str, reentered: bool) -> None:
        """Write the Trace Log's record of an action execution starting (when selected)."""
        if self._trace is not None:
            self._trace_action(key, execution_id, action, "started")

    def action_finished(self, key: Any, execution_id: str, action: str,
                        error: BaseException | None) -> None:
        """Write the Trace Log's record of an action execution's outcome (when selected)."""
        if self._trace is not None:
            self._trace_action(key, execution_id, action,
                               "success" if error is None else "failed")

    def close(self) -> None:
        """Close the files."""
        with self._lock:
            for name in ("_file", "_trace"):
                if getattr(self, name) is not None:
                    getattr(self, name).close()
                    setattr(self, name, None)


def new_job_id() -> str:
    """A job id for a local run (32 hex digits, as Flink's ``JobID`` prints)."""
    return uuid.uuid4().hex
