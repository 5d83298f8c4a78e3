"""``env.from_collection(records, type_info=Types.PICKLED_BYTE_ARRAY())`` feeding an agent.

PyFlink takes an explicit ``type_info`` to mean "convert each element to that Java type": it
unpickles a dict into a ``java.util.HashMap`` and hands it to the ``byte[]`` serializer of
``PICKLED_BYTE_ARRAY``, so building the source failed with a Java ``ClassCastException``
(``HashMap cannot be cast to class [B``), before the agent was involved. On the environments
the agents run on, that ``type_info`` now means what the user meant: the records pickled.
Run from a temporary directory outside the repository, as a user runs it.
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

MY_AGENT = '''
from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action


class Echo(Agent):
    @action(InputEvent)
    @staticmethod
    def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output={"key": ctx.key, "n": event.input["n"]}))
'''

MAIN = '''
import json

from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.compat import AgentsExecutionEnvironment as FlinkAgentsStyle
from flink_agents_py.flink import create_stream_environment
from my_agent import Echo

records = [{"key": "k%d" % (i % 2), "n": i} for i in range(4)]

# Flink Agents' order: a plain environment, given to the agents, then the collection
plain = StreamExecutionEnvironment.get_execution_environment()
FlinkAgentsStyle.get_execution_environment(plain)
plain.from_collection(records, type_info=Types.PICKLED_BYTE_ARRAY())  # built: no error

env = create_stream_environment()
ds = env.from_collection(records, type_info=Types.PICKLED_BYTE_ARRAY())
out = AgentsExecutionEnvironment.flink(env).from_datastream(ds).apply(Echo()).to_datastream()
with out.execute_and_collect("pickled collection") as rows:
    print(json.dumps(sorted([row["key"], row["n"]] for row in rows)))
'''


@pytest.mark.flink
@pytest.mark.timeout(600)
def test_a_pickled_byte_array_collection_feeds_the_agent(tmp_path):
    assert ROOT not in tmp_path.resolve().parents
    (tmp_path / "my_agent.py").write_text(textwrap.dedent(MY_AGENT))
    (tmp_path / "main.py").write_text(textwrap.dedent(MAIN))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    res = subprocess.run([PYTHON, "main.py"], cwd=tmp_path, capture_output=True, text=True,
                         env=env, timeout=540, check=False)
    assert res.returncode == 0, res.stderr[-4000:]
    assert "ClassCastException" not in res.stderr
    assert json.loads(res.stdout.strip().splitlines()[-1]) == [
        ["k0", 0], ["k0", 2], ["k1", 1], ["k1", 3]]
