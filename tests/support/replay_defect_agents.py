"""Agents of the replay defects of issue 14, one per kind, importable by name.

Each agent makes durable calls whose replay once went wrong (a result whose type changed after
a restore, a tool round lost to a failing conversion, a cancel skipped on replay so the next
call got its outcome, ...). The regression tests (``test_replay_defects.py``,
``test_replay_divergence.py``) use them, and ``SCENARIOS`` lists them for the crash-everywhere
checker (``flink_agents_py.testing.check_replay_safety``, run by ``test_crash_checker.py``).

Every fake is a pure function of its request: no wall clock, no state a rerun could see
differently. So a crash and restore at any point must give the fault-free outputs, with the
same types.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import json
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from flink_agents_py.api import (
    Agent,
    AsyncSubagentSetup,
    ChatMessage,
    ChatModelSetup,
    DeferredSubagentSetup,
    FunctionTool,
    InputEvent,
    InternalSubagent,
    MessageRole,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    RunStatus,
    SubagentResult,
    ToolCall,
    action,
)
from flink_agents_py.integrations.chat_models import ScriptedChatModel

OBJECT_SCHEMA = '{"type": "object", "properties": {"n": {"type": "integer"}}}'
WHEN = datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)


# -- rich result types ---------------------------------------------------------------------
class Verdict(BaseModel):
    """A result type: a pydantic model."""

    score: int
    label: str


class Color(enum.Enum):
    RED = "red"


@dataclasses.dataclass
class Stamp:
    """A dataclass holding a datetime and an enum."""

    at: datetime.datetime
    color: Color


class Envelope(BaseModel):
    """A model whose ``Any`` field holds richer values than JSON (kept by no schema)."""

    payload: Any
    tags: tuple[str, ...] = ()


def shape(value: Any) -> Any:
    """The type tree of ``value`` (``{"dict": {...}}``, ``["list", ...]``, type names)."""
    if isinstance(value, dict):
        return {"dict": {k: shape(v) for k, v in value.items()}}
    if isinstance(value, (list, tuple)):
        return [type(value).__name__, *[shape(v) for v in value]]
    if isinstance(value, BaseModel):
        return {type(value).__name__: {k: shape(getattr(value, k))
                                       for k in type(value).model_fields}}
    return type(value).__name__


def rich_value(what: str) -> Any:
    """The rich value named ``what`` (a pure function of its argument)."""
    return {
        "model": Verdict(score=4, label="good"),
        "dataclass": Stamp(at=WHEN, color=Color.RED),
        "enum": Color.RED,
        "datetime": WHEN,
        "tuple": (1, "two"),
        "nested": {"verdicts": [Verdict(score=1, label="bad")], "at": WHEN},
    }[what]


def envelope(n: int) -> Envelope:
    """A durable function returning a model whose ``Any`` field holds a model and a datetime."""
    return Envelope(payload={"verdict": Verdict(score=n, label="x"), "at": WHEN, "pair": (n, n)},
                    tags=("a", "b"))


def echo(tag: str) -> str:
    """A durable function: a pure function of its argument."""
    return f"done-{tag}"


# -- sub-agent setups ----------------------------------------------------------------------
class RichRemote(DeferredSubagentSetup):
    """A deferred sub-agent returning ``rich_value(input["what"])``."""

    def prepare(self, ctx: RunnerContext, input: Any, session_id: str, call_id: str):
        if isinstance(input, dict) and input.get("prepare") == "raise":
            raise ConnectionError("cannot reach the remote")

        def call() -> SubagentResult:
            return SubagentResult.ok(rich_value(input["what"]))

        return f"{session_id}#{call_id}", call, None


class RichPubsub(AsyncSubagentSetup):
    """An async sub-agent whose runs complete at once with ``{"verdict": Verdict}``."""

    def call_submit_request(self, session_id: str, call_id: str, input: Any) -> None:
        """Nothing to store: the run's result is a function of the call."""

    def call_query_status(self, session_id: str, call_id: str) -> RunStatus:
        return RunStatus.completed()

    def call_fetch_result(self, session_id: str, call_id: str) -> SubagentResult:
        return SubagentResult.ok({"verdict": Verdict(score=5, label="async"), "at": WHEN})

    def call_cancel_request(self, session_id: str, call_id: str) -> None:
        """Cancelling is idempotent and has nothing to undo here."""


