"""Shared fixtures: per-test probes (call counts and gates), operator harnesses on fakes
and a real Kafka broker.

``tests/`` and the repository are on ``sys.path`` through pytest's ``pythonpath`` option
(``pyproject.toml``): test helpers are imported from the ``support`` package.
"""

from __future__ import annotations

import gc
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


@pytest.fixture(scope="module", autouse=True)
def _known_secrets_as_they_were() -> Iterator[None]:
    """Each test module ends with the process's known secrets it started with.

    ``register_secret`` (and every resource or key a test makes with an ``api_key``) adds to
    one registry for the process, and once it holds any secret every text written to a
    record or a log is masked against all of them: a secret a module left behind made every
    later module's failures, traces and logs slower (the deep-chain traces of
    ``test_trace_deep`` took 30-42 s each late in a CI run, under 1 s alone). A test that
    needs a secret registers it itself; those registered while test modules were imported
    stay (they are known before the first module starts).
    """
    from flink_agents_py.api import _secrets

    registry = _secrets._REGISTRY
    with registry._lock:
        saved = (set(registry._values), set(registry._forms), set(registry._patterns),
                 set(registry._hidden), registry.regexes, set(registry._encoded),
                 registry.encoded)
    yield
    with registry._lock:
        values, forms, patterns, hidden, regexes, encoded_forms, encoded = saved
        registry._values, registry._forms = set(values), set(forms)
        registry._patterns, registry._hidden = set(patterns), set(hidden)
        registry.regexes = regexes
        registry._encoded, registry.encoded = set(encoded_forms), encoded


@pytest.fixture(scope="module", autouse=True)
def _chroma_systems_stopped() -> Iterator[None]:
    """Each test module ends with chromadb's in-process instances stopped.

    chromadb keeps one instance per persist directory for the whole process (its
    ``SharedSystemClient`` registry), each holding about 15 fds (its SQLite connections,
    its index files, its Rust runtime's epoll): a test's temporary directory is a new one
    each time, so the suite held over 1,000 fds by its last modules, past the 1,024 that
    many machines allow a process by default.
    """
    yield
    if "chromadb" in sys.modules:
        from chromadb.api.shared_system_client import SharedSystemClient

        SharedSystemClient.clear_system_cache()
        gc.collect()  # (their files close as the clients the module's stores held are freed)


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
