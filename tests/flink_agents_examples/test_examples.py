"""Flink Agents' quickstart programs, ported with import changes and an offline model only.

Each program is copied to a temporary directory outside the repository and run there with
the venv's interpreter, as a user runs it. The streaming examples read their file source
with ``monitor_continuously`` (they never end, in Flink Agents too): the test reads what
they print until every expected result is there, then stops the process group it started.
"""

from __future__ import annotations

import ast
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import flink_agents_py

HERE = Path(__file__).resolve().parent
PYTHON = sys.executable
PACKAGE_ROOT = str(Path(flink_agents_py.__file__).resolve().parents[1])
"""Where the package under test is: the copy runs it, not another checkout the venv may
have installed (a git worktree's tests would otherwise run the main checkout's code)."""


def _copy(tmp_path: Path) -> Path:
    work = tmp_path / "quickstart"
    shutil.copytree(HERE, work, ignore=shutil.ignore_patterns("test_*.py", "__pycache__"))
    return work


def _run_until(work: Path, script: str, done: callable, timeout_s: float) -> list[str]:
    """Run ``script`` in ``work``; return its stdout lines once ``done(lines)`` or it ends."""
    proc = subprocess.Popen([PYTHON, script], cwd=work, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env={**os.environ, "PYTHONPATH": PACKAGE_ROOT})
    lines: queue.SimpleQueue[str | None] = queue.SimpleQueue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    got: list[str] = []
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline and not done(got):
            try:
                line = lines.get(timeout=1.0)
            except queue.Empty:
                continue
            if line is None:
                break
            got.append(line)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)  # the process group this test started
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    if not done(got):
        err = proc.stderr.read() if proc.stderr else ""
        raise AssertionError(f"{script} printed {got!r}; stderr tail: {err[-3000:]}")
    return got


def _results(lines: list[str]) -> list[str]:
    """What the job's ``print()`` sink printed, without the ``<subtask>> `` prefix."""
    return [x.split("> ", 1)[1] for x in lines if re.match(r"^\d+> ", x)]


def test_parallel_chat_agent_runs_on_the_local_runner(tmp_path):
    work = _copy(tmp_path)
    lines = _run_until(work, "parallel_chat_local.py",
                       lambda got: any(x.startswith("OUTPUT rows") for x in got), 120)
    assert lines[-1] == ("OUTPUT rows: [{1: {'id': 1, 'text': 'The food here is great, but "
                         "the service is too slow', 'summary': 'taste:positive, "
                         "service:negative'}}]")


@pytest.mark.flink
def test_parallel_chat_request_example_runs_on_a_minicluster(tmp_path):
    # their driver: from_table (a PyFlink KeySelector over Rows) -> to_table (ExternalTypeInfo)
    # -> a filesystem sink at the fixed path the program reads back; stale rows would pass
    shutil.rmtree("/tmp/parallel_chat_results", ignore_errors=True)
    work = _copy(tmp_path)
    lines = _run_until(work, "parallel_chat_request_example.py",
                       lambda got: "=== Done ===" in got, 240)
    assert [x for x in lines if x.startswith("OUTPUT rows")] == [
        "OUTPUT rows: [{'id': 1, 'text': 'The food here is great, but the service is too "
        "slow', 'summary': 'taste:positive, service:negative'}]"]


@pytest.mark.flink
@pytest.mark.parametrize("script", ["workflow_single_agent_example.py", "react_agent_example.py"])
def test_review_analysis_examples_run_on_a_minicluster(tmp_path, script):
    work = _copy(tmp_path)
    n_reviews = len((work / "resources" / "product_review.txt").read_text().splitlines())
    lines = _run_until(work, script, lambda got: len(_results(got)) >= n_reviews, 240)
    results = _results(lines)
    assert len(results) == n_reviews
    damaged = [r for r in results if "B000YFSR4W" in r and "shipping damage" in r]
    assert len(damaged) == 1 and "score=1" in damaged[0].replace("'score': 1", "score=1")
    assert any(x.startswith("Transportation issue for product [B000YFSR4W]") for x in lines)
    if script == "react_agent_example.py":  # the output schema's class, as in Flink Agents
        assert all(r.startswith("id=") for r in results)


