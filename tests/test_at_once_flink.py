"""A one-action run's straight line (``runtime/core/_at_once.py``) on a Flink MiniCluster.

The Flink operator takes it (its records arrive fresh, one callback each); the same records
through the local runner with the straight line turned off must give the same outputs and
the same error rows, for inputs that stay on it and inputs that leave it mid-way (memory,
an awaited durable call, an exception, an event that triggers another action). Run from a
temporary directory outside the repository, as a user runs it.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("pyflink")

ROOT = pathlib.Path(__file__).resolve().parents[1]
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
PYTHON = str(VENV_PYTHON if VENV_PYTHON.exists() else pathlib.Path(sys.executable))

MY_AGENT = """
import json

from flink_agents_py.api import Agent, Event, InputEvent, OutputEvent, RunnerContext, action


class Noted(Event):
    note: str = ""


async def lookup(n):
    return f"looked up {n}"


class Mixed(Agent):
    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        n, do = event.input["n"], event.input["do"]
        if do == "raise":
            raise ValueError(f"refused {n}")
        if do == "memory":
            ctx.short_term_memory.set("count", (ctx.short_term_memory.get("count") or 0) + 1)
        if do == "await":
            n = await ctx.durable_execute_async(lookup, n)
        if do == "chain":
            ctx.send_event(Noted(note=str(n)))
        ctx.send_event(OutputEvent(output={"key": ctx.key, "n": n,
                                           "count": ctx.short_term_memory.get("count")}))

    @action(Noted)
    @staticmethod
    def on_noted(event: Noted, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output={"key": ctx.key, "noted": event.note}))


DOS = ["echo", "memory", "raise", "await", "chain", "echo", "memory", "echo"]
RECORDS = [{"key": f"k{i % 3}", "n": i, "do": do} for i, do in enumerate(DOS * 3)]


def error_row(e):
    return json.dumps([e["key"], e["seq"], e["action"], e["error_type"], e["message"]])
"""

MAIN = """
import json
import sys

from my_agent import RECORDS, Mixed, error_row

if sys.argv[1] == "flink":
    from pyflink.common import Types
    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.flink import create_stream_environment

    env = create_stream_environment()
    env.set_parallelism(1)
    agents = AgentsExecutionEnvironment.flink(env)
    ds = env.from_collection(RECORDS, type_info=Types.PICKLED_BYTE_ARRAY())
    job = agents.from_datastream(ds, key_selector=lambda r: r["key"])
    job.apply(Mixed())
    out = job.to_datastream().map(lambda o: json.dumps(o, sort_keys=True),
                                  output_type=Types.STRING()).union(
        job.errors_datastream().map(lambda e: "ERROR " + error_row(e),
                                    output_type=Types.STRING()))
    with out.execute_and_collect("at once") as rows:
        print(json.dumps(sorted(rows)))
else:
    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.runtime.core import _at_once

    _at_once.AT_ONCE = False  # the general path only
    result = AgentsExecutionEnvironment.local().from_list(RECORDS).apply(Mixed()).run()
    rows = [json.dumps(o, sort_keys=True) for o in result.outputs]
    rows += ["ERROR " + error_row(e.model_dump(mode="json")) for e in result.errors]
    print(json.dumps(sorted(rows)))
"""


@pytest.mark.flink
@pytest.mark.timeout(600)
def test_the_flink_operator_gives_what_the_general_path_gives(tmp_path):
    assert ROOT not in tmp_path.resolve().parents
    (tmp_path / "my_agent.py").write_text(textwrap.dedent(MY_AGENT))
    (tmp_path / "main.py").write_text(textwrap.dedent(MAIN))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if os.environ.get("PYTHONPATH"):  # a work tree's package, not the venv's editable one
        env["PYTHONPATH"] = os.pathsep.join(
            os.path.abspath(p) for p in os.environ["PYTHONPATH"].split(os.pathsep) if p
        )
    got = {}
    for host in ("local", "flink"):
        res = subprocess.run(
            [PYTHON, "main.py", host],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            env=env,
            timeout=540,
            check=False,
        )
        assert res.returncode == 0, res.stderr[-4000:]
        got[host] = json.loads(res.stdout.strip().splitlines()[-1])
    assert got["flink"] == got["local"]
    rows = got["local"]
    assert len(rows) == 24 + 3  # an output a record (one failing), one more a chain
    assert sum(r.startswith("ERROR ") and "ValueError" in r for r in rows) == 3
    assert '{"key": "k1", "noted": "4"}' in rows
    assert '{"count": null, "key": "k0", "n": "looked up 3"}' in rows
