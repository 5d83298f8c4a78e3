"""The trace tool at scale: anomalies over every run, filters, tracebacks, timeline data.

The log: 3,000 runs of ``trace_agents.Shop`` on the local runner (a scripted model calling
two tools, then answering); record 83 fails in its ``ask`` action (``KeyError: 'missing'``)
and the last run's completion is missing (an unfinished run).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support import trace_agents

from flink_agents_py.observability import (
    EventLog,
    MemorySink,
    build_traces,
    read_event_log,
    render_html,
    render_text,
    select_traces,
)
from flink_agents_py.observability._trace_html import page_data

pytestmark = pytest.mark.timeout(300)

RUNS = 3000
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def log() -> Path:
    return trace_agents.cached_log(RUNS)


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``flink-agents-py`` as a user runs it: the venv's script, from ``cwd``."""
    exe = Path(sys.executable).with_name("flink-agents-py")
    assert exe.exists(), f"{exe} is missing: pip install -e . installs it"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=120,
                          env=env, cwd=cwd)


def test_anomalies_of_every_run_are_listed_though_50_runs_are_printed(log, tmp_path):
    proc = _cli("trace", str(log), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.count("\nrun r0  key ") + out.startswith("run r0  key ") == 50
    assert "runs: 50 shown of 3000 (others: --limit 0" in out
    assert "anomalies: none" not in out
    assert "anomalies (2): 2 anomalies in 2 of 3000 runs, 1 run failed" in out
    assert ("  #84 key k83 action r0/ask: failed action: KeyError: 'missing' "
            "(run not shown)") in out
    assert "  #3000 key k2999 run r0: unfinished run (run not shown)" in out


def test_failed_and_anomalous_filters(log, tmp_path):
    proc = _cli("trace", str(log), "--failed", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    trees = [ln for ln in proc.stdout.splitlines() if ln.startswith("run r0  key ")]
    assert len(trees) == 1 and trees[0].startswith("run r0  key k83  completed")
    assert "!! failed action: KeyError: 'missing'" in proc.stdout
    assert "runs: 1 shown of 1" in proc.stdout

    proc = _cli("trace", str(log), "--anomalous", "--limit", "0", cwd=tmp_path)
    keys = re.findall(r"^run r0  key (k\d+)", proc.stdout, flags=re.M)
    assert keys == ["k83", "k2999"]
    assert "run r0  key k2999  [actions" in proc.stdout  # no "completed": it never ended

    proc = _cli("trace", str(log), "--failed", "--key", "k5", cwd=tmp_path)
    assert proc.returncode == 1 and "no failed run of key k5" in proc.stderr


def test_html_of_thousands_of_runs_embeds_each_run_once(log, tmp_path):
    out = tmp_path / "trace.html"
    proc = _cli("trace", str(log), "--html", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert f"wrote {out} (3000 runs)" in proc.stderr
    page = out.read_text(encoding="utf-8")
    for external in ("<script src", "<link", "http://", "https://", "@import"):
        assert external not in page
    data = json.loads(re.search(r"<script type='application/json' id='trace-data'>(.*?)"
                                r"</script>", page, flags=re.S).group(1))
    assert len(data["runs"]) == 3000
    assert page.count('"r":"r0"') == 3000  # once each: no pre-rendered copy of the runs
    assert "<li" not in page.split("<script")[0]  # the trees are drawn by the script
    statuses = {r["k"]: r["st"] for r in data["runs"]}
    assert statuses["k83"] == "failed" and statuses["k2999"] == "anomalous"
    assert sum(s == "ok" for s in statuses.values()) == 2998
    # each anomaly points at its run and at the row that shows the failing node
    [failed] = [a for a in data["anomalies"] if a[3]]
    run = data["runs"][failed[0]]
    assert run["k"] == "k83"
    row = run["t"]
    for i in failed[1].split("."):
        row = row["k"][int(i)]
    assert row["f"] == ["failed action: KeyError: 'missing'"] and row["x"] == 1
    assert row["p"]["action"]["error"] == "KeyError: 'missing'"


def test_timeline_data_follows_the_log_clock(log):
    records = [r for r in read_event_log([log]) if r.get("key") == "k7"]
    [trace] = build_traces(records)
    [run] = page_data([trace])["runs"]

    rows = []

    def walk(r):
        rows.append(r)
        for c in r.get("k", []):
            walk(c)

    walk(run["t"])
    spans = [r for r in rows if "e" in r]
    # the run, 5 actions (events folded into them), 2 model calls and 2 tool calls
    assert sorted(r["b"] for r in spans) == sorted(
        ["run"] + ["action"] * 5 + ["chat_model"] * 2 + ["tool"] * 2)
    total = run["t"]["e"]
    for r in spans:
        assert 0 <= r["s"] <= r["e"] <= total
    first_chat, second_chat = [r for r in rows if r["b"] == "chat_model"]
    tools = [r for r in rows if r["b"] == "tool"]
    # the tools run after the model asked for them; the second round after both answered
    assert all(first_chat["e"] <= t["s"] for t in tools)
    assert all(t["e"] <= second_chat["s"] for t in tools)
    marks = [r for r in rows if r.get("m")]
    assert marks and all("e" not in r for r in marks)  # outputs: a moment, no bar


TRACEBACK = ('Traceback (most recent call last):\n  File "/home/me/shop.py", line 88, in ask\n'
             '    record["missing"]\nKeyError: \'missing\'\n')


def _failing_records() -> list[dict]:
    sink = MemorySink()
    from flink_agents_py import AgentsExecutionEnvironment

    (AgentsExecutionEnvironment.local(event_log=EventLog(sink=sink))
     .from_list([{"key": "a", "n": 1, "sku": "s"}, {"key": "b", "n": trace_agents.FAILING,
                                                   "sku": "s"}])
     .apply(trace_agents.shop()).run())
    return sink.records


def test_a_failing_nodes_traceback_is_shown_under_it():
    records = _failing_records()
    failed = next(r for r in records if r["kind"] == "action_finished"
                  and r["status"] == "failed")
    # the runtime writes it (it names the user's file and line); here it is replaced by a
    # fixed one, to pin how it is shown
    assert "trace_agents.py" in failed["traceback"]
    assert "KeyError: 'missing'" in failed["traceback"]
    failed["traceback"] = TRACEBACK
    traces = build_traces(records)
    text = render_text(select_traces(traces, key="b"))
    lines = text.splitlines()
    at = next(i for i, ln in enumerate(lines) if "!! failed action: KeyError" in ln)
    assert lines[at + 1:at + 5] == [
        "      ┆ Traceback (most recent call last):",
        '      ┆   File "/home/me/shop.py", line 88, in ask',
        '      ┆     record["missing"]',
        "      ┆ KeyError: 'missing'"]
    assert "┆" not in render_text(select_traces(traces, key="a"))
    [run] = page_data(select_traces(traces, key="b"))["runs"]
    assert run["t"]["k"][0]["tb"] == TRACEBACK
    assert "traceback" not in run["t"]["k"][0]["p"]["action"]  # shown once, on its own
    assert render_html(traces).count("shop.py") == 1


def test_select_traces_rejects_an_unknown_status():
    with pytest.raises(ValueError, match="status must be 'failed' or 'anomalous'"):
        select_traces([], status="broken")


USER_JOB = '''
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action


class Doubler(Agent):
    @action(InputEvent)
    @staticmethod
    def double(event: InputEvent, ctx: RunnerContext) -> None:
        record = event.input
        if record["n"] == 83:
            record = {"key": record["key"]}
        ctx.send_event(OutputEvent(output=record["n"] * 2))


if __name__ == "__main__":
    records = [{"key": f"k{i}", "n": i} for i in range(120)]
    result = (AgentsExecutionEnvironment.local(event_log="out/events.jsonl")
              .from_list(records).apply(Doubler()).run())
    print(len(result.outputs), "outputs", len(result.errors), "errors")
'''


def test_a_users_job_outside_the_repository_then_trace(tmp_path):
    (tmp_path / "myjob.py").write_text(USER_JOB)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "myjob.py"], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "119 outputs 1 errors" in proc.stdout

    proc = _cli("trace", "out/events.jsonl", "--html", "out/trace.html", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "runs: 50 shown of 120" in proc.stdout
    assert ("#84 key k83 action r0/double: failed action: KeyError: 'n' (run not shown)"
            in proc.stdout)
    assert (tmp_path / "out" / "trace.html").stat().st_size > 0

    proc = _cli("trace", "out/events.jsonl", "--failed", cwd=tmp_path)
    lines = proc.stdout.splitlines()
    at = next(i for i, ln in enumerate(lines) if "!! failed action: KeyError: 'n'" in ln)
    traceback = "\n".join(ln for ln in lines[at + 1:] if "┆" in ln)
    # where it happened: the user's file, line and code, under the failing node
    line = USER_JOB.splitlines().index(
        '        ctx.send_event(OutputEvent(output=record["n"] * 2))') + 1
    assert f'myjob.py", line {line}, in double' in traceback
    assert 'ctx.send_event(OutputEvent(output=record["n"] * 2))' in traceback
    assert traceback.rstrip().endswith("KeyError: 'n'")


def test_payloads_cannot_break_out_of_the_page():
    sink = MemorySink()
    from flink_agents_py.observability import EventLogObserver

    obs = EventLogObserver(sink)
    evil = "</script><!--<script>alert(1)</script>"
    obs.run_started(evil, 0)
    obs.output_emitted(evil, {"text": evil}, "r0/a/e0")
    obs.run_completed(evil, 0)
    page = render_html(build_traces(sink.records))
    body = page.split("<script type='application/json' id='trace-data'>", 1)[1]
    data, rest = body.split("</script>", 1)
    assert "<" not in data
    assert json.loads(data)["runs"][0]["k"] == evil
    assert rest.startswith("<script>") and rest.count("</script>") == 1