@pytest.mark.flink
def test_multiple_agent_example_runs_on_a_minicluster(tmp_path):
    # a 1-minute processing-time window between the two agents: over a minute per run
    work = _copy(tmp_path)
    products = {line.split('"id": "')[1].split('"')[0] for line in
                (work / "resources" / "product_review.txt").read_text().splitlines()}
    # a product whose analyses straddle a minute boundary has one result per window
    def ids(got: list[str]) -> set[str]:
        return {r.split("id='")[1].split("'")[0] for r in _results(got)}

    lines = _run_until(work, "workflow_multiple_agent_example.py",
                       lambda got: ids(got) >= products, 240)
    assert ids(lines) == products
    hists = [ast.literal_eval(r.split("score_hist=")[1].split("]")[0] + "]")
             for r in _results(lines) if "id='B000YFSR4W'" in r]
    if len(hists) == 1:  # its two reviews (scores 1 and 5) in one window
        assert hists == [["50.0%", "0.0%", "0.0%", "0.0%", "50.0%"]]
    else:  # one review per window
        assert sorted(h.index("100.0%") for h in hists) == [0, 4], hists


@pytest.mark.flink
def test_yaml_workflow_example_runs_on_a_minicluster(tmp_path):
    work = _copy(tmp_path)
    n_reviews = len((work / "resources" / "product_review.txt").read_text().splitlines())
    lines = _run_until(work, "yaml_workflow_agent_example.py",
                       lambda got: len(_results(got)) >= n_reviews, 240)
    assert len(_results(lines)) == n_reviews


@pytest.mark.flink
def test_skills_example_runs_on_a_minicluster(tmp_path):
    work = _copy(tmp_path)
    lines = _run_until(work, "skills_agent_example.py", lambda got: len(_results(got)) >= 3,
                       240)
    assert sorted(_results(lines)) == ["1024", "12", "20"]


KNOWLEDGE = ["Apache Flink is a stream processing framework", "Flink provides exactly-once",
             "Apache Flink Agents is an innovative", "Vector stores are databases",
             "Context retrieval combines"]


def test_rag_example_retrieves_what_chromadbs_own_client_stored(tmp_path):
    """Flink Agents' RAG example fills its knowledge base through chromadb's in-process
    client, then queries it through the agent's Chroma store by collection name; Ollama
    (embeddings and chat) is a fake one on 127.0.0.1 that the example finds by OLLAMA_HOST."""
    pytest.importorskip("chromadb")
    from support.providers import WireServer, ollama_reply

    from flink_agents_py.integrations.embedding_models import HashingEmbeddingModel

    embedder = HashingEmbeddingModel(dimension=64)
    prompts: list[str] = []

    def ollama(req):
        if req["path"] == "/api/embed":
            texts = req["body"]["input"]
            texts = [texts] if isinstance(texts, str) else texts
            return 200, {"model": req["body"]["model"],
                         "embeddings": embedder.embed_texts(texts).embeddings}
        prompt = req["body"]["messages"][-1]["content"]
        prompts.append(prompt)
        context = prompt.split("Context:\n", 1)[1].split("\n\nUser Question", 1)[0]
        return 200, ollama_reply("ANSWER FROM " + context.splitlines()[0][:40])

    work = _copy(tmp_path)
    with WireServer(ollama) as srv:
        run = subprocess.run([PYTHON, "rag_agent_example.py"], cwd=work, capture_output=True,
                             text=True, timeout=300,
                             env={**os.environ, "PYTHONPATH": PACKAGE_ROOT,
                                  "OLLAMA_HOST": srv.url})
    assert run.returncode == 0, run.stderr[-3000:]
    assert "Added 5 documents to ChromaDB" in run.stdout
    answers = re.findall(r"^\[(\d+)\] Response: (.*)$", run.stdout, re.MULTILINE)
    assert [k for k, _ in answers] == ["001", "002", "003"]
    assert all(a.startswith("ANSWER FROM 1. ") for _, a in answers)
    assert len(prompts) == 3
    for prompt in prompts:  # three numbered documents of the knowledge base each
        context = prompt.split("Context:\n", 1)[1].split("\n\nUser Question", 1)[0]
        docs = [line for line in context.split("\n\n") if line]
        assert [d[:3] for d in docs] == ["1. ", "2. ", "3. "]
        assert all(any(d[3:].startswith(k) for k in KNOWLEDGE) for d in docs), docs
    agents_prompt = next(p for p in prompts if "What is Apache Flink Agents?" in p)
    assert "1. Apache Flink Agents is an innovative" in agents_prompt
