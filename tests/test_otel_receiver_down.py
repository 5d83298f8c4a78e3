"""A receiver that is down does not hold the job's end (or ``trace --otlp``) for minutes.

The OTLP exporter retries a batch for about 6 s before it gives up, and the SDK's batch
processor, when the sink closes (``force_flush``, whose timeout the SDK ignores), sends
every queued batch one after the other: 6 s per 512 spans, so a job of a few thousand
records with ``OtelSink`` pointed at a collector that was down took minutes to end (on
Flink, longer than the task's cancellation timeout). Now a batch that failed after
retrying marks the receiver down: the next batches of a cooldown fail at once, unsent, and
are reported undelivered as before. The exporter's retries are simulated on a fake clock.
"""

from __future__ import annotations

from typing import Any

import pytest

import flink_agents_py.observability._otel as _otel
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent, Event, InputEvent, OutputEvent, RunnerContext, action
from flink_agents_py.observability import (
    EventLog,
    MemorySink,
    OtelExportError,
    OtelSink,
    build_traces,
    export_otel,
)

pytest.importorskip("opentelemetry.sdk")
from opentelemetry.sdk.trace.export import SpanExportResult  # noqa: E402

pytestmark = pytest.mark.timeout(120)


class Hop(Event):
    hops: int = 0


class Hops(Agent):
    """Three hops, then an output: 6 spans a run (the run and 5 actions)."""

    @action(InputEvent, Hop)
    @staticmethod
    def hop(event: Event, ctx: RunnerContext) -> None:
        if isinstance(event, InputEvent):
            ctx.send_event(Hop())
        elif event.hops == 3:
            ctx.send_event(OutputEvent(output={"key": ctx.key}))
        else:
            ctx.send_event(Hop(hops=event.hops + 1))


RUNS = 400
SPANS = RUNS * 6  # the run and 5 actions each: 4 batches of 512 and more


@pytest.fixture
def clock(monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(_otel, "_now", lambda: now[0], raising=False)
    return now


class Down:
    """An exporter whose receiver does not answer: each batch fails after 6 s of retries."""

    def __init__(self, clock: list[float], seconds: float = 6.0) -> None:
        self.clock, self.seconds, self.calls = clock, seconds, 0

    def export(self, spans: Any) -> Any:
        self.calls += 1
        self.clock[0] += self.seconds
        return SpanExportResult.FAILURE

    def shutdown(self) -> None:
        pass


def _run(event_log: Any) -> Any:
    return (AgentsExecutionEnvironment.local(event_log=event_log)
            .from_list([{"key": f"k{i}"} for i in range(RUNS)]).apply(Hops()).run())


def _traces() -> Any:
    sink = MemorySink()
    _run(EventLog(sink=sink))
    return build_traces(sink.records)


def test_trace_otlp_tries_one_batch_when_the_receiver_is_down(clock):
    traces = _traces()
    down = Down(clock)
    with pytest.raises(OtelExportError) as err:
        export_otel(traces, down)
    assert (err.value.delivered, err.value.total) == (0, SPANS)
    assert down.calls == 1  # not one 6 s retry per batch


def test_the_job_ends_after_one_batch_when_the_receiver_is_down(clock, caplog):
    down = Down(clock)
    with caplog.at_level("WARNING", logger="flink_agents_py.observability"):
        res = _run(EventLog(sink=OtelSink(exporter=down)))
    assert len(res.outputs) == RUNS
    assert down.calls == 1
    assert [r.getMessage() for r in caplog.records if "not delivered" in r.getMessage()] == [
        f"OtelSink: {SPANS} of {SPANS} spans were not delivered to the exporter: "
        "the exporter returned SpanExportResult.FAILURE"]


def test_a_batch_refused_at_once_does_not_stop_the_others(clock):
    class RefusesTheFirst(Down):
        def export(self, spans: Any) -> Any:
            self.calls += 1
            return SpanExportResult.FAILURE if self.calls == 1 else SpanExportResult.SUCCESS

    exporter = RefusesTheFirst(clock)
    with pytest.raises(OtelExportError) as err:
        export_otel(_traces(), exporter)
    assert exporter.calls > 3 and 0 < err.value.delivered == SPANS - 512


def test_batches_are_sent_again_after_the_cooldown(clock):
    down = Down(clock)
    delivery = _otel._Delivery(down)
    assert delivery.export([1, 2]) is SpanExportResult.FAILURE and down.calls == 1
    assert delivery.export([3]) is SpanExportResult.FAILURE and down.calls == 1  # unsent
    clock[0] += _otel._Delivery.COOLDOWN_S
    down.seconds = 0.0
    assert delivery.export([4]) is SpanExportResult.FAILURE and down.calls == 2  # tried
    assert (delivery.delivered, delivery.failed) == (0, 4)
