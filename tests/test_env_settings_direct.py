"""``create_stream_environment`` hands its settings to Java in one call each.

PyFlink's ``Configuration.set_string`` looks the two jar keys' names up through py4j at
every call (about 14 round trips into a JVM that has just started): 22-96 ms of a one-record
job's start for the dozen settings. Every setting must still reach the environment, and the
jar keys, which PyFlink's method also adds to the client's class loader, still go through it.
"""

from __future__ import annotations

import pytest

pytest.importorskip("pyflink")

from pyflink.common import Configuration  # noqa: E402

from flink_agents_py.flink import create_stream_environment  # noqa: E402
from flink_agents_py.flink._workers import config_getter  # noqa: E402


@pytest.mark.flink
@pytest.mark.timeout(300)
def test_every_setting_reaches_the_environment_and_only_jar_keys_take_pyflinks_path(
    monkeypatch, tmp_path
):
    through_pyflink: list[str] = []
    real = Configuration.set_string

    def watched(self, key, value):
        through_pyflink.append(key)
        return real(self, key, value)

    monkeypatch.setattr(Configuration, "set_string", watched)
    jar = tmp_path / "extra.jar"
    jar.write_bytes(b"")  # an empty file: the class loader only records its URL
    env = create_stream_environment(
        bundle_size=123,
        restart_attempts=7,
        extra_config={"pipeline.jars": jar.as_uri(), "state.backend.type": "hashmap"},
    )
    get = config_getter(env)
    assert get("python.execution-mode") == "thread"
    assert get("python.fn-execution.bundle.size") == "123"
    assert get("restart-strategy.fixed-delay.attempts") == "7"
    assert get("execution.checkpointing.unaligned.enabled") == "true"
    assert get("state.backend.type") == "hashmap"
    assert get("pipeline.jars") == jar.as_uri()
    assert "pipeline.jars" in through_pyflink  # (PyFlink adds it to the class loader)
    ours = {
        "python.execution-mode",
        "python.executable",
        "python.client.executable",
        "python.fn-execution.bundle.size",
        "python.fn-execution.bundle.time",
        "restart-strategy.type",
        "restart-strategy.fixed-delay.attempts",
        "restart-strategy.fixed-delay.delay",
        "execution.checkpointing.unaligned.enabled",
        "execution.checkpointing.aligned-checkpoint-timeout",
        "state.backend.type",
    }
    assert not ours & set(through_pyflink), through_pyflink  # one call into Java each
