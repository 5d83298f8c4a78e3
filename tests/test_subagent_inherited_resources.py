"""Internal sub-agents name their ancestors' resources (as in Flink Agents).

A sub-agent's chat model setup may name a connection its parent declares (or any resource
of a type its ancestors declare, but sub-agents); its own resource of a name wins; the
parent's one instance is used, and a setup it names from an ancestor counts its spend in
the ancestor's ``_budget.<setup>`` entry. Each program runs as a user runs it: a script in
``tmp_path`` on the local runner, its imports the compat package's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from flink_agents_py.api import PlanError, ResourceDescriptor, ResourceNotFoundError, ResourceType
from flink_agents_py.compat import ReActAgent
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime._resources import ResourceEnvironment

ROOT = Path(__file__).resolve().parents[1]
VENV_PY = ROOT / ".venv" / "bin" / "python"
PYTHON = VENV_PY if VENV_PY.exists() else Path(sys.executable)

pytestmark = pytest.mark.timeout(120)

_COMMON = """
    import json
    from typing import Any, Sequence

    from flink_agents_py.compat import (
        Agent, AgentsExecutionEnvironment, BaseChatModelConnection, BaseChatModelSetup,
        ChatMessage, ChatRequestEvent, ChatResponseEvent, Event, InputEvent, MessageRole,
        OutputEvent, ReActAgent, ResourceDescriptor, ResourceType, RunnerContext, Tool,
        action)

    OPENED = []


    class ScriptedSetup(BaseChatModelSetup):
        @property
        def model_kwargs(self) -> dict[str, Any]:
            return {"model": self.model}


    class ScriptedConnection(BaseChatModelConnection):
        def open(self) -> None:
            OPENED.append(id(self))

        def chat(self, messages: Sequence[ChatMessage], tools: list | None = None,
                 output_schema: Any = None, **kwargs: Any) -> ChatMessage:
            model = kwargs.get("model")
            last = messages[-1]
            if model == "plain":
                return ChatMessage(role=MessageRole.ASSISTANT, content="plain answer")
            if last.role == MessageRole.TOOL:
                expected = "child evidence" if model == "child" else "child answer"
                if expected not in last.content:
                    raise ValueError(f"wrong scoped result: {last.content}")
                return ChatMessage(role=MessageRole.ASSISTANT, content=f"{model} answer")
            name, arguments = (("evidence", {}) if model == "child"
                               else ("_subagent_researcher", {"input": "investigate"}))
            if [tool.name for tool in tools] != [name]:
                raise ValueError(f"tools not of the scope: {[t.name for t in tools]}")
            return ChatMessage(role=MessageRole.ASSISTANT, tool_calls=[{
                "id": "call-1", "type": "function",
                "function": {"name": name, "arguments": arguments}}])


    class ChildTools:
        @staticmethod
        def evidence() -> str:
            \"\"\"Read evidence owned by the child.\"\"\"
            return "child evidence"


    class ParentTools:
        @staticmethod
        def evidence() -> str:
            \"\"\"Read evidence owned by the parent.\"\"\"
            return "parent evidence"


    SETUP = f"{ScriptedSetup.__module__}.{ScriptedSetup.__name__}"
    CONNECTION = ResourceDescriptor(
        clazz=f"{ScriptedConnection.__module__}.{ScriptedConnection.__name__}")
"""

# Flink Agents' react_subagent_test.py (its cases without skills): the child ReAct agent's
# setup names the connection only its parent declares; both declare a tool "evidence", the
# child's own is the one its model is offered and runs.
REACT_CHILD = _COMMON + """

    class ExplicitParent(Agent):
        @action(InputEvent)
        @staticmethod
        async def invoke(event: Event, ctx: RunnerContext) -> None:
            child = ctx.get_resource("researcher", ResourceType.AGENT)
            result = await (await child.submit(ctx, "investigate"))
            ctx.send_event(OutputEvent(output=result.result if result.success
                                       else f"failed:{result.error_message}"))


    def parent_agent(model_driven: bool) -> Agent:
        child = ReActAgent(chat_model=ResourceDescriptor(
            clazz=SETUP, connection="connection", model="child", tools=["evidence"]))
        child.add_resource("evidence", ResourceType.TOOL, Tool.from_callable(ChildTools.evidence))
        parent = ReActAgent(chat_model=ResourceDescriptor(
            clazz=SETUP, connection="connection", model="parent", subagents=["researcher"])
        ) if model_driven else ExplicitParent()
        parent.add_resource("connection", ResourceType.CHAT_MODEL_CONNECTION, CONNECTION)
        parent.add_resource("evidence", ResourceType.TOOL,
                            Tool.from_callable(ParentTools.evidence))
        parent.add_resource("researcher", ResourceType.AGENT, child)
        return parent


    results = {}
    for model_driven in (False, True):
        env = AgentsExecutionEnvironment.get_execution_environment()
        out = env.from_list([{"key": "k", "value": "hello"}]).apply(
            parent_agent(model_driven)).to_list()
        env.execute()
        results[str(model_driven)] = out
    print(json.dumps({"results": results, "opened": len(OPENED)}))
