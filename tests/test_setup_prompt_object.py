"""A chat model setup takes its prompt as a ``Prompt`` itself, as Apache Flink Agents' does.

Flink Agents' ``BaseChatModelSetup.prompt`` is ``Prompt | str``: its programs write
``ResourceDescriptor(clazz=..., connection=..., prompt=Prompt.from_messages([...]))``. Here
the field took only a name or a literal text, so such a program failed at its first chat
(``ResourceError: cannot build ... prompt: Input should be a valid string``).
"""

from __future__ import annotations

import json
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
    import json
    from flink_agents_py.compat import (
        Agent, AgentsExecutionEnvironment, BaseChatModelConnection, BaseChatModelSetup,
        ChatMessage, ChatRequestEvent, ChatResponseEvent, InputEvent, MessageRole,
        OutputEvent, Prompt, ResourceDescriptor, ResourceType, action)
    from flink_agents_py.plan import AgentPlan

    SEEN = []


    class Echo(BaseChatModelConnection):
        def chat(self, messages, tools=None, **kwargs):
            SEEN.append([[m.role, m.content] for m in messages])
            return ChatMessage(role=MessageRole.ASSISTANT, content="ok")


    class Calc(Agent):
        @action(InputEvent)
        @staticmethod
        def ask(event, ctx):
            ctx.send_event(ChatRequestEvent(model="calc", messages=[
                ChatMessage(role=MessageRole.USER, content="", extra_args={"sum": event.input})]))

        @action(ChatResponseEvent)
        @staticmethod
        def answer(event, ctx):
            ctx.send_event(OutputEvent(output=event.response.content))


    agent = Calc()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ResourceDescriptor(clazz=Echo))
    agent.add_resource("calc", ResourceType.CHAT_MODEL, ResourceDescriptor(
        clazz=BaseChatModelSetup, connection="conn",
        prompt=Prompt.from_messages([
            ChatMessage(role=MessageRole.SYSTEM, content="You add numbers."),
            ChatMessage(role=MessageRole.USER, content="What is {sum}?")])))
    env = AgentsExecutionEnvironment.get_execution_environment()
    out = env.from_list([{"key": "k", "value": "1+2"}]).apply(agent).to_list()
    env.execute()
    # the plan's JSON form (as a saved plan) builds the same setup
    plan = AgentPlan.from_json(AgentPlan.from_agent(agent).to_json())
    setup = plan.resources[ResourceType.CHAT_MODEL]["calc"].build()
    print(json.dumps({"out": out, "seen": SEEN, "restored": type(setup.prompt).__name__}))
''')


def test_a_setup_given_a_prompt_object_sends_it_filled(tmp_path: Path) -> None:
    (tmp_path / "calc.py").write_text(SCRIPT)
    proc = subprocess.run([str(PYTHON), "calc.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=150, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["out"] == [{"k": "ok"}], proc.stderr
    assert result["seen"] == [[["system", "You add numbers."], ["user", "What is 1+2?"]]]
    assert result["restored"] == "Prompt"
