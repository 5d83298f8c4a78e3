"""Shared fixtures: a real Kafka broker for the tests marked ``kafka``."""

from __future__ import annotations

import os
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(__file__))


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory):
    """One KRaft Kafka broker for the session (``tests/kafka_fixture.KafkaBroker``).

    Started on first use (fetching its jars from Maven Central if they are not cached yet),
    stopped by PID at the end of the session.
    """
    pytest.importorskip("confluent_kafka")
    from kafka_fixture import KafkaBroker

    broker = KafkaBroker(tmp_path_factory.mktemp("kafka-broker"))
    t0 = time.monotonic()
    broker.start()
    print(f"\n[kafka] broker pid {broker.pid} on {broker.bootstrap}, ready in "
          f"{time.monotonic() - t0:.1f} s", file=sys.stderr)
    try:
        yield broker
    finally:
        broker.stop()
