#!/usr/bin/env bash
# Entry point of the flink-agents-py image.
#
#   jobmanager   run a JobManager in the foreground (REST on :8081)
#   taskmanager  run a TaskManager in the foreground
#   anything     run it (e.g. `flink run -pym jobs.review_analysis ...`)
#
# Configuration: $FLINK_HOME/conf/config.yaml, then one `key: value` per line of
# $FLINK_PROPERTIES (flattened keys such as `jobmanager.rpc.address: jobmanager`), written to
# $FLINK_CONF_DIR/config.yaml.
set -euo pipefail

write_conf() {
  mkdir -p "$FLINK_CONF_DIR"
  find "$FLINK_HOME/conf" -maxdepth 1 -type f ! -name config.yaml -exec cp {} "$FLINK_CONF_DIR/" \;
  python - <<'PY'
import os
import yaml

home, conf = os.environ["FLINK_HOME"], os.environ["FLINK_CONF_DIR"]
cfg = yaml.safe_load(open(f"{home}/conf/config.yaml")) or {}

def put(dotted, value):
    node = cfg
    *parents, last = dotted.split(".")
    for p in parents:
        node = node.setdefault(p, {})
    node[last] = value

defaults = {
    "jobmanager.rpc.address": "jobmanager",
    "jobmanager.bind-host": "0.0.0.0",
    "taskmanager.bind-host": "0.0.0.0",
    "rest.address": "jobmanager",
    "rest.bind-address": "0.0.0.0",
    "python.executable": "/usr/local/bin/python",
    "python.client.executable": "/usr/local/bin/python",
    # with opt/flink-python-*.jar copied to lib/ (Dockerfile): pemja loaded once per JVM, so a
    # TaskManager runs any number of thread-mode jobs (docs/how-to/cluster.md)
    "classloader.parent-first-patterns.additional": "pemja",
}
for k, v in defaults.items():
    put(k, v)
for line in os.environ.get("FLINK_PROPERTIES", "").splitlines():
    if ":" in line and not line.lstrip().startswith("#"):
        k, v = line.split(":", 1)
        put(k.strip(), yaml.safe_load(v.strip()))
with open(f"{conf}/config.yaml", "w") as f:
    yaml.safe_dump(cfg, f, sort_keys=False)
PY
}

case "${1:-help}" in
  jobmanager)
    write_conf
    exec "$FLINK_HOME/bin/jobmanager.sh" start-foreground
    ;;
  taskmanager)
    # the TaskManager announces its own container name to the JobManager
    export FLINK_PROPERTIES="${FLINK_PROPERTIES:-}
taskmanager.host: $(hostname -i | cut -d" " -f1)"
    write_conf
    exec "$FLINK_HOME/bin/taskmanager.sh" start-foreground
    ;;
  help)
    sed -n '2,11p' "$0"
    ;;
  *)
    write_conf
    exec "$@"
    ;;
esac
