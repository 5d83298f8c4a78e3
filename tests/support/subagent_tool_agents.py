"""Agents, scripted models, tools and sub-agent setups of the sub-agents-as-tools tests.

Importable by name (``subagent_tool_agents:...``), so scripted model functions and external
sub-agent setups can be named in descriptors, and by Flink workers (the MiniCluster test).

Fast tests steer the scripted model per test: ``SCRIPTS[model]`` is the script of the chat
model setup whose ``model`` field is ``model``, and every request it gets is kept in
``requests()[model]``. Deferred sub-agents pick a behaviour by name from ``BEHAVIOURS`` (their
``behaviour`` field), and count what they receive (the test's ``probes`` counts, and
``inputs()``). Gates and start signals are the test's probes gates (``support.probes``).

The Flink test uses only pure functions of the request (``e2e_orchestrator``), since
workers do not share this process's globals.
"""

from __future__ import annotations

import collections
import dataclasses
import threading
import time
from collections.abc import Callable
from typing import Any

import orjson
from pydantic import BaseModel, Field

from flink_agents_py.api import (
    Agent,
    ChatMessage,
    ChatModelSetup,
    ChatRequestEvent,
    ChatResponseEvent,
    DeferredSubagentSetup,
    InputEvent,
    InternalSubagent,
    MessageRole,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    SubagentResult,
    ToolCall,
    action,
    chat_model_connection,
)
from flink_agents_py.integrations.chat_models import ScriptedChatModel
from support.probes import count as probe_count
from support.probes import current, gate, store
from support.tool_messages import tool_value

# -- per-test steering and recording --------------------------------------------------------
SCRIPTS: dict[str, Callable[[Any], Any]] = {}
RENDEZVOUS_TIMEOUT_S = 2.0


def requests() -> dict[str, list[Any]]:
    """The requests each scripted model got in this test, by model."""
    return store("requests", lambda: collections.defaultdict(list))


def inputs() -> dict[str, list[Any]]:
    """The values counted with ``count(name, value)`` in this test, by name."""
    return store("inputs", lambda: collections.defaultdict(list))


def started(name: str) -> threading.Event:
    """Set when ``name`` started (a rendezvous or a blocking call)."""
    return gate(f"started:{name}")


def reset() -> None:
    """Forget every script, and this test's requests, counts and inputs so far."""
    SCRIPTS.clear()
    current().reset()
    requests().clear()
    inputs().clear()


def count(name: str, value: Any = None) -> int:
    """Count one call of ``name`` (and keep ``value`` in ``inputs()[name]``)."""
    if value is not None:
        inputs()[name].append(value)
    return probe_count(name)


def script(request: Any) -> Any:
    """The scripted model: records the request, answers by ``SCRIPTS[request.model]``."""
    requests()[request.model].append(request)
    return SCRIPTS[request.model](request)


def calls(*tool_calls: tuple[str, str, dict[str, Any]]) -> ChatMessage:
    """An assistant message calling ``(id, name, arguments)`` tools."""
    return ChatMessage(role=MessageRole.ASSISTANT, tool_calls=[
        ToolCall(id=i, name=n, arguments=a) for i, n, a in tool_calls])


def results_by_id(request: Any) -> dict[str, str]:
    """``{tool_call_id: content}`` of the tool messages answering the last tool round."""
    return {m.tool_call_id: m.content for m in request.tool_results}


# -- types --------------------------------------------------------------------------------
class Item(BaseModel):
    sku: str
    qty: int = 1


class ReviewTask(BaseModel):
    """A review to rate."""

    review: str
    product: str = Field(description="product id")
    attachment: bytes
    thumbnail: bytes = b""
    items: list[Item] = []
    rating_hint: int | None = None


list_of_items = list[Item]
"""An input type whose schema is an array, not an object."""


class Other(BaseModel):
    """An input type that an explicit schema overrides."""

    ignored: int


class Node(BaseModel):
    """Self-referential: chat models cannot take it."""

    label: str
    children: list[Node] = []