class ModelChild(Agent):
    """An internal sub-agent whose outputs hold a pydantic model, a dataclass, an enum."""

    @action(InputEvent)
    @staticmethod
    def run(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output=Verdict(score=3, label="child")))
        ctx.send_event(OutputEvent(output={"stamp": Stamp(at=WHEN, color=Color.RED),
                                           "color": Color.RED, "at": WHEN}))


def nested(depth: int) -> Any:
    """``{"next": {"next": ... "leaf"}}``, ``depth`` levels deep."""
    value: Any = "leaf"
    for _ in range(depth):
        value = {"next": value}
    return value


class Behaving(DeferredSubagentSetup):
    """A deferred sub-agent answering by its ``behaviour``: ``verdict``, ``deep300``,
    ``abyss`` (too deep for the interpreter's stack)."""

    behaviour: str = "verdict"

    def prepare(self, ctx: RunnerContext, input: Any, session_id: str, call_id: str):
        behaviour = self.behaviour

        def call() -> SubagentResult:
            if behaviour == "deep300":
                return SubagentResult.ok(nested(300))
            if behaviour == "abyss":
                return SubagentResult.ok(nested(100_000))
            return SubagentResult.ok({"score": 4, "label": "good", "extra": "dropped"})

        return f"{session_id}#{call_id}", call, None


class NotAModel:
    """A class pydantic cannot build a schema for."""

    def __init__(self, x: int) -> None:
        self.x = x


class UnbuildableResult(Behaving):
    """Declares a result type pydantic cannot build."""

    def result_type(self) -> type | None:
        return NotAModel


class DeepTyped(Behaving):
    """Declares ``dict``: pydantic's serializer stops at 255 levels, the result is deeper."""

    def result_type(self) -> type | None:
        return dict


class TypedVerdict(Behaving):
    """Declares ``Verdict``: extra fields are dropped."""

    def result_type(self) -> type | None:
        return Verdict


# -- scripted chat models ------------------------------------------------------------------
def tool_calls(*calls: tuple[str, str, dict[str, Any]]) -> ChatMessage:
    """An assistant message calling ``(id, name, arguments)`` tools."""
    return ChatMessage(role=MessageRole.ASSISTANT, tool_calls=[
        ToolCall(id=i, name=n, arguments=a) for i, n, a in calls])


def delegating_script(request: Any) -> Any:
    """Turn 1: delegate to four sub-agents and call a tool at once; turn 2: answer with
    ``{call id: tool message content}``."""
    if not request.tool_results:
        return tool_calls(("u", "_subagent_unbuildable", {"n": 1}),
                          ("d", "_subagent_deep300", {"n": 2}),
                          ("a", "_subagent_abyss", {"n": 3}),
                          ("t", "_subagent_typed", {"n": 4}),
                          ("s", "add", {"a": 2, "b": 3}))
    return json.dumps({m.tool_call_id: m.content for m in request.tool_results}, sort_keys=True)


def prefixed_function_script(request: Any) -> Any:
    """Turn 1: call the tool offered as ``style_lookup``; turn 2: answer with its result."""
    if not request.tool_results:
        names = [t.name for t in request.tools]
        return tool_calls(("1", names[0], {"sku": "B01"}))
    return f"{request.tools[0].name}={request.tool_results[0].content}"


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def _subagent_style_lookup(sku: str) -> dict[str, Any]:
    """Look a sku up (a function whose own name carries the reserved prefix)."""
    return {"sku": sku, "style": "plain"}


class SneakyTool(FunctionTool):
    """A tool class whose default name carries the reserved prefix."""

    name: str = "_subagent_sneaky"


