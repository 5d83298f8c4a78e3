"""An output schema pydantic cannot describe as JSON Schema is one clear ``UsageError``.

Apache Flink Agents #985 (decided: raise a clear, consistent error): a pydantic class with a
field of an arbitrary class has no JSON Schema. Here pydantic's own
``PydanticInvalidForJsonSchema`` came out of ``ChatRequestEvent(...)``, ``ctx.chat`` and
``ReActAgent(...)``, naming a core schema, not the class nor what to do.
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
    from pydantic import BaseModel, ConfigDict
    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.agents import ReActAgent
    from flink_agents_py.api import (Agent, ChatMessage, ChatModelSetup, ChatRequestEvent,
                                     InputEvent, ResourceDescriptor, ResourceType, action)
    from flink_agents_py.testing import model_from_turns


    class Money:
        pass


    class Price(BaseModel):
        model_config = ConfigDict(arbitrary_types_allowed=True)
        amount: Money


    class Asker(Agent):
        @action(InputEvent)
        @staticmethod
        async def ask(event, ctx):
            if event.input["how"] == "event":
                ctx.send_event(ChatRequestEvent(model="m", messages=[ChatMessage(content="x")],
                                                output_schema=Price))
            else:
                await ctx.chat("m", [ChatMessage(content="x")], output_schema=Price)


    agent = Asker()
    agent.add_resource("c", ResourceType.CHAT_MODEL_CONNECTION, model_from_turns(["{}"]))
    agent.add_resource("m", ResourceType.CHAT_MODEL, ResourceDescriptor(ChatModelSetup,
                                                                        connection="c"))
    result = AgentsExecutionEnvironment.local().from_list(
        [{"key": h, "how": h} for h in ("event", "chat")]).apply(agent).run()
    errors = sorted([e.error_type, e.message] for e in result.errors)
    try:
        ReActAgent(chat_model=ResourceDescriptor(ChatModelSetup, connection="c"), prompt="x",
                   output_schema=Price)
        react = None
    except Exception as e:
        react = [type(e).__name__, str(e)]
    print(json.dumps({"errors": errors, "react": react}))
''')


def test_an_output_schema_without_json_schema_is_a_usage_error_naming_the_class(
        tmp_path: Path) -> None:
    (tmp_path / "asker.py").write_text(SCRIPT)
    proc = subprocess.run([str(PYTHON), "asker.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=150, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    found = [*result["errors"], result["react"]]
    assert len(found) == 3, result
    for error_type, message in found:
        assert error_type == "UsageError", message
        assert "output schema __main__.Price has no JSON Schema" in message
        assert "Money" in message and "or pass a JSON Schema dict" in message
