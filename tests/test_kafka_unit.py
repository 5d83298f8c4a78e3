"""Kafka helpers without a broker or a cluster: URLs, parsing, rows, pinned versions."""

from __future__ import annotations

import pathlib
import re

import orjson
import pytest

pytest.importorskip("pyflink")

ROOT = pathlib.Path(__file__).resolve().parents[1]

from flink_agents_py.flink import KAFKA_CONNECTOR_VERSION, KafkaMessage, parse_kafka_url  # noqa: E402
from flink_agents_py.flink._kafka import _Parse, _ToRow, json_value  # noqa: E402


def msg(value, offset=7, partition=1):
    return KafkaMessage("t", partition, offset, 0, "k", value)


def test_parse_kafka_url():
    assert parse_kafka_url("kafka://127.0.0.1:9092/reviews") == ("127.0.0.1:9092", "reviews")
    assert parse_kafka_url("kafka://a:1,b:2/t") == ("a:1,b:2", "t")
    for bad in ("kafka://host:1/", "http://h:1/t", "kafka:///t", "kafka://h:1/a/b"):
        with pytest.raises(ValueError):
            parse_kafka_url(bad)


def test_json_parse_and_error_side_output():
    tag = object()
    parse = _Parse(json_value, tag)
    assert list(parse(("t", 0, 3, 0, "k", '{"a": 1}'))) == [{"a": 1}]
    [(got_tag, err)] = list(parse(("t", 2, 9, 0, "k", "{nope")))
    assert got_tag is tag
    assert err["kind"] == "error" and (err["topic"], err["partition"], err["offset"]) == ("t", 2, 9)
    assert "not JSON" in err["error"] and err["value"] == "{nope"
    [(_, tomb)] = list(parse(("t", 0, 1, 0, "k", None)))
    assert tomb["error"] == "the record has no value"


def test_review_records_from_kafka_name_partition_and_offset():
    from jobs.review_analysis.runners.kafka import parse_review_message

    rec = parse_review_message(msg('{"id": "P1", "review": "good", "ts": 5}', offset=42))
    assert rec == {"line": 42, "id": "P1", "review": "good", "ts": 5, "partition": 1}
    with pytest.raises(ValueError, match="partition 1 offset 42: field 'id'"):
        parse_review_message(msg('{"review": "x"}', offset=42))


def test_rows_for_the_sink_carry_topic_key_and_json_value():
    row = _ToRow("out", lambda r: r["id"])({"id": "P1", "score": 4})
    assert (row[0], row[1], row[2]) == ("out", "P1", '{"id":"P1","score":4}')
    row = _ToRow(lambda r: f"t-{r['k']}", lambda r: r["k"])({"k": 3})
    assert (row[0], row[1]) == ("t-3", "3")  # non-string keys are written as JSON


def test_pinned_versions_agree():
    fetch = (ROOT / "scripts" / "fetch_jars.sh").read_text()
    assert f'FLINK_AGENTS_PY_KAFKA_CONNECTOR:-{KAFKA_CONNECTOR_VERSION}}}' in fetch
    dockerfile = (ROOT / "docker" / "Dockerfile").read_text()
    assert f"KAFKA_CONNECTOR_VERSION={KAFKA_CONNECTOR_VERSION}" in dockerfile
    fixture = (ROOT / "tests" / "kafka_fixture.py").read_text()
    broker = re.search(r'^KAFKA_VERSION = "([^"]+)"', fixture, re.M).group(1)
    assert f"FLINK_AGENTS_PY_KAFKA_BROKER:-{broker}}}" in fetch
    assert f"apache/kafka:{broker}" in (ROOT / "docker" / "compose.yaml").read_text()


def test_json_null_and_a_parse_giving_none_are_error_rows():
    # thread mode hands a None record to Java as null: the job failed (NullPointerException
    # in BytePrimitiveArraySerializer.copy) instead of reporting one record
    tag = object()
    [(got_tag, err)] = list(_Parse(json_value, tag)(("t", 0, 4, 0, "k", b"null")))
    assert got_tag is tag and err["offset"] == 4 and err["value"] == "null"
    assert err["error"] == "the value is JSON null: no record"
    [(got_tag, err)] = list(_Parse(lambda m: None, tag)(("t", 0, 5, 0, "k", b'{"a": 1}')))
    assert got_tag is tag and "parse returned None" in err["error"]
    assert list(_Parse(json_value, tag)(("t", 0, 6, 0, "k", b"0"))) == [0]  # falsy, not None


