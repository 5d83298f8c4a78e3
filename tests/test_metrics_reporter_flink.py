"""What a Flink metric reporter sees of the agent metrics equals what the agent counted.

A user's job, run the way a user runs it (their own module in a directory outside the
repository, this project's Python): an agent with an async action and two durable calls per
record, on a MiniCluster in thread mode, over a stream that does not end. After the last
output the script reads the operator's metrics from the JobManager's REST API (what the web
UI and every REST-based reporter read, ``/jobs/<id>/vertices/<v>/subtasks/metrics``) until
they stop changing, and the test compares them with the local runner's counts for the same
records and agent. The metrics reach Flink in batches (``observability._metrics``), so this
also shows that the last batch of an idle operator is not lost.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = [pytest.mark.flink, pytest.mark.timeout(420)]

ROOT = Path(__file__).resolve().parent.parent

USER_JOB = textwrap.dedent('''
    """A user's agent job: echo with two durable calls, reads its metrics over REST."""
    import json
    import sys
    import tempfile
    import time
    import urllib.parse
    import urllib.request

    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
    from flink_agents_py.flink import create_stream_environment

    N, KEYS, PORT = int(sys.argv[1]), 7, int(sys.argv[2])


    def double(x):
        return 2 * x


    def plus_one(x):
        return x + 1


    class Calc(Agent):
        @action(InputEvent)
        @staticmethod
        async def calc(event: InputEvent, ctx: RunnerContext) -> None:
            a = await ctx.durable_execute_async(double, event.input["n"])
            b = await ctx.durable_execute_async(plus_one, a)
            ctx.send_event(OutputEvent(output={"key": ctx.key, "n": event.input["n"], "b": b}))


    def key_of(r):
        return r["key"]


    def rest(path):
        with urllib.request.urlopen(f"http://127.0.0.1:{PORT}{path}", timeout=30) as resp:
            return json.loads(resp.read())


    def agent_metrics(job):
        """Every flink_agents metric of the job, summed over subtasks: {name: value}."""
        out = {}
        for vertex in rest(f"/jobs/{job}")["vertices"]:
            base = f"/jobs/{job}/vertices/{vertex['id']}/subtasks/metrics"
            ids = [m["id"] for m in rest(base) if ".flink_agents." in m["id"]]
            if ids:
                query = urllib.parse.urlencode({"agg": "sum", "get": ",".join(ids)})
                for m in rest(f"{base}?{query}"):
                    out[m["id"].split(".flink_agents.", 1)[1]] = float(m["sum"])
        return out


    def main():
        records = [{"key": f"k{i % KEYS}", "n": i} for i in range(N)]
        local = (AgentsExecutionEnvironment.local().from_list(records, key_selector=key_of)
                 .apply(Calc()).run())
        assert not local.errors and len(local.outputs) == N

        env = create_stream_environment(extra_config={"rest.bind-port": str(PORT)})
        from pyflink.common import Duration, Types, WatermarkStrategy
        from pyflink.datastream.connectors.file_system import FileSource, StreamFormat
        from pyflink.datastream.connectors.number_seq import NumberSequenceSource

        pickled = Types.PICKLED_BYTE_ARRAY()
        numbers = env.from_source(NumberSequenceSource(0, N - 1),
                                  WatermarkStrategy.no_watermarks(), "numbers").map(
            lambda i: {"key": f"k{i % KEYS}", "n": i}, output_type=pickled)
        empty = tempfile.mkdtemp()  # a source that never ends: no end of input, no close()
        never = (FileSource.for_record_stream_format(StreamFormat.text_line_format(), empty)
                 .monitor_continuously(Duration.of_seconds(1)).build())
        stream = numbers.union(env.from_source(never, WatermarkStrategy.no_watermarks(),
                                               "never").map(lambda s: None, output_type=pickled)
                               .filter(lambda r: r is not None))
        out = (AgentsExecutionEnvironment.flink(env).from_datastream(stream, key_selector=key_of)
               .apply(Calc()).to_datastream())
        seen, flink = 0, {}
        with out.execute_and_collect("metrics-reporter") as rows:
            for _ in rows:
                seen += 1
                if seen == N:
                    break
            jobs = [j for j in rest("/jobs/overview")["jobs"] if j["state"] == "RUNNING"]
            job = jobs[0]["jid"]
            # until two reads a fetch interval apart agree (a limit for a busy machine; a
            # late REST answer is read again)
            deadline, last, stable = time.time() + 180, None, 0
            while time.time() < deadline:
                try:
                    flink = agent_metrics(job)
                except OSError:
                    time.sleep(1.2)
                    continue
                stable = stable + 1 if flink == last and flink else 0
                if stable >= 2 and flink.get("runs_completed") == N:
                    break
                last = flink
                time.sleep(1.2)
        print("RESULT " + json.dumps({"outputs": seen, "local": local.metrics, "flink": flink}))


    if __name__ == "__main__":
        main()
''')


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_reporter_values_equal_the_local_counts_at_the_end_of_a_job(tmp_path: Path) -> None:
    n = 300
    (tmp_path / "calc_job.py").write_text(USER_JOB)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "calc_job.py", str(n), str(_free_port())],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))
    got = json.loads(line[len("RESULT "):])
    local, flink = got["local"], got["flink"]
    assert got["outputs"] == n
    assert local["runs_completed"] == n and local["durable_calls_executed"] == 2 * n
    for name in ("events_processed", "outputs_emitted", "runs_started", "runs_completed",
                 "runs_in_flight", "durable_calls_executed", "durable_calls_replayed",
                 "calls_in_flight"):
        assert flink.get(name) == local[name], (name, flink.get(name), local[name])
    for etype, count in local["events_processed_by_type"].items():
        assert flink.get(f"type.{etype}.events_processed") == count, etype
    for action, count in local["actions_executed"].items():
        assert flink.get(f"action.{action}.actions_executed") == count, action
    assert flink.get("action.calc.actions_failed") == 0
    # latency: a total of whole milliseconds per distribution, next to its (last) value
    assert "run_latency_ms" in flink and "action.calc.action_latency_ms_total" in flink
