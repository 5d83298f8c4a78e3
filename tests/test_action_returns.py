"""An action declaring a return type is warned about when its plan is built.

What an action returns is discarded (actions speak by sending events), so an action written
``-> str: return answer`` lost its answer without a word. Apache Flink Agents #834 added the
same warning. The action still runs.
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

pytestmark = pytest.mark.timeout(180)

SCRIPT = textwrap.dedent('''
    from __future__ import annotations
    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.api import Agent, InputEvent, OutputEvent, action


    class Summarise(Agent):
        @action(InputEvent)
        @staticmethod
        def summarise(event, ctx) -> dict:
            return {"summary": event.input["text"][:3]}

        @action(InputEvent)
        @staticmethod
        async def count(event, ctx) -> None:
            ctx.send_event(OutputEvent(output=len(event.input["text"])))


    print(AgentsExecutionEnvironment.local().from_list(
        [{"key": "a", "text": "hello"}]).apply(Summarise()).collect())
''')


def test_an_action_declaring_a_return_type_is_warned_about_naming_it_and_the_fix(
        tmp_path: Path) -> None:
    (tmp_path / "summarise.py").write_text(SCRIPT)
    proc = subprocess.run([str(PYTHON), "summarise.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=150, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "[5]"
    warned = [line for line in proc.stderr.splitlines() if "ActionReturnWarning" in line]
    assert len(warned) == 1, proc.stderr
    # at the user's line, naming the action, what it declares, and what to do instead
    assert "summarise.py:" in warned[0].split(" ")[0]
    assert "action 'summarise'" in warned[0] and "declares it returns dict" in warned[0]
    assert "ctx.send_event(OutputEvent(output=...))" in warned[0]
    assert "count" not in warned[0]