class Orchestrator(Agent):
    """Asks chat model ``om`` about the input; outputs the answer (or the chat's error)."""

    @action(InputEvent)
    @staticmethod
    async def ask(event: InputEvent, ctx: RunnerContext) -> None:
        try:
            r = await ctx.chat("om", [ChatMessage(content=json.dumps(event.input))])
        except Exception as e:  # noqa: BLE001 - the chat's failure is the output
            ctx.send_event(OutputEvent(output={"answer": None, "error": str(e)}))
            return
        ctx.send_event(OutputEvent(output={"answer": r.message.content, "error": None}))


def _scripted(function: str) -> ResourceDescriptor:
    return ResourceDescriptor(ScriptedChatModel,
                              function=f"support.replay_defect_agents:{function}")


# -- the agents -----------------------------------------------------------------------------
class RichResultsParent(Agent):
    """Awaits an internal, a deferred and an async sub-agent whose results hold rich types,
    and a durable function returning a model whose ``Any`` field holds a model; outputs the
    values with their type trees (equal live and after any restore)."""

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        what = event.input["what"]
        internal = await (await ctx.submit_subagent("child", {"n": 1}))
        deferred = await (await ctx.submit_subagent("remote", {"what": what}))
        remote = await (await ctx.submit_subagent("pubsub", {"n": 2}))
        env = await ctx.durable_execute_async(envelope, 7)
        got = {"internal": internal.result, "deferred": deferred.result,
               "async": remote.result, "envelope": env.model_dump(mode="json")}
        ctx.send_event(OutputEvent(output={
            "what": what, "values": got,
            "types": {k: shape(v) for k, v in {**got, "envelope": env}.items()}}))


def rich_results() -> Agent:
    """``RichResultsParent`` with its three sub-agents."""
    agent = RichResultsParent()
    agent.add_resource("child", ResourceType.AGENT,
                       ResourceDescriptor(InternalSubagent, agent=ModelChild))
    agent.add_resource("remote", ResourceType.AGENT, ResourceDescriptor(RichRemote))
    agent.add_resource("pubsub", ResourceType.AGENT,
                       ResourceDescriptor(RichPubsub, status_poll_interval_millis=1))
    return agent


def delegation_failures() -> Agent:
    """A chat whose tool round delegates to sub-agents whose results cannot be converted
    (a declared type pydantic cannot build, a result deeper than pydantic serializes, one
    deeper than the stack) beside a good delegation and a plain tool: every sibling result
    reaches the model, and the chat answers."""
    agent = Orchestrator()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, _scripted("delegating_script"))
    agent.add_resource("add", ResourceType.TOOL, add)
    for name, cls, behaviour in (("unbuildable", UnbuildableResult, "verdict"),
                                 ("deep300", DeepTyped, "deep300"),
                                 ("abyss", Behaving, "abyss"),
                                 ("typed", TypedVerdict, "verdict")):
        agent.add_resource(name, ResourceType.AGENT, ResourceDescriptor(
            cls, behaviour=behaviour, input_schema=OBJECT_SCHEMA))
    agent.add_resource("om", ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="conn", tools=["add"],
        subagents=["unbuildable", "deep300", "abyss", "typed"]))
    return agent


class CancelThenCall(Agent):
    """Cancels a sub-agent call (awaited or not, per ``input["await"]``), then makes another
    durable call: that call gets its own result on every path, never the cancel's."""

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        name = event.input["subagent"]
        handle = await ctx.submit_subagent(name, {"what": "model", "n": 1})
        if event.input["await"]:
            await handle.cancel()
        else:
            handle.cancel()  # not awaited: takes effect all the same
        after = await ctx.durable_execute_async(echo, "after")
        result = await handle
        again = await ctx.durable_execute_async(echo, "again")
        ctx.send_event(OutputEvent(output={
            "subagent": name, "after": after, "again": again,
            "cancelled": result.cancelled, "success": result.success}))


