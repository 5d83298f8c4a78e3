"""Jobs keyed by ``uuid.uuid4()`` and ``datetime`` keys on a MiniCluster, in each mode.

One job per execution mode (thread, process): each key runs memory, a durable call and an
output with ``ctx.key`` in its own type; one record's action fails, and its error row holds
the key's JSON form. The event log names the keys by their JSON form. The key's encoding is
made by the key selector's operator in Python, so both modes key state by the same text.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
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
def job(request, tmp_path_factory) -> dict[str, Any]:
    from pyflink.common import Types

    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.flink import create_stream_environment

    log = tmp_path_factory.mktemp(f"keys-{request.param}") / "events.jsonl"
    env = create_stream_environment(execution_mode=request.param, restart_attempts=0)
    pickled = Types.PICKLED_BYTE_ARRAY()
    agents = AgentsExecutionEnvironment.flink(env, metrics=False, event_log=str(log))
    applied = (agents.from_datastream(env.from_collection(RECORDS, type_info=pickled),
                                      key_selector=kt.key_of).apply(kt.CountByKey()))
    out = applied.to_datastream().map(lambda o: ("out", o), output_type=pickled).union(
        applied.errors_datastream().map(lambda e: ("err", e), output_type=pickled))
    got: dict[str, Any] = {"out": [], "err": []}
    with out.execute_and_collect(f"key-types-{request.param}") as results:
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
