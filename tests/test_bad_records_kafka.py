"""Hostile Kafka records through ``from_kafka`` and ``write_json_topic``: one job, many checks.

One topic (one partition) holds good records around every kind of bad one, produced raw:
invalid UTF-8, not JSON, JSON ``null``, a value over ``max_record_bytes``, JSON nested deeper
than a Flink stream can carry (it used to fail the job at every restart), JSON that is a list
or a number or has no ``"id"`` (the key selector raises), a nested-object key, keys of odd
types (null, a float, 100,000 characters, two unicode forms of one word), duplicate JSON keys,
a record whose action raises, an output nested deeper than the sink's JSON writer takes (it
used to fail the sink at every restart). The job checkpoints and is crashed once (after a
checkpoint, when one completed in time: a busy machine may not). Outputs and error rows are
read ``read_committed``: each good record has exactly one output, each bad one exactly one
error row naming its partition and offset (or, for an action that failed, its key).
"""

from __future__ import annotations

import collections
import unicodedata
import uuid

import orjson
import pytest

pytestmark = [pytest.mark.kafka, pytest.mark.flink]

pytest.importorskip("pyflink")
pytest.importorskip("confluent_kafka")

from kafka_fixture import consume_all  # noqa: E402
from support import bad_record_agents as bra  # noqa: E402
from support.crash import crash_environment  # noqa: E402
from test_bad_input_kafka import MAX_MESSAGE, produce_raw  # noqa: E402

NFC, NFD = unicodedata.normalize("NFC", "café"), unicodedata.normalize("NFD", "café")
LONG = "L" * 100_000


def _j(value: object) -> bytes:
    return orjson.dumps(value)  # (at most 255 levels deep: deeper JSON is written by hand)


# (name, raw value, where it must land: "out" with its key, "bad" (parse), "rejected"
# (key selector), "failed" (action), "sink" (an error row in the output topic))
CASES: list[tuple[str, bytes | None, str, object]] = [
    ("good first", _j({"id": "g", "n": 0}), "out", "g"),
    ("invalid UTF-8", b'{"id": "u", "n": "caf\xe9"}', "bad", "invalid UTF-8 at byte"),
    ("not JSON", b'{"id": "x", ', "bad", "not JSON"),
    ("JSON null", b"null", "bad", "JSON null"),
    ("too large", b'{"id": "big", "s": "' + b"x" * (2 << 20) + b'"}', "bad", "over the limit"),
    ("nested 600 deep", b'{"id": "deep", "d": ' + b'{"a": ' * 599 + b"1" + b"}" * 600, "bad",
     "nested more than 200"),
    ("a list", _j([1, 2, 3]), "rejected", "TypeError"),
    ("a number", b"7", "rejected", "TypeError"),
    ("no id", _j({"n": 1}), "rejected", "KeyError"),
    ("a dict key", _j({"id": {"x": 1}}), "rejected", "TypeError"),
    ("null key", _j({"id": None, "n": 2}), "out", None),
    ("float key", _j({"id": 1.5, "n": 3}), "out", 1.5),
    ("NFC key", _j({"id": NFC, "n": 4}), "out", NFC),
    ("NFD key", _j({"id": NFD, "n": 5}), "out", NFD),
    ("long key", _j({"id": LONG, "n": 6}), "out", LONG),
    ("duplicate JSON keys", b'{"id": "dup", "n": 1, "n": 7}', "out", "dup"),
    ("action raises", _j({"id": "boom", "boom": True}), "failed", "boom"),
    ("output too deep to write", _j({"id": "deep-out", "deep_out": 300}), "sink", "deep-out"),
    ("the crash point", _j({"id": "crash", "n": 8}), "out", "crash"),
    *[(f"good after {i}", _j({"id": "g", "n": 10 + i}), "out", "g") for i in range(5)],
]


