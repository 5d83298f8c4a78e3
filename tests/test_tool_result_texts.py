"""A tool's result holding text that is not valid Unicode reaches the model, replaced.

``os.listdir`` decodes a file name that is not UTF-8 with ``surrogateescape`` (``caf\\udce9``
for a Latin-1 ``café``); such a string has no JSON form, so the tool call could not be
recorded and the model was told the call failed (a ``SerializationError``). The model now
reads the result with U+FFFD in place of each lone surrogate. Run as a user runs it: their
module, from a directory outside the repository.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent('''
    import json, os, pathlib
    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.api import (Agent, ChatMessage, ChatModelSetup, InputEvent,
                                     OutputEvent, ResourceDescriptor, ResourceType, action)
    from flink_agents_py.testing import model_from_function, tool_call, tool_calls

    def list_files(folder: str) -> list:
        """List a folder's file names.

        Args:
            folder: the folder.
        """
        return sorted(os.listdir(folder))

    def first_name(folder: str) -> dict:
        """The folder's first file name, by kind.

        Args:
            folder: the folder.
        """
        return {"names": (sorted(os.listdir(folder))[0],)}

    def script(request):
        if not request.tool_results:
            return tool_calls(tool_call(request.last_user_text, "c1", folder="files"))
        result = request.tool_results[-1]
        return json.dumps({"content": result.content})

    class Lister(Agent):
        @action(InputEvent)
        @staticmethod
        async def ask(event, ctx):
            reply = await ctx.chat("model", [ChatMessage(content=event.input["tool"])])
            ctx.send_event(OutputEvent(output={"tool": event.input["tool"],
                                               "answer": reply.message.content}))

    pathlib.Path("files").mkdir()
    open(os.path.join(b"files", b"caf\\xe9.txt"), "wb").close()  # a Latin-1 name
    open(os.path.join("files", "ok.txt"), "w").close()
    agent = Lister()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, model_from_function(script))
    agent.add_resource("model", ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="conn", tools=["list_files", "first_name"]))
    agent.add_resource("list_files", ResourceType.TOOL, list_files)
    agent.add_resource("first_name", ResourceType.TOOL, first_name)
    job = AgentsExecutionEnvironment.local().from_list(
        [{"key": t, "tool": t} for t in ("list_files", "first_name")]).apply(agent)
    result = job.run()
    print(json.dumps({"outputs": sorted(result.outputs, key=lambda o: o["tool"]),
                      "errors": [str(e) for e in result.errors]}))
''')


def test_a_tool_result_with_undecodable_file_names_reaches_the_model_replaced(tmp_path):
    (tmp_path / "lister.py").write_text(SCRIPT)
    proc = subprocess.run([sys.executable, "lister.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=100, env={"PYTHONPATH": str(ROOT), "PATH": "",
                                                       "LC_ALL": "C.UTF-8"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert found["errors"] == []
    first, listed = found["outputs"]
    # before: 'Error: SerializationError: result of tool ... holds a lone surrogate'
    assert json.loads(json.loads(listed["answer"])["content"]) == ["caf\ufffd.txt", "ok.txt"]
    assert json.loads(json.loads(first["answer"])["content"]) == {"names": ["caf\ufffd.txt"]}
