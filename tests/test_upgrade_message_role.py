"""Runs recorded before ``ChatMessage.role`` became the ``MessageRole`` member replay quietly.

Before, a message's role was its text (``"user"``); a durable call an action made with it
(``[{"role": m.role, ...}]``, the usual way to hand messages to a client) was recorded with
that text. Restored by today's code, the same call passes ``MessageRole.USER``: its digest
must be the one recorded, or a strict agent fails the run with a divergence and a lenient
one warns of changed arguments on every such run after an upgrade.
"""

from __future__ import annotations

from typing import Any

import pytest
from support.harness import KEY, call_of, drive_until, new_core, resume, snapshot_of
from support.probes import count, gate

from flink_agents_py.api import (
    Agent,
    ChatMessage,
    InputEvent,
    MessageRole,
    OutputEvent,
    RunnerContext,
    action,
)
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import InMemoryKeyState
from flink_agents_py.runtime.recorder._outcomes import argument_shape, call_digest

pytestmark = pytest.mark.timeout(60)

OLD = {"text": False}
"""``True``: the action passes the role as the text earlier versions held."""


def send(messages: list[dict[str, Any]]) -> str:
    count("send")
    return f"sent {len(messages)}"


def held(tag: str) -> str:
    assert gate().wait(10), "gate never opened"
    return tag


class Wire(Agent):
    replay = "strict"

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        message = ChatMessage(role="user", content="hi")
        role: Any = message.role.value if OLD["text"] else message.role
        sent = await ctx.durable_execute_async(send, [{"role": role, "content": message.content}])
        tag = await ctx.durable_execute_async(held, "t")
        ctx.send_event(OutputEvent(output={"sent": sent, "tag": tag}))


def recorded_by_old_code(plan: AgentPlan) -> InMemoryKeyState:
    """The key's state (through JSON) once the call with the role as text is recorded."""
    OLD["text"] = True
    core = new_core(plan)
    try:
        state = InMemoryKeyState()
        core.on_input(KEY, {"key": KEY}, state)
        drive_until(
            core,
            state,
            quiet=True,
            done=lambda s: (c := call_of(s, "go", 1)) is not None and not c.done,
        )
        return snapshot_of(state, "json")
    finally:
        gate().set()
        core.close()
        OLD["text"] = False


def test_a_call_recorded_with_the_role_as_text_replays_with_the_member(probes):
    plan = AgentPlan.from_agent(Wire())
    snap = recorded_by_old_code(plan)
    assert probes.counts()["send"] == 1
    outputs, errors, core = resume(plan, snap)
    assert errors == []
    assert outputs == [{"sent": "sent 1", "tag": "t"}]
    assert probes.counts()["send"] == 1  # replayed, not sent again
    assert core.counters.get("replay_arguments_changed", 0) == 0


@pytest.mark.parametrize("role", list(MessageRole))
def test_each_role_member_digests_as_its_text(role):
    assert call_digest(send, ([{"role": role}],), {}, "c0") == call_digest(
        send, ([{"role": role.value}],), {}, "c0"
    )
    assert call_digest(send, (role,), {}, "c0") == call_digest(send, (role.value,), {}, "c0")
    assert argument_shape(send, (role,), {}) == argument_shape(send, (role.value,), {})


USER_MODULE = """
import os, sys
from flink_agents_py.api import (Agent, ChatMessage, InputEvent, OutputEvent, RunnerContext,
                                 action)

OLD = sys.argv[1] == "old"  # the version before: a message's role was its text


def send(messages):
    with open("sent.log", "a") as f:
        f.write(messages[0]["role"] + "\\n")
    return "sent"


def die():
    os._exit(3)


class Wire(Agent):
    replay = "strict"

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        m = ChatMessage(role="user", content=event.input["text"])
        role = m.role.value if OLD else m.role
        sent = await ctx.durable_execute_async(send, [{"role": role, "content": m.content}])
        if OLD:
            await ctx.durable_execute_async(die)  # the old process dies here
        ctx.send_event(OutputEvent(output=sent))
"""

USER_RUN = """
import json, sys
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.runtime import SqliteJournal
from my_wire import Wire

journal = SqliteJournal("journal.db", retention_s=3600)
env = AgentsExecutionEnvironment.local(journal=journal)
result = env.from_list([{"key": "a", "text": "hi"}]).apply(Wire()).run()
print(json.dumps({"outputs": result.outputs, "errors": [e.error_type for e in result.errors]}))
"""


def test_a_users_job_journaled_by_the_old_version_resumes_after_the_upgrade(tmp_path):
    import json
    import os
    import subprocess
    import sys

    (tmp_path / "my_wire.py").write_text(USER_MODULE)
    (tmp_path / "run.py").write_text(USER_RUN)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    import flink_agents_py  # this checkout's package, not the tests' folder

    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(flink_agents_py.__file__))

    def run(version: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "run.py", version],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    old = run("old")
    assert old.returncode == 3, old.stderr[-3000:]
    new = run("new")
    assert new.returncode == 0, new.stderr[-3000:]
    got = json.loads(new.stdout.strip().splitlines()[-1])
    assert got == {"outputs": ["sent"], "errors": []}
    assert (tmp_path / "sent.log").read_text() == "user\n"  # answered from the journal