def test_rows_for_the_sink_take_what_agents_output():
    # structured output (a pydantic model), Decimal and bytes (key types the runtime keeps):
    # plain orjson refused them and one such output failed the job at every restart
    import dataclasses
    import decimal

    from pydantic import BaseModel, Field

    from flink_agents_py.flink._kafka_sink import _default_key

    class Verdict(BaseModel):
        key: str
        score_pct: decimal.Decimal = Field(alias="scorePct")

    @dataclasses.dataclass
    class Tagged:
        key: bytes
        note: str

    to_row = _ToRow("out", _default_key)
    row = to_row(Verdict(key="P1", scorePct=decimal.Decimal("12.5")))
    assert (row[1], row[2]) == ("P1", '{"key":"P1","scorePct":"12.5"}')  # key from the model
    row = to_row({"key": decimal.Decimal("2.50"), "raw": b"\xff\x00", "text": b"ok"})
    assert (row[1], row[2]) == ('"2.50"', '{"key":"2.50","raw":"/wA=","text":"ok"}')
    row = to_row({"key": "a", "verdict": Verdict(key="a", scorePct=1)})
    assert row[2] == '{"key":"a","verdict":{"key":"a","scorePct":"1"}}'
    assert tuple(to_row(Tagged(b"k", "n"))[1:]) == ('"k"', '{"key":"k","note":"n"}')
    err = orjson.loads(to_row({"key": "a", "what": object()})[2])  # an error row, see below
    assert "a dict record has no JSON form" in err["error"]


def _deep(levels: int) -> dict:
    record: dict = {"leaf": 1}
    for _ in range(levels - 1):
        record = {"a": record}
    return record


def test_a_record_the_sink_cannot_write_is_an_error_row_in_its_place(caplog):
    # raised, it failed the sink at every restart (the same output comes again) and held
    # back every other output of the checkpoint: an output nested deeper than orjson writes
    # (255 levels; the agent keeps it), an object of no JSON form, a key selector that raises
    def key_of(r):
        if r.get("bad_key"):
            raise LookupError("no key here")
        return r["key"]

    to_row = _ToRow("out", key_of)
    with caplog.at_level("WARNING", logger="flink_agents_py.flink._kafka_sink"):
        rows = [to_row(r) for r in (
            {"key": "k1", "n": 1}, {"key": "deep", "d": _deep(300)},
            {"key": "obj", "o": object()}, {"key": "sur", "s": "a\ud800"},
            {"bad_key": 1}, {"key": "k2", "n": 2})]
    assert all(type(r[2]) is str for r in rows)  # the sink takes text
    assert [orjson.loads(r[2]) for r in (rows[0], rows[5])] == [{"key": "k1", "n": 1},
                                                                  {"key": "k2", "n": 2}]
    errors = [orjson.loads(r[2]) for r in rows[1:5]]
    assert [(r[0], r[1]) for r in rows[1:5]] == [("out", "deep"), ("out", "obj"),
                                                  ("out", "sur"), ("out", None)]
    assert [e["key"] for e in errors] == ["deep", "obj", "sur", None]
    assert all(e["kind"] == "error" and e["topic"] == "out" for e in errors)
    assert "has no JSON form (Recursion limit reached)" in errors[0]["error"]
    assert "has no JSON form" in errors[1]["error"] and "object" in errors[1]["value"]
    assert "surrogates not allowed" in errors[2]["error"]
    assert "its Kafka key could not be made (LookupError: no key here)" in errors[3]["error"]
    assert all(len(e["value"]) < 1100 for e in errors)  # an excerpt, not the record
    assert caplog.text.count("this error row was written in its place") == 4


@pytest.mark.flink
def test_unreachable_servers_fail_a_local_job_at_once_naming_them():
    # before: the job ran, its source's enumerator timed out after 30 s per attempt with
    # "Timed out waiting for a node assignment. Call: listNodes" (no server named), and
    # Kafka's admin client logged ~4,500 "Rebootstrapping" lines a second meanwhile
    import socket
    import time

    from pyflink.common import Types

    from flink_agents_py.flink import create_stream_environment, read_json_topic, write_json_topic

    closed = []
    for _ in range(2):  # ports that were free a moment ago: nothing listens there
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            closed.append(f"127.0.0.1:{s.getsockname()[1]}")
    servers = ",".join(closed)
    env = create_stream_environment()
    t0 = time.monotonic()
    with pytest.raises(ConnectionError, match=(
            f"no Kafka broker answers at {servers} \\({closed[0]}: Connection refused; "
            f"{closed[1]}: Connection refused\\)")):
        read_json_topic(env, servers, "reviews")
    ds = env.from_collection([{"key": "a"}], type_info=Types.PICKLED_BYTE_ARRAY())
    with pytest.raises(ConnectionError, match=f"no Kafka broker answers at {closed[0]} "):
        write_json_topic(ds, closed[0], "results", delivery_guarantee="at-least-once")
    assert time.monotonic() - t0 < 5
    # a job for a cluster is not checked here: the cluster may reach what this machine cannot
    from flink_agents_py.flink._workers import _env_config

    _env_config(env).setString("execution.target", "remote")  # as `flink run` submits it
    try:
        assert read_json_topic(env, servers, "reviews").records is not None
    finally:
        _env_config(env).setString("execution.target", "local")


