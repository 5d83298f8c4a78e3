"""The Flink host end to end, on a local MiniCluster (thread mode, and process mode).

One job per fixture (MiniCluster start-up dominates): the counter job serves the ordering,
memory, error and drain assertions; the chat job serves the tool-round assertions and is run
again in process mode for the cross-mode comparison. All jobs of this module share the
pytest process's JVM; environments come from one factory (``create_stream_environment``),
and a thread-mode environment is always created first (it sets PYTHONPATH for the JVM).
"""

from __future__ import annotations

import json
import os
import time
from collections import defaultdict
from typing import Any

import pytest
from support import flink_agents_for_tests as fa

pytestmark = [pytest.mark.flink, pytest.mark.timeout(300)]

FAILING = [n for n in range(fa.N_RECORDS) if fa.fails(n)]
PASSING = [n for n in range(fa.N_RECORDS) if not fa.fails(n)]


@pytest.fixture(scope="module")
def flink_env():
    """Factory of STREAMING environments; the first call starts the JVM (thread mode)."""
    pytest.importorskip("pyflink")
    from flink_agents_py.flink import create_stream_environment

    return create_stream_environment


@pytest.fixture(scope="module")
def counter_run(flink_env) -> dict[str, Any]:
    started = time.monotonic()
    rows = fa.counter_job(flink_env())
    elapsed = time.monotonic() - started
    return {
        "rows": rows,
        "outputs": [v for kind, v in rows if kind == "out"],
        "errors": [v for kind, v in rows if kind == "err"],
        "elapsed": elapsed,
    }


def outputs_by_key(outputs: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    by: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for o in outputs:  # collection order
        by[o["key"]].append(o)
    return by


# ------------------------------------------------------------------ the counter job
def test_job_finishes_and_drains_every_key(counter_run):
    # bounded input ends while most keys still have queued inputs and I/O in flight: the
    # processing-time wake-ups are dropped then, so everything after that comes from the
    # end-of-input drain timer
    assert len(counter_run["rows"]) == fa.N_RECORDS
    by = outputs_by_key(counter_run["outputs"])
    assert sorted(by) == [f"k{i}" for i in range(fa.N_KEYS)]
    for key, outs in by.items():
        last_n = max(n for n in PASSING if f"k{n % fa.N_KEYS}" == key)
        assert outs[-1]["n"] == last_n


def test_every_non_failing_record_has_exactly_one_output(counter_run):
    outputs = counter_run["outputs"]
    assert sorted(o["n"] for o in outputs) == PASSING  # no duplicates, none missing
    for o in outputs:
        assert o["key"] == f"k{o['n'] % fa.N_KEYS}"
        assert o["doubled"] == 2 * o["n"]  # the durable call's result reached the action
        assert o["event_type"] == "Counted"  # emitted by the second action, on the user event


def test_outputs_per_key_in_input_order_one_run_at_a_time(counter_run):
    by = outputs_by_key(counter_run["outputs"])
    queued = 0
    for key, outs in by.items():
        ns = [o["n"] for o in outs]
        assert ns == sorted(ns), f"{key} out of input order: {ns}"
        for prev, cur in zip(outs, outs[1:], strict=False):
            # one run per key at a time: a key's next run starts after its previous one ended
            assert cur["t_start"] >= prev["t_done"]
            # the record had arrived (was queued) before the previous run of its key ended
            queued += cur["t_in"] < prev["t_done"]
    assert queued >= len(PASSING) // 2, f"only {queued} records were queued behind a run"
    # ... while runs of different keys overlapped (their slow calls ran concurrently)
    outs = counter_run["outputs"]
    busy = sum(o["t_done"] - o["t_start"] for o in outs)
    span = max(o["t_done"] for o in outs) - min(o["t_start"] for o in outs)
    assert busy > 2 * span, (busy, span)


def test_counter_is_contiguous_and_failed_runs_write_nothing(counter_run):
    # the failing action sets count and last_n before raising: those writes are dropped,
    # so the next run of the key counts on from the last successful run
    for key, outs in outputs_by_key(counter_run["outputs"]).items():
        expected_len = sum(1 for n in PASSING if f"k{n % fa.N_KEYS}" == key)
        assert [o["count"] for o in outs] == list(range(1, expected_len + 1)), key
        for o in outs:  # start's writes are visible to the second action of the same run
            assert o["memory_count"] == o["count"]
            assert o["memory_last_n"] == o["n"]


def test_errors_carry_key_action_and_message(counter_run):
    errors = sorted(counter_run["errors"], key=lambda e: e["input"]["n"])
    assert [e["input"]["n"] for e in errors] == FAILING
    for e, n in zip(errors, FAILING, strict=True):
        seq = n // fa.N_KEYS  # position of n in its key's input sequence
        assert e["key"] == f"k{n % fa.N_KEYS}"
        assert e["action"] == "start"
        assert e["error_type"] == "ValueError"
        assert e["message"] == f"boom on n={n}"
        assert e["seq"] == seq
        assert e["execution_id"] == f"r{seq}/start"


# ------------------------------------------------------------------ chat with a tool round
@pytest.fixture(scope="module")
def chat_thread(flink_env, counter_run) -> list[dict[str, Any]]:
    # depends on counter_run only to keep one job at a time and the thread-mode env first
    return fa.chat_job(flink_env())


def test_chat_tool_round_answer_built_from_tool_messages(chat_thread):
    assert sorted(o["item"] for o in chat_thread) == sorted(fa.CHAT_ITEMS)
    for o in chat_thread:
        item = o["item"]
        assert o["key"] == f"k{fa.CHAT_ITEMS.index(item) % fa.CHAT_KEYS}"
        assert o["error"] is None and o["answers_request"] is True
        assert o["finish_reason"] == "stop"
        answer = json.loads(o["answer"])
        assert answer["item"] == item
        assert answer["tools_offered"] == ["price_of", "stock_of"]
        # system prompt, user, assistant asking for tools, one tool message per call
        assert answer["n_messages"] == 5
        # each result on its own call id (price_of finishes last, but is still on its id)
        assert answer["by_call"] == {
            fa.price_call_id(item): {"name": "price_of", "content": fa.price_of(item)},
            fa.stock_call_id(item): {"name": "stock_of", "content": fa.stock_of(item)},
        }
    for key, outs in outputs_by_key(chat_thread).items():  # per-key input order holds here too
        items = [o["item"] for o in outs]
        assert items == [i for n, i in enumerate(fa.CHAT_ITEMS) if f"k{n % fa.CHAT_KEYS}" == key]


def test_process_mode_gives_the_same_outputs_as_thread_mode(flink_env, chat_thread, monkeypatch):
    # On a MiniCluster PyFlink runs process-mode functions by default in a "loopback" worker
    # inside this very process (which also leaves PYFLINK_GATEWAY_DISABLED=true and other
    # worker variables in os.environ); this variable asks for a real worker process. It runs
    # in the same JVM after thread mode and finds the tests' modules through the PYTHONPATH
    # the thread-mode environment set before the JVM started.
    monkeypatch.setenv("_python_worker_execution_mode", "process")
    process = fa.chat_job(flink_env(execution_mode="process"))
    assert {o["pid"] for o in process}.isdisjoint({os.getpid()})  # a real worker process
    canon = lambda outs: sorted(  # noqa: E731
        json.dumps({k: v for k, v in o.items() if k != "pid"}, sort_keys=True) for o in outs)
    assert canon(process) == canon(chat_thread)
