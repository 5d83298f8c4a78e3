"""The job of ``bench._waits``: ``runs`` runs waiting for an approval, in a process of its own.

    python -m bench._waits_job '<json spec>'

Spec: ``runs``, ``dir`` (the bench's directory: ``release`` file, ``probe.jsonl``,
``outputs.jsonl``), ``rest_port``, ``restore`` (a checkpoint directory, or null),
``release`` (how many keys each release file sets free).

Requests ``{"key": n}`` for ``n < runs`` (held until the file ``start`` exists) start runs
that each ``await ctx.wait_for("go")`` (a one-day timeout, so every run also has a timer).
A paced tick source (20 a second) keeps the input open; its flat map, in the TaskManager's
interpreter (thread mode: the operator's too), appends the interpreter's object count after
a full collection to ``probe.jsonl`` each time a file ``probe-<i>`` appears, and once the
file ``release-<i>`` exists sends ``release`` approvals for keys ``i * release ...``.
Outputs are appended to ``outputs.jsonl``.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import time
from typing import Any

from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action


class Waiter(Agent):
    """Waits for ``go`` (one day at most), then outputs its key."""

    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        got = await ctx.wait_for("go", timeout_s=86_400)
        ctx.send_event(OutputEvent(output={"key": ctx.key, "got": got, "t": time.time()}))


class Ticks:
    """The tick flat map: probes the interpreter, sends the approvals of each release file."""

    def __init__(self, d: str, release: int) -> None:
        self.d, self.release = d, release
        self.sent: set[int] = set()
        self.probed: list[str] = []

    def __call__(self, n: int) -> list[Any]:
        time.sleep(0.05)
        probe = os.path.join(self.d, f"probe-{len(self.probed)}")
        if os.path.exists(probe):  # asked for: a full collection, then the counts
            gc.collect()
            self.probed.append(probe)
            with open(os.path.join(self.d, "probe.jsonl"), "a") as f:
                f.write(json.dumps({"t": time.time(), "objects": len(gc.get_objects()),
                                    "blocks": sys.getallocatedblocks()}) + "\n")
        out: list[Any] = []
        i = 0
        while os.path.exists(os.path.join(self.d, f"release-{i}")):
            if i not in self.sent:
                self.sent.add(i)
                out += [{"key": k, "correlation_id": "go", "payload": i}
                        for k in range(i * self.release, (i + 1) * self.release)]
            i += 1
        return out


class Held:
    """The requests' map: holds the first request until the file ``start`` exists."""

    def __init__(self, d: str) -> None:
        self.d, self.started = d, False

    def __call__(self, n: int) -> dict[str, Any]:
        while not self.started:
            self.started = os.path.exists(os.path.join(self.d, "start"))
            time.sleep(0.05)
        return {"key": n}


def _write_output(d: str, out: Any) -> Any:
    with open(os.path.join(d, "outputs.jsonl"), "a") as f:
        f.write(json.dumps({**out, "t_out": time.time()}) + "\n")
    return out


def main(spec: dict[str, Any]) -> None:
    import functools

    from pyflink.common import Types, WatermarkStrategy
    from pyflink.datastream.connectors.number_seq import NumberSequenceSource

    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.flink import create_stream_environment

    d = spec["dir"]
    config = {"execution.checkpointing.dir": f"file://{d}/checkpoints",
              "execution.checkpointing.storage": "filesystem",
              "execution.checkpointing.externalized-checkpoint-retention":
                  "RETAIN_ON_CANCELLATION",
              "state.backend.type": "rocksdb",
              "state.backend.incremental": "true",
              "rest.port": str(spec["rest_port"])}
    if spec.get("restore"):
        config["execution.state-recovery.path"] = f"file://{spec['restore']}"
    env = create_stream_environment(checkpoint_interval_ms=5_000, extra_config=config)
    pickled = Types.PICKLED_BYTE_ARRAY()
    requests = (env.from_source(NumberSequenceSource(0, spec["runs"] - 1),
                                WatermarkStrategy.no_watermarks(), "requests").uid("requests")
                .map(Held(d), output_type=pickled).uid("as-records"))
    ticks = (env.from_source(NumberSequenceSource(0, 10**9), WatermarkStrategy.no_watermarks(),
                             "ticks").uid("ticks")
             .flat_map(Ticks(d, spec["release"]), output_type=pickled).uid("approvals"))
    agents = AgentsExecutionEnvironment.flink(env, metrics=False)
    out = agents.from_datastream(requests).connect(ticks).apply(Waiter(), name="waiter")
    (out.to_datastream().map(functools.partial(_write_output, d), output_type=pickled)
     .uid("outputs").filter(lambda o: False).print())
    env.execute("waits-bench")


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
