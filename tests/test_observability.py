"""Observability: metrics, the event log (parents, levels, redaction, truncation), traces.

The scenario: an orchestrator whose chat model asks, in one tool round, for the ``lookup``
tool and the internal sub-agent ``child``, then answers; a ``ctx.chat`` agent; and a restore
on a new ``AgentCore`` for replayed calls. Everything runs on the local runner or the core.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from support import subagent_tool_agents as sa
from support.observability_scenario import RECORDS, orchestrator
from support.probes import gate

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    ChatMessage,
    ChatModelSetup,
    InputEvent,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    action,
)
from flink_agents_py.integrations.chat_models import ScriptedChatModel
from flink_agents_py.observability import (
    AgentMetrics,
    EventLog,
    EventLogObserver,
    FileSink,
    MemorySink,
    Redactor,
    build_traces,
    read_event_log,
    render_html,
    render_text,
    truncate,
)
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import AgentCore, CompositeObserver, InMemoryKeyState

pytestmark = pytest.mark.timeout(60)

ROOT = Path(__file__).resolve().parent.parent


# -- the scenario (support.observability_scenario) -----------------------------------------
def run_local(agent: Agent, records: list[Any], **options: Any) -> Any:
    return AgentsExecutionEnvironment.local(**options).from_list(records).apply(agent).run()


# -- metrics -------------------------------------------------------------------------------
def test_metrics_of_a_known_run():
    result = run_local(orchestrator(), RECORDS)
    assert result.errors == []
    assert [o["answer"] for o in result.outputs] == [f"done question {i}" for i in range(3)]
    m = result.metrics
    assert (m["runs_started"], m["runs_completed"], m["runs_in_flight"]) == (3, 3, 0)
    assert m["outputs_emitted"] == 3
    assert m["actions_executed"] == {"_chat_model_action": 6, "_tool_call_action": 3,
                                     "answer": 3, "ask": 3, "run": 3}
    assert m["actions_failed"] == {}
    assert m["chats"] == {"om": 3} and m["chats_failed"] == {}
    assert m["chat_calls"] == {"om": 6}  # two rounds per chat
    # the scripted model reports output tokens = words of its answer ("done question N")
    assert m["output_tokens"] == {"om": 9} and m["input_tokens"] == {"om": 0}
    assert m["tool_calls"] == {"lookup": 3} and m["tool_calls_failed"] == {}
    assert m["subagent_calls"] == {"child": 3} and m["subagent_calls_failed"] == {}
    assert m["durable_calls_executed"] == 12  # 6 model calls, 3 tools, 3 sub-agent calls
    assert m["durable_calls_replayed"] == 0
    assert m["calls_in_flight"] == 0
    assert m["events_processed"] == 24
    assert m["events_processed_by_type"]["ToolRequestEvent"] == 3
    lat = m["latency_ms"]
    assert lat["run"]["count"] == 3
    assert lat["action"]["ask"]["count"] == 3
    assert lat["chat"]["om"]["count"] == 3
    assert lat["chat_call"]["om"]["count"] == 6
    assert lat["tool"]["lookup"]["count"] == 3
    assert lat["subagent"]["child"]["count"] == 3
    s = lat["chat"]["om"]
    assert 0 <= s["min"] <= s["p50"] <= s["p95"] <= s["max"]
    # the core's own counters agree
    assert result.counters["calls_executed"] == m["durable_calls_executed"]


def test_metrics_count_failures_by_name():
    # the child fails without a 'review' field: a failed delegation, and the tool round goes on
    result = run_local(orchestrator(child=sa.Picky()), RECORDS[:2])
    m = result.metrics
    assert m["subagent_calls"] == {"child": 2}
    assert m["subagent_calls_failed"] == {"child": 2}
    assert m["actions_failed"] == {"run": 2}  # the child's action, captured by its call


def test_metrics_can_be_turned_off():
    result = run_local(orchestrator(), RECORDS[:1], metrics=False)
    assert result.metrics == {} and len(result.outputs) == 1


class Exploding(Agent):
    @action(InputEvent)
    @staticmethod
    def boom(event: InputEvent, ctx: RunnerContext) -> None:
        raise ValueError(f"boom {event.input['n']}")


def test_failed_actions_are_counted_by_action():
    result = run_local(Exploding(), [{"key": "a", "n": 1}, {"key": "b", "n": 2}])
    assert len(result.errors) == 2
    assert result.metrics["actions_failed"] == {"boom": 2}
    assert result.metrics["actions_executed"] == {"boom": 2}


# -- event log: parents -----------------------------------------------------------------------
def chat_script(req: Any) -> Any:
    return "chatted: " + req.last_user_text


class ChatCaller(Agent):
    """``ctx.chat`` then a sub-agent call from the action itself."""

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        r = await ctx.chat("cm", [ChatMessage(content=event.input["text"])])
        handle = await ctx.submit_subagent("child", {"text": r.message.content})
        res = await handle
        ctx.send_event(OutputEvent(output={"chat": r.message.content,
                                           "child": res.result}))


def chat_caller() -> Agent:
    agent = ChatCaller()
    agent.add_resource("cconn", ResourceType.CHAT_MODEL_CONNECTION, ResourceDescriptor(
        ScriptedChatModel, function="test_observability:chat_script"))
    agent.add_resource("cm", ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="cconn", model="tiny-1"))
    agent.add_resource("child", *sa.internal(sa.Echo(), description="echoes",
                                             input_schema=sa.OBJECT_SCHEMA))
    return agent


def _check_parents(records: list[dict[str, Any]]) -> dict[str, int]:
    ids: dict[tuple[str, str], set[str]] = {}
    kinds = {"event": "event", "action_started": "action", "action_finished": "action",
             "call_started": "call", "call_finished": "call", "output": "output"}
    for r in records:
        if r["kind"] in kinds:
            ids.setdefault((json.dumps(r["key"]), kinds[r["kind"]]), set()).add(r["id"])
    seen: dict[str, int] = {}
    for r in records:
        kind = kinds.get(r["kind"])
        if kind is None:
            continue
        key = json.dumps(r["key"])
        seen[kind] = seen.get(kind, 0) + 1
        if kind == "event" and r["parent"] is None:
            assert r["type"] == "InputEvent" and r["id"].startswith("r") and "/" not in r["id"]
            continue
        assert r["parent"], r
        parent_kind = {"action": "event", "call": "action", "output": "event"}.get(kind)
        if kind == "event":
            parent_kind = "call" if r["id"].endswith("/b") else "action"
        assert r["parent"] in ids.get((key, parent_kind), set()), (
            f"{r['kind']} {r['id']}: parent {r['parent']} ({parent_kind}) not in the log")
        assert r["id"].startswith(r["parent"])
    return seen


def test_every_record_has_a_parent_in_the_log_across_subagent_and_chat_calls():
    sink = MemorySink()
    result = run_local(orchestrator(), RECORDS, event_log=EventLog(sink=sink))
    assert len(result.outputs) == 3
    seen = _check_parents(sink.records)
    assert seen["output"] == 3
    kinds = {(r.get("call_kind"), r["kind"]) for r in sink.records if "call" in r["kind"]}
    assert {("chat_model", "call_finished"), ("tool", "call_finished"),
            ("subagent", "call_finished")} <= kinds
    # a sub-agent's bootstrap event hangs under the sub-agent call
    boots = [r for r in sink.records if r["kind"] == "event" and r["id"].endswith("/b")]
    assert len(boots) == 3 and all(r["parent"].endswith("/c1") for r in boots)

    sink = MemorySink()
    sa.reset()
    result = run_local(chat_caller(), [{"key": "x", "text": "hello"}],
                       event_log=EventLog(sink=sink))
    assert result.outputs == [{"chat": "chatted: hello",
                               "child": [{"got": {"text": "chatted: hello"}}]}]
    _check_parents(sink.records)
    calls = {r["id"]: r for r in sink.records if r["kind"] == "call_finished"}
    assert calls["r0/go/c0"]["call_kind"] == "chat" and calls["r0/go/c0"]["name"] == "cm"
    assert calls["r0/go/c1"]["call_kind"] == "subagent"
    model_call = calls["r0/go/c0/b/_chat_model_action/c0"]
    assert model_call["model"] == "cm" and model_call["chat"] == "r0/go/c0/b"
    assert model_call["provider_model"] == "tiny-1" and model_call["round"] == 1
    assert model_call["usage"] == {"input_tokens": 0, "output_tokens": 2}
    assert result.metrics["chats"] == {"cm": 1} and result.metrics["chat_calls"] == {"cm": 1}


def test_log_record_kinds_and_header(tmp_path):
    path = tmp_path / "log.jsonl"
    run_local(orchestrator(), RECORDS[:1], event_log=str(path))
    records = read_event_log([path])
    assert records[0]["kind"] == "log_opened" and records[0]["host"] == "local"
    kinds = [r["kind"] for r in records]
    assert kinds[1] == "run_started" and kinds[-1] == "run_completed"
    for kind in ("event", "action_started", "action_finished", "call_started",
                 "call_finished", "output"):
        assert kind in kinds
    for r in records:
        assert isinstance(r["ts"], float) and r.get("key") in (None, "k0")
    finished = [r for r in records if r["kind"] == "action_finished"]
    assert all(r["status"] == "ok" and r["duration_ms"] >= 0 for r in finished)
    # the file is appended to by a second run
    run_local(orchestrator(), RECORDS[1:2], event_log=str(path))
    assert sum(r["kind"] == "log_opened" for r in read_event_log([path])) == 2


# -- event log: levels, redaction, truncation -------------------------------------------------
SECRET_RECORD = {
    "key": "s", "ask": "hi", "api_key": "k-123", "nested": {"Authorization": "Basic abc",
                                                            "password": "hunter2",
                                                            "x-api-key": "zzz"},
    "headers": [{"apiKey": "abc"}], "note": "use Bearer abcdefghijklmnop please",
    "openai": "sk-abcdefghijklmnopqrstuvwxyz", "ssn": "123-45-6789",
    "max_tokens": 12, "input_tokens": 3, "token": "t0k",
}


def test_redaction_of_secret_names_configured_fields_and_secret_values():
    red = Redactor(fields=["SSN"])
    out = red(SECRET_RECORD)
    assert out["api_key"] == out["token"] == out["ssn"] == "[REDACTED]"
    assert out["nested"] == {"Authorization": "[REDACTED]", "password": "[REDACTED]",
                             "x-api-key": "[REDACTED]"}
    assert out["headers"] == [{"apiKey": "[REDACTED]"}]
    assert out["note"] == "use [REDACTED] please"
    assert out["openai"] == "[REDACTED]"
    assert (out["max_tokens"], out["input_tokens"], out["ask"]) == (12, 3, "hi")
    assert SECRET_RECORD["api_key"] == "k-123"  # the input is not changed


def test_event_log_redacts_and_truncates_payloads():
    sink = MemorySink()
    big = "x" * 5000
    run_local(orchestrator(), [{**SECRET_RECORD, "blob": big}],
              event_log=EventLog(sink=sink, max_chars=300, redact_fields=["ssn"]))
    text = json.dumps(sink.records)
    for secret in ("k-123", "Basic abc", "hunter2", "abcdefghijklmnop", "123-45-6789", "t0k"):
        assert secret not in text
    [inp] = [r for r in sink.records if r["kind"] == "event" and r["id"] == "r0"]
    cut = inp["data"]["input"]
    assert cut["$truncated"] > 5000 and len(cut["preview"]) == 300
    assert "hunter2" not in cut["preview"] and "[REDACTED]" in cut["preview"]
    assert all(len(json.dumps(r)) < 2000 for r in sink.records)


def test_truncate():
    assert truncate("abc", 10) == "abc"
    assert truncate("a" * 20, 5) == "aaaaa...[+15 chars]"
    assert truncate({"a": 1}, 100) == {"a": 1}
    assert truncate({"a": "b" * 50}, 10) == {"$truncated": 58, "preview": '{"a":"bbbb'}
    assert truncate("a" * 20, 0) == "a" * 20


def test_levels(tmp_path):
    path = tmp_path / "off.jsonl"
    run_local(orchestrator(), RECORDS[:1], event_log=EventLog(path, level="off"))
    assert not path.exists()
    standard, verbose = MemorySink(), MemorySink()
    run_local(orchestrator(), RECORDS[:1], event_log=EventLog(sink=standard))
    run_local(orchestrator(), RECORDS[:1], event_log=EventLog(sink=verbose, level="verbose"))
    assert [r["kind"] for r in standard.records] == [r["kind"] for r in verbose.records]
    assert not any("result" in r for r in standard.records)
    assert not any("data" in r for r in standard.records
                   if r["kind"] == "event" and r["type"] == "ToolRequestEvent")
    results = [r for r in verbose.records if r["kind"] == "call_finished"]
    assert results and all("result" in r for r in results)
    tool_req = [r for r in verbose.records if r["kind"] == "event"
                and r["type"] == "ToolRequestEvent"]
    assert tool_req[0]["data"]["tool_calls"][0]["name"] == "lookup"
    with pytest.raises(ValueError, match="level"):
        EventLog(path, level="loud")


def test_file_sink_paths_per_subtask(tmp_path):
    assert FileSink.subtask_path("/l/events.jsonl", 2, 0) == "/l/events-2.jsonl"
    assert FileSink.subtask_path("/l/ev-{subtask}-{attempt}.log", 1, 3) == "/l/ev-1-3.log"
    assert FileSink.subtask_path("/l/events.jsonl", None, None) == "/l/events.jsonl"
    import pickle

    log = EventLog(tmp_path / "e.jsonl")
    obs = pickle.loads(pickle.dumps(log)).open(host="flink", subtask=1, attempt=0)
    obs.close()
    [header] = read_event_log([tmp_path / "e-1.jsonl"])
    assert (header["kind"], header["subtask"], header["attempt"]) == ("log_opened", 1, 0)


# -- replay: metrics and trace ---------------------------------------------------------------


def first_step(x: int) -> int:
    return x + 1


def gated_step(x: int) -> int:
    gate().wait(10)
    return x * 10


class TwoSteps(Agent):
    @action(InputEvent)
    @staticmethod
    async def work(event: InputEvent, ctx: RunnerContext) -> None:
        a = await ctx.durable_execute_async(first_step, event.input["x"])
        b = await ctx.durable_execute_async(gated_step, a)
        ctx.send_event(OutputEvent(output={"a": a, "b": b}))


def _advance_until(core: AgentCore, key: str, state: InMemoryKeyState, done) -> list[Any]:
    outputs: list[Any] = []
    res = core.advance(key, state)
    outputs.extend(res.outputs)
    while not done(state) and res.busy:
        assert core.wait_for(key, 10)
        res = core.advance(key, state)
        outputs.extend(res.outputs)
    return outputs


def test_replayed_calls_after_a_restore_in_metrics_and_trace(tmp_path):
    plan = AgentPlan.from_agent(TwoSteps())
    path = tmp_path / "replay.jsonl"
    log1 = EventLog(path).open()
    old = AgentCore(plan, observer=CompositeObserver(AgentMetrics(), log1))
    old.open()
    state = InMemoryKeyState()
    try:
        old.on_input("k", {"x": 1}, state)
        _advance_until(old, "k", state, lambda s: "1" in next(iter(s.run.inflight.values())).calls)
        snapshot = copy.deepcopy(state)  # c0 recorded, c1 in flight: the "checkpoint"
    finally:
        gate().set()
        old.close()
        log1.close()
    metrics = AgentMetrics()
    log2 = EventLog(path).open()
    new = AgentCore(plan, observer=CompositeObserver(metrics, log2))
    new.open()
    try:
        outputs = _advance_until(new, "k", snapshot, lambda s: s.run is None)
    finally:
        new.close()
        log2.close()
    assert outputs == [{"a": 2, "b": 20}]
    m = metrics.snapshot()
    assert m["durable_calls_replayed"] == 1 and m["durable_calls_executed"] == 1
    assert m["actions_reentered"] == {"work": 1}
    assert m["runs_completed"] == 1 and m["runs_in_flight"] == 0 and m["calls_in_flight"] == 0

    text = render_text(build_traces(read_event_log([path])))
    assert "replayed call" in text and "re-entered after a restore" in text
    assert "anomalies (" in text


# -- traces ----------------------------------------------------------------------------------
def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("flink-agents-py")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "flink_agents_py.cli"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=60, env=env,
                          cwd=ROOT)


def test_trace_command_renders_a_run_of_a_real_log(tmp_path):
    path = tmp_path / "events.jsonl"
    run_local(orchestrator(), RECORDS, event_log=str(path))
    out_html = tmp_path / "trace.html"
    proc = _cli("trace", str(path), "--key", "k1", "--html", str(out_html))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("run r0  key k1  completed in ")
    assert "chat calls 2 (tokens 0 in / 3 out), tool calls 1, sub-agent calls 1" in lines[0]
    expected_in_order = [
        'input r0: {"key":"k1","ask":"question 1"} -> ask',
        "ChatRequestEvent e0  model=om -> _chat_model_action",
        "chat call #1 om (c0)",
        "-> tools: lookup, _subagent_child",
        "ToolRequestEvent e0  tools: lookup, _subagent_child -> _tool_call_action",
        "tool lookup (c0)",
        "sub-agent child (c1)",
        "InputEvent b -> run",
        "ToolResponseEvent e0 -> _chat_model_action",
        "chat call #2 om (c0)",
        "tokens 0 in / 3 out  -> answer (stop)",
        "ChatResponseEvent e0 -> answer",
        'OutputEvent e0 -> output: {"answer":"done question 1","error":null}',
    ]
    pos = 0
    text = proc.stdout
    for frag in expected_in_order:
        found = text.find(frag, pos)
        assert found >= 0, f"{frag!r} not found in order in:\n{text}"
        pos = found
    assert "k0" not in text and "k2" not in text
    assert lines[-1] == "anomalies: none"
    # nesting: the tool call is deeper than the chat call, the sub-agent's action deeper still
    indent = {frag: next(len(ln) - len(ln.lstrip(" │├└─")) for ln in lines if frag in ln)
              for frag in ("chat call #1", "tool lookup", "InputEvent b", "chat call #2")}
    assert indent["chat call #1"] < indent["tool lookup"] < indent["InputEvent b"]
    assert indent["tool lookup"] < indent["chat call #2"]
    page = out_html.read_text()
    assert page.startswith("<!DOCTYPE html>") and "tool lookup (c0)" in page
    for external in ("<script src", "<link", "http://", "https://", "@import"):
        assert external not in page

    proc = _cli("trace", str(path), "--key", "nope")
    assert proc.returncode == 1 and "no run of key nope" in proc.stderr


def test_trace_flags_anomalies():
    sink = MemorySink()
    run_local(orchestrator(child=sa.Picky()), RECORDS[:1], event_log=EventLog(sink=sink))
    run_local(Exploding(), [{"key": "boom", "n": 1}], event_log=EventLog(sink=sink))
    records = list(sink.records)
    # an event whose parent is not in the log: drop the action that sent the ToolRequestEvent
    tool_req = next(r for r in records if r["kind"] == "event" and r["type"] == "ToolRequestEvent")
    records = [r for r in records if not (r.get("id") == tool_req["parent"]
                                          and r["kind"].startswith("action"))]
    traces = build_traces(records)
    text = render_text(traces)
    assert f"orphan: parent {tool_req['parent']} is not in the log" in text
    assert "failed delegation: sub-agent 'child' failed" in text
    assert "failed action: ValueError: picky needs a 'review' field" in text
    assert "failed action: ValueError: boom 1" in text
    anomalies = [f for t in traces for _, f in t.anomalies]
    assert len(anomalies) >= 4
    page = render_html(traces)
    assert '"f":["orphan: parent' in page  # the flag of the row, in the page's run data


def test_event_log_observer_survives_unloggable_values():
    sink = MemorySink()
    obs = EventLogObserver(sink)
    obs.run_started(("tuple", 1), 0)
    obs.output_emitted(("tuple", 1), {"obj": object(), 1: "x"}, "r0/a/e0")
    obs.run_completed(("tuple", 1), 0)
    assert [r["kind"] for r in sink.records] == ["run_started", "output", "run_completed"]
    orjson.dumps(sink.records, default=repr)


# -- abandoned calls, call kinds, bench smoke ----------------------------------------------------
def slow_side_effect(n: int) -> int:
    import time

    time.sleep(0.05)
    return n


class FireAndForget(Agent):
    @action(InputEvent)
    @staticmethod
    def go(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.durable_execute_async(slow_side_effect, 1)  # never awaited
        ctx.send_event(OutputEvent(output="sent"))


def test_a_call_its_action_never_awaited_finishes_before_the_action():
    """Issue 28, defect 3: a started call belongs to its action (as a task to a TaskGroup):
    the action completes once the call's outcome is recorded, so it is not abandoned."""
    sink = MemorySink()
    result = run_local(FireAndForget(), [{"key": "a"}], event_log=EventLog(sink=sink))
    assert result.outputs == ["sent"]
    assert result.metrics["calls_in_flight"] == 0
    [end] = [r for r in sink.records if r["kind"] == "call_finished"]
    assert end["status"] == "ok" and end["call_kind"] == "function"
    kinds = [r["kind"] for r in sink.records]
    assert kinds.index("call_finished") < kinds.index("action_finished")
    assert "abandoned call" not in render_text(build_traces(sink.records))


def test_bench_p4_and_p5_smoke():
    from bench import _p4, _p5

    row = _p4.measure(keys=40, calls=3, payload_bytes=10, limit=8)
    assert row["ok"] and row["replayed"] == 120 and row["executed"] == 40
    row = _p5.measure("calls", keys=20, observe=True)
    assert row["ok"] and row["observer_keys_left"] == 0 and row["state_b_per_key_after"] < 100
