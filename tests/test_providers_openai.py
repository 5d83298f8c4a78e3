"""The OpenAI-compatible connection against a real server: llama-cpp-python's own
(``python -m llama_cpp.server``) serving the bundled SmolLM2 GGUF on a free loopback port.

Marked ``model``; skipped when llama-cpp-python, its server extra or the GGUF file is missing.
The server is started once for the module; its start-up time is printed (``-s``) and
recorded as a test property.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from support.providers import free_port, only_answer, outputs_of, probe_agent, run_probe

from flink_agents_py.api import ChatMessage, ResourceDescriptor
from flink_agents_py.integrations.chat_models import OpenAIChatModel

pytestmark = [pytest.mark.model, pytest.mark.timeout(600)]
ROOT = Path(__file__).resolve().parents[1]
STARTUP: dict[str, float] = {}


@pytest.fixture(scope="module")
def llama_url(tmp_path_factory):
    pytest.importorskip("openai")
    try:
        import llama_cpp  # noqa: F401
        import llama_cpp.server.app  # noqa: F401 - needs the [server] extra (fastapi, uvicorn...)
    except Exception as e:  # noqa: BLE001 - any import failure: no usable server
        pytest.skip(f"llama-cpp-python's server is not usable: {type(e).__name__}: {e}")
    from flink_agents_py.integrations.chat_models._gguf import bundled_gguf, find_gguf_model

    try:  # the small bundled SmolLM2 keeps this module fast; find_gguf_model() is the job's
        model = bundled_gguf() or find_gguf_model()
    except FileNotFoundError as e:
        pytest.skip(f"no GGUF model: {e}")
    port = free_port()
    started = time.monotonic()
    log_path = tmp_path_factory.mktemp("llama_server") / "server.log"
    log = log_path.open("w")  # not a pipe: llama.cpp's start-up chatter would fill it
    proc = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--host", "127.0.0.1",
         "--port", str(port), "--n_ctx", "2048", "--seed", "42", "--verbose", "False"],
        stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        while True:
            try:
                with urllib.request.urlopen(f"{url}/models", timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None:
                pytest.fail(f"llama_cpp.server exited: {log_path.read_text()[-2000:]}")
            if time.monotonic() - started > 120:
                pytest.fail("llama_cpp.server did not start within 120 s")
            time.sleep(0.1)
        STARTUP["seconds"] = time.monotonic() - started
        print(f"\nllama_cpp.server started in {STARTUP['seconds']:.2f} s")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def conn(url: str, **kw: Any) -> ResourceDescriptor:
    return ResourceDescriptor(OpenAIChatModel, base_url=url, api_key_env="FAP_NO_KEY", **kw)


def test_plain_chat_with_usage(llama_url, record_property):
    record_property("llama_server_startup_s", round(STARTUP.get("seconds", 0), 2))
    ans = only_answer(run_probe(probe_agent(conn(llama_url), options={"max_tokens": 24,
                                                                     "temperature": 0}),
                                [{"key": "k", "q": "Say hello in three words."}]))
    assert ans["error"] is None and ans["content"].strip()
    assert ans["usage"]["input_tokens"] > 0 and ans["usage"]["output_tokens"] > 0
    assert ans["finish_reason"] in ("stop", "length")


def test_structured_output_falls_back_to_the_servers_json_mode(llama_url):
    schema = {"type": "object", "properties": {"score": {"enum": [1, 2, 3, 4, 5]}},
              "required": ["score"]}
    connection = OpenAIChatModel(base_url=llama_url, api_key_env="FAP_NO_KEY")
    r = connection.chat([ChatMessage(content="Rate 'great tea, loved it' from 1 to 5.")],
                        output_schema=schema, max_tokens=32, temperature=0)
    assert json.loads(r.message.content)["score"] in (1, 2, 3, 4, 5)
    assert connection._json_object_fallback  # this server refuses response_format json_schema
    ans = only_answer(run_probe(probe_agent(conn(llama_url), options={"max_tokens": 32}),
                                [{"key": "k", "q": "Rate: awful, broke at once.",
                                  "schema": schema}]))
    assert ans["error"] is None and ans["structured"]["score"] in (1, 2, 3, 4, 5)


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: the first.
        b: the second.
    """
    return a + b


def test_a_forced_tool_call_round_trip(llama_url):
    # SmolLM2 calls tools only when forced; forced every round, the chat ends at the bound
    forced = {"type": "function", "function": {"name": "add"}}
    res = run_probe(probe_agent(conn(llama_url), tools=["add"], tool_fns=[add], max_tool_rounds=1,
                                options={"tool_choice": forced, "max_tokens": 48}),
                    [{"key": "k", "q": "What is 2 plus 3? Use the add tool."}])
    [calls] = outputs_of(res, "calls")
    [call] = calls["calls"]
    assert call["name"] == "add" and call["id"]
    assert set(call["arguments"]) == {"a", "b"}
    [results] = outputs_of(res, "results")
    got = results["results"][call["id"]]
    assert got["ok"] and got["content"] == call["arguments"]["a"] + call["arguments"]["b"]
    ans = only_answer(res)
    assert "max_tool_rounds=1" in ans["error"]


def test_review_job_runs_against_the_llama_server(llama_url, tmp_path):
    out = tmp_path / "reviews.jsonl"
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "jobs.review_analysis", "--no-progress", "--runner", "local",
         "--model", "openai", "--base-url", llama_url, "--limit", "3", "--output", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    elapsed = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    reviews = [r for r in rows if r["kind"] == "review"]
    errors_path = out.with_suffix(".errors.jsonl")
    errors = errors_path.read_text() if errors_path.exists() else ""
    assert len(reviews) == 3, f"errors: {errors}\nstderr: {proc.stderr[-2000:]}"
    assert sorted(r["line"] for r in reviews) == [0, 1, 2]
    assert all(r["score"] in (1, 2, 3, 4, 5) for r in reviews)
    print(f"\nreview job, 3 reviews over the llama server: {elapsed:.1f} s")
