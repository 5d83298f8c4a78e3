#!/usr/bin/env bash
# Fetch the Java artifacts flink-agents-py needs from Maven Central (idempotent, cached).
#
#   bash scripts/fetch_jars.sh [connector|broker|prometheus|all]   # default: all (make setup)
#
# connector  Flink's Kafka connector, the shaded flink-sql-connector-kafka jar, which jobs add
#            with env.add_jars (flink_agents_py.flink.kafka_connector_jar() finds it).
# broker     an Apache Kafka broker (org.apache.kafka:kafka_2.13 and its runtime
#            dependencies, plus a log4j2 SLF4J binding), run as a local Java process by the
#            tests (tests/kafka_fixture.py). No Kafka distribution archive is needed.
# prometheus Flink's Prometheus metric reporter (org.apache.flink:flink-metrics-prometheus,
#            the version of the Flink in apache-flink), for a distribution whose
#            plugins/metrics-prometheus lacks it (apache-flink 2.3.0 ships it; then nothing is
#            fetched). tests/flink_cluster.py puts it in a plugins/ folder of the cluster.
#
# Both are resolved with `mvn` into a Maven repository inside the shared cache, copied into
# the shared cache ($FLINK_AGENTS_PY_CACHE, default ~/.cache/flink-agents-py) and then into
# the project's git-ignored .cache/:
#   .cache/jars/flink-sql-connector-kafka-<version>.jar
#   .cache/kafka_2.13-<version>/libs/*.jar
#   .cache/jars/flink-metrics-prometheus-<flink version>.jar   (only when fetched)
# A run whose files are in place does nothing and needs no network.
#
# Environment:
#   FLINK_AGENTS_PY_CACHE           shared cache root
#   FLINK_AGENTS_PY_KAFKA_CONNECTOR flink-sql-connector-kafka version (default below)
#   FLINK_AGENTS_PY_KAFKA_BROKER    kafka_2.13 version for the test broker (default below)
#   FLINK_AGENTS_PY_FLINK_VERSION   Flink version of the reporter (default: apache-flink's)
#   PYTHON                          the Python with apache-flink (default: .venv/bin/python)
#   MVN                             the Maven command (default: mvn)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# Keep in step with flink_agents_py/flink/_kafka_jars.py (KAFKA_CONNECTOR_VERSION) and
# tests/kafka_fixture.py (KAFKA_VERSION); tests/test_kafka_unit.py checks that they agree.
# 5.0.0-2.2 is the newest Kafka connector release (built for Flink 2.2); no release for
# Flink 2.3 exists yet, and it is verified to work with apache-flink 2.3.0 by the kafka tests.
CONNECTOR_VERSION="${FLINK_AGENTS_PY_KAFKA_CONNECTOR:-5.0.0-2.2}"
BROKER_VERSION="${FLINK_AGENTS_PY_KAFKA_BROKER:-4.1.1}"
LOG4J_VERSION="2.24.3"   # the log4j2 version kafka_2.13 4.1.1 depends on
CACHE_DIR="${FLINK_AGENTS_PY_CACHE:-$HOME/.cache/flink-agents-py}"
M2="$CACHE_DIR/m2"
MVN="${MVN:-mvn}"
WHAT="${1:-all}"

log() { printf '[fetch-jars] %s\n' "$*"; }
die() { printf '[fetch-jars] ERROR: %s\n' "$*" >&2; exit 1; }

mkdir -p "$CACHE_DIR/jars" "$ROOT/.cache/jars"
# Serialise concurrent fetches sharing the cache.
exec 8>"$CACHE_DIR/.jars.lock"
if command -v flock >/dev/null; then
  flock 8
fi

need_mvn() {
  command -v "$MVN" >/dev/null || die "Maven ($MVN) is needed to fetch jars (apt-get install maven)"
}

# copy_tree SRC DST: make DST a copy of SRC (hard links when possible), atomically.
copy_tree() {
  local src="$1" dst="$2" tmp
  tmp="$(mktemp -d "$(dirname "$dst")/.tmp.XXXXXX")"
  chmod 755 "$tmp"
  cp -rl "$src/." "$tmp/" 2>/dev/null || cp -r "$src/." "$tmp/"
  rm -rf "$dst"
  mv "$tmp" "$dst"
}

fetch_connector() {
  local name="flink-sql-connector-kafka-$CONNECTOR_VERSION.jar"
  local shared="$CACHE_DIR/jars/$name" local_copy="$ROOT/.cache/jars/$name"
  if [[ ! -s "$shared" ]]; then
    need_mvn
    log "connector: fetching org.apache.flink:flink-sql-connector-kafka:$CONNECTOR_VERSION"
    local tmp
    tmp="$(mktemp -d "$CACHE_DIR/jars/.fetch.XXXXXX")"
    "$MVN" -q -B -Dmaven.repo.local="$M2" dependency:copy \
      "-Dartifact=org.apache.flink:flink-sql-connector-kafka:$CONNECTOR_VERSION" \
      -DoutputDirectory="$tmp" >"$tmp.log" 2>&1 \
      || { cat "$tmp.log" >&2; rm -rf "$tmp" "$tmp.log"; die "fetching the connector failed"; }
    mv -f "$tmp/$name" "$shared"
    rm -rf "$tmp" "$tmp.log"
  fi
  if [[ ! -s "$local_copy" ]]; then
    ln -f "$shared" "$local_copy" 2>/dev/null || cp -f "$shared" "$local_copy"
  fi
  log "connector: $local_copy"
}