"""


def _run(tmp_path: Path, script: str) -> dict:
    (tmp_path / "prog.py").write_text(textwrap.dedent(script))
    environ = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([str(PYTHON), "prog.py"], cwd=tmp_path, env=environ,
                          capture_output=True, text=True, timeout=100)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_react_child_uses_its_parents_connection_and_its_own_tool(tmp_path: Path) -> None:
    """Both invocation paths run the child's loop on the parent's one connection."""
    out = _run(tmp_path, REACT_CHILD)
    assert out["results"] == {"False": [{"k": ["child answer"]}],
                              "True": [{"k": "parent answer"}]}
    assert out["opened"] == 2  # once per job: the child uses the parent's instance


# A child agent chatting through a budgeted setup its parent declares: the spend goes in the
# parent's entry (``_budget.plain``), which the parent's own chats through it count in.
BUDGETED = _COMMON + """

    class Child(Agent):
        @action(InputEvent)
        @staticmethod
        def ask(event: Event, ctx: RunnerContext) -> None:
            ctx.send_event(ChatRequestEvent(model="plain", messages=[
                ChatMessage(role=MessageRole.USER, content="hi")]))

        @action(ChatResponseEvent)
        @staticmethod
        def answer(event: Event, ctx: RunnerContext) -> None:
            ctx.send_event(OutputEvent(output=event.response.content))


    class Parent(Agent):
        @action(InputEvent)
        @staticmethod
        async def invoke(event: Event, ctx: RunnerContext) -> None:
            child = ctx.get_resource("child", ResourceType.AGENT)
            result = await (await child.submit(ctx, "go"))
            spent = ctx.short_term_memory.get("_budget")
            ctx.send_event(OutputEvent(output={
                "result": result.result if result.success else result.error_message,
                "entries": sorted(spent.get_fields()) if spent is not None else None}))


    parent = Parent()
    parent.add_resource("connection", ResourceType.CHAT_MODEL_CONNECTION, CONNECTION)
    parent.add_resource("plain", ResourceType.CHAT_MODEL, ResourceDescriptor(
        clazz=SETUP, connection="connection", model="plain",
        budget={"max_tokens": 100000}))
    parent.add_resource("child", ResourceType.AGENT, Child())
    env = AgentsExecutionEnvironment.get_execution_environment()
    out = env.from_list([{"key": "k", "value": "hello"}]).apply(parent).to_list()
    env.execute()
    print(json.dumps(out[0]["k"]))
"""


def test_a_setup_named_from_an_ancestor_spends_in_its_entry(tmp_path: Path) -> None:
    """The child's chat through the parent's budgeted setup counts in ``_budget.plain``."""
    out = _run(tmp_path, BUDGETED)
    assert out == {"result": ["plain answer"], "entries": ["plain"]}


def test_the_child_environment_falls_back_to_its_parents() -> None:
    """One instance for both; the child's own wins; a name nobody declares says where."""
    root, child = (ReActAgent(chat_model=ResourceDescriptor(
        clazz="flink_agents_py.compat.BaseChatModelSetup", connection="shared"))
        for _ in range(2))
    root.add_resource("shared", ResourceType.PROMPT, "the root's")
    root.add_resource("mine", ResourceType.PROMPT, "the root's")
    child.add_resource("mine", ResourceType.PROMPT, "the child's")
    root.add_resource("shared", ResourceType.CHAT_MODEL_CONNECTION, ResourceDescriptor(
        clazz="flink_agents_py.integrations.chat_models.ScriptedChatModel"))
    root.add_resource("child", ResourceType.AGENT, child)
    plan = AgentPlan.from_agent(root)
    assert AgentPlan.from_json(plan.to_json()).to_json() == plan.to_json()
    top = ResourceEnvironment(plan)
    sub = ResourceEnvironment(plan.subagents["child"], parent=top, path=("child",))
    assert sub.get("shared", ResourceType.PROMPT) is top.get("shared", ResourceType.PROMPT)
    assert sub.get("mine", ResourceType.PROMPT).format_string() == "the child's"
    assert sub.owner("shared", ResourceType.CHAT_MODEL_CONNECTION) is top
    with pytest.raises(ResourceNotFoundError, match=r"'nowhere' in sub-agent 'child' or the "
                       r"agents above it \(sub-agent 'child' declares: mine; the agent "
                       r"declares: mine, shared\)"):
        sub.get("nowhere", ResourceType.PROMPT)
    with pytest.raises(ResourceNotFoundError):  # sub-agents: only the plan's own
        sub.get("child", ResourceType.AGENT)


def test_a_name_no_ancestor_declares_is_still_refused() -> None:
    """The plan check still names what neither the child nor its ancestors declare."""
    root, child = (ReActAgent(chat_model=ResourceDescriptor(
        clazz="flink_agents_py.compat.BaseChatModelSetup", connection=name))
        for name in ("shared", "nowhere"))
    root.add_resource("shared", ResourceType.CHAT_MODEL_CONNECTION, ResourceDescriptor(
        clazz="flink_agents_py.integrations.chat_models.ScriptedChatModel"))
    root.add_resource("child", ResourceType.AGENT, child)
    root.add_resource("nowhere", ResourceType.TOOL, ResourceDescriptor(
        clazz="flink_agents_py.compat.Tool"))  # another type: not the connection
    with pytest.raises(PlanError, match="sub-agent 'child': chat_model resource .* names "
                       "connection 'nowhere', which is not declared"):
        AgentPlan.from_agent(root)
