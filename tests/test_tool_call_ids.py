"""``ToolCall(name=..., arguments=...)`` without an id, as its docstring describes.

``ToolCall.id`` was required, so a call built without one (a custom chat model connection's
answer, a ``ToolRequestEvent`` an action builds) failed validation, though the docstring
promised a synthetic id when none was given. The id now defaults to empty and the runtime
gives the call a synthetic one that a replay gives again: the chat action
``<chat event id>#<round>.<position>`` (as before for providers that send none), a
``ToolRequestEvent`` ``<its event id>#<position>``. Apache Flink Agents' connections give
each tool call a fresh ``uuid4`` (kept with the model's answer in its record); ours are
derived from the replay-stable event ids, so a re-executed action that builds its request
again gets the same ids too.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import textwrap
from typing import Any

import pytest

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    ChatMessage,
    ChatModelSetup,
    InputEvent,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    ToolCall,
    ToolRequestEvent,
    ToolResponseEvent,
    action,
)
from flink_agents_py.integrations.chat_models import ScriptedChatModel
from flink_agents_py.testing import (
    CallCounter,
    check_replay_safety,
    model_from_function,
    tool_calls,
)

ROOT = pathlib.Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.timeout(180)

CALLS = CallCounter()


def doubled(a: int) -> int:
    """Return twice a.

    Args:
        a: a number.
    """
    CALLS.count("doubled")
    return 2 * a


def test_a_tool_call_builds_without_an_id():
    call = ToolCall(name="doubled", arguments={"a": 1})
    assert (call.id, call.name, call.arguments) == ("", "doubled", {"a": 1})
    assert call["function"]["name"] == "doubled"


class AsksTools(Agent):
    @action(InputEvent)
    @staticmethod
    def ask(event: InputEvent, ctx: RunnerContext) -> None:
        request = ToolRequestEvent(
            model="model",
            tool_calls=[ToolCall(name="doubled", arguments={"a": a}) for a in event.input["a"]],
        )
        ctx.short_term_memory.set("asked", {c.id: c.arguments["a"] for c in request.tool_calls})
        ctx.send_event(request)

    @action(ToolResponseEvent)
    @staticmethod
    def answer(event: ToolResponseEvent, ctx: RunnerContext) -> None:
        asked = ctx.short_term_memory.get("asked")
        got = {str(asked[cid]): r.content for cid, r in event.responses.items()}
        ids = sorted(event.responses)
        ctx.send_event(OutputEvent(output={"key": ctx.key, "got": got, "ids": ids}))


def _asks_tools() -> Agent:
    agent = AsksTools()
    agent.add_resource(
        "conn",
        ResourceType.CHAT_MODEL_CONNECTION,
        ResourceDescriptor(ScriptedChatModel, default_reply="?"),
    )
    agent.add_resource(
        "model",
        ResourceType.CHAT_MODEL,
        ResourceDescriptor(ChatModelSetup, connection="conn", tools=["doubled"]),
    )
    agent.add_resource("doubled", ResourceType.TOOL, doubled)
    return agent


RECORDS = [{"key": "a", "a": [1, 2, 3]}, {"key": "b", "a": [5]}, {"key": "a", "a": [7, 8]}]


def test_an_actions_request_of_id_less_calls_gets_each_result_under_a_stable_id():
    res = AgentsExecutionEnvironment.local().from_list(RECORDS).apply(_asks_tools()).run()
    assert res.errors == []
    by_key: dict[str, list[Any]] = {}
    for out in res.outputs:
        by_key.setdefault(out["key"], []).append(out)
    assert [o["got"] for o in by_key["a"]] == [{"1": 2, "2": 4, "3": 6}, {"7": 14, "8": 16}]
    first = by_key["a"][0]["ids"]
    assert len(set(first)) == 3 and all(i.endswith(("#0", "#1", "#2")) for i in first)
    report = check_replay_safety(_asks_tools(), RECORDS, reset=CALLS.reset, other_process=False)
    assert report.ok, report.table  # the same ids (in the outputs) at every crash point


def _model(request: Any) -> Any:
    if request.tool_results:
        return "done: " + ", ".join(r.content for r in request.tool_results)
    return tool_calls(  # two id-less calls in one turn (the scripted model refused them)
        ToolCall(name="doubled", arguments={"a": 4}), ToolCall(name="doubled", arguments={"a": 1})
    )


class Chats(Agent):
    @action(InputEvent)
    @staticmethod
    async def ask(event: InputEvent, ctx: RunnerContext) -> None:
        reply = await ctx.chat("model", [ChatMessage(content="double 4")])
        ctx.send_event(OutputEvent(output={"key": ctx.key, "answer": reply.message.content}))


def _chats() -> Agent:
    agent = Chats()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, model_from_function(_model))
    agent.add_resource(
        "model",
        ResourceType.CHAT_MODEL,
        ResourceDescriptor(ChatModelSetup, connection="conn", tools=["doubled"]),
    )
    agent.add_resource("doubled", ResourceType.TOOL, doubled)
    return agent


def test_a_connections_id_less_tool_call_runs_in_a_chat_and_replays():
    records = [{"key": "a"}, {"key": "b"}]
    res = AgentsExecutionEnvironment.local().from_list(records).apply(_chats()).run()
    assert res.errors == []
    assert sorted(o["answer"] for o in res.outputs) == ["done: 8, 2", "done: 8, 2"]
    report = check_replay_safety(_chats(), records, reset=CALLS.reset, other_process=False)
    assert report.ok, report.table


def test_a_users_script_building_id_less_tool_calls(tmp_path):
    script = tmp_path / "user_job.py"
    script.write_text(
        textwrap.dedent("""
        import json
        from flink_agents_py import AgentsExecutionEnvironment
        from flink_agents_py.api import (Agent, ChatModelSetup, InputEvent, OutputEvent,
            ResourceDescriptor, ResourceType, RunnerContext, ToolCall, ToolRequestEvent,
            ToolResponseEvent, action)
        from flink_agents_py.integrations.chat_models import ScriptedChatModel

        def shout(text: str) -> str:
            \"\"\"Upper-case a text.

            Args:
                text: the text.
            \"\"\"
            return text.upper()

        class Loud(Agent):
            @action(InputEvent)
            @staticmethod
            def ask(event: InputEvent, ctx: RunnerContext) -> None:
                ctx.send_event(ToolRequestEvent(model="model", tool_calls=[
                    ToolCall(name="shout", arguments={"text": w}) for w in event.input["words"]]))

            @action(ToolResponseEvent)
            @staticmethod
            def answer(event: ToolResponseEvent, ctx: RunnerContext) -> None:
                ctx.send_event(OutputEvent(output={
                    cid: r.content for cid, r in event.responses.items()}))

        agent = Loud()
        agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION,
                           ResourceDescriptor(ScriptedChatModel, default_reply="?"))
        agent.add_resource("model", ResourceType.CHAT_MODEL,
                           ResourceDescriptor(ChatModelSetup, connection="conn", tools=["shout"]))
        agent.add_resource("shout", ResourceType.TOOL, shout)
        result = AgentsExecutionEnvironment.local().from_list(
            [{"key": "k", "words": ["hi", "yo"]}]).apply(agent).run()
        print(json.dumps({"outputs": result.outputs,
                          "errors": [e.message for e in result.errors]}))
    """)
    )
    proc = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["errors"] == []
    [answer] = out["outputs"]
    assert sorted(answer.values()) == ["HI", "YO"]
    assert [cid.rpartition("#")[2] for cid in answer] == ["0", "1"]
