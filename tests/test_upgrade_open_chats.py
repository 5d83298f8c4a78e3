"""``check_upgrade_safety`` reports a chat still open at the point whose setup changed.

A ``ctx.chat`` recorded before a deploy that changed its chat model setup (its options, its
model, its ``prompt=``, the sub-agents it offers) is a changed call: the runtime warns (a
divergence in strict mode). For a chat still open at the checkpoint (a tool round in
flight: most of a chat's time), the re-entered action re-attaches to the open chat, which
goes on with the turns the old setup answered; the runtime warned, but the checker only
compared the calls it replayed, found none, and said the upgrade was safe. Every
``arguments changed`` warning of a recovery is now a finding.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import textwrap
from typing import Any

import pytest

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
    action,
)
from flink_agents_py.testing import check_upgrade_safety, model_from_function, tool_calls

ROOT = pathlib.Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.timeout(180)

SAID = "the configuration of the chat model setup it asks changed"


def stock(item: str) -> dict[str, Any]:
    """Units in stock.

    Args:
        item: the item.
    """
    return {"item": item, "units": 3}


def _model(request: Any) -> Any:
    if not request.tool_results:
        return tool_calls(ToolCall(name="stock", arguments={"item": "tea"}))
    return f"in stock: {request.tool_results[0].content}"


class Shop(Agent):
    @action(InputEvent)
    @staticmethod
    async def ask(event: InputEvent, ctx: RunnerContext) -> None:
        reply = await ctx.chat("model", [ChatMessage(content="tea?")])
        ctx.send_event(OutputEvent(output={"key": ctx.key, "answer": reply.message.content}))


def shop(**setup: Any) -> Shop:
    agent = Shop()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, model_from_function(_model))
    agent.add_resource(
        "model",
        ResourceType.CHAT_MODEL,
        ResourceDescriptor(ChatModelSetup, connection="conn", tools=["stock"], **setup),
    )
    agent.add_resource("stock", ResourceType.TOOL, stock)
    return agent


RECORDS = [{"key": "a"}, {"key": "b"}]


@pytest.mark.parametrize(
    "change",
    [{"options": {"temperature": 0.9}}, {"prompt": "Answer in French."}, {"model": "bigger"}],
    ids=["options", "prompt", "model"],
)
def test_an_open_chats_changed_setup_is_a_finding(change):
    report = check_upgrade_safety(shop(), shop(**change), RECORDS, other_process=False)
    assert not report.ok
    assert any(SAID in f and "r0/ask" in f for f in report.findings), report.findings


def test_the_same_setup_is_still_safe():
    check_upgrade_safety(shop(), shop(), RECORDS, other_process=False).assert_ok()


def test_a_users_upgrade_check_from_their_own_modules(tmp_path):
    (tmp_path / "shop_v1.py").write_text(
        textwrap.dedent("""
        from flink_agents_py.api import (Agent, ChatMessage, ChatModelSetup, InputEvent,
            OutputEvent, ResourceDescriptor, ResourceType, RunnerContext, ToolCall, action)
        from flink_agents_py.testing import model_from_function, tool_calls

        def stock(item: str) -> dict:
            \"\"\"Units in stock.

            Args:
                item: the item.
            \"\"\"
            return {"item": item, "units": 3}

        def answer(request):
            if not request.tool_results:
                return tool_calls(ToolCall(name="stock", arguments={"item": "tea"}))
            return "in stock: " + request.tool_results[0].content

        class Shop(Agent):
            @action(InputEvent)
            @staticmethod
            async def ask(event: InputEvent, ctx: RunnerContext) -> None:
                reply = await ctx.chat("model", [ChatMessage(content="tea?")])
                ctx.send_event(OutputEvent(output={"key": ctx.key,
                                                   "answer": reply.message.content}))

        def build(**setup):
            agent = Shop()
            agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION,
                               model_from_function(answer))
            agent.add_resource("model", ResourceType.CHAT_MODEL, ResourceDescriptor(
                ChatModelSetup, connection="conn", tools=["stock"], **setup))
            agent.add_resource("stock", ResourceType.TOOL, stock)
            return agent
    """)
    )
    (tmp_path / "check.py").write_text(
        textwrap.dedent("""
        import json
        import shop_v1
        from flink_agents_py.testing import check_upgrade_safety

        records = [{"key": "a"}]
        report = check_upgrade_safety(shop_v1.build(), shop_v1.build(prompt="Be brief."),
                                      records, other_process=False)
        print(json.dumps({"ok": report.ok, "findings": report.findings}))
    """)
    )
    proc = subprocess.run(
        [sys.executable, "check.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": f"{ROOT}:{tmp_path}", "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert not out["ok"] and any(SAID in f for f in out["findings"]), out


# -- what a setup offers its model: its tools' and sub-agents' own declarations ------------
class Rater(Agent):
    @action(InputEvent)
    @staticmethod
    def rate(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output={"stars": 4}))


def _delegating_model(request: Any) -> Any:
    if not request.tool_results:
        return tool_calls(ToolCall(name="_subagent_rater", arguments={"text": "ok tea"}))
    return f"rated: {request.tool_results[0].content}"


SCHEMA = '{"type": "object", "properties": {"text": {"type": "string"}}}'


def delegating(
    description: str = "Rates a review.", schema: str = SCHEMA, tool_doc: str | None = None
) -> Shop:
    from flink_agents_py.api import FunctionTool, InternalSubagent, qualified_name

    agent = Shop()
    agent.add_resource(
        "conn", ResourceType.CHAT_MODEL_CONNECTION, model_from_function(_delegating_model)
    )
    agent.add_resource(
        "model",
        ResourceType.CHAT_MODEL,
        ResourceDescriptor(ChatModelSetup, connection="conn", tools=["stock"], subagents=["rater"]),
    )
    agent.add_resource(
        "rater",
        ResourceType.AGENT,
        ResourceDescriptor(
            InternalSubagent, agent=Rater, description=description, input_schema=schema
        ),
    )
    tool = (
        stock
        if tool_doc is None
        else FunctionTool(func=qualified_name(stock), description=tool_doc)
    )
    agent.add_resource("stock", ResourceType.TOOL, tool)
    return agent


@pytest.mark.parametrize(
    "change",
    [
        {"description": "Rates a review harshly."},
        {"schema": '{"type": "object", "properties": {"text": {"type": "integer"}}}'},
        {"tool_doc": "Units in stock, by warehouse."},
    ],
    ids=["subagent_description", "subagent_schema", "tool_description"],
)
def test_a_chats_offered_tools_and_sub_agents_changed_is_a_finding(change):
    # the model is offered each sub-agent's description and input schema and each tool's
    # description: a recorded answer was made for what the old code offered
    report = check_upgrade_safety(delegating(), delegating(**change), RECORDS, other_process=False)
    assert any(SAID in f for f in report.findings), report.findings
    check_upgrade_safety(delegating(), delegating(), RECORDS, other_process=False).assert_ok()


def test_a_record_written_before_the_offered_digest_is_not_compared():
    from flink_agents_py.runtime.recorder._call_changes import changed_defaults

    before, now = "$setup=aaaaaaaa", "$setup=aaaaaaaa,$offered=bbbbbbbb"
    assert changed_defaults(before, now) == []  # (a library upgrade warns about nothing)
    assert changed_defaults(now, "$setup=aaaaaaaa,$offered=cccccccc") == [
        ("$offered", "configured")
    ]
