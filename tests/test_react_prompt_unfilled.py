"""A ReActAgent's prompt placeholder that the input does not fill is logged, once.

A record without a field the prompt names (``What is {a} + {b}?`` for ``{"a": 2}``) sent
``{b}`` to the model without a word, where a chat model setup's prompt logs a WARNING for
it (``warn_unfilled``): the same mistake went unseen through the built-in agent.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VENV_PY = ROOT / ".venv" / "bin" / "python"
PYTHON = VENV_PY if VENV_PY.exists() else Path(sys.executable)

pytestmark = pytest.mark.timeout(300)

MODULE = textwrap.dedent('''
    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.agents import ReActAgent
    from flink_agents_py.api import ChatModelSetup, ResourceDescriptor, ResourceType
    from flink_agents_py.testing import model_from_function

    agent = ReActAgent(chat_model=ResourceDescriptor(ChatModelSetup, connection="s"),
                       prompt='What is {a} + {b}? Answer as {{"sum": n}}.')
    agent.add_resource("s", ResourceType.CHAT_MODEL_CONNECTION,
                       model_from_function(lambda request: request.last_user_text))
    records = [{"key": "x", "a": 2}, {"key": "y", "a": 5}, {"key": "z", "a": 1, "b": 2}]
    for out in AgentsExecutionEnvironment.local(max_in_flight=1).from_list(
            records).apply(agent).collect():
        print(out)
''')


def test_a_placeholder_the_input_lacks_is_warned_once(tmp_path: Path) -> None:
    (tmp_path / "adder.py").write_text(MODULE)
    proc = subprocess.run([str(PYTHON), "adder.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=250, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert proc.returncode == 0, proc.stderr
    assert 'What is 1 + 2? Answer as {"sum": n}.' in proc.stdout  # filled: no warning
    assert "What is 2 + {b}?" in proc.stdout  # as written, as before
    warnings = [line for line in proc.stderr.splitlines() if "no value for the prompt" in line]
    assert len(warnings) == 1, proc.stderr  # keys x and y: one line
    assert "ReActAgent prompt: no value for the prompt's placeholder(s) {b} (values given: " \
           "a, key)" in warnings[0]
    assert "Give the input a field 'b'" in warnings[0]
