"""``KafkaJournal`` on a real broker, without Flink: append, lookup, recovery, pruning."""

from __future__ import annotations

import pickle
import time
import uuid

import pytest

pytestmark = pytest.mark.kafka

pytest.importorskip("pyflink")  # flink_agents_py.flink imports it
pytest.importorskip("confluent_kafka")

from flink_agents_py.flink import KafkaJournal  # noqa: E402
from flink_agents_py.runtime import CallRecord  # noqa: E402


def test_kafka_journal_append_lookup_recover_prune(kafka_broker):
    topic = f"journal-unit-{uuid.uuid4().hex[:6]}"
    j = KafkaJournal(kafka_broker.bootstrap, topic, retention_s=10)
    rec = CallRecord.model_validate({"digest": "d", "done": True, "ok": True, "value": 42})
    assert j.lookup("a", "r0/x/c0") is None  # builds the (empty) index
    j.append("a", "r0/x/c0", rec)
    j.append({"k": 1}, "r0/x/c0", rec)
    j.append("a", "r1/x/c0", rec)
    assert j.lookup("a", "r0/x/c0") == rec
    # a new instance (after a restore: unpickled) recovers the entries from the topic
    again = pickle.loads(pickle.dumps(j))
    assert again.lookup({"k": 1}, "r0/x/c0") == rec and again.loaded_entries == 3
    # pruning: entries of runs completed retention_s ago become tombstones
    now = time.time()
    j.run_completed("a", "r0", now_s=now)
    j.run_completed("a", "r1", now_s=now + 20)
    j.close()
    third = KafkaJournal(kafka_broker.bootstrap, topic)
    assert third.lookup("a", "r0/x/c0") is None
    assert third.lookup("a", "r1/x/c0") == rec and third.count() == 2
