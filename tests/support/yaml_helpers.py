"""Importable functions, events and setups for tests/test_yaml.py (named by YAML paths)."""

from __future__ import annotations

from typing import Any, ClassVar

from flink_agents_py.api import (
    Agent,
    ChatMessage,
    ChatRequestEvent,
    ChatResponseEvent,
    DeferredSubagentSetup,
    Event,
    InputEvent,
    MessageRole,
    OutputEvent,
    PreparedCall,
    Resource,
    ResourceType,
    RunnerContext,
    SubagentResult,
    ToolCall,
    action,
)
from flink_agents_py.testing import ScriptedRequest


class ReviewDone(Event):
    """A custom event type, registered when this module is imported."""

    EVENT_TYPE: ClassVar[str] = "ReviewDone"
    product: str
    verdict: str


def lookup(product: str) -> str:
    """Look a product's facts up.

    Args:
        product: the product's name.
    """
    return f"{product}: sturdy, blue"


def script(request: ScriptedRequest) -> Any:
    """The scripted model: call ``lookup`` once, then answer with what it returned."""
    if request.tool_results:
        return f"verdict for {request.tool_results[-1].content}"
    if request.tools:
        product = request.last_user_text
        return ChatMessage(role=MessageRole.ASSISTANT, tool_calls=[
            ToolCall(id="t0", name="lookup", arguments={"product": product})])
    return f"plain answer to {request.last_user_text}"


# -- the orchestrator ------------------------------------------------------------------


def start(event: InputEvent, ctx: RunnerContext) -> None:
    ctx.sensory_memory.set("product", event.input["product"])
    ctx.send_event(ChatRequestEvent(
        model="review_model", messages=[ChatMessage(content=event.input["product"])],
        prompt_args={"product": event.input["product"]}))


async def answered(event: ChatResponseEvent, ctx: RunnerContext) -> None:
    verdict = event.response.message.content if event.response else f"error: {event.error}"
    ctx.send_event(ReviewDone(product=ctx.sensory_memory.get("product"), verdict=verdict))


async def finish(event: ReviewDone, ctx: RunnerContext) -> None:
    child = await ctx.submit_subagent("child", {"product": event.product})
    result = await child
    ctx.send_event(OutputEvent(output={
        "key": ctx.key, "verdict": event.verdict, "bonus": ctx.action_config.get("bonus"),
        "child": result.result if result.success else result.error_message,
    }))


# -- the child agent (an internal sub-agent) -------------------------------------------


def child_start(event: InputEvent, ctx: RunnerContext) -> None:
    ctx.send_event(OutputEvent(output={"tagged": event.input["product"].upper()}))


# -- misc ------------------------------------------------------------------------------


def echo(event: InputEvent, ctx: RunnerContext) -> None:
    ctx.send_event(OutputEvent(output={"key": ctx.key, "echo": event.input}))


async def call_shared(event: InputEvent, ctx: RunnerContext) -> None:
    result = await (await ctx.submit_subagent("remote_reviewer", event.input))
    ctx.send_event(OutputEvent(output={"key": ctx.key, "remote": result.result}))


async def call_tagger(event: InputEvent, ctx: RunnerContext) -> None:
    result = await (await ctx.submit_subagent("tagger", {"product": "x"}))
    ctx.send_event(OutputEvent(output={"key": ctx.key, "tagged": result.result}))


def not_an_action(event: InputEvent) -> None:
    """Takes one argument: not an action."""


NOT_CALLABLE = 42


class RemoteReviewSetup(DeferredSubagentSetup):
    """An external sub-agent answering in-process (no network)."""

    endpoint: str = "http://127.0.0.1:9000"

    def prepare(self, ctx: RunnerContext, input: Any, session_id: str,
                call_id: str) -> PreparedCall:
        def call() -> SubagentResult:
            return SubagentResult.ok({"reviewed": input, "by": self.endpoint})
        return call_id, call, None


class NotASetup:
    """A class that is not a sub-agent setup."""


# -- delegation from a chat model to a sub-agent (when ChatModelSetup has `subagents`) -


def delegate_script(request: ScriptedRequest) -> Any:
    """Call the ``_subagent_child`` callable once, then answer with its result."""
    if request.tool_results:
        return f"delegated: {request.tool_results[-1].content}"
    names = [t.name for t in request.tools]
    if "_subagent_child" not in names:
        return f"no sub-agent offered (tools: {names})"
    return ChatMessage(role=MessageRole.ASSISTANT, tool_calls=[
        ToolCall(id="d0", name="_subagent_child", arguments={"product": request.last_user_text})])


def ask_delegate(event: InputEvent, ctx: RunnerContext) -> None:
    ctx.send_event(ChatRequestEvent(model="delegating_model",
                                    messages=[ChatMessage(content=event.input["product"])]))


def reply(event: ChatResponseEvent, ctx: RunnerContext) -> None:
    ctx.send_event(OutputEvent(output={
        "key": ctx.key,
        "answer": event.response.message.content if event.response else f"error: {event.error}"}))


# -- an Agent class whose plan does not compile ------------------------------------------


class BrokenAgent(Agent):
    """An agent whose action does not take (event, ctx): its plan fails."""

    @action(InputEvent)
    @staticmethod
    def lonely(event: InputEvent) -> None:
        """One argument only."""


class FileServer(Resource):
    """A stand-in MCP server resource (declared only; never opened by the tests)."""

    RESOURCE_TYPE: ClassVar[ResourceType] = ResourceType.MCP_SERVER

    root: str
