"""Runs of different jobs written to one event log stay apart; a job's own restore merges.

A file sink appends, so running a program twice with the same ``event_log=`` path puts two
jobs in one file. Their runs have the same keys and run ids (``r0`` of key ``a``): the trace
merged them into one run (half the runs shown, one job's timings and outputs over the
other's), and ``trace --otlp`` drew new random ids on each sending, so sending a log again
(after exit status 3) duplicated every trace. The log's header now names the job's lineage:
runs are told apart by it, and span ids derive from it, so a log sent twice lands on the
same traces and a run sent live by ``OtelSink`` and later from its file gets the same ids.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from support import trace_agents

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.observability import (
    EventLog,
    FileSink,
    OtelSink,
    build_traces,
    export_otel,
    read_event_log,
)

ROOT = Path(__file__).resolve().parents[1]

PROGRAM = textwrap.dedent("""
    import sys

    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action

    class Echo(Agent):
        @action(InputEvent)
        @staticmethod
        async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
            ctx.send_event(OutputEvent(output={"echo": event.input["text"]}))

    if __name__ == "__main__":
        env = AgentsExecutionEnvironment.local(event_log="out/events.jsonl")
        rows = [{"key": "a", "text": sys.argv[1]}, {"key": "b", "text": sys.argv[1]}]
        print(env.from_list(rows).apply(Echo()).collect())
""")


def _python(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


def test_a_program_run_twice_into_one_log_shows_both_jobs_runs(tmp_path):
    (tmp_path / "echo_job.py").write_text(PROGRAM)
    for text in ("first", "second"):
        assert _python(tmp_path, "echo_job.py", text).returncode == 0
    traced = _python(tmp_path, "-m", "flink_agents_py", "trace", "out/events.jsonl")
    assert traced.returncode == 0, traced.stderr
    assert "runs: 4 shown of 4" in traced.stdout
    assert traced.stdout.count('output: {"echo":"first"}') == 2
    assert traced.stdout.count('output: {"echo":"second"}') == 2
    heads = [line for line in traced.stdout.splitlines() if " run r0  key " in line]
    assert len(heads) == 4 and all(line.startswith("job ") for line in heads)
    assert len({line.split()[1] for line in heads}) == 2  # two jobs, named
    assert "anomalies: none" in traced.stdout


def test_a_job_restored_from_its_snapshot_keeps_one_run_per_key_in_the_log(tmp_path):
    path = tmp_path / "e.jsonl"
    snapshots: list[Any] = []

    def checkpoint(job: Any) -> None:
        snap = job.snapshot()
        if any(k["run"] for k in snap["keys"]):
            snapshots.append(json.loads(json.dumps(snap)))

    def job() -> Any:
        return (AgentsExecutionEnvironment.local(event_log=EventLog(path))
                .from_list([{"key": "a", "n": 1, "sku": "s-1"}]).apply(trace_agents.shop()))

    job().run(on_step=checkpoint)
    job().restore(snapshots[-1]).run()
    [trace] = build_traces(read_event_log([path]))  # the restore's records join the run
    assert trace.root.end is not None and trace.totals()["outputs"] == 1
    assert any("replayed" in f or "re-entered" in f for n in trace.walk() for f in n.flags)


otel = pytest.importorskip("opentelemetry.sdk")
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)


def _ids(spans: Any) -> set[tuple[str, int, int]]:
    return {(s.attributes["flink_agents.id"], s.context.trace_id, s.context.span_id)
            for s in spans}


def _shop_log(path: Path, sink: Any = None) -> None:
    log = EventLog(sink=sink) if sink is not None else EventLog(path)
    (AgentsExecutionEnvironment.local(event_log=log)
     .from_list([{"key": "a", "n": 1, "sku": "s-1"}, {"key": "b", "n": 2, "sku": "s-2"}])
     .apply(trace_agents.shop()).run())


def test_a_log_sent_twice_lands_on_the_same_trace_and_span_ids(tmp_path):
    path = tmp_path / "e.jsonl"
    _shop_log(path)
    sent = []
    for _ in range(2):
        exporter = InMemorySpanExporter()
        export_otel(build_traces(read_event_log([path])), exporter)
        sent.append(exporter.get_finished_spans())
    assert len(sent[0]) == len(sent[1]) == len(_ids(sent[0])) > 0
    assert _ids(sent[0]) == _ids(sent[1])


def test_two_jobs_in_one_log_are_two_sets_of_traces(tmp_path):
    path = tmp_path / "e.jsonl"
    _shop_log(path)
    _shop_log(path)
    exporter = InMemorySpanExporter()
    export_otel(build_traces(read_event_log([path])), exporter)
    roots = [s for s in exporter.get_finished_spans() if s.parent is None]
    assert len(roots) == 4 and len({s.context.trace_id for s in roots}) == 4


def test_a_run_sent_live_and_later_from_its_file_has_the_same_ids(tmp_path):
    path = tmp_path / "e.jsonl"
    live = InMemorySpanExporter()
    _shop_log(path, OtelSink(exporter=live, forward=FileSink(path)))
    later = InMemorySpanExporter()
    export_otel(build_traces(read_event_log([path])), later)
    assert _ids(live.get_finished_spans()) == _ids(later.get_finished_spans())


def test_trace_says_which_lines_of_a_damaged_log_it_skipped(tmp_path):
    (tmp_path / "echo_job.py").write_text(PROGRAM)
    assert _python(tmp_path, "echo_job.py", "hi").returncode == 0
    log = tmp_path / "out" / "events.jsonl"
    lines = log.read_bytes().splitlines(keepends=True)
    lines[3] = b"\x00\x00\x00 damaged\n"  # a block lost in a crash
    log.write_bytes(b"".join(lines) + b'{"ts":1.0,"kind":"run_sta')  # a job still writing
    traced = _python(tmp_path, "-m", "flink_agents_py", "trace", "out/events.jsonl")
    assert traced.returncode == 0
    assert "run r0  key b" in traced.stdout
    assert traced.stderr.strip() == (
        "flink-agents-py trace: skipped 2 lines that are no JSON record (cut short or "
        f"damaged): out/events.jsonl:4, out/events.jsonl:{len(lines) + 1}")