fetch_broker() {
  local name="kafka_2.13-$BROKER_VERSION"
  local shared="$CACHE_DIR/$name" local_copy="$ROOT/.cache/$name"
  if [[ ! -f "$shared/.complete" ]]; then
    need_mvn
    log "broker: fetching org.apache.kafka:kafka_2.13:$BROKER_VERSION and its dependencies"
    local work
    work="$(mktemp -d "$CACHE_DIR/.fetch-$name.XXXXXX")"
    cat >"$work/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.flink-agents-py</groupId>
  <artifactId>kafka-broker-libs</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_2.13</artifactId>
      <version>$BROKER_VERSION</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-slf4j-impl</artifactId>
      <version>$LOG4J_VERSION</version>
    </dependency>
  </dependencies>
</project>
EOF
    (cd "$work" && "$MVN" -q -B -Dmaven.repo.local="$M2" dependency:copy-dependencies \
      -DincludeScope=runtime -DoutputDirectory="$work/libs" >"$work/mvn.log" 2>&1) \
      || { cat "$work/mvn.log" >&2; rm -rf "$work"; die "fetching the Kafka broker failed"; }
    ls "$work/libs/$name.jar" >/dev/null 2>&1 || { rm -rf "$work"; die "no $name.jar resolved"; }
    rm -f "$work/mvn.log"
    chmod 755 "$work"
    touch "$work/.complete"
    rm -rf "$shared"
    mv "$work" "$shared"
  fi
  if [[ ! -f "$local_copy/.complete" ]]; then
    copy_tree "$shared" "$local_copy"
  fi
  log "broker: $local_copy ($(ls "$local_copy/libs" | wc -l) jars)"
}

# flink_version: the Flink version of the installed apache-flink (its flink-dist jar).
flink_version() {
  if [[ -n "${FLINK_AGENTS_PY_FLINK_VERSION:-}" ]]; then
    echo "$FLINK_AGENTS_PY_FLINK_VERSION"
    return
  fi
  local python="${PYTHON:-$ROOT/.venv/bin/python}" lib jar
  lib="$("$python" -c 'import os, pyflink; print(os.path.join(os.path.dirname(pyflink.__file__), "lib"))')" \
    || die "no apache-flink in $python: set FLINK_AGENTS_PY_FLINK_VERSION or PYTHON"
  jar="$(basename "$(ls "$lib"/flink-dist-*.jar | head -n 1)")"
  jar="${jar#flink-dist-}"
  echo "${jar%.jar}"
}

flink_home() {
  "${PYTHON:-$ROOT/.venv/bin/python}" -c 'import os, pyflink; print(os.path.dirname(pyflink.__file__))'
}

fetch_prometheus() {
  local version name
  if ! version="$(flink_version 2>/dev/null)"; then
    [[ "$WHAT" == all ]] || die "no apache-flink found: set FLINK_AGENTS_PY_FLINK_VERSION or PYTHON"
    log "prometheus: skipped (no apache-flink found to match; run it again with PYTHON set)"
    return 0
  fi
  name="flink-metrics-prometheus-$version.jar"
  local shipped
  shipped="$(flink_home 2>/dev/null || true)/plugins/metrics-prometheus/$name"
  if [[ -s "$shipped" ]]; then
    log "prometheus: shipped with apache-flink: $shipped"
    return
  fi
  local shared="$CACHE_DIR/jars/$name" local_copy="$ROOT/.cache/jars/$name"
  if [[ ! -s "$shared" ]]; then
    need_mvn
    log "prometheus: fetching org.apache.flink:flink-metrics-prometheus:$version"
    local tmp
    tmp="$(mktemp -d "$CACHE_DIR/jars/.fetch.XXXXXX")"
    "$MVN" -q -B -Dmaven.repo.local="$M2" dependency:copy \
      "-Dartifact=org.apache.flink:flink-metrics-prometheus:$version" \
      -DoutputDirectory="$tmp" >"$tmp.log" 2>&1 \
      || { cat "$tmp.log" >&2; rm -rf "$tmp" "$tmp.log"; die "fetching the reporter failed"; }
    mv -f "$tmp/$name" "$shared"
    rm -rf "$tmp" "$tmp.log"
  fi
  if [[ ! -s "$local_copy" ]]; then
    ln -f "$shared" "$local_copy" 2>/dev/null || cp -f "$shared" "$local_copy"
  fi
  log "prometheus: $local_copy"
}

case "$WHAT" in
  connector) fetch_connector ;;
  broker) fetch_broker ;;
  prometheus) fetch_prometheus ;;
  all) fetch_connector; fetch_broker; fetch_prometheus ;;
  *) die "usage: $0 [connector|broker|prometheus|all]" ;;
esac
