"""OpenTelemetry export of trace trees: span names, parent links, GenAI attributes.

Spans are caught with the SDK's in-memory exporter; the OTLP path (``trace --otlp``) is
checked against a small OTLP/HTTP receiver on 127.0.0.1 that decodes what it gets.
"""

from __future__ import annotations

import http.server
import os
import subprocess
import sys
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
from support import subagent_tool_agents as sa
from support import trace_agents

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent, InputEvent, OutputEvent, action
from flink_agents_py.observability import (
    EventLog,
    FileSink,
    MemorySink,
    OtelSink,
    build_traces,
    export_otel,
    read_event_log,
)

pytest.importorskip("opentelemetry.sdk")
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)
from opentelemetry.trace import SpanKind, StatusCode  # noqa: E402

pytestmark = pytest.mark.timeout(120)


def _run(agent: Any, records: list[Any], event_log: Any) -> Any:
    return (AgentsExecutionEnvironment.local(event_log=event_log).from_list(records)
            .apply(agent).run())


def _shop_records() -> list[dict[str, Any]]:
    sink = MemorySink()
    _run(trace_agents.shop(), [{"key": "a", "n": 1, "sku": "s-1"},
                               {"key": "b", "n": trace_agents.FAILING, "sku": "s-2"}],
         EventLog(sink=sink))
    return sink.records


def _by_trace(spans: Any) -> dict[int, list[Any]]:
    out: dict[int, list[Any]] = {}
    for s in spans:
        out.setdefault(s.context.trace_id, []).append(s)
    return out


