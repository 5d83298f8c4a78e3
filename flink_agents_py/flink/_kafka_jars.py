"""The jars of Kafka jobs: Flink's Kafka connector and our compiled helper schemas.

The connector is the shaded ``org.apache.flink:flink-sql-connector-kafka`` jar
(``KAFKA_CONNECTOR_VERSION``, fetched from Maven Central by ``scripts/fetch_jars.sh``, which
``make setup`` runs). PyFlink's builders only take value-only deserializers and cannot take a
record's key from a field, so two small schemas (``java/flinkagentspy/kafka/KafkaRows.java``)
are compiled once with ``javac`` into a helper jar: records travel between Java and Python as
``Row(topic, partition, offset, timestamp, key, value)`` and ``Row(topic, key, value)``.
``add_kafka_jars(env)`` adds both jars to a job; ``check_servers`` fails a job for the local
MiniCluster at once when none of its Kafka servers answers.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import shutil
import socket
import subprocess
import tempfile
import zipfile
from typing import Any
from urllib.parse import urlparse

__all__ = ["KAFKA_CONNECTOR_VERSION", "add_kafka_jars", "check_servers", "kafka_jars",
           "parse_kafka_url"]

KAFKA_CONNECTOR_VERSION = "5.0.0-2.2"
"""``flink-sql-connector-kafka`` release used: the newest (for Flink 2.2; none exists for 2.3
yet), tested with apache-flink 2.3.0. Keep in step with ``scripts/fetch_jars.sh``."""

_CONNECTOR_JAR = f"flink-sql-connector-kafka-{KAFKA_CONNECTOR_VERSION}.jar"
_JAVA_SOURCE = pathlib.Path(__file__).parent / "java" / "flinkagentspy" / "kafka" / "KafkaRows.java"
DESERIALIZER = "flinkagentspy.kafka.KafkaRows$RecordRowDeserializer"
"""The helper jar's deserializer class (Kafka record -> ``Row`` with topic, partition, ...)."""
SERIALIZER = "flinkagentspy.kafka.KafkaRows$TopicKeyValueSerializer"
"""The helper jar's serializer class (``Row(topic, key, value)`` -> Kafka record)."""


def _cache_root() -> pathlib.Path:
    return pathlib.Path(os.environ.get("FLINK_AGENTS_PY_CACHE")
                        or pathlib.Path.home() / ".cache" / "flink-agents-py")


def _jar_dirs() -> list[pathlib.Path]:
    """Where jars are looked for, first match wins."""
    dirs = []
    if os.environ.get("FLINK_AGENTS_PY_JARS"):
        dirs.append(pathlib.Path(os.environ["FLINK_AGENTS_PY_JARS"]))
    dirs.append(pathlib.Path.cwd() / ".cache" / "jars")
    dirs.append(pathlib.Path(__file__).resolve().parents[2] / ".cache" / "jars")  # a checkout
    dirs.append(_cache_root() / "jars")
    return dirs


def _connector_jar() -> pathlib.Path:
    for d in _jar_dirs():
        if (d / _CONNECTOR_JAR).is_file():
            return d / _CONNECTOR_JAR
    raise FileNotFoundError(
        f"{_CONNECTOR_JAR} not found in {', '.join(map(str, _jar_dirs()))}: run `make setup` "
        "or `bash scripts/fetch_jars.sh connector` (it fetches it from Maven Central), or set "
        "FLINK_AGENTS_PY_JARS to a folder holding it")


def _flink_dist_jar() -> pathlib.Path:
    import pyflink

    lib = pathlib.Path(pyflink.__file__).parent / "lib"
    found = sorted(lib.glob("flink-dist*.jar"))
    if not found:
        raise FileNotFoundError(f"no flink-dist jar in {lib}")
    return found[0]


def _helper_jar(connector: pathlib.Path) -> pathlib.Path:
    """The compiled schemas, built with javac on first use and cached by content hash."""
    source = _JAVA_SOURCE.read_bytes()
    digest = hashlib.sha256(source + KAFKA_CONNECTOR_VERSION.encode()).hexdigest()[:12]
    name = f"flink-agents-py-kafka-{digest}.jar"
    for d in _jar_dirs():
        if (d / name).is_file():
            return d / name
    java_home = os.environ.get("JAVA_HOME")
    javac = shutil.which("javac") or (
        os.path.join(java_home, "bin", "javac") if java_home else None)
    if not javac or not os.path.exists(javac):
        raise FileNotFoundError(
            f"{name} is not built and no javac was found: install a JDK (11+) and run "
            "`make setup`, or build it where a JDK is and put it in FLINK_AGENTS_PY_JARS")
    out_dir = _cache_root() / "jars"
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_dir) as tmp:
        classes = pathlib.Path(tmp) / "classes"
        classpath = os.pathsep.join([str(_flink_dist_jar()), str(connector)])
        proc = subprocess.run(
            [javac, "--release", "11", "-nowarn", "-encoding", "UTF-8", "-d", str(classes),
             "-cp", classpath, str(_JAVA_SOURCE)], capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"compiling {_JAVA_SOURCE.name} failed:\n{proc.stderr}")
        tmp_jar = pathlib.Path(tmp) / name
        with zipfile.ZipFile(tmp_jar, "w", zipfile.ZIP_DEFLATED) as jar:
            jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\r\n\r\n")
            for f in sorted(classes.rglob("*.class")):
                jar.write(f, f.relative_to(classes).as_posix())
        os.replace(tmp_jar, out_dir / name)  # atomic: concurrent builders write the same bytes
    return out_dir / name


