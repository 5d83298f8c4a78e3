"""Shared fixtures: per-test probes (call counts and gates), operator harnesses on fakes
and a real Kafka broker.

``tests/`` and the repository are on ``sys.path`` through pytest's ``pythonpath`` option
(``pyproject.toml``): test helpers are imported from the ``support`` package.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator

import pytest
from support import probes as _probes


@pytest.fixture(autouse=True)
def _environment_as_it_was() -> Iterator[None]:
    """Each test ends with the environment variables it started with.

    A MiniCluster job in process mode runs its Python worker inside this process (PyFlink's
    loopback mode), which sets the worker's variables here for good, among them
    ``PYFLINK_GATEWAY_DISABLED``: a later test's child Flink job would then refuse to start
    its gateway ("launching the PythonGatewayServer during Python UDF execution").
    """
    saved = dict(os.environ)
    yield
    if os.environ != saved:
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture(autouse=True)
def probes() -> Iterator[_probes.Probes]:
    """This test's call counts and gates (``support.probes``): new for every test, every gate
    opened when it ends."""
    current = _probes.install()
    yield current
    current.finish()


@pytest.fixture
def pump_harness():
    """Make agent operators on fakes (``test_operator_pump.PumpHarness``: thread mode, no
    Flink job): ``pump_harness(agent, **operator_options)``; each is closed when the test ends.
    """
    pytest.importorskip("pyflink")
    from test_operator_pump import PumpHarness

    made: list[PumpHarness] = []

    def make(agent, **options) -> PumpHarness:
        made.append(PumpHarness(agent, **options))
        return made[-1]

    yield make
    for h in made:
        h.close()


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