@dataclasses.dataclass
class WithCallback:
    """A field pydantic cannot render as JSON Schema."""

    name: str
    callback: Callable[[int], int]


class Verdict(BaseModel):
    """A declared result type."""

    score: int
    label: str


# -- tools --------------------------------------------------------------------------------
def lookup(q: str) -> dict[str, Any]:
    """Look a product up.

    Args:
        q: what to look for.
    """
    count("tool:lookup", q)
    return {"q": q, "found": True}


def x(n: int) -> dict[str, Any]:
    """The tool named x (a sub-agent is named x too)."""
    count("tool:x", n)
    return {"tool_x": n}


def shout(text: str) -> str:
    """Upper-case text."""
    count("tool:shout", text)
    return text.upper()


def gated(name: str) -> dict[str, str]:
    """A tool that waits for the gate ``name`` (at most 10 s)."""
    count("tool:gated", name)
    gate(name).wait(10)
    return {"gated": name}


# -- internal sub-agents ------------------------------------------------------------------
class Echo(Agent):
    """Emits what it got."""

    @action(InputEvent)
    @staticmethod
    def run(event: InputEvent, ctx: RunnerContext) -> None:
        count("child:echo", event.input)
        ctx.send_event(OutputEvent(output={"got": event.input}))


class TwoOutputs(Agent):
    """Emits two outputs."""

    @action(InputEvent)
    @staticmethod
    def run(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output={"part": 1, "of": event.input}))
        ctx.send_event(OutputEvent(output={"part": 2, "score": 4}))


class Picky(Agent):
    """Fails unless its input has a ``review`` field."""

    @action(InputEvent)
    @staticmethod
    def run(event: InputEvent, ctx: RunnerContext) -> None:
        count("child:picky", event.input)
        if "review" not in event.input:
            raise ValueError("picky needs a 'review' field")
        ctx.send_event(OutputEvent(output={"rated": event.input["review"]}))


def _rendezvous(me: str, other: str) -> dict[str, Any]:
    """Announce ``me`` started, then wait (bounded) for ``other`` to have started."""
    started(me).set()
    return {"me": me, "saw_other": started(other).wait(RENDEZVOUS_TIMEOUT_S)}


class Rendezvous(Agent):
    """Waits, in a durable call, for its peer sub-agent to have started."""

    @action(InputEvent)
    @staticmethod
    async def run(event: InputEvent, ctx: RunnerContext) -> None:
        out = await ctx.durable_execute_async(_rendezvous, event.input["me"], event.input["other"])
        ctx.send_event(OutputEvent(output=out))


def _block(name: str) -> str:
    count(f"block:{name}")
    started(name).set()
    gate(name).wait(10)
    return name


class Blocking(Agent):
    """Signals ``started(input.name)``, then waits for the gate ``input.name``."""

    @action(InputEvent)
    @staticmethod
    async def run(event: InputEvent, ctx: RunnerContext) -> None:
        out = await ctx.durable_execute_async(_block, event.input["name"])
        ctx.send_event(OutputEvent(output={"blocked": out}))


def _count_inner(value: Any) -> int:
    return count("inner:durable", value)


class Counting(Agent):
    """Counts its runs in a durable call."""

    @action(InputEvent)
    @staticmethod
    async def run(event: InputEvent, ctx: RunnerContext) -> None:
        n = await ctx.durable_execute_async(_count_inner, event.input)
        ctx.send_event(OutputEvent(output={"inner": event.input, "n": n}))


# -- deferred (external) sub-agents -------------------------------------------------------
BEHAVIOURS: dict[str, Callable[[str, Any], SubagentResult]] = {}


def behaviour(fn: Callable[[str, Any], SubagentResult]) -> Callable[[str, Any], SubagentResult]:
    BEHAVIOURS[fn.__name__] = fn
    return fn


@behaviour
def echo(name: str, value: Any) -> SubagentResult:
    return SubagentResult.ok({"echo": value})


@behaviour
def verdict_plus(name: str, value: Any) -> SubagentResult:
    return SubagentResult.ok({"score": 4, "label": "good", "secret": "not for the model",
                              "debug": [1, 2]})


