"""A model's tool call runs the tool offered under the name it called, and no other.

A function tool is offered under its function's name (or its ``name``), which may differ
from its resource's name, and may be another resource's. The call was resolved by resource
name first: offered ``read_notes`` (resource ``delete_notes``, described as harmless) and
``delete_notes`` (resource ``read_notes``), a call of ``read_notes`` ran the function
offered as ``delete_notes``. The name offered wins now; a resource's own name still
reaches its tool (a call recorded before a deploy renamed the tool's function), and a name
of no tool of the setup runs nothing, the model reading the names it was offered.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
PYTHON = str(VENV_PYTHON if VENV_PYTHON.exists() else Path(sys.executable))

USER_MODULE = '''
import json
import sys

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (Agent, ChatMessage, ChatModelSetup, InputEvent, OutputEvent,
                                 ResourceDescriptor, ResourceType, RunnerContext, action)
from flink_agents_py.testing import model_from_function, tool_call, tool_calls

ran = []


def read_notes() -> str:
    """Read the user's notes (harmless)."""
    ran.append("read_notes")
    return "notes: nothing"


def delete_notes() -> str:
    """Delete every note."""
    ran.append("delete_notes")
    return "deleted"


offered = []


def script(request):
    done = [m.content for m in request.messages if m.role == "tool"]
    if not done:
        offered.append([t.name for t in request.tools or []])
        return tool_calls(*[tool_call(name, f"c{i}") for i, name in enumerate(sys.argv[1:])])
    return json.dumps(done)


class Notes(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        answer = await ctx.chat("m", [ChatMessage(content="tidy my notes")])
        ctx.send_event(OutputEvent(output=answer.message.content))


agent = Notes()
agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, model_from_function(script))
# each resource named after the other's function
agent.add_resource("delete_notes", ResourceType.TOOL, read_notes)
agent.add_resource("read_notes", ResourceType.TOOL, delete_notes)
agent.add_resource("archive", ResourceType.TOOL, read_notes)
agent.add_resource("m", ResourceType.CHAT_MODEL, ResourceDescriptor(
    ChatModelSetup, connection="conn", tools=["delete_notes", "read_notes"]))
outputs = AgentsExecutionEnvironment.local().from_list(["x"]).apply(agent).collect()
print(json.dumps({"offered": offered, "ran": ran, "read": json.loads(outputs[0])}))
'''


def _run(tmp_path: Path, *calls: str) -> dict[str, object]:
    work = tmp_path / "user"
    work.mkdir(exist_ok=True)
    assert ROOT not in work.resolve().parents
    (work / "notes_agent.py").write_text(USER_MODULE)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # this tree's package, as installed
    proc = subprocess.run([PYTHON, "notes_agent.py", *calls], cwd=work, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def test_a_call_runs_the_tool_offered_under_that_name_not_the_resource_so_named(tmp_path):
    got = _run(tmp_path, "read_notes")
    assert got["offered"] == [["read_notes", "delete_notes"]]
    assert got["ran"] == ["read_notes"]  # the function offered as read_notes, not delete_notes
    assert got["read"] == ["notes: nothing"]


def test_a_tool_the_setup_lacks_runs_nothing_and_the_model_reads_the_offered_names(tmp_path):
    """``archive`` is a declared tool resource this model is not offered."""
    got = _run(tmp_path, "archive", "delete_notes")
    assert got["ran"] == ["delete_notes"]
    refusal, deleted = got["read"]  # type: ignore[misc]
    assert refusal == ("Error: no tool named 'archive'; available: read_notes, delete_notes")
    assert deleted == "deleted"
