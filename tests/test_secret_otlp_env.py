"""The OTLP headers set by OpenTelemetry's own variables are secrets too.

``--otlp-header`` values were registered as secrets, but the OTLP exporter also sends the
headers of ``OTEL_EXPORTER_OTLP_HEADERS`` / ``OTEL_EXPORTER_OTLP_TRACES_HEADERS`` (the way
OpenTelemetry is usually configured), and those were not: a collector (or a proxy in front
of it) quoting the key back in its status line had it printed by ``flink-agents-py trace``
to stderr, in clear.
"""

from __future__ import annotations

import http.server
import os
import pathlib
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from support import trace_agents

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.observability import EventLog

pytest.importorskip("opentelemetry.exporter.otlp.proto.http")

REPO = pathlib.Path(__file__).resolve().parents[1]


class _Echoes(http.server.BaseHTTPRequestHandler):
    """A collector refusing every batch, quoting the team key it got in its status line."""

    seen: list[str] = []

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers["Content-Length"]))
        got = self.headers.get("x-team-key", "")
        self.seen.append(got)
        self.send_response(401, f"unknown team key {got}")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def collector() -> Iterator[str]:
    _Echoes.seen = []
    server = http.server.HTTPServer(("127.0.0.1", 0), _Echoes)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    "variable", ["OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"]
)
def test_a_collector_echoing_a_header_from_the_environment_shows_it_masked(
    tmp_path, collector, variable
):
    home = tmp_path / "user"
    home.mkdir()
    AgentsExecutionEnvironment.local(event_log=EventLog(home / "events.jsonl")).from_list(
        [{"key": "a", "n": 1, "sku": "s"}]
    ).apply(trace_agents.shop()).run()
    key = f"team{uuid.uuid4().hex}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update({variable: f"x-team-key={key}", "PYTHONPATH": str(REPO)})
    done = subprocess.run(
        [sys.executable, "-m", "flink_agents_py", "trace", "events.jsonl", "--otlp", collector],
        cwd=home,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert str(REPO) not in str(home)
    assert done.returncode == 3, done.stderr
    assert _Echoes.seen and _Echoes.seen[0] == key  # the header was sent
    assert "401, reason: unknown team key [REDACTED]" in done.stderr, done.stderr
    assert key not in done.stderr and key not in done.stdout


def test_spans_sent_through_the_users_own_exporter_register_the_environments_headers(monkeypatch):
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from flink_agents_py.api import mask_secrets
    from flink_agents_py.observability import MemorySink, build_traces, export_otel

    key = f"grpc{uuid.uuid4().hex}"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", f"api-key={key},x-team=blue")
    sink = MemorySink()
    AgentsExecutionEnvironment.local(event_log=EventLog(sink=sink)).from_list(
        [{"key": "a", "n": 1, "sku": "s"}]
    ).apply(trace_agents.shop()).run()
    assert export_otel(build_traces(sink.records), InMemorySpanExporter()) > 0
    assert (
        mask_secrets(f"StatusCode.UNAUTHENTICATED: bad key {key}")
        == "StatusCode.UNAUTHENTICATED: bad key [REDACTED]"
    )