@behaviour
def not_a_verdict(name: str, value: Any) -> SubagentResult:
    return SubagentResult.ok({"score": "high"})


@behaviour
def refuse_without_review(name: str, value: Any) -> SubagentResult:
    if "review" not in value:
        return SubagentResult.failed("input must carry a 'review' field")
    return SubagentResult.ok({"rated": value["review"]})


@behaviour
def rendezvous(name: str, value: Any) -> SubagentResult:
    return SubagentResult.ok(_rendezvous(value["me"], value["other"]))


@behaviour
def slow_echo(name: str, value: Any) -> SubagentResult:
    time.sleep(0.05)
    return SubagentResult.ok({"echo": value})


BAD_RESULTS: dict[str, Callable[[], Any]] = {}


@behaviour
def bad(name: str, value: Any) -> SubagentResult:
    """Return the bad value ``BAD_RESULTS[value['case']]()``."""
    return SubagentResult.ok(BAD_RESULTS[value["case"]]())


class Remote(DeferredSubagentSetup):
    """A deferred sub-agent answering by ``BEHAVIOURS[behaviour]``; counts its calls."""

    behaviour: str = "echo"

    def prepare(self, ctx: RunnerContext, input: Any, session_id: str, call_id: str):
        name = self.resource_name
        count(f"prepare:{name}")

        def call() -> SubagentResult:
            count(f"deferred:{name}", input)
            return BEHAVIOURS[self.behaviour](name, input)

        return f"{session_id}#{call_id}", call, None


class TypedRemote(Remote):
    """A deferred sub-agent declaring ``Verdict`` as its result type."""

    def result_type(self) -> type | None:
        return Verdict


# -- the orchestrator ---------------------------------------------------------------------
class Orchestrator(Agent):
    """Asks chat model ``om`` (added per test) what the input's ``ask`` says; emits the answer.

    Output: ``{"answer": content or None, "error": ChatResponseEvent.error}``.
    """

    @chat_model_connection
    @staticmethod
    def conn() -> ResourceDescriptor:
        return ResourceDescriptor(ScriptedChatModel, function="support.subagent_tool_agents:script")

    @action(InputEvent)
    @staticmethod
    def ask(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(ChatRequestEvent(
            model="om", messages=[ChatMessage(content=event.input["ask"])]))

    @action(ChatResponseEvent)
    @staticmethod
    def answer(event: ChatResponseEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output={
            "answer": event.response.message.content if event.response else None,
            "error": event.error}))


def orchestrator(*, tools: list[str] = (), subagents: list[str] = (), prompt: str | None = None,
                 tool_dispatch: str = "concurrent", model: str = "orch",
                 **resources: tuple[ResourceType, Any]) -> Orchestrator:
    """An ``Orchestrator`` whose ``om`` setup offers ``tools`` and ``subagents``.

    ``resources`` maps a resource name to ``(type, value)``; tools named in ``tools`` and
    not in ``resources`` are taken from this module.
    """
    agent = Orchestrator()
    agent.add_resource("om", ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="conn", model=model, tools=list(tools),
        subagents=list(subagents), prompt=prompt, tool_dispatch=tool_dispatch))
    for t in dict.fromkeys(tools):
        if t not in resources or resources[t][0] is not ResourceType.TOOL:
            agent.add_resource(t, ResourceType.TOOL, globals()[t])
    for name, (rtype, value) in resources.items():
        agent.add_resource(name, rtype, value)
    return agent


def internal(agent: Any, **kw: Any) -> tuple[ResourceType, ResourceDescriptor]:
    return ResourceType.AGENT, ResourceDescriptor(InternalSubagent, agent=agent, **kw)


def deferred(behaviour: str = "echo", cls: type = Remote,
             **kw: Any) -> tuple[ResourceType, ResourceDescriptor]:
    return ResourceType.AGENT, ResourceDescriptor(cls, behaviour=behaviour, **kw)


OBJECT_SCHEMA = '{"type": "object", "properties": {"text": {"type": "string"}}}'


