"""A program's own ``ToolRequestEvent`` naming no chat model setup, as Flink Agents runs it.

Flink Agents' built-in tool action finds each called tool by name among the agent's tools,
whatever the request's ``model`` says; an action of a program may so send
``ToolRequestEvent(model=..., tool_calls=[...])`` for tools alone and read the
``ToolResponseEvent``. Here every such request failed its record (``no chat_model resource
named ...``): the tool action required a chat model setup. The program runs as its user
would run it, from its own directory, with only its imports changed.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENV_PY = ROOT / ".venv" / "bin" / "python"
PYTHON = VENV_PY if VENV_PY.exists() else Path(sys.executable)

PROGRAM = '''
from flink_agents_py.compat import (Agent, AgentsExecutionEnvironment, InputEvent, OutputEvent,
    RunnerContext, ToolRequestEvent, ToolResponseEvent, action, tool)


class Calc(Agent):
    @tool
    @staticmethod
    def add(a: int, b: int) -> int:
        """Add two numbers.

        Args:
            a: the first.
            b: the second.
        """
        return a + b

    @action(InputEvent)
    @staticmethod
    def ask(event: InputEvent, ctx: RunnerContext) -> None:
        a, b, name = event.input
        ctx.send_event(ToolRequestEvent(model="calculator", tool_calls=[
            {"id": "call-1", "type": "function",
             "function": {"name": name, "arguments": {"a": a, "b": b}}}]))

    @action(ToolResponseEvent)
    @staticmethod
    def done(event: ToolResponseEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output={
            "ok": event.success["call-1"], "value": event.responses["call-1"].content,
            "error": event.error.get("call-1")}))


env = AgentsExecutionEnvironment.get_execution_environment()
outputs = env.from_list([{"key": "k1", "value": [1, 2, "add"]},
                         {"key": "k2", "value": [5, 6, "sub"]}]).apply(Calc()).to_list()
env.execute()
for output in outputs:
    print(output)
'''


def test_a_tool_request_naming_no_setup_runs_the_agents_tools(tmp_path):
    (tmp_path / "calc.py").write_text(PROGRAM)
    proc = subprocess.run([str(PYTHON), "calc.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "{'k1': {'ok': True, 'value': 3, 'error': None}}",
        "{'k2': {'ok': False, 'value': None, 'error': \"no tool named 'sub'; available: "
        "add\"}}",
    ], proc.stdout + proc.stderr
