"""The documented Kafka helpers (``from_kafka``, ``write_json_topic``) on records users send.

One bounded MiniCluster job on the session's broker reads a topic holding good records, a
JSON ``null`` value and a record without the key field, runs an agent whose outputs are
pydantic models holding a ``Decimal`` (structured output), one of them just within the
producer's ``max.request.size`` and one over it, and writes outputs, agent errors and
malformed records to three topics, exactly-once (read ``read_committed``).

Before the fixes the job failed on each: the ``null`` record reached Java as a null array
(``NullPointerException`` in ``BytePrimitiveArraySerializer.copy``), the sink's JSON encoder
refused the model (``TypeError: Type is not JSON serializable``), and the producer refused
the large output (``RecordTooLargeException``), at every restart, committing no output.
"""

from __future__ import annotations

import uuid

import orjson
import pytest

pytestmark = [pytest.mark.kafka, pytest.mark.flink]

pytest.importorskip("pyflink")
pytest.importorskip("confluent_kafka")

from kafka_fixture import consume_all, produce  # noqa: E402

EMPTY_VERDICT = len('{"key":"e","amount":"0.25","note":""}')
EDGE = 1_048_576 - 128 - len("e") - EMPTY_VERDICT  # value + key + 128 = max.request.size
RECORDS = [
    ("a", b'{"id": "a", "n": 1}'),
    ("null", b"null"),  # valid JSON, but no record
    ("b", b'{"id": "b", "n": 2}'),
    ("no-id", b'{"n": 3}'),  # the key selector raises: an agent error row
    ("e", b'{"id": "e", "n": 1, "note": %d}' % EDGE),  # the largest output written
    ("g", b'{"id": "g", "n": 1, "note": %d}' % (EDGE + 1)),  # an error row in its place
    ("a", b'{"id": "a", "n": 6}'),
]


@pytest.mark.timeout(600)
def test_null_values_model_outputs_and_large_outputs_do_not_fail_the_job(kafka_broker):
    from support.kafka_agents import StructuredOutput

    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.flink import create_stream_environment, from_kafka, write_json_topic

    tag = uuid.uuid4().hex[:6]
    src, dst, errs, bad = f"rec-in-{tag}", f"rec-out-{tag}", f"rec-err-{tag}", f"rec-bad-{tag}"
    kafka_broker.create_topics([src, dst, errs, bad], partitions=1)
    where = produce(kafka_broker.bootstrap, src, RECORDS)

    env = create_stream_environment(parallelism=1, checkpoint_interval_ms=1000,
                                    restart_attempts=0)  # a failure fails the test at once
    agents = AgentsExecutionEnvironment.flink(env)
    job, malformed = from_kafka(agents, kafka_broker.bootstrap, src,
                                key_selector=lambda r: r["id"], bounded=True)
    job.apply(StructuredOutput())
    write_json_topic(job.to_datastream(), kafka_broker.bootstrap, dst)  # key: Verdict.key
    write_json_topic(job.errors_datastream(), kafka_broker.bootstrap, errs)
    write_json_topic(malformed, kafka_broker.bootstrap, bad)
    agents.execute(f"kafka-records-{tag}")

    outputs = [(m.key(), orjson.loads(m.value()))
               for m in consume_all(kafka_broker.bootstrap, dst)]
    assert len(outputs) == 5
    assert outputs[:2] + outputs[4:] == [
        (b"a", {"key": "a", "amount": "0.25", "note": ""}),
        (b"b", {"key": "b", "amount": "0.5", "note": ""}),
        (b"a", {"key": "a", "amount": "1.5", "note": ""})]
    assert outputs[2] == (b"e", {"key": "e", "amount": "0.25", "note": "x" * EDGE})
    key, too_large = outputs[3]
    assert key == b"g" and (too_large["kind"], too_large["key"]) == ("error", "g")
    assert too_large["error"].startswith(
        f"a record of {EDGE + 1 + EMPTY_VERDICT + 1:,} bytes for Kafka topic '{dst}' is over "
        "the producer's max.request.size of 1,048,576 bytes")
    assert len(too_large["value"]) < 1100  # an excerpt
    [null] = [orjson.loads(m.value()) for m in consume_all(kafka_broker.bootstrap, bad)]
    assert (null["partition"], null["offset"]) == where[1]
    assert (null["key"], null["error"], null["value"]) == (
        "null", "the value is JSON null: no record", "null")
    [unkeyed] = [orjson.loads(m.value()) for m in consume_all(kafka_broker.bootstrap, errs)]
    assert unkeyed["action"] == "<key_selector>" and unkeyed["error_type"] == "KeyError"
    assert unkeyed["input"] == {"n": 3}
