"""Kafka record keys that are not UTF-8 stay distinct agent keys; failed actions' rows say where.

Before, the source's Java deserializer decoded each key leniently (every invalid byte as
U+FFFD), so records keyed ``b"\\xff"``, ``b"\\xfe"`` and the UTF-8 of U+FFFD ran as one agent
key: each saw and changed the others' memory (here: one counter counting all three).

The error row of a record whose action failed named its key and the run's execution, but
not where the record was read: its ``source`` now names the topic, partition and offset, for
a record run at once as for one queued behind its key's run in flight.
"""

from __future__ import annotations

import uuid

import orjson
import pytest

pytestmark = [pytest.mark.kafka, pytest.mark.flink]

pytest.importorskip("pyflink")
pytest.importorskip("confluent_kafka")

from kafka_fixture import consume_all  # noqa: E402


@pytest.mark.timeout(600)
def test_distinct_key_bytes_are_distinct_keys(kafka_broker):
    from confluent_kafka import Producer
    from support.kafka_keys import CountPerKey, by_kafka_key

    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.flink import create_stream_environment, from_kafka, write_json_topic

    tag = uuid.uuid4().hex[:6]
    src, dst, errs = f"keys-in-{tag}", f"keys-out-{tag}", f"keys-err-{tag}"
    kafka_broker.create_topics([src, dst, errs], partitions=1)
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap})
    keys = [
        b"\xff",
        b"\xfe",
        "\ufffd".encode(),
        b"\xff",
        "\ufffd".encode(),
        b"q",
        b"q",
        b"f",
    ]  # q, f: UTF-8
    extra = [{}, {}, {}, {}, {}, {"slow": True}, {"fail": True}, {"fail": True}]
    for n, (key, more) in enumerate(zip(keys, extra, strict=True)):
        producer.produce(src, key=key, value=orjson.dumps({"n": n, **more}))
    assert producer.flush(60) == 0  # one partition: record n at offset n

    env = create_stream_environment(parallelism=1, restart_attempts=0)
    agents = AgentsExecutionEnvironment.flink(env)
    job, malformed = from_kafka(
        agents, kafka_broker.bootstrap, src, parse=by_kafka_key, bounded=True
    )
    job.apply(CountPerKey())
    write_json_topic(job.to_datastream(), kafka_broker.bootstrap, dst)
    write_json_topic(job.errors_datastream(), kafka_broker.bootstrap, errs)
    agents.execute(f"kafka-keys-{tag}")

    outputs = sorted(
        (o["n"], o["key"], o["seen"])
        for o in (orjson.loads(m.value()) for m in consume_all(kafka_broker.bootstrap, dst))
    )
    assert outputs == [
        (0, "b'\\xff'", 1),
        (1, "b'\\xfe'", 1),
        (2, "'\ufffd'", 1),
        (3, "b'\\xff'", 2),
        (4, "'\ufffd'", 2),
        (5, "'q'", 1),
    ]
    errors = sorted(
        (e["input"]["n"], e["key"], e["source"], e["error_type"])
        for e in (orjson.loads(m.value()) for m in consume_all(kafka_broker.bootstrap, errs))
    )
    assert errors == [  # the key, and where the record was read
        (6, "q", f"topic {src} partition 0 offset 6", "ValueError"),
        (7, "f", f"topic {src} partition 0 offset 7", "ValueError"),
    ]
