"""The scale-out measurement job, submitted to a standalone cluster with
``flink run -d -p P -pym bench._scaleout_job '<json spec>'`` by ``bench._scaleout``.

Job shape (what a user's Kafka job looks like)::

    KafkaSource(in_topic, unbounded) -> parse JSON -> stamp t_in -> key_by(key)
      -> agent operator (or the bare KeyedProcessFunction) -> stamp t_out -> KafkaSink(out_topic)

Spec keys: ``bootstrap``, ``in_topic``, ``out_topic``, ``kind`` (``slow``: one 200 ms chat per
input; ``hold``: one chat that never ends within the measurement (600 s), so every run stays in
flight; ``echo``; ``bare``: ``bench._bare.BareEcho``), ``max_in_flight``, ``mode``
(``thread``/``process``), ``checkpoint_interval_ms`` (optional), ``host_options`` (optional:
more keyword arguments of ``AgentsExecutionEnvironment.flink``, e.g. a per-key queue limit).

The agents and stamping functions live in ``bench._scaleout_agents`` (this module runs as
``__main__`` in the client, which the workers cannot import).
"""

from __future__ import annotations

import json
import sys

from bench._scaleout_agents import HoldAgent, SlowAgent, StampIn, StampOut, key_of

__all__ = ["main"]


def main(argv: list[str]) -> None:
    """Build and submit the job described by ``argv[0]`` (JSON); returns once submitted."""
    spec = json.loads(argv[0])
    from flink_agents_py.flink import create_stream_environment

    extra = {"pipeline.name": spec.get("name", f"scaleout-{spec['kind']}")}
    env = create_stream_environment(
        execution_mode=spec.get("mode", "thread"), parallelism=int(spec.get("parallelism", 1)),
        checkpoint_interval_ms=spec.get("checkpoint_interval_ms"), extra_config=extra)

    from pyflink.common import Types

    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.flink import read_json_topic, write_json_topic

    pickled = Types.PICKLED_BYTE_ARRAY()
    records, _ = read_json_topic(env, spec["bootstrap"], spec["in_topic"],
                                 group_id=f"scaleout-{spec['in_topic']}")
    stamped = records.map(StampIn(), output_type=pickled).name("stamp-in")
    kind = spec["kind"]
    if kind == "bare":
        from bench._bare import BareEcho

        out = stamped.key_by(key_of).process(BareEcho(), output_type=pickled).name("bare-echo")
    else:
        from bench._agents import EchoAgent

        agent = {"slow": SlowAgent, "hold": HoldAgent, "echo": EchoAgent}[kind]()
        agents = AgentsExecutionEnvironment.flink(
            env, max_in_flight=int(spec.get("max_in_flight", 32)), **spec.get("host_options", {}))
        out = agents.from_datastream(stamped, key_selector=key_of).apply(agent).to_datastream()
    timed = out.map(StampOut(), output_type=pickled).name("stamp-out")
    write_json_topic(timed, spec["bootstrap"], spec["out_topic"], delivery_guarantee="none")
    env.execute_async(extra["pipeline.name"])


if __name__ == "__main__":
    main(sys.argv[1:])
