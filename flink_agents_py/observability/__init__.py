"""Observability: metrics, a JSON-lines event log, and trace trees read back from it.

- ``AgentMetrics``: an ``Observer`` keeping counters, in-flight gauges and latency
  distributions (names in ``flink_agents_py.observability._metrics``); the local runner
  returns its snapshot as ``LocalRunResult.metrics``, the Flink operator pushes it to the
  operator's PyFlink metric group ``flink_agents`` in batches (no call into Java per event).
- ``EventLog``: one JSON line per run, event, action execution, durable call and output,
  with identities and parent links, levels, truncation and secret redaction; written to a
  file (``FileSink``) or any ``EventLogSink``.
- ``build_traces`` / ``render_text`` / ``render_html``: the ``flink-agents-py trace`` command.
- ``export_otel`` / ``OtelSink``: the same trees as OpenTelemetry spans (GenAI semantic
  conventions; the ``otel`` extra), from a finished log or live from the event log.
"""

from typing import TYPE_CHECKING, Any

from ._event_log import (
    LEVELS,
    EventLog,
    EventLogObserver,
    EventLogSink,
    FileSink,
    MemorySink,
    read_event_log,
)
from ._host import HostObservability
from ._metrics import METRIC_GROUP, AgentMetrics, Distribution, FlinkMetricsMirror
from ._payload import REDACTED, Redactor, truncate
from ._terminal import escape_controls
from ._tracking import CallInfo, TrackingObserver

if TYPE_CHECKING:  # read back from a finished log: imported on first use (below)
    from ._otel import OtelExportError, OtelSink, export_otel, otlp_exporter
    from ._trace import RunTrace, TraceNode, build_traces, render_text, select_traces
    from ._trace_html import render_html

__all__ = [
    "AgentMetrics",
    "CallInfo",
    "Distribution",
    "EventLog",
    "EventLogObserver",
    "EventLogSink",
    "FileSink",
    "FlinkMetricsMirror",
    "HostObservability",
    "LEVELS",
    "METRIC_GROUP",
    "MemorySink",
    "OtelExportError",
    "OtelSink",
    "REDACTED",
    "Redactor",
    "RunTrace",
    "TraceNode",
    "TrackingObserver",
    "build_traces",
    "escape_controls",
    "export_otel",
    "otlp_exporter",
    "read_event_log",
    "render_html",
    "render_text",
    "select_traces",
    "truncate",
]

_LAZY: dict[str, str] = {
    **dict.fromkeys(("OtelExportError", "OtelSink", "export_otel", "otlp_exporter"), "_otel"),
    **dict.fromkeys(("RunTrace", "TraceNode", "build_traces", "render_text", "select_traces"),
                    "_trace"),
    "render_html": "_trace_html",
}
"""The names of traces and their OpenTelemetry export, each with its module: imported on first
use (PEP 562), so an operator opening its host observability does not load them."""


def __getattr__(name: str) -> Any:
    """Import a trace or OpenTelemetry name from its module on first use, then keep it here.

    Args:
        name: the attribute asked for.

    Returns:
        The object named ``name`` in ``__all__``.

    Raises:
        AttributeError: for a name this package does not export.
    """
    home = _LAZY.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The module's names, the not yet imported public ones included.

    Returns:
        The sorted names.
    """
    return sorted(set(globals()) | set(__all__))
