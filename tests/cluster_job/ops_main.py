"""The job of the cluster operations tests: a Kafka topic -> ``Ops`` -> a Kafka topic.

Usage (submitted as a user does, from the folder holding it and ``ops_agents.py``)::

    flink run -pym ops_main -pyfs . [-s SAVEPOINT] [-p N] BOOTSTRAP IN OUT LOG_DIR LATENCY_S

LOG_DIR and LATENCY_S go to ``Ops`` (see ``ops_agents``). Exactly-once sink, checkpoints
every second. The parallelism is not set in the program, so
``flink run -p`` (or the cluster's ``parallelism.default``) decides it.
"""

from __future__ import annotations

import sys

from ops_agents import CallLog, Ops
from pyflink.datastream import StreamExecutionEnvironment

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.flink import create_stream_environment, from_kafka, write_json_topic


def main() -> None:
    """Build and submit the job (see the module docstring)."""
    servers, source, sink, log_dir, latency_s = sys.argv[1:6]
    # `flink run -p N` (else the cluster's parallelism.default) is what a fresh environment has
    parallelism = StreamExecutionEnvironment.get_execution_environment().get_parallelism()
    env = create_stream_environment(parallelism=max(1, parallelism), checkpoint_interval_ms=1000)
    agents = AgentsExecutionEnvironment.flink(env, observer=CallLog(log_dir))
    job, _malformed = from_kafka(agents, servers, source, key_selector=lambda r: r["key"],
                                 name="ops-input")
    job.apply(Ops(log_dir, float(latency_s)), name="ops")
    write_json_topic(job.to_datastream(), servers, sink, key_selector=lambda o: o["key"],
                     transactional_id_prefix=f"ops-{sink}", name="ops-output")
    agents.execute("cluster-ops")


if __name__ == "__main__":
    main()
