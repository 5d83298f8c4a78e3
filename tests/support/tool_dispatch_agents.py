"""A chat agent whose model asks for three tools at once (``late``, ``mid``, ``fast``),
dispatched concurrently or serially; the ``late`` tool waits for the test's ``release`` gate.

Used by ``test_identity_and_journal`` and the replay-safety checker (``test_crash_checker``).
"""


from __future__ import annotations

import time

from flink_agents_py.api import (
    Agent,
    ChatMessage,
    ChatModelSetup,
    ChatRequestEvent,
    ChatResponseEvent,
    InputEvent,
    MessageRole,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    ToolCall,
    action,
)
from flink_agents_py.integrations.chat_models import ScriptedChatModel
from support.probes import gate, note


def slow_tool(name: str, delay_s: float) -> str:
    note(name)
    if name == "late":
        gate("release").wait(10)
    time.sleep(delay_s)
    return f"result-{name}"


def three_calls(request):  # scripted model: ask three tools once, then answer with their text
    results = request.tool_results
    if not results:
        return ChatMessage(role=MessageRole.ASSISTANT, tool_calls=[
            ToolCall(id="x", name="tool_late", arguments={"name": "late", "delay_s": 0.0}),
            ToolCall(id="y", name="tool_mid", arguments={"name": "mid", "delay_s": 0.05}),
            ToolCall(id="z", name="tool_fast", arguments={"name": "fast", "delay_s": 0.0}),
        ])
    return " ".join(f"{m.tool_call_id}={m.content}" for m in results)


def tool_late(name: str, delay_s: float) -> str:
    """Late tool."""
    return slow_tool(name, delay_s)


def tool_mid(name: str, delay_s: float) -> str:
    """Mid tool."""
    return slow_tool(name, delay_s)


def tool_fast(name: str, delay_s: float) -> str:
    """Fast tool."""
    return slow_tool(name, delay_s)


def make_agent(dispatch: str) -> Agent:
    class ToolAgent(Agent):
        @action(InputEvent)
        @staticmethod
        def ask(event, ctx: RunnerContext) -> None:
            ctx.send_event(ChatRequestEvent(model="m", messages=[ChatMessage(content="go")]))

        @action(ChatResponseEvent)
        @staticmethod
        def done(event, ctx: RunnerContext) -> None:
            ctx.send_event(OutputEvent(output=event.response.message.content))

    agent = ToolAgent()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION,
                       ResourceDescriptor(ScriptedChatModel, function=f"{__name__}:three_calls"))
    agent.add_resource("m", ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="conn", tools=["tool_late", "tool_mid", "tool_fast"],
        tool_dispatch=dispatch))
    for fn in (tool_late, tool_mid, tool_fast):
        agent.add_resource(fn.__name__, ResourceType.TOOL, fn)
    return agent
