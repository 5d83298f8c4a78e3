"""One Flink measurement in a process of its own: ``python -m bench._flink_job '<json spec>'``.

Spec keys: ``kind`` (``echo`` | ``bare`` | ``chat`` | ``bare_chat``, see ``bench._bare``),
``mode`` (``thread`` | ``process``), ``parallelism``, ``records``, ``keys``, ``max_in_flight``;
optional ``metrics`` (default true: the agent metrics in the operator's metric group),
``unbounded`` (default false: the numbers are unioned with a source that never ends, a
continuously monitored empty directory, so there is no end of input and no end-of-input drain;
the job is cancelled after ``records`` outputs) and ``cpu`` (default true: sample the JVM's
threads from ``/proc``, see ``bench._threads``), ``key_encoding`` (default ``"json"``: Flink
``STRING`` keys; ``"pickle"``: pickled keys), ``java_calls`` (default false; chat: count and
time the operator's calls into Java, ``bench._java_calls``).

Job shape: ``NumberSequenceSource -> map to {"key", "n", "t"} -> key_by -> process ->
map to (t_in, t_out) -> execute_and_collect``. ``t`` is the wall clock when the source map
made the record; ``t_out`` when the output left the keyed operator (a chained map). The
throughput window runs from the first input stamp to the last output stamp, so JVM start,
job submission and task deployment are not in it (they are reported as ``startup_s``). The
chat job also reports ``rps_op``, over a window from when the agent's first action saw its
input (``t_op``): the source's tasks may start emitting well before the keyed operator has
opened (0.3-1.4 s on this machine, under load), which a window of under a second would count
against it. The chat job also reports ``cpu_op`` (the operator thread's CPU over that
window) and ``gc_us_per_out`` (CPython's cyclic GC in the TaskManager's interpreter, all
threads, from the first output on, per output).

Prints one line ``BENCH_RESULT <json>`` on stdout.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any


class _StampChat:
    """A chat output -> ``(t_in, t_out, ok, t_op, (gc_s, gc_n))``.

    ``gc_s``/``gc_n``: the seconds spent in, and the number of, CPython cyclic collections
    in this interpreter (the TaskManager's, in thread mode) since the first output, counted
    by a ``gc.callbacks`` hook installed on first use.
    """

    def __init__(self) -> None:
        self.gc: list[float] = []

    def _hook(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self.gc[2] = time.perf_counter()
        else:
            self.gc[0] += time.perf_counter() - self.gc[2]
            self.gc[1] += 1

    def __call__(self, r: Any) -> Any:
        if not self.gc:
            import gc

            self.gc = [0.0, 0, 0.0]
            gc.callbacks.append(self._hook)
        return (r["t"], time.time(), r["error"] is None, r.get("t_op"),
                (self.gc[0], int(self.gc[1])))


def main(argv: list[str]) -> dict[str, Any]:
    spec = json.loads(argv[0])
    t_start = time.time()
    # must come before any other PyFlink environment (it sets PYTHONPATH for thread mode)
    from flink_agents_py.flink import create_stream_environment

    env = create_stream_environment(execution_mode=spec["mode"],
                                    parallelism=int(spec["parallelism"]))
    t_env = time.time()

    from pyflink.common import Types, WatermarkStrategy
    from pyflink.datastream.connectors.number_seq import NumberSequenceSource

    kind, n, keys = spec["kind"], int(spec["records"]), int(spec["keys"])
    pickled = Types.PICKLED_BYTE_ARRAY()
    ds = env.from_source(NumberSequenceSource(0, n - 1), WatermarkStrategy.no_watermarks(),
                         "numbers").map(
        lambda i: {"key": f"k{i % keys}", "n": i, "t": time.time()}, output_type=pickled)
    empty_dir = None
    if spec.get("unbounded"):
        import tempfile

        from pyflink.common import Duration
        from pyflink.datastream.connectors.file_system import FileSource, StreamFormat

        empty_dir = tempfile.TemporaryDirectory(prefix="bench-never-")
        never = (FileSource.for_record_stream_format(StreamFormat.text_line_format(),
                                                     empty_dir.name)
                 .monitor_continuously(Duration.of_seconds(1)).build())
        ds = ds.union(env.from_source(never, WatermarkStrategy.no_watermarks(), "never").map(
            lambda line: {"key": "k0", "n": -1, "t": time.time()}, output_type=pickled))

    def key_of(r: Any) -> Any:
        return r["key"]

    if kind == "bare":
        from bench._bare import BareEcho

        out = ds.key_by(key_of).process(BareEcho(), output_type=pickled).name("bare-echo")
    elif kind == "bare_chat":
        from bench._bare import BareChat

        out = ds.key_by(key_of, key_type=Types.STRING()).process(
            BareChat(max_in_flight=int(spec.get("max_in_flight", 32))),
            output_type=pickled).name("bare-chat")
    else:
        from bench._agents import EchoAgent, SlowChatAgent
        from flink_agents_py import AgentsExecutionEnvironment

        agent = EchoAgent() if kind == "echo" else SlowChatAgent()
        agents = AgentsExecutionEnvironment.flink(
            env, max_in_flight=int(spec.get("max_in_flight", 32)),
            metrics=bool(spec.get("metrics", True)),
            key_encoding=spec.get("key_encoding", "json"))
        out = agents.from_datastream(ds, key_selector=key_of).apply(agent).to_datastream()

    if kind in ("chat", "bare_chat"):
        stamp: Any = _StampChat()
        if spec.get("java_calls"):  # wrap the operator's calls into Java (debug figures)
            from bench._java_calls import Counted

            stamp = Counted(stamp)
        stamped = out.map(stamp, output_type=pickled)
        if not spec.get("stamp_chained", True):
            stamped = stamped.start_new_chain()
    else:
        stamped = out.map(lambda r: (r["echo"]["t"], time.time(), True, None, None),
                          output_type=pickled)

    t_in_min = t_op_min = float("inf")
    t_outs: list[float] = []
    gc_last: tuple[float, int] = (0.0, 0)
    failed = 0
    t_exec = time.time()
    t_first_recv = None
    sampler = None
    if spec.get("cpu", True):
        from bench._threads import ThreadSampler, child_java_pid

        jvm = child_java_pid()
        sampler = ThreadSampler(jvm).start() if jvm else None
    with stamped.execute_and_collect(f"bench-{kind}") as results:
        for t_in, t_out, ok, t_op, gc_seen in results:
            if gc_seen is not None:
                gc_last = gc_seen
            if t_first_recv is None:
                t_first_recv = time.time()
            t_in_min = min(t_in_min, t_in)
            if t_op is not None:
                t_op_min = min(t_op_min, t_op)
            t_outs.append(t_out)
            failed += not ok
            if len(t_outs) >= n and spec.get("unbounded"):
                break  # leaving the block cancels the job
    t_end = time.time()
    if sampler is not None:
        sampler.stop()
    if empty_dir is not None:
        empty_dir.cleanup()
    t_outs.sort()
    count = len(t_outs)
    window = (t_outs[-1] - t_in_min) if count else float("nan")
    window_op = (t_outs[-1] - t_op_min) if count and t_op_min < float("inf") else float("nan")
    cpu = sampler.window(t_in_min, t_outs[-1], t_outs) if sampler is not None and count else {}
    cpu_op = (sampler.window(t_op_min, t_outs[-1], t_outs)
              if sampler is not None and count and t_op_min < float("inf") else {})

    def at(frac: float) -> float:
        return t_outs[min(count - 1, int(frac * count))] - t_in_min if count else float("nan")

    return {
        "spec": spec,
        "count": count,
        "failed": failed,
        "window_s": window,
        "rps": count / window if count and window > 0 else float("nan"),
        # from the keyed operator's first input (chat): without its tasks' start-up skew
        "window_op_s": window_op,
        "rps_op": count / window_op if count and window_op > 0 else float("nan"),
        "startup_s": t_in_min - t_exec if count else float("nan"),
        "env_s": t_env - t_start,
        "job_wall_s": t_end - t_exec,
        "first_out_s": t_outs[0] - t_in_min if count else float("nan"),
        "p50_out_s": at(0.5),
        "p90_out_s": at(0.9),
        "tail_after_collect_s": t_end - t_outs[-1] if count else float("nan"),
        "cpu": cpu,
        # chat: the same from the operator's first input (its open() is not in the window)
        "cpu_op": cpu_op,
        # chat: CPython's cyclic GC in the TaskManager's interpreter (every thread), per output
        "gc_us_per_out": gc_last[0] / count * 1e6 if count else float("nan"),
        "gc_collections": gc_last[1],
    }


if __name__ == "__main__":
    result = main(sys.argv[1:])
    print("BENCH_RESULT " + json.dumps(result), flush=True)