def test_a_run_becomes_one_trace_of_genai_spans():
    exporter = InMemorySpanExporter()
    records = _shop_records()
    n = export_otel(build_traces(records), exporter, service_name="shop-svc",
                    agent_name="shop")
    spans = exporter.get_finished_spans()
    assert n == len(spans)
    traces = _by_trace(spans)
    assert len(traces) == 2  # one per run
    ok = next(t for t in traces.values()
              if any(s.attributes.get("flink_agents.key") == "a" for s in t))
    by_name: dict[str, list[Any]] = {}
    for s in ok:
        by_name.setdefault(s.name, []).append(s)
    assert sorted(by_name) == sorted([
        "invoke_agent shop", "action ask", "action _chat_model_action",
        "action _tool_call_action", "action answer", "chat shop-llm-1",
        "execute_tool stock", "execute_tool price"])
    [root] = by_name["invoke_agent shop"]
    assert root.parent is None
    assert root.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert root.attributes["gen_ai.agent.name"] == "shop"
    assert root.attributes["flink_agents.status"] == "ok"
    assert root.status.status_code is StatusCode.UNSET
    assert root.resource.attributes["service.name"] == "shop-svc"
    ids = {s.context.span_id: s for s in ok}

    def parent(s: Any) -> Any:
        return ids[s.parent.span_id]

    # parent links: run -> ask -> _chat_model_action -> chat; tools under the tool action
    [ask] = by_name["action ask"]
    assert parent(ask) is root
    chats = by_name["chat shop-llm-1"]
    assert len(chats) == 2 and all(parent(c).name == "action _chat_model_action" for c in chats)
    first, second = sorted(chats, key=lambda s: s.start_time)
    assert parent(parent(first)) is ask
    for tool in ("stock", "price"):
        [span] = by_name[f"execute_tool {tool}"]
        assert parent(span).name == "action _tool_call_action"
        assert span.attributes["gen_ai.operation.name"] == "execute_tool"
        assert span.attributes["gen_ai.tool.name"] == tool
    assert first.kind is SpanKind.CLIENT
    assert first.attributes["gen_ai.operation.name"] == "chat"
    assert first.attributes["gen_ai.request.model"] == "shop-llm-1"
    assert first.attributes["gen_ai.response.model"] == "shop-llm-1"
    assert first.attributes["flink_agents.model_setup"] == "shop_model"
    assert first.attributes["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert second.attributes["gen_ai.response.finish_reasons"] == ("stop",)
    # the scripted model counts the words of its answer as output tokens
    assert second.attributes["gen_ai.usage.output_tokens"] == 4
    assert second.attributes["gen_ai.usage.input_tokens"] == 0
    assert first.attributes["gen_ai.conversation.id"] == \
        second.attributes["gen_ai.conversation.id"]
    # times (the log's clock): every span inside the run; a model or tool call inside the
    # action that awaited it; an action triggered by an event after the action that sent it
    # started (a child by cause: it may outlive its parent, as asynchronous spans do)
    for s in ok:
        assert root.start_time <= s.start_time <= s.end_time <= root.end_time
        if s.name.startswith(("chat ", "execute_tool ")):
            assert parent(s).start_time <= s.start_time <= s.end_time <= parent(s).end_time
        elif s.parent is not None:
            assert parent(s).start_time <= s.start_time
    assert parent(first).start_time >= ask.end_time  # the model action ran after ask ended
    # events are span events: the input on the run span, the output on the answer action
    assert [e.name for e in root.events] == ["InputEvent"]
    [answer] = by_name["action answer"]
    assert "output" in [e.name for e in answer.events]


def test_a_failure_is_an_error_span_with_its_traceback():
    records = _shop_records()
    failed = next(r for r in records if r["kind"] == "action_finished"
                  and r["status"] == "failed")
    failed.setdefault("traceback", 'Traceback...\n  File "shop.py", line 9\nKeyError: \'missing\'')
    exporter = InMemorySpanExporter()
    export_otel(build_traces(records), exporter)
    [ask] = [s for s in exporter.get_finished_spans()
             if s.name == "action ask" and s.attributes["flink_agents.key"] == "b"]
    assert ask.status.status_code is StatusCode.ERROR
    assert ask.status.description == "KeyError: 'missing'"
    assert ask.attributes["error.type"] == "KeyError"
    [exc] = [e for e in ask.events if e.name == "exception"]
    assert exc.attributes["exception.type"] == "KeyError"
    assert exc.attributes["exception.stacktrace"] == failed["traceback"]
    root = next(s for s in exporter.get_finished_spans()
                if s.parent is None and s.context.trace_id == ask.context.trace_id)
    assert root.attributes["flink_agents.status"] == "failed"
    assert root.status.status_code is StatusCode.ERROR
    assert not [e for e in root.events if e.name == "exception"]
    assert root.attributes["gen_ai.agent.name"] == "Shop"  # the agent class, from the log


def test_subagent_calls_are_invoke_agent_spans():
    sa.reset()
    sa.SCRIPTS["orch"] = lambda req: (
        "done" if req.tool_results else sa.calls(("t1", "_subagent_child", {"text": "x"})))
    agent = sa.orchestrator(subagents=["child"], child=sa.internal(
        sa.Echo(), description="echoes", input_schema=sa.OBJECT_SCHEMA))
    sink = MemorySink()
    _run(agent, [{"key": "k", "ask": "go"}], EventLog(sink=sink))
    exporter = InMemorySpanExporter()
    export_otel(build_traces(sink.records), exporter)
    spans = {s.name: s for s in exporter.get_finished_spans()}
    child = spans["invoke_agent child"]
    assert child.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert child.attributes["gen_ai.agent.name"] == "child"
    # the sub-agent's own action runs under its call
    assert spans["action run"].parent.span_id == child.context.span_id


def test_a_ctx_chat_is_a_span_over_its_model_calls():
    sink = MemorySink()
    result = _run(trace_agents.chatter(), [{"key": "c", "text": "hi there"}],
                  EventLog(sink=sink))
    assert result.outputs == ["echo: hi there"]
    exporter = InMemorySpanExporter()
    export_otel(build_traces(sink.records), exporter)
    spans = {s.name: s for s in exporter.get_finished_spans()}
    chat, model = spans["ctx.chat chat_model"], spans["chat echo-llm-2"]
    assert chat.attributes["flink_agents.call_kind"] == "chat"
    assert "gen_ai.operation.name" not in chat.attributes  # its model calls carry usage
    assert chat.parent.span_id == spans["action go"].context.span_id
    # ctx.chat -> the chat action it started -> one model call
    model_action = next(s for s in exporter.get_finished_spans()
                        if s.context.span_id == model.parent.span_id)
    assert model_action.name == "action _chat_model_action"
    assert model_action.parent.span_id == chat.context.span_id
    assert model.attributes["gen_ai.usage.output_tokens"] == 3


def test_live_sink_sends_each_run_when_it_completes_and_still_writes_the_file(tmp_path):
    exporter = InMemorySpanExporter()
    path = tmp_path / "events.jsonl"
    sink = OtelSink(exporter=exporter, service_name="live", forward=FileSink(path))
    _run(trace_agents.shop(), [{"key": f"k{i}", "n": i, "sku": "s"} for i in range(5)],
         EventLog(sink=sink))
    spans = exporter.get_finished_spans()
    roots = [s for s in spans if s.parent is None]
    assert sorted(s.attributes["flink_agents.key"] for s in roots) == [f"k{i}" for i in
                                                                      range(5)]
    assert len(_by_trace(spans)) == 5
    assert sum(s.name == "execute_tool stock" for s in spans) == 5
    # the forwarded file is the same log: the trace command reads it
    assert len(build_traces(read_event_log([path]))) == 5


def test_otel_sink_needs_an_endpoint_or_an_exporter():
    with pytest.raises(ValueError, match="endpoint or an exporter"):
        OtelSink()
    with pytest.raises(ValueError, match="must be an http"):
        OtelSink("localhost:4318")


class _Receiver(http.server.BaseHTTPRequestHandler):
    bodies: list[tuple[str, bytes]] = []

    headers_seen: list[str | None] = []

    def do_POST(self) -> None:  # noqa: N802
        body = self.rfile.read(int(self.headers["Content-Length"]))
        _Receiver.bodies.append((self.path, body))
        _Receiver.headers_seen.append(self.headers.get("X-Scope-OrgID"))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def receiver():
    """An OTLP/HTTP receiver on 127.0.0.1: ``(url, decoded)``; ``decoded()`` lists
    ``(path, service name, span name)`` of everything received."""
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    server = http.server.HTTPServer(("127.0.0.1", 0), _Receiver)
    _Receiver.bodies = []
    _Receiver.headers_seen = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()

    def decoded() -> list[tuple[str, str, str]]:
        out = []
        for path, body in _Receiver.bodies:
            for rs in ExportTraceServiceRequest.FromString(body).resource_spans:
                service = {a.key: a.value.string_value for a in rs.resource.attributes}
                out += [(path, service["service.name"], s.name)
                        for ss in rs.scope_spans for s in ss.spans]
        return out

    try:
        yield f"http://127.0.0.1:{server.server_port}", decoded
    finally:
        server.shutdown()
        server.server_close()


SHOP_SPANS = sorted([
    "action ask", "action _chat_model_action", "action _tool_call_action",
    "action _chat_model_action", "action answer", "chat shop-llm-1", "chat shop-llm-1",
    "execute_tool stock", "execute_tool price"])


def test_trace_command_sends_a_log_to_an_otlp_endpoint(tmp_path, receiver):
    url, decoded = receiver
    log = tmp_path / "events.jsonl"
    _run(trace_agents.shop(), [{"key": "a", "n": 1, "sku": "s"}], str(log))
    exe = Path(sys.executable).with_name("flink-agents-py")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    proc = subprocess.run(
        [str(exe), "trace", str(log), "--otlp", url, "--service-name", "shop-svc",
         "--otlp-header", "X-Scope-OrgID=tenant-1"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    assert f"delivered 10 spans of 1 run to {url}" in proc.stderr
    assert set(_Receiver.headers_seen) == {"tenant-1"}
    got = decoded()
    assert {(p, svc) for p, svc, _ in got} == {("/v1/traces", "shop-svc")}
    # the run span is named after the agent (its class, from the log), not the service
    assert sorted(n for _, _, n in got) == sorted(SHOP_SPANS + ["invoke_agent Shop"])

    proc = subprocess.run([str(exe), "trace", str(log), "--otlp", "localhost:4318"],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env)
    assert proc.returncode == 2
    assert "OTLP endpoint must be an http(s) URL, not 'localhost:4318'" in proc.stderr
    proc = subprocess.run([str(exe), "trace", str(log), "--otlp", url, "--otlp-header", "x"],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env)
    assert proc.returncode == 2 and "expected NAME=VALUE, not 'x'" in proc.stderr


def test_trace_command_names_the_agent_as_told(tmp_path, receiver):
    url, decoded = receiver
    log = tmp_path / "events.jsonl"
    _run(trace_agents.shop(), [{"key": "a", "n": 1, "sku": "s"}], str(log))
    exe = Path(sys.executable).with_name("flink-agents-py")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    proc = subprocess.run([str(exe), "trace", str(log), "--otlp", url, "--agent-name", "shop"],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    got = decoded()
    assert "invoke_agent shop" in {n for _, _, n in got}
    assert {svc for _, svc, _ in got} == {"flink-agents-py"}


def _closed_port() -> int:
    """A port of 127.0.0.1 nothing listens on (bound, then closed)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_trace_command_fails_when_no_receiver_listens(tmp_path):
    """Spans that were not delivered are reported, with a non-zero exit (was: "sent 11
    spans" and exit 0, counting spans built)."""
    log = tmp_path / "events.jsonl"
    _run(trace_agents.shop(), [{"key": "a", "n": 1, "sku": "s"}], str(log))
    exe = Path(sys.executable).with_name("flink-agents-py")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    url = f"http://127.0.0.1:{_closed_port()}"
    proc = subprocess.run([str(exe), "trace", str(log), "--otlp", url],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    assert proc.returncode == 3, proc.stderr
    assert f"delivered 0 of 10 spans of 1 run to {url}: Connection refused" in proc.stderr
    assert "sent" not in proc.stderr and "delivered 10" not in proc.stderr
    assert "run r0" in proc.stdout  # the trees are still printed


class _Refuses(http.server.BaseHTTPRequestHandler):
    """An HTTP server that is not an OTLP receiver: every POST gets 404."""

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(404)
        self.send_header("Content-Length", "9")
        self.end_headers()
        self.wfile.write(b"not here!")

    def log_message(self, *args: Any) -> None:
        pass


def test_trace_command_fails_when_the_endpoint_refuses_the_spans(tmp_path):
    log = tmp_path / "events.jsonl"
    _run(trace_agents.shop(), [{"key": "a", "n": 1, "sku": "s"}], str(log))
    server = http.server.HTTPServer(("127.0.0.1", 0), _Refuses)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}"
        exe = Path(sys.executable).with_name("flink-agents-py")
        env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        proc = subprocess.run([str(exe), "trace", str(log), "--otlp", url],
                              capture_output=True, text=True, timeout=120, cwd=tmp_path,
                              env=env)
    finally:
        server.shutdown()
        server.server_close()
    assert proc.returncode == 3, proc.stderr
    assert f"delivered 0 of 10 spans of 1 run to {url}: " in proc.stderr
    assert "404" in proc.stderr


class _Flaky:
    """An exporter that refuses every other batch."""

    def __init__(self) -> None:
        self.calls = 0
        self.kept: list[Any] = []

    def export(self, spans: Any) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        self.calls += 1
        if self.calls % 2 == 0:
            import logging

            logging.getLogger("opentelemetry.exporter.test").warning("503 Service Unavailable")
            return SpanExportResult.FAILURE
        self.kept.extend(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


def test_export_otel_counts_what_was_delivered_not_what_was_built():
    from flink_agents_py.observability import OtelExportError

    records = _shop_records()
    assert export_otel(build_traces(records), InMemorySpanExporter()) == 12

    class Refusing(_Flaky):
        def export(self, spans: Any) -> Any:
            self.calls = 1  # every batch is the "other" one
            return super().export(spans)

    with pytest.raises(OtelExportError) as err:
        export_otel(build_traces(records), Refusing())
    assert (err.value.delivered, err.value.total) == (0, 12)
    assert err.value.reason == "503 Service Unavailable"
    assert str(err.value) == "delivered 0 of 12 spans: 503 Service Unavailable"

    class Raising:
        def export(self, spans: Any) -> Any:
            raise ConnectionError("no route to host")

        def shutdown(self) -> None:
            pass

    with pytest.raises(OtelExportError, match="delivered 0 of 12 spans: ConnectionError: no "
                                              "route to host"):
        export_otel(build_traces(records), Raising())


def test_otel_sink_warns_of_spans_it_could_not_deliver(caplog):
    class Refusing(_Flaky):
        def export(self, spans: Any) -> Any:
            self.calls = 1  # every batch is refused
            return super().export(spans)

    sink = OtelSink(exporter=Refusing(), service_name="s")
    with caplog.at_level("WARNING", logger="flink_agents_py.observability"):
        _run(trace_agents.shop(), [{"key": k, "n": 1, "sku": "s"} for k in "abcd"],
             EventLog(sink=sink))
    warned = [r.getMessage() for r in caplog.records if "not delivered" in r.getMessage()]
    assert warned == ["OtelSink: 40 of 40 spans were not delivered to the exporter: "
                      "503 Service Unavailable"]

    kept = InMemorySpanExporter()
    _run(trace_agents.shop(), [{"key": "a", "n": 1, "sku": "s"}],
         EventLog(sink=OtelSink(exporter=kept)))
    # the run span is named after the agent class, from the log's header
    assert [s.name for s in kept.get_finished_spans() if s.parent is None] == \
        ["invoke_agent Shop"]


def test_a_pickled_otel_sink_sends_from_its_worker(tmp_path, receiver):
    """As on Flink: the sink is pickled to a subtask, opened there, and sends by itself."""
    import pickle

    url, decoded = receiver
    sink = pickle.loads(pickle.dumps(OtelSink(url, service_name="live-svc", agent_name="shop",
                                              forward=FileSink(tmp_path / "e.jsonl"))))
    _run(trace_agents.shop(), [{"key": "a", "n": 1, "sku": "s"}], EventLog(sink=sink))
    got = decoded()
    assert sorted(n for _, _, n in got) == sorted(SHOP_SPANS + ["invoke_agent shop"])
    assert {svc for _, svc, _ in got} == {"live-svc"}
    assert len(build_traces(read_event_log([tmp_path / "e.jsonl"]))) == 1


def test_a_run_sent_again_after_a_restore_keeps_its_trace_and_span_ids():
    # a run that completed after the checkpoint runs again on the restored job (its recorded
    # calls replay) and the live sink sends it again: that was a second trace with new
    # random ids, a duplicate; now the ids derive from the run, and the run span says so
    import json
    import pickle

    class Kept(InMemorySpanExporter):
        def shutdown(self) -> None:  # one exporter for both attempts
            pass

    exporter = Kept()
    sink = OtelSink(exporter=exporter)
    assert pickle.loads(pickle.dumps(sink))._lineage == sink._lineage  # every attempt's
    records = [{"key": "a", "n": 1, "sku": "s-1"}]
    snapshots: list[Any] = []

    def checkpoint(job: Any) -> None:
        snap = job.snapshot()
        if any(k["run"] for k in snap["keys"]):  # the run in flight
            snapshots.append(json.loads(json.dumps(snap)))

    def job() -> Any:
        return (AgentsExecutionEnvironment.local(event_log=EventLog(sink=sink))
                .from_list(records).apply(trace_agents.shop()))

    assert len(job().run(on_step=checkpoint).outputs) == 1
    first = exporter.get_finished_spans()
    exporter.clear()
    for snapshot in (snapshots[0], snapshots[-1]):
        assert len(job().restore(snapshot).run().outputs) == 1
        again = exporter.get_finished_spans()
        exporter.clear()
        ids = {(s.attributes["flink_agents.id"], s.context.trace_id, s.context.span_id)
               for s in first}
        assert len(_by_trace(first)) == len(_by_trace(again)) == 1
        assert {(s.attributes["flink_agents.id"], s.context.trace_id, s.context.span_id)
                for s in again} <= ids
        [root] = [s for s in again if s.parent is None]
        assert root.attributes["flink_agents.replayed"] is True
    assert "flink_agents.replayed" not in next(s for s in first if s.parent is None).attributes
    # another job (a new sink) has other trace ids for the same key and run
    other = Kept()
    (AgentsExecutionEnvironment.local(event_log=EventLog(sink=OtelSink(exporter=other)))
     .from_list(records).apply(trace_agents.shop()).run())
    assert _by_trace(other.get_finished_spans()).keys().isdisjoint(_by_trace(first).keys())


def test_the_trace_text_and_page_mask_a_secret_the_log_was_written_before_knowing():
    # the spans masked a secret registered after its log was written; the trace text and
    # the HTML page built from the same log showed it
    from flink_agents_py.api import register_secret
    from flink_agents_py.observability import render_html, render_text

    secret = f"late-{uuid.uuid4().hex}"

    class Leaky(Agent):
        @action(InputEvent)
        @staticmethod
        def go(event: InputEvent, ctx: Any) -> None:
            ctx.send_event(OutputEvent(output=f"token {event.input['t']}"))
            raise RuntimeError(f"refused token {event.input['t']}")

    sink = MemorySink()
    _run(Leaky(), [{"key": "a", "t": secret}], EventLog(sink=sink, level="verbose"))
    traces = build_traces(sink.records)
    assert secret in render_text(traces) and secret in render_html(traces)  # not known yet
    register_secret(secret, "a test")
    text, page = render_text(traces), render_html(traces)
    assert secret not in text and secret not in page
    assert "refused token [REDACTED]" in text and "refused token [REDACTED]" in page
