"""``read_json_topic``'s records given to ``from_datastream``: error rows name their offsets.

``from_kafka`` carried each record's topic, partition and offset to the agent operator, but a
program that reads the topic itself (``records, bad = read_json_topic(...)``, then
``agents.from_datastream(records)``) got error rows saying ``record``: a record its key
selector refused, or whose action failed, could not be found in the topic. Now they name
``topic T partition P offset O`` as ``from_kafka``'s do, and every good record still runs.
"""

from __future__ import annotations

import uuid

import orjson
import pytest

pytestmark = [pytest.mark.kafka, pytest.mark.flink]

pytest.importorskip("pyflink")
pytest.importorskip("confluent_kafka")

from support import bad_record_agents as bra  # noqa: E402
from test_bad_input_kafka import produce_raw  # noqa: E402


def test_rows_of_a_topics_records_name_their_offsets(kafka_broker):
    from pyflink.common import Types

    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.flink import create_stream_environment, read_json_topic

    topic = f"positions-{uuid.uuid4().hex[:6]}"
    kafka_broker.create_topics([topic], partitions=1)
    values = [
        orjson.dumps(v)
        for v in (
            {"id": "g", "n": 0},
            {"n": 1},
            {"id": "boom", "boom": True},
            [1, 2],
            {"id": "g", "n": 4},
        )
    ]
    where = produce_raw(kafka_broker.bootstrap, topic, values)
    env = create_stream_environment(execution_mode="thread", parallelism=1, restart_attempts=0)
    records, bad = read_json_topic(env, kafka_broker.bootstrap, topic, bounded=True)
    agents = AgentsExecutionEnvironment.flink(env, metrics=False)
    job = agents.from_datastream(records, key_selector=bra.key_of).apply(bra.Echo())
    pickled = Types.PICKLED_BYTE_ARRAY()
    rows = (
        job.to_datastream()
        .map(lambda o: ("out", o), output_type=pickled)
        .union(
            job.errors_datastream().map(lambda e: ("err", e), output_type=pickled),
            bad.map(lambda e: ("bad", e), output_type=pickled),
        )
    )
    got: dict[str, list] = {"out": [], "err": [], "bad": []}
    with rows.execute_and_collect("topic-positions") as results:
        for kind, row in results:
            got[kind].append(row)
    assert sorted(o["n"] for o in got["out"]) == [0, 4]
    assert got["bad"] == []

    def place(i: int) -> str:
        return f"topic {topic} partition {where[i][0]} offset {where[i][1]}"

    assert sorted((e["source"], e["action"], e["error_type"]) for e in got["err"]) == sorted(
        [
            (place(1), "<key_selector>", "KeyError"),
            (place(2), "on_input", "RuntimeError"),
            (place(3), "<key_selector>", "TypeError"),
        ]
    )
    for e in got["err"]:
        if e["action"] == "<key_selector>":
            assert e["execution_id"] == e["source"]
        else:
            assert e["key"] == "boom"