def cancel_then_call() -> Agent:
    """``CancelThenCall`` with an async, a deferred and an internal sub-agent."""
    agent = CancelThenCall()
    agent.add_resource("pubsub", ResourceType.AGENT,
                       ResourceDescriptor(RichPubsub, status_poll_interval_millis=1))
    agent.add_resource("remote", ResourceType.AGENT, ResourceDescriptor(RichRemote))
    agent.add_resource("child", ResourceType.AGENT,
                       ResourceDescriptor(InternalSubagent, agent=ModelChild))
    return agent


class RefusalsThenCall(Agent):
    """A refused submit (unknown name), a deferred call whose ``prepare`` raises, then a
    durable call: the refusal and the failure are recorded, the call gets its own result."""

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        refused = await (await ctx.submit_subagent("nope", {"n": 1}))
        try:
            await (await ctx.submit_subagent("remote", {"prepare": "raise"}))
            prepared = "no error"
        except ConnectionError as e:
            prepared = f"ConnectionError: {e}"
        after = await ctx.durable_execute_async(echo, "after")
        ctx.send_event(OutputEvent(output={
            "refused": refused.error_message, "prepare": prepared, "after": after}))


def refusals_then_call() -> Agent:
    """``RefusalsThenCall`` with its deferred sub-agent."""
    agent = RefusalsThenCall()
    agent.add_resource("remote", ResourceType.AGENT, ResourceDescriptor(RichRemote))
    return agent


def prefixed_function_with_name() -> Agent:
    """A tool whose function is named ``_subagent_...`` but offered under an explicit name
    (accepted: only the offered name is reserved); the model calls it by that name."""
    agent = Orchestrator()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION,
                       _scripted("prefixed_function_script"))
    agent.add_resource("style_lookup", ResourceType.TOOL, FunctionTool.from_function(
        _subagent_style_lookup, name="style_lookup"))
    agent.add_resource("om", ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="conn", tools=["style_lookup"]))
    return agent


class ChatInChild(Agent):
    """Echoes its input (a sub-agent offered by its input type)."""

    @action(InputEvent)
    @staticmethod
    def run(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output={"got": event.input}))


class Ask(BaseModel):
    """A shape-bearing input type: the sub-agent's schema is derived from it."""

    n: int
    note: str = ""


def typed_input_script(request: Any) -> Any:
    """Turn 1: delegate to ``typed_child``; turn 2: answer with its result."""
    if not request.tool_results:
        assert request.tools[0].parameters["required"] == ["n"], request.tools
        return tool_calls(("1", "_subagent_typed_child", {"n": 5}))
    return request.tool_results[0].content


def typed_input_subagent() -> Agent:
    """A sub-agent offered by its declared input type (contract 2's usable case)."""
    agent = Orchestrator()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, _scripted("typed_input_script"))
    agent.add_resource("typed_child", ResourceType.AGENT, ResourceDescriptor(
        InternalSubagent, agent=ChatInChild, input_type="support.replay_defect_agents:Ask"))
    agent.add_resource("om", ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="conn", subagents=["typed_child"]))
    return agent


SCENARIOS: list[tuple[str, Callable[[], Agent], list[Any]]] = [
    ("sub-agent results with rich types", rich_results,
     [{"key": "a", "what": w} for w in ("model", "dataclass", "enum")]
     + [{"key": "b", "what": w} for w in ("datetime", "tuple", "nested")]),
    ("declared result types that fail to convert", delegation_failures,
     [{"key": "a", "ask": "go"}, {"key": "b", "ask": "again"}]),
    ("cancel then call", cancel_then_call,
     [{"key": s, "subagent": s, "await": a}
      for s in ("pubsub", "remote", "child") for a in (True, False)]),
    ("refusals then call", refusals_then_call, [{"key": "a"}, {"key": "b"}]),
    ("reserved-prefix function under an explicit name", prefixed_function_with_name,
     [{"key": "a", "ask": "style?"}]),
    ("sub-agent offered by its input type", typed_input_subagent, [{"key": "a", "ask": "n?"}]),
]
"""``(name, agent factory, input records)`` of each defect kind, for the crash checker."""