# -- the MiniCluster scenario (pure functions of the request) ------------------------------
class ReviewerIn(BaseModel):
    """What the reviewer sub-agent takes."""

    text: str


def e2e_reviewer_script(request: Any) -> Any:
    """The reviewer's own model: 5 for 'great', else 2."""
    return {"score": 5 if "great" in request.last_user_text else 2}


class E2EReviewer(Agent):
    """An internal sub-agent with its own chat model: rates ``input.text``."""

    @chat_model_connection
    @staticmethod
    def rconn() -> ResourceDescriptor:
        return ResourceDescriptor(ScriptedChatModel,
                                  function="support.subagent_tool_agents:e2e_reviewer_script")

    @action(InputEvent)
    @staticmethod
    async def rate(event: InputEvent, ctx: RunnerContext) -> None:
        r = await ctx.chat("rm", [ChatMessage(content=event.input["text"])],
                           output_schema={"type": "object"})
        ctx.send_event(OutputEvent(output={"score": r.structured["score"]}))


class E2ECatalog(DeferredSubagentSetup):
    """An external (deferred) sub-agent: a product catalog."""

    def prepare(self, ctx: RunnerContext, input: Any, session_id: str, call_id: str):
        def call() -> SubagentResult:
            return SubagentResult.ok({"product": input["sku"], "price": 42.5, "extra": None})

        return f"{session_id}#{call_id}", call, None


def e2e_stock(sku: str) -> dict[str, Any]:
    """Units in stock for a sku."""
    return {"sku": sku, "units": len(sku)}


def e2e_orchestrator(request: Any) -> Any:
    """Turn 1: call reviewer, catalog and stock at once; turn 2: answer from their results."""
    task = orjson.loads(request.last_user_text)
    if not request.tool_results:
        assert [t.name for t in request.tools] == [
            "e2e_stock", "_subagent_reviewer", "_subagent_catalog"], request.tools
        return calls(("r", "_subagent_reviewer", {"text": task["review"]}),
                     ("c", "_subagent_catalog", {"sku": task["sku"]}),
                     ("s", "e2e_stock", {"sku": task["sku"]}))
    got = {m.tool_call_id: tool_value(m) for m in request.tool_results}
    return {"key": task["key"], "score": got["r"][0]["score"], "price": got["c"]["price"],
            "units": got["s"]["units"]}


class E2EOrchestrator(Agent):
    """Asks its model about the input; the model delegates, then answers."""

    @chat_model_connection
    @staticmethod
    def oconn() -> ResourceDescriptor:
        return ResourceDescriptor(ScriptedChatModel,
                                  function="support.subagent_tool_agents:e2e_orchestrator")

    @action(InputEvent)
    @staticmethod
    async def ask(event: InputEvent, ctx: RunnerContext) -> None:
        r = await ctx.chat("om", [ChatMessage(content=orjson.dumps(event.input).decode())])
        ctx.send_event(OutputEvent(output=orjson.loads(r.message.content)))


def build_e2e() -> E2EOrchestrator:
    reviewer = E2EReviewer()
    reviewer.add_resource("rm", ResourceType.CHAT_MODEL,
                          ResourceDescriptor(ChatModelSetup, connection="rconn"))
    agent = E2EOrchestrator()
    agent.add_resource("e2e_stock", ResourceType.TOOL, e2e_stock)
    agent.add_resource("reviewer", ResourceType.AGENT, ResourceDescriptor(
        InternalSubagent, agent=reviewer, description="Rates a review.",
        input_type="support.subagent_tool_agents:ReviewerIn"))
    agent.add_resource("catalog", ResourceType.AGENT, ResourceDescriptor(
        "support.subagent_tool_agents.E2ECatalog", description="Looks a sku up.",
        input_schema='{"type": "object", "properties": {"sku": {"type": "string"}}, '
                     '"required": ["sku"]}'))
    agent.add_resource("om", ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="oconn", tools=["e2e_stock"],
        subagents=["reviewer", "catalog"]))
    return agent
