"""Agents and scripted models for the ReAct agent tests (importable by Flink's workers)."""

from __future__ import annotations

import re

from pydantic import BaseModel

from flink_agents_py.agents import ReActAgent
from flink_agents_py.api import (
    Agent,
    ChatMessage,
    ChatModelSetup,
    Event,
    InputEvent,
    MessageRole,
    OutputEvent,
    Prompt,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    action,
)
from flink_agents_py.testing import ScriptedChatModel, ScriptedRequest, tool_call, tool_calls


class Total(BaseModel):
    total: int


def add(a: int, b: int) -> int:
    """Add two integers.

    Parameters
    ----------
    a : int
        The first addend.
    b : int
        The second addend.
    """
    return a + b


def calc_script(request: ScriptedRequest) -> object:
    """Calls ``add`` with the two numbers of the question, then answers with its result.

    A question with ``forever`` in it is answered by another tool call every time (a model
    that never answers).
    """
    question = next(m.content for m in request.messages if m.role == MessageRole.USER)
    results = request.tool_results
    if "forever" in question or not results:
        a, b = (int(x) for x in re.search(r"What is (-?\d+) \+ (-?\d+)", question).groups())
        return tool_calls(tool_call("add", f"c{len(request.messages)}", a=a, b=b))
    return {"total": int(results[-1].content)}


def connection() -> ResourceDescriptor:
    return ResourceDescriptor(ScriptedChatModel, function=f"{__name__}:calc_script")


def build_react(max_iterations: int | None = 3) -> ReActAgent:
    """A ReAct agent adding two numbers with its ``add`` tool, answering a ``Total``."""
    agent = ReActAgent(
        chat_model=ResourceDescriptor(ChatModelSetup, connection="conn"),
        prompt=Prompt.from_messages([
            ChatMessage(role=MessageRole.SYSTEM, content="You add numbers with tools."),
            ChatMessage(role=MessageRole.USER, content="What is {a} + {b}?{mode}")]),
        output_schema=Total, tools=[add], max_iterations=max_iterations)
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, connection())
    return agent


TAGGED = "TaggedRecord"  # a user event type named only by this string


class StringTypes(Agent):
    """Actions triggered by event-type strings (Flink Agents' idiom)."""

    @action(InputEvent.EVENT_TYPE)
    @staticmethod
    def tag(event: Event, ctx: RunnerContext) -> None:
        sent = Event(type=TAGGED, attributes={"n": event.input["a"]})
        ctx.sensory_memory.set("tag_id", sent.id)
        ctx.send_event(sent)

    @action(TAGGED)
    @staticmethod
    def emit(event: Event, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output={
            "key": ctx.key, "tagged": event.get_attr("n"),
            "same_id": ctx.sensory_memory.get("tag_id") == event.id}))


RECORDS = [{"key": "a", "a": 2, "b": 3, "mode": ""},
           {"key": "b", "a": 1, "b": 1, "mode": " forever"},
           {"key": "c", "a": 5, "b": 5, "mode": ""}]


def record_of(n: int) -> dict:
    """The ``n``-th test record (for a ``NumberSequenceSource``)."""
    return dict(RECORDS[n])


SKILL_MD = """---
name: math-calculator
description: Evaluate arithmetic expressions exactly with the bc calculator.
---
Run `echo '<expression>' | bc` and answer with its output only.
"""


def skill_script(request: ScriptedRequest) -> object:
    """Loads the math skill, runs its command on the question, answers with the output."""
    results = request.tool_results
    question = next(m.content for m in request.messages if m.role == MessageRole.USER)
    if not any(m.role == MessageRole.TOOL for m in request.messages):
        return tool_calls(tool_call("load_skill", "s1", name="math-calculator"))
    if len([m for m in request.messages if m.role == MessageRole.TOOL]) == 1:
        return tool_calls(tool_call("run_skill_command", "s2", skill="math-calculator",
                                    command=f"echo '{question}' | bc"))
    return results[-1].content


def build_skilled(skills_dir: str) -> ReActAgent:
    """A ReAct agent answering arithmetic with the math-calculator skill."""
    from flink_agents_py.skills import skill_tools

    agent = ReActAgent(chat_model=ResourceDescriptor(ChatModelSetup, connection="conn"),
                       tools=skill_tools([skills_dir], allowed_commands=["echo", "bc"]))
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ResourceDescriptor(
        ScriptedChatModel, function=f"{__name__}:skill_script"))
    return agent


def question_of(n: int) -> dict:
    """The ``n``-th arithmetic question record."""
    return {"key": f"q{n}", "input": f"({n}+3)*4"}