def kafka_jars() -> list[str]:
    """Paths of the jars a Kafka job needs: the connector and the compiled helper schemas.

    The helper jar is compiled with ``javac`` the first time (about 2 s) and cached in the shared
    cache (``$FLINK_AGENTS_PY_CACHE/jars``, default ``~/.cache/flink-agents-py/jars``).
    Looked up in order: ``$FLINK_AGENTS_PY_JARS``, ``./.cache/jars``, the checkout's
    ``.cache/jars``, the shared cache.

    Returns:
        Absolute paths ``[connector_jar, helper_jar]``.

    Raises:
        FileNotFoundError: when the connector jar was not fetched (run ``make setup``), or the
            helper jar is not built and no JDK is there to build it.
        RuntimeError: when compiling the helper fails.

    """
    connector = _connector_jar()
    return [str(connector.resolve()), str(_helper_jar(connector).resolve())]


def add_kafka_jars(env: Any) -> list[str]:
    """Add the Kafka connector and helper jars to ``env`` (``env.add_jars``).

    Args:
        env: a PyFlink ``StreamExecutionEnvironment``.

    Returns:
        The ``file://`` URLs added.

    """
    from pyflink.java_gateway import get_gateway

    urls = [pathlib.Path(p).as_uri() for p in kafka_jars()]
    jvm = get_gateway().jvm
    config = jvm.org.apache.flink.python.util.PythonConfigUtil.getEnvironmentConfig(
        env._j_stream_execution_environment)
    present = config.getString(jvm.org.apache.flink.configuration.PipelineOptions.JARS.key(), "")
    missing = [u for u in urls if u not in (present or "")]
    if missing:
        env.add_jars(*missing)
    return urls


def new_java(class_name: str) -> Any:
    """A new instance of a Java class of the job's jars (no-argument constructor)."""
    from pyflink.util.java_utils import load_java_class

    return load_java_class(class_name).getDeclaredConstructor(None).newInstance(None)


def parse_kafka_url(url: str) -> tuple[str, str]:
    """Split ``kafka://HOST:PORT[,HOST:PORT...]/topic`` into its servers and topic.

    Returns:
        ``(bootstrap_servers, topic)``.

    Raises:
        ValueError: when ``url`` is not such a URL.

    """
    parsed = urlparse(url)
    topic = parsed.path.lstrip("/")
    if parsed.scheme != "kafka" or not parsed.netloc or not topic or "/" in topic:
        raise ValueError(f"expected kafka://HOST:PORT/topic, got {url!r}")
    return parsed.netloc, topic


CHECK_TIMEOUT_S = 3.0
"""How long ``check_servers`` waits for each bootstrap server to accept a connection."""


def _host_port(server: str) -> tuple[str, int] | None:
    """``host:port`` or ``[v6]:port`` -> ``(host, port)``; ``None`` for another form."""
    host, sep, port = server.rpartition(":")
    if not sep or not host or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


def check_servers(env: Any, bootstrap_servers: str) -> None:
    """Fail a job for the local MiniCluster at once when none of its Kafka servers answers.

    On a local MiniCluster (``execution.target`` ``local``) the job runs on this machine. When
    no bootstrap server accepts a TCP connection there, the Kafka source's enumerator waits
    30 s, fails with ``Timed out waiting for a node assignment`` (naming no server) and does
    so again at every restart, while Kafka 4's admin client logs a "Rebootstrapping" line
    thousands of times a second. A job for a cluster is not checked: the cluster may reach
    servers this machine cannot. Server lists in a form this check does not read are left to
    the Kafka client.

    Args:
        env: the ``StreamExecutionEnvironment`` the job is built on.
        bootstrap_servers: ``host:port[,host:port...]``.

    Raises:
        ConnectionError: naming the servers and what each one answered.

    """
    from ._workers import on_local_target

    if not on_local_target(env):
        return
    problems = []
    for server in (s.strip() for s in bootstrap_servers.split(",")):
        where = _host_port(server)
        if where is None:
            return
        try:
            with socket.create_connection(where, timeout=CHECK_TIMEOUT_S):
                return
        except OSError as e:
            problems.append(f"{server}: {e.strerror or e}")
    raise ConnectionError(
        f"no Kafka broker answers at {bootstrap_servers} ({'; '.join(problems)}): start the "
        "broker or correct the bootstrap servers (the job would run on this machine's "
        "MiniCluster, retry for minutes and fail with 'Timed out waiting for a node "
        "assignment')")
