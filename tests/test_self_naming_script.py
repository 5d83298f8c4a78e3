"""A script that runs its job at import time and names its own functions (``"sec:fn"``).

Before, the I/O thread's import of the script waited for the import running the job, which
waited for the I/O thread: no output, no end (``import sec``); run as ``python sec.py`` the
script would be imported a second time. Now its own module is used as it is.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent('''
    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.api import (Agent, ChatMessage, ChatModelSetup, InputEvent,
                                     OutputEvent, ResourceDescriptor, action,
                                     chat_model_connection, chat_model_setup)
    from flink_agents_py.integrations.chat_models import ScriptedChatModel

    RUNS = []


    def scripted(request):
        return "hello " + request.last_user_text


    class A(Agent):
        @chat_model_connection
        @staticmethod
        def conn():
            return ResourceDescriptor(clazz=ScriptedChatModel, function="sec:scripted")

        @chat_model_setup
        @staticmethod
        def m():
            return ResourceDescriptor(clazz=ChatModelSetup, connection="conn")

        @action(InputEvent)
        @staticmethod
        async def go(event, ctx):
            r = await ctx.chat("m", [ChatMessage(role="user", content=event.input["q"])])
            ctx.send_event(OutputEvent(output=r.message.content))


    RUNS.append(1)
    print("runs", len(RUNS), sorted(AgentsExecutionEnvironment.local().from_list(
        [{"key": "a", "q": "x"}, {"key": "b", "q": "y"}]).apply(A()).collect()), flush=True)
''')


@pytest.mark.parametrize("how", [["sec.py"], ["-c", "import sec"]])
def test_a_script_naming_its_own_function_runs_its_job_once_at_import(tmp_path: pathlib.Path,
                                                                     how: list[str]):
    (tmp_path / "sec.py").write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, *how], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["runs 1 ['hello x', 'hello y']"], done.stdout
