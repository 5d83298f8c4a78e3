"""examples/sql_kafka_agent.py: an agent between two Kafka tables declared in SQL.

Run as a user runs it: the venv's interpreter, from a temporary directory outside the
repository, against the session's Kafka broker; the bounded source ends the job by itself.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import uuid

import pytest

pytestmark = [pytest.mark.kafka, pytest.mark.flink]

pytest.importorskip("pyflink")
pytest.importorskip("confluent_kafka")

ROOT = pathlib.Path(__file__).resolve().parents[1]

from kafka_fixture import consume_all  # noqa: E402
from support.waiting import SLOW_S  # noqa: E402

REVIEWS = {"r1": "Great taste, fair price", "r2": "The delivery was late and the box broken",
           "r3": "Lovely staff", "r4": "Service too slow"}


@pytest.mark.timeout(720)
def test_sql_kafka_agent_judges_every_review(kafka_broker, tmp_path):
    from confluent_kafka import Producer

    suffix = uuid.uuid4().hex[:6]
    reviews, verdicts = f"sql-reviews-{suffix}", f"sql-verdicts-{suffix}"
    kafka_broker.create_topics([reviews, verdicts], partitions=1)
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap})
    for rid, text in REVIEWS.items():
        producer.produce(reviews, value=json.dumps({"id": rid, "text": text}).encode())
    assert producer.flush(SLOW_S) == 0  # returns as soon as every record is acknowledged

    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "sql_kafka_agent.py"),
         "--bootstrap", kafka_broker.bootstrap, "--input", reviews, "--output", verdicts],
        cwd=tmp_path, capture_output=True, text=True, timeout=2 * SLOW_S,
        env={**os.environ, "PYTHONPATH": ""})
    assert proc.returncode == 0, proc.stderr[-3000:]

    rows = [json.loads(m.value()) for m in consume_all(kafka_broker.bootstrap, verdicts)]
    assert sorted(rows, key=lambda r: r["id"]) == [
        {"id": "r1", "sentiment": "positive", "error": None},
        {"id": "r2", "sentiment": "negative", "error": None},
        {"id": "r3", "sentiment": "positive", "error": None},
        {"id": "r4", "sentiment": "negative", "error": None},
    ]