@pytest.mark.flink
def test_exactly_once_output_of_a_local_job_without_checkpoints_is_warned_of(capsys, caplog):
    # before: an unbounded job wrote its outputs in transactions no checkpoint ever committed:
    # read_committed consumers saw nothing (measured: 5 written, 0 committed), until Kafka
    # aborted them after transaction.timeout.ms, and nothing said so (a bounded job commits
    # at its end: a warning, not a refusal)
    import socket

    from pyflink.common import Types

    from flink_agents_py.flink import create_stream_environment, write_json_topic
    from jobs.review_analysis import main

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = f"127.0.0.1:{s.getsockname()[1]}"  # nothing listens: the next check's error
    env = create_stream_environment()  # checkpointing off
    ds = env.from_collection([{"key": "a"}], type_info=Types.PICKLED_BYTE_ARRAY())
    said = "exactly-once output to Kafka topic 'out' is committed at checkpoints, and this job"
    with caplog.at_level("WARNING"), pytest.raises(ConnectionError):
        write_json_topic(ds, closed, "out")
    assert said in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING"), pytest.raises(ConnectionError):
        write_json_topic(ds, closed, "out", delivery_guarantee="at-least-once")
    assert said not in caplog.text
    env = create_stream_environment(checkpoint_interval_ms=1000)
    ds = env.from_collection([{"key": "a"}], type_info=Types.PICKLED_BYTE_ARRAY())
    with caplog.at_level("WARNING"), pytest.raises(ConnectionError):
        write_json_topic(ds, closed, "out")
    assert said not in caplog.text
    # the review job: its own sink, the same rule; no broker: a usage error naming it
    for args, said in ((["--checkpoint-interval-ms", "0"], "committed at checkpoints"),
                       ([], f"no Kafka broker answers at {closed}")):
        with pytest.raises(SystemExit) as exit_:
            main(["--runner", "flink", "--model", "scripted", "--no-progress",
                  "--output", f"kafka://{closed}/results", *args])
        assert exit_.value.code == 2 and said in capsys.readouterr().err


def test_a_record_too_large_for_the_producer_is_an_error_row_in_its_place(caplog):
    # sent as it was, the producer refused it (RecordTooLargeException): the job failed at
    # every restart and no other output of the checkpoint was committed
    to_row = _ToRow("out", lambda r: r["key"], max_request_bytes=300)
    row = to_row({"key": "k", "text": "x" * 150})  # 166 bytes + key + 128: fits
    assert orjson.loads(row[2]) == {"key": "k", "text": "x" * 150}
    with caplog.at_level("WARNING", logger="flink_agents_py.flink._kafka_sink"):
        row = to_row({"key": "k", "text": "x" * 2000})
    err = orjson.loads(row[2])
    assert (row[0], row[1]) == ("out", "k")
    assert (err["kind"], err["topic"], err["key"]) == ("error", "out", "k")
    assert err["error"].startswith("a record of 2,022 bytes for Kafka topic 'out' is over the "
                                   "producer's max.request.size of 300 bytes")
    assert err["value"].startswith('{"key":"k","text":"xxx') and err["value"].endswith(
        "... (2,021 bytes)")
    assert "key k: a record of 2,022 bytes" in caplog.text


def test_record_keys_that_are_not_utf8_stay_distinct_keys():
    """A key's bytes that are not UTF-8 are kept as bytes, never decoded with U+FFFD.

    Before, the source's Java side decoded keys leniently, so ``b"\\xff"``, ``b"\\xfe"`` and
    the UTF-8 of U+FFFD itself were one key: an agent keyed by the Kafka key ran them as one,
    each seeing and changing the others' memory.
    """
    keys = []
    parse = _Parse(lambda m: keys.append(m.key) or {"key": m.key}, object())
    for offset, key in enumerate([b"\xff", b"\xfe", "\ufffd".encode(), b"1", None, "k"]):
        assert list(parse(("t", 0, offset, 0, key, b"{}")))  # none is an error row
    assert keys == [b"\xff", b"\xfe", "\ufffd", "1", None, "k"]
    assert len({k for k in keys if k is not None}) == 5
    [(_, err)] = list(_Parse(json_value, "tag")(("t", 3, 8, 0, b"\xff", b"{nope")))
    assert (err["partition"], err["offset"], err["key"]) == (3, 8, b"\xff")
