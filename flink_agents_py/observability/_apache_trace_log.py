"""Apache Flink Agents' file Trace Log: ``traces-{jobId}-{taskName}-{subtaskId}.log``.

Its main branch (newer than 0.3) records Events and Action executions as ``TraceRecord``
JSON lines when ``trace-log.base-dir`` is set (or ``trace-log.output-type`` is ``FILE``),
as its monitoring page and its ``python_trace_logging_test.py`` /
``memory_trace_logging_test.py`` read them: ``timestamp``, ``detail`` (``STANDARD`` or
``VERBOSE``), ``inputRunId``, ``businessKey``, ``agentName``, ``entityType`` (``event``,
``action``), ``entityName`` (an Event's Flink Agents type, ``_output_event``; an Action's
name), ``entityMetadata`` (an Event's ``eventId`` and, for one an Action sent,
``producerExecutionId``, ``upstreamEventId``, ``upstreamActionName``; an Action's
``triggerEventId``), for an Action ``executionId`` and ``status`` (``started``, ``success``,
``failed``), and ``attributes`` (an Event's payload), the only part ``STANDARD`` truncates
(``trace-log.standard.*``).

``trace-log.targets`` selects what is recorded: presets ``EVENT_ONLY`` (the default) and
``ALL``, and entity scopes ``{"entityType": ..., "entityName": ...}`` (a name may end in
``.*``), each with a ``detail`` (``OFF`` suppresses); the most specific match decides, as
its page says. Component calls (``llm``, ``tool``) are not recorded here, and its SLF4J
output and ``flink-agents-trace-tree`` reader have no counterpart.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["TraceSpec", "trace_detail", "event_metadata", "run_of"]

_DETAILS = ("OFF", "STANDARD", "VERBOSE")
_RUN_BEGIN_ACTION = "agent_run_begin_action"  # the runtime's (``compat``): no producer


def _detail(value: Any, where: str) -> str:
    text = str(getattr(value, "value", value)).upper()
    if text not in _DETAILS:
        raise ValueError(f"{where} must be one of {list(_DETAILS)}, not {value!r}")
    return text


def _targets(value: Any) -> tuple[tuple[str, str, str, str], ...]:
    """``trace-log.targets`` (a list, or its JSON text) as rows.

    Returns:
        ``(kind, entity type, entity name, detail or "")`` rows.

    Raises:
        ValueError: for a target that is not a mapping with a ``scope`` Flink Agents knows.
    """
    if isinstance(value, str):
        value = json.loads(value)
    rows: list[tuple[str, str, str, str]] = []
    for i, target in enumerate(value or []):
        where = f"trace-log.targets[{i}]"
        if not isinstance(target, Mapping) or "scope" not in target:
            raise ValueError(f"{where} must be a mapping with a 'scope', not {target!r}")
        detail = "" if target.get("detail") is None else _detail(target["detail"], where)
        scope = target["scope"]
        if isinstance(scope, str) and scope.upper() in ("ALL", "EVENT_ONLY"):
            rows.append((scope.upper(), "", "", detail))
        elif isinstance(scope, Mapping) and isinstance(scope.get("entityType"), str):
            name = scope.get("entityName")
            rows.append(("entity", scope["entityType"].lower(), str(name or ""), detail))
        else:
            raise ValueError(
                f"{where}: scope must be ALL, EVENT_ONLY or {{entityType, "
                f"entityName}}, not {scope!r}"
            )
    return tuple(rows)


@dataclass(frozen=True)
class TraceSpec:
    """How to write Flink Agents' file Trace Log (picklable; see the module doc).

    Attributes:
        base_dir: the folder of the ``traces-*.log`` files.
        targets: the recording targets (``_targets`` rows).
        max_string_length: at ``STANDARD``, the longest string kept (``0``: any).
        max_array_elements: at ``STANDARD``, the most elements of a list kept (``0``: any).
        max_depth: at ``STANDARD``, the deepest object kept whole (``0``: any).
        pretty_print: write each record indented over several lines.
    """

    base_dir: str
    targets: tuple[tuple[str, str, str, str], ...] = (("EVENT_ONLY", "", "", ""),)
    max_string_length: int = 2000
    max_array_elements: int = 20
    max_depth: int = 5
    pretty_print: bool = False

    @classmethod
    def from_config(cls, values: Mapping[str, Any]) -> TraceSpec | None:
        """The Trace Log Flink Agents' options ask for (``None``: no file Trace Log).

        Args:
            values: configuration values by key (``trace-log.*``).

        Returns:
            The spec when ``trace-log.base-dir`` is set or ``trace-log.output-type`` is
            ``FILE`` (then in ``{tmp}/flink-agents``).
        """
        import tempfile

        base = values.get("trace-log.base-dir")
        kind = str(
            getattr(
                values.get("trace-log.output-type"),
                "value",
                values.get("trace-log.output-type") or "",
            )
        ).upper()
        if base in (None, "") and kind != "FILE":
            return None
        base = (
            str(base)
            if base not in (None, "")
            else str(Path(tempfile.gettempdir()) / "flink-agents")
        )
        given = values.get("trace-log.targets")
        return cls(
            base_dir=str(Path(base).expanduser().absolute()),
            targets=cls.targets if given is None else _targets(given),
            max_string_length=int(values.get("trace-log.standard.max-string-length", 2000)),
            max_array_elements=int(values.get("trace-log.standard.max-array-elements", 20)),
            max_depth=int(values.get("trace-log.standard.max-depth", 5)),
            pretty_print=str(values.get("trace-log.pretty-print", False)).lower() == "true",
        )


def trace_detail(spec: TraceSpec, entity_type: str, entity_name: str) -> str:
    """The detail an entity is recorded at: the most specific matching target's.

    Exact name, then the longest ``.*`` prefix, then the whole type, then ``EVENT_ONLY``
    (events only), then ``ALL``; an entity target without a detail takes its preset's
    (events prefer ``EVENT_ONLY``'s), else ``STANDARD``.

    Returns:
        ``"OFF"`` (not recorded), ``"STANDARD"`` or ``"VERBOSE"``.
    """
    presets = {kind: detail for kind, _, _, detail in spec.targets if kind != "entity"}
    all_detail = presets.get("ALL") or "STANDARD" if "ALL" in presets else None
    only = (
        presets.get("EVENT_ONLY") or all_detail or "STANDARD" if "EVENT_ONLY" in presets else None
    )
    preset = (only or all_detail) if entity_type == "event" else (all_detail or only)
    best: tuple[int, str] | None = None
    for kind, etype, name, detail in spec.targets:
        if kind != "entity" or etype != entity_type:
            continue
        if not name:
            rank = 1
        elif name == entity_name:
            rank = 1_000_000
        elif name.endswith(".*") and entity_name.startswith(name[:-1]):
            rank = 2 + len(name)
        else:
            continue
        if best is None or rank > best[0]:
            best = (rank, detail or preset or "STANDARD")
    if best is not None:
        return best[1]
    if entity_type == "event" and only is not None:
        return only
    return all_detail or "OFF"


def run_of(key_text: str, event_id: str) -> str:
    """The ``inputRunId`` of a record: the key and its run (an id's first segment)."""
    return f"{key_text}:{event_id.split('/', 1)[0]}"


def event_metadata(key_text: str, event_id: str, parent: str | None) -> dict[str, Any]:
    """An Event's ``entityMetadata``: its id and, when an Action sent it, its lineage.

    Ids are ours (replay-stable paths, ``r0/act/e0``), unique per key: each is written
    after its key's text (``order-1:r0/act/e0``) to be unique in the log.

    Returns:
        The metadata.
    """
    meta: dict[str, Any] = {"eventId": f"{key_text}:{event_id}"}
    if parent:
        upstream, _, action = parent.rpartition("/")
        if action != _RUN_BEGIN_ACTION:  # the runtime's event: an upstream, no producer
            meta["producerExecutionId"] = f"{key_text}:{parent}"
        meta["upstreamEventId"] = f"{key_text}:{upstream}"
        meta["upstreamActionName"] = action
    return meta
