"""The deployment guide's manifests: the sample FlinkDeployment (Flink Kubernetes Operator) and
the Docker compose file parse as YAML and carry what the agent operator needs.

No Kubernetes and no Docker engine here: these tests read the files, as a reviewer would, and
check them against what the project ships (the Flink version of apache-flink, the Kafka broker
version of the test broker, the pemja setting that lets several thread-mode jobs share a
TaskManager). ``bench/_scaleout.py``'s CPU attribution is checked on fixed samples.
"""

from __future__ import annotations

import pathlib
import re
import sys

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "how-to" / "deployment.md"
MANIFEST = ROOT / "docs" / "how-to" / "flink-deployment.yaml"
COMPOSE = ROOT / "docker" / "compose.yaml"


def _flink_version() -> str:
    pyflink = pytest.importorskip("pyflink")
    lib = pathlib.Path(pyflink.__file__).parent / "lib"
    for jar in lib.glob("flink-dist-*.jar"):
        return jar.stem.removeprefix("flink-dist-")
    pytest.skip("no flink-dist jar in the apache-flink package")


@pytest.fixture(scope="module")
def deployment() -> dict:
    return yaml.safe_load(MANIFEST.read_text())


def test_the_manifest_is_a_flink_deployment_of_the_operator_api(deployment):
    assert deployment["apiVersion"] == "flink.apache.org/v1beta1"
    assert deployment["kind"] == "FlinkDeployment"
    assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", deployment["metadata"]["name"])
    spec = deployment["spec"]
    assert spec["image"] and spec["serviceAccount"]
    assert re.fullmatch(r"v2_\d+", spec["flinkVersion"])
    for part in ("jobManager", "taskManager"):
        assert set(spec[part]["resource"]) >= {"memory", "cpu"}


def test_flink_configuration_is_a_map_of_strings(deployment):
    # the operator's CRD types flinkConfiguration as map<string, string>: a bare YAML number
    # or boolean there is rejected by the API server
    conf = deployment["spec"]["flinkConfiguration"]
    bad = {k: v for k, v in conf.items() if not isinstance(v, str)}
    assert not bad, f"non-string values in flinkConfiguration: {bad}"


def test_the_configuration_has_what_an_agent_job_needs(deployment):
    conf = deployment["spec"]["flinkConfiguration"]
    # thread mode, one interpreter per TaskManager: one slot per TaskManager
    assert conf["taskmanager.numberOfTaskSlots"] == "1"
    assert conf["python.execution-mode"] == "thread"
    assert conf["python.executable"] == conf["python.client.executable"]
    # several thread-mode jobs on one TaskManager (docs/how-to/cluster.md)
    assert conf["classloader.parent-first-patterns.additional"] == "pemja"
    # durable runs: checkpoints and savepoints on shared storage, retained on cancel
    assert conf["execution.checkpointing.interval"]
    for key in ("execution.checkpointing.dir", "execution.checkpointing.savepoint-dir",
                "high-availability.storageDir"):
        assert re.match(r"(s3|gs|abfss?|hdfs|file)://", conf[key]), key
    assert conf["execution.checkpointing.externalized-checkpoint-retention"] == \
        "RETAIN_ON_CANCELLATION"
    assert int(conf["pipeline.max-parallelism"]) >= deployment["spec"]["job"]["parallelism"]


def test_the_job_runs_a_python_module_through_the_python_driver(deployment):
    job = deployment["spec"]["job"]
    assert job["entryClass"] == "org.apache.flink.client.python.PythonDriver"
    m = re.fullmatch(r"local:///opt/flink/opt/flink-python-(.+)\.jar", job["jarURI"])
    assert m, job["jarURI"]
    assert m.group(1) == _flink_version(), "the flink-python jar of the shipped Flink version"
    args = job["args"]
    assert "-pym" in args or "-py" in args
    exe = deployment["spec"]["flinkConfiguration"]["python.executable"]
    assert args[args.index("-pyexec") + 1] == exe
    assert args[args.index("-pyclientexec") + 1] == exe
    # upgrades keep runs in flight: stop with a savepoint, restore from it
    assert job["upgradeMode"] == "savepoint"
    assert job["state"] == "running"
    assert isinstance(job["parallelism"], int) and job["parallelism"] >= 1


def test_the_guide_shows_the_manifest_as_it_is_in_the_repository():
    text = GUIDE.read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", text, re.S)
    shown = [yaml.safe_load(b) for b in blocks]
    assert yaml.safe_load(MANIFEST.read_text()) in shown
    assert "flink-deployment.yaml" in text


def test_the_compose_file_runs_a_cluster_next_to_the_test_brokers_kafka():
    compose = yaml.safe_load(COMPOSE.read_text())
    services = compose["services"]
    assert {"jobmanager", "taskmanager", "kafka"} <= set(services)
    assert any(str(p).endswith(":8081") for p in services["jobmanager"].get("ports", []))
    depends = services["taskmanager"].get("depends_on", [])
    assert "jobmanager" in depends
    sys.path.insert(0, str(ROOT / "tests"))
    from kafka_fixture import KAFKA_VERSION

    assert services["kafka"]["image"] == f"apache/kafka:{KAFKA_VERSION}"


def test_scaleout_cpu_is_attributed_to_the_noted_threads():
    sys.path.insert(0, str(ROOT))
    from bench._scaleout import HZ, _window_cpu

    class Sampler:  # two samples, 2 s apart: op thread 1 s of CPU, io 0.2 s, other 0.4 s
        samples = [
            (100.0, {11: ("agent", 0), 12: ("agent", 0), 13: ("gc", 0)}),
            (102.0, {11: ("agent", HZ), 12: ("agent", HZ // 5), 13: ("gc", 2 * HZ // 5),
                     14: ("new", 0)}),
        ]

    cpu = _window_cpu({7: Sampler()}, {"op": [(7, 11)], "io": [(7, 12)]}, 99.0, 103.0)
    assert cpu["op_cores"] == pytest.approx(0.5)
    assert cpu["io_cores"] == pytest.approx(0.1)
    assert cpu["tm_cores_total"] == pytest.approx(0.8)
    # a window with fewer than two samples measures nothing
    assert _window_cpu({7: Sampler()}, {}, 101.0, 103.0)["tm_cores"] == {}
