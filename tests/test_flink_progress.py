"""Progress on the Flink runner: a bar fed by the agent metrics of the job's REST API.

Unit tests check when a bar is shown and how the REST answers are read (a fake REST API); the
Flink test runs the main job, with ``FLINK_AGENTS_PY_PROGRESS=1`` since a captured stderr is
not a terminal. A user's job from a temporary directory showing its records go by is checked
on the job of ``tests/test_papercuts_flink.py``, and ``--no-progress`` on the main job's full
Flink run in ``tests/test_review_job.py`` (each job serves several tests).
"""

from __future__ import annotations

import http.server
import json
import os
import pathlib
import re
import subprocess
import sys
import threading

import pytest

pytest.importorskip("pyflink")

from flink_agents_py.flink._progress import JobProgress, progress_enabled  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
PYTHON = str(VENV_PYTHON if VENV_PYTHON.exists() else pathlib.Path(sys.executable))
BAR = re.compile(r"agent:\s+\d+%\|[^|]*\|\s*(\d+)/(\d+) \[[^\]]*?(?:, (.*))?\]")


def bar_lines(stderr: str) -> list[tuple[int, int, str]]:
    """``(done, total, postfix)`` of every state of the bar that stderr holds."""
    found = []
    for part in re.split(r"[\r\n]", stderr):
        m = BAR.search(part)
        if m:
            found.append((int(m.group(1)), int(m.group(2)), m.group(3) or ""))
    return found


def test_a_bar_is_shown_when_requested_on_a_terminal_or_when_forced(monkeypatch):
    class Tty:
        def __init__(self, tty: bool) -> None:
            self.tty = tty

        def isatty(self) -> bool:
            return self.tty

    monkeypatch.delenv("FLINK_AGENTS_PY_PROGRESS", raising=False)
    monkeypatch.setattr(sys, "stderr", Tty(True))
    assert progress_enabled(True) and not progress_enabled(False)
    monkeypatch.setattr(sys, "stderr", Tty(False))
    assert not progress_enabled(True)
    monkeypatch.setenv("FLINK_AGENTS_PY_PROGRESS", "1")
    assert progress_enabled(True) and not progress_enabled(False)  # --no-progress wins
    monkeypatch.setattr(sys, "stderr", Tty(True))
    monkeypatch.setenv("FLINK_AGENTS_PY_PROGRESS", "0")
    assert not progress_enabled(True)


class _FakeRest(http.server.BaseHTTPRequestHandler):
    """Two jobs (another one, finished, and ours) with two agent vertices."""

    routes = {
        "/jobs/overview": {"jobs": [
            {"jid": "old", "name": "mine", "state": "FINISHED", "start-time": 1},
            {"jid": "other", "name": "theirs", "state": "RUNNING", "start-time": 3},
            {"jid": "j1", "name": "mine", "state": "RUNNING", "start-time": 2}]},
        "/jobs/j1": {"vertices": [{"id": "v0"}, {"id": "v1"}, {"id": "v2"}]},
        "/jobs/j1/vertices/v0/subtasks/metrics": [{"id": "numRecordsIn"}],
        "/jobs/j1/vertices/v1/subtasks/metrics": [
            {"id": "A.flink_agents.runs_completed"}, {"id": "A.flink_agents.runs_completed_rate"},
            {"id": "A.flink_agents.outputs_emitted"}, {"id": "A.flink_agents.calls_in_flight"},
            {"id": "A.flink_agents.action.x.actions_failed"}],
        "/jobs/j1/vertices/v2/subtasks/metrics": [
            {"id": "B.flink_agents.runs_completed"},
            {"id": "B.flink_agents.action.y.actions_failed"},
            {"id": "B.flink_agents.action.z.actions_failed"}],
    }
    values = {"A.flink_agents.runs_completed": 7, "A.flink_agents.outputs_emitted": 9,
              "A.flink_agents.calls_in_flight": 2, "A.flink_agents.action.x.actions_failed": 1,
              "B.flink_agents.runs_completed": 3, "B.flink_agents.action.y.actions_failed": 2,
              "B.flink_agents.action.z.actions_failed": 0}
    asked: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        path, _, query = self.path.partition("?")
        if query:
            ids = dict(p.split("=", 1) for p in query.split("&"))["get"].replace("%2C", ",")
            type(self).asked.extend(ids.split(","))
            body: object = [{"id": i, "sum": self.values[i]} for i in ids.split(",")]
        elif path in self.routes:
            body = self.routes[path]
        else:
            self.send_error(404)
            return
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


def test_the_bar_sums_the_agent_metrics_of_the_named_running_job_over_its_operators():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _FakeRest)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        dead = "http://127.0.0.1:9"  # nothing listens: skipped
        progress = JobProgress([dead, f"http://127.0.0.1:{server.server_port}"], total=20,
                               job_name="mine")
        assert progress.poll() == {"runs_completed": 10.0, "outputs_emitted": 9.0,
                                   "errors": 3.0, "calls_in_flight": 2.0}
        assert "A.flink_agents.runs_completed_rate" not in _FakeRest.asked
        assert JobProgress([dead], job_name="mine").poll() is None
    finally:
        server.shutdown()


# A user's bounded job showing records done of total while it runs: one test of
# tests/test_papercuts_flink.py, whose user job (progress forced, as here) serves it.


def _main_job(tmp_path: pathlib.Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [PYTHON, "-m", "jobs.review_analysis", "--runner", "flink", "--model", "scripted",
         "--limit", "20", "--output", str(tmp_path / "out.jsonl"), *extra],
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
        env={**env, "FLINK_AGENTS_PY_PROGRESS": "1"})


# --no-progress silencing a forced bar: tests/test_review_job.py, on its full Flink run
@pytest.mark.flink
def test_the_main_job_on_flink_shows_progress(tmp_path):
    res = _main_job(tmp_path)
    assert res.returncode == 0, res.stderr[-4000:]
    states = bar_lines(res.stderr)
    assert states and states[-1][:2] == (20, 20), res.stderr[-3000:]


def test_a_candidate_url_that_is_not_an_http_server_is_skipped():
    # one of the ports the bar probes may belong to another process that answers in binary
    # (seen in CI: http.client.BadStatusLine escaped and failed the user's job)
    import socket

    from flink_agents_py.flink._progress import JobProgress

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()

    def serve() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            conn.recv(1024)
            conn.sendall(b"\x00\x01\xff\xff not http\r\n\r\n")
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    try:
        progress = JobProgress([f"http://127.0.0.1:{srv.getsockname()[1]}"], total=3)
        assert progress.poll() is None  # not found (yet), no exception
    finally:
        srv.close()
