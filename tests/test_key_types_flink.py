"""Jobs keyed by ``uuid.uuid4()`` and ``datetime`` keys on a MiniCluster, in each mode.

One job per execution mode (thread; process, in a worker process of its own): each key runs
memory, a durable call and an output with ``ctx.key`` in its own type; one record's action
fails, and its error row holds the key's JSON form. The event log names the keys by their
JSON form. The key's encoding is made by the key selector's operator in Python, so both
modes key state by the same text.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

pytestmark = pytest.mark.flink

pytest.importorskip("pyflink")

from support import key_type_agents as kt  # noqa: E402

IDS = [uuid.uuid4() for _ in range(3)]
TIMES = [dt.datetime(2024, 5, 1, 12, 0, tzinfo=dt.timezone.utc),
         dt.datetime(2024, 5, 1, 14, 0, tzinfo=dt.timezone(dt.timedelta(hours=2))),
         dt.datetime(2024, 5, 1, 12, 0)]
"""One instant in two UTC offsets (two keys) and a naive time."""
KEYS: list[Any] = [*IDS, *TIMES]


def _record(n: int) -> dict[str, Any]:
    key = KEYS[n % len(KEYS)]
    field = {"id": str(key)} if isinstance(key, uuid.UUID) else {"at": key.isoformat()}
    return {**field, "n": n, "fail": n == 2 * len(KEYS)}  # the first key's third record


RECORDS = [_record(n) for n in range(2 * len(KEYS) + 1)]


@pytest.fixture(scope="module", params=["thread", "process"])
def job(request, tmp_path_factory) -> Iterator[dict[str, Any]]:
    # process mode in a worker process of its own, as on a cluster: PyFlink's default on a
    # MiniCluster runs it in this process (loopback), which leaves its variables here
    # (PYFLINK_GATEWAY_DISABLED: a later test's child Flink job would refuse to start)
    saved = dict(os.environ)
    if request.param == "process":
        os.environ["_python_worker_execution_mode"] = "process"
    try:
        yield _run(request.param, tmp_path_factory)
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _run(mode: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from pyflink.common import Types

    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.flink import create_stream_environment

    log = tmp_path_factory.mktemp(f"keys-{mode}") / "events.jsonl"
    env = create_stream_environment(execution_mode=mode, restart_attempts=0)
    pickled = Types.PICKLED_BYTE_ARRAY()
    agents = AgentsExecutionEnvironment.flink(env, metrics=False, event_log=str(log))
    applied = (agents.from_datastream(env.from_collection(RECORDS, type_info=pickled),
                                      key_selector=kt.key_of).apply(kt.CountByKey()))
    out = applied.to_datastream().map(lambda o: ("out", o), output_type=pickled).union(
        applied.errors_datastream().map(lambda e: ("err", e), output_type=pickled))
    got: dict[str, Any] = {"out": [], "err": [], "mode": mode}
    with out.execute_and_collect(f"key-types-{mode}") as results:
        for kind, value in results:
            got[kind].append(value)
    from flink_agents_py.observability import read_event_log

    got["log"] = read_event_log(sorted(log.parent.glob("events*.jsonl")))
    return got


@pytest.mark.timeout(600)
def test_each_key_runs_memory_calls_and_outputs_with_ctx_key_in_its_type(job):
    outs = sorted(job["out"], key=lambda o: o["n"])
    assert [o["n"] for o in outs] == list(range(2 * len(KEYS)))
    for o in outs:
        key = KEYS[o["n"] % len(KEYS)]
        assert o["key"] == key and type(o["key"]) is type(key), o
        assert o["type"] == type(key).__name__ and o["echoed"] == repr(key)
        assert o["kept"] and o["seen"] == 1 + o["n"] // len(KEYS)
    if job["mode"] == "process":  # a worker process of its own, not this one (loopback)
        assert os.getpid() not in {o["pid"] for o in outs}
    aware = [o for o in outs if isinstance(o["key"], dt.datetime) and o["key"].tzinfo]
    assert {o["key"].utcoffset() for o in aware} == {dt.timedelta(0), dt.timedelta(hours=2)}


@pytest.mark.timeout(600)
def test_the_failed_records_row_and_the_event_log_hold_the_keys_json_form(job):
    from flink_agents_py.runtime import key_from_json, key_json

    [error] = job["err"]
    assert error["key"] == {"uuid": str(IDS[0])} and error["seq"] == 2
    assert key_from_json(error["key"]) == IDS[0]
    assert error["error_type"] == "ValueError"
    logged = {json.dumps(r["key"], sort_keys=True) for r in job["log"] if "key" in r}
    assert logged == {json.dumps(key_json(k), sort_keys=True) for k in KEYS}