@pytest.fixture(scope="module")
def run(kafka_broker, tmp_path_factory):
    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.flink import from_kafka, write_json_topic

    d = tmp_path_factory.mktemp("bad-records")
    suffix = uuid.uuid4().hex[:6]
    src, out, errs = f"hostile-{suffix}", f"hostile-out-{suffix}", f"hostile-err-{suffix}"
    kafka_broker.create_topics([src], partitions=1, config={"max.message.bytes": MAX_MESSAGE})
    kafka_broker.create_topics([out, errs], partitions=1)
    where = produce_raw(kafka_broker.bootstrap, src, [raw for _, raw, _, _ in CASES])
    env = crash_environment(str(d), interval_ms=300, restart_attempts=2)
    agents = AgentsExecutionEnvironment.flink(
        env, failpoint=bra.CrashOnceAtTheCrashRecord(str(d)), metrics=False)
    job, bad = from_kafka(agents, kafka_broker.bootstrap, src, key_selector=bra.key_of,
                          bounded=True)
    job.apply(bra.Echo())
    write_json_topic(job.to_datastream(), kafka_broker.bootstrap, out)
    write_json_topic(job.errors_datastream().union(bad), kafka_broker.bootstrap, errs)
    agents.execute(f"hostile-{suffix}")
    assert (d / "crashed").exists(), "the failpoint never fired: no restart was tested"
    return {"where": where, "src": src,
            "out": [orjson.loads(m.value()) for m in consume_all(kafka_broker.bootstrap, out)],
            "errors": [orjson.loads(m.value())
                       for m in consume_all(kafka_broker.bootstrap, errs)]}


def test_every_good_record_has_exactly_one_output(run):
    got = collections.Counter((o.get("key"), o.get("n")) for o in run["out"]
                              if o.get("kind") != "error")
    want = collections.Counter((key, orjson.loads(raw)["n"]) for _, raw, to, key in CASES
                               if to == "out")
    assert got == want  # null, float, long and both unicode forms of a key each ran once
    assert ("dup", 7) in got  # duplicate JSON keys: the last one wins, as in JSON readers


def test_unreadable_records_are_error_rows_with_partition_and_offset(run):
    rows = {e["offset"]: e for e in run["errors"] if "offset" in e}
    for (_, offset), (name, _, to, problem) in zip(run["where"], CASES, strict=True):
        if to != "bad":
            assert offset not in rows, name
            continue
        assert rows[offset]["partition"] == 0 and problem in rows[offset]["error"], name
        assert len(rows[offset]["value"]) < 1100, name  # an excerpt, not the record
    assert len(rows) == sum(1 for c in CASES if c[2] == "bad")  # each once, after the crash too


def test_records_the_key_selector_refuses_name_their_offset(run):
    # the agent's error rows said only "record": which Kafka record it was was lost
    rejected = [e for e in run["errors"] if e.get("action") == "<key_selector>"]
    at = collections.defaultdict(list)
    for e in rejected:
        at[e["execution_id"]].append(e)
    for (partition, offset), (name, raw, to, problem) in zip(run["where"], CASES, strict=True):
        found = at.get(f"topic {run['src']} partition {partition} offset {offset}", [])
        if to != "rejected":
            assert not found, name
            continue
        assert len(found) == 1, (name, sorted(at))
        assert found[0]["error_type"] == problem, name
        assert found[0]["input"] == orjson.loads(raw), name
    assert len(rejected) == sum(1 for c in CASES if c[2] == "rejected")


def test_a_failed_action_and_an_unwritable_output_are_rows_with_their_key(run):
    failed = [e for e in run["errors"] if e.get("action") == "on_input"]
    assert [(e["key"], e["error_type"]) for e in failed] == [("boom", "RuntimeError")]
    assert failed[0]["input"] == {"id": "boom", "boom": True}
    # the sink wrote an error row in the output's place instead of failing at every restart
    sink = [o for o in run["out"] if o.get("kind") == "error"]
    assert [o["key"] for o in sink] == ["deep-out"]
    assert "Recursion limit reached" in sink[0]["error"]
