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

from typing import TYPE_CHECKING

from ..api.internal import lazy_exports
from ..runtime.internal import escape_controls
from ._apache_event_log import ApacheEventLog
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
from ._tracking import CallInfo, TrackingObserver

if TYPE_CHECKING:  # read back from a finished log: imported on first use (below)
    from ._otel import OtelExportError, OtelSink, export_otel, otlp_exporter
    from ._trace import RunTrace, TraceNode, build_traces, render_text, select_traces
    from ._trace_html import render_html

__all__ = [
    "AgentMetrics",
    "ApacheEventLog",
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


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, __all__)
