"""Runs that nest deeply: the trace's text, page and spans are made without recursion.

An event chain may be up to ``EventChainLimitError.LIMIT`` (1,000) actions long, and the
run that hits the limit is the one a user traces first. Each action of a chain is one level
of the trace's tree, so the text renderer (one Python frame per level), the OpenTelemetry
spans (two per level) and the page's JSON (orjson stops at 255 levels; a row nests two per
level, so a chain of about 130 actions) failed with ``RecursionError`` / ``TypeError:
Recursion limit reached`` on such runs.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    Event,
    EventChainLimitError,
    InputEvent,
    OutputEvent,
    RunnerContext,
    action,
)
from flink_agents_py.observability import (
    EventLog,
    MemorySink,
    build_traces,
    export_otel,
    render_html,
    render_text,
)
from flink_agents_py.observability._otel import spans_of
from flink_agents_py.observability._trace_html import page_data

pytestmark = pytest.mark.timeout(120)


class Hop(Event):
    hops: int = 0
    stop_at: int = -1


class Chain(Agent):
    """Each ``Hop`` sends the next until ``stop_at`` (never, when it is negative)."""

    @action(InputEvent, Hop)
    @staticmethod
    def hop(event: Event, ctx: RunnerContext) -> None:
        if isinstance(event, InputEvent):
            ctx.send_event(Hop(stop_at=event.input["stop_at"]))
        elif event.hops == event.stop_at:
            ctx.send_event(OutputEvent(output={"hops": event.hops}))
        else:
            ctx.send_event(Hop(hops=event.hops + 1, stop_at=event.stop_at))


def _records(stop_at: int) -> list[dict[str, Any]]:
    sink = MemorySink()
    (AgentsExecutionEnvironment.local(event_log=EventLog(sink=sink))
     .from_list([{"key": "k", "stop_at": stop_at}]).apply(Chain()).run())
    return sink.records


ACTIONS = EventChainLimitError.LIMIT + 1
"""The actions of the run stopped at the limit (the last one failed sending one more)."""


@pytest.fixture(scope="module")
def at_limit() -> list[dict[str, Any]]:
    """The event log's records of the run stopped at the limit: made once, read by each test
    (each builds its own traces from them)."""
    return _records(-1)


def test_the_run_stopped_at_the_event_chain_limit_prints_as_a_tree(at_limit):
    records = at_limit
    assert sum(r["kind"] == "action_started" for r in records) == ACTIONS
    [trace] = build_traces(records)
    text = render_text([trace])
    lines = text.splitlines()
    assert lines[0].startswith("run r0  key k  completed in ")
    # one line per action of the chain (each event folded into its only action), the last
    # the one that failed, deepest
    hops = [ln for ln in lines if re.search(r"(Hop|input) \S+.* -> hop", ln)]
    assert len(hops) == ACTIONS
    assert "!! failed action: EventChainLimitError" in hops[-1]
    assert hops[-1].index("└─") > hops[-2].index("└─") > hops[0].index("└─")
    assert "anomalies (1): 1 anomaly in 1 of 1 run, 1 run failed" in text


def test_its_spans_nest_one_per_action_under_the_run(at_limit):
    [trace] = build_traces(at_limit)
    spans = spans_of(trace, "Chain")
    assert spans[0]["name"] == "invoke_agent Chain" and spans[0]["parent"] is None
    assert [s["name"] for s in spans[1:]] == ["action hop"] * ACTIONS
    assert [s["parent"] for s in spans[1:]] == list(range(ACTIONS))
    assert spans[-1]["error"][0] == "EventChainLimitError"


def test_they_are_exported_each_under_its_parent(at_limit):
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    assert export_otel(build_traces(at_limit), exporter) == ACTIONS + 1
    spans = exporter.get_finished_spans()
    by_id = {s.context.span_id: s for s in spans}
    [deepest] = [s for s in spans if s.status.status_code.name == "ERROR"
                 and s.name == "action hop"]
    depth, span = 0, deepest
    while span.parent is not None:
        span = by_id[span.parent.span_id]
        depth += 1
    assert depth == ACTIONS and span.name == "invoke_agent Chain"


def test_a_chain_of_150_actions_makes_a_trace_page_with_every_row():
    [trace] = build_traces(_records(150))
    page = render_html([trace])
    embedded = page.split("<script type='application/json' id='trace-data'>", 1)[1]
    embedded = embedded.split("</script>", 1)[0]
    data = json.loads(embedded)
    assert data == json.loads(json.dumps(page_data([trace])))  # as orjson would write it
    row, depth = data["runs"][0]["t"], 0
    while "k" in row:
        [row] = row["k"]
        depth += 1
    assert depth == 1 + 151 + 1  # the input, 151 actions, the output
    assert row["l"] == 'OutputEvent e0 -> output: {"hops":150}'


def test_the_page_of_the_run_stopped_at_the_limit_is_written(at_limit):
    [trace] = build_traces(at_limit)
    page = render_html([trace])
    assert page.count('"l":"Hop ') == ACTIONS - 1  # the first action's event: the input
    assert "failed action: EventChainLimitError" in page
