"""Bad input never costs good input on Kafka: one job over a topic holding the whole matrix.

The values are produced raw (bytes), among them a 10 MB one (the topic and the producer allow
16 MB), read by the job's ``KafkaSource`` (bounded), rated, and written topic to topic: results
to the output topic, error rows to ``<output>-errors`` (read ``read_committed``).
"""

from __future__ import annotations

import sys
import uuid

import orjson
import pytest

pytestmark = [pytest.mark.kafka, pytest.mark.flink]

pytest.importorskip("pyflink")
pytest.importorskip("confluent_kafka")

from kafka_fixture import consume_all  # noqa: E402
from support.bad_input import kafka_matrix  # noqa: E402

MAX_MESSAGE = str(16 * 1024 * 1024)


def produce_raw(bootstrap: str, topic: str,
                values: list[bytes | None]) -> list[tuple[int, int]]:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "message.max.bytes": MAX_MESSAGE})
    where: list = [None] * len(values)
    errors: list = []

    def cb(i: int):
        def done(err, msg):
            if err is not None:
                errors.append(err)
            else:
                where[i] = (msg.partition(), msg.offset())
        return done

    for i, value in enumerate(values):
        producer.produce(topic, key=f"k{i}", value=value, on_delivery=cb(i))
        producer.poll(0)
    assert producer.flush(60) == 0 and not errors, errors
    return where


@pytest.mark.timeout(600)
def test_kafka_matrix(kafka_broker):
    from jobs.review_analysis import main

    suffix = uuid.uuid4().hex[:6]
    topic, results = f"bad-reviews-{suffix}", f"bad-results-{suffix}"
    kafka_broker.create_topics([topic], partitions=1, config={"max.message.bytes": MAX_MESSAGE})
    kafka_broker.create_topics([results, f"{results}-errors"], partitions=1)
    cases = kafka_matrix()
    where = produce_raw(kafka_broker.bootstrap, topic, [c.raw for c in cases])
    assert main(["--input", f"kafka://{kafka_broker.bootstrap}/{topic}",
                 "--output", f"kafka://{kafka_broker.bootstrap}/{results}",
                 "--model", "scripted", "--bounded", "--checkpoint-interval-ms", "1000",
                 "--no-progress"]) == 0
    by_offset = {off: c for (_, off), c in zip(where, cases, strict=True)}
    rows = [orjson.loads(m.value()) for m in consume_all(kafka_broker.bootstrap, results)]
    reviews = [r for r in rows if r["kind"] == "review"]
    errors = [orjson.loads(m.value())
              for m in consume_all(kafka_broker.bootstrap, f"{results}-errors")]
    assert {r["line"]: r["id"] for r in reviews} == {
        off: c.product for off, c in by_offset.items() if c.good}
    assert sorted(e["offset"] for e in errors) == sorted(
        off for off, c in by_offset.items() if not c.good)
    for e in errors:
        case = by_offset[e["offset"]]
        assert e["error"].startswith(f"partition 0 offset {e['offset']}: "), e["error"]
        assert case.problem in e["error"], (case.name, e["error"])
        assert (e["value"] is None) == (case.raw is None)  # an excerpt, not the record
        assert e["value"] is None or len(e["value"]) < 1100
    counts = {"good": sum(1 for c in cases if c.good), "bad": sum(1 for c in cases if not c.good),
              "outputs": len(reviews), "errors": len(errors)}
    print(f"\n[bad input] kafka: {counts}", file=sys.stderr)
    assert counts == {"good": 5, "bad": 10, "outputs": 5, "errors": 10}
