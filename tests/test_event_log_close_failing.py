"""One log failing to close (a full disk) still closes the others, and loses no span.

``OtelSink`` closed its forward sink first: a ``FileSink`` whose last flush failed raised
before the spans queued in the batch processor were sent, so a job's last runs never
reached the receiver. ``HostObservability`` closed our event log before the Flink Agents
one: when ours raised, the other file stayed open. The failure is still raised, after.
"""

from __future__ import annotations

import errno
from typing import Any

import pytest
from support import trace_agents

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.observability import (
    ApacheEventLog,
    EventLog,
    EventLogSink,
    HostObservability,
    OtelSink,
)


class FullDisk(EventLogSink):
    """Takes every record; its last flush fails as a full disk does."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def open(self, subtask: int | None = None, attempt: int | None = None) -> FullDisk:
        return self

    def write(self, record: dict[str, Any]) -> None:
        self.records.append(record)

    def close(self) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")


def test_otel_sink_sends_its_spans_when_its_forward_sink_fails_to_close():
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    sink = OtelSink(exporter=exporter, forward=FullDisk())
    job = (AgentsExecutionEnvironment.local(event_log=EventLog(sink=sink))
           .from_list([{"key": "a", "n": 1, "sku": "s-1"}]).apply(trace_agents.shop()))
    with pytest.raises(OSError, match="No space left"):
        job.run()
    roots = [s for s in exporter.get_finished_spans() if s.parent is None]
    assert [s.name for s in roots] == ["invoke_agent Shop"]


def test_the_flink_agents_log_is_closed_when_ours_fails_to(tmp_path):
    obs = HostObservability(metrics=False, event_log=EventLog(sink=FullDisk()),
                            apache_event_log=ApacheEventLog(str(tmp_path)), agent="a")
    apache = obs.apache_log
    assert apache is not None and apache._file is not None
    with pytest.raises(OSError, match="No space left"):
        obs.close()
    assert apache._file is None
