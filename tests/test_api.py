"""Public API: events, decorators, tools, prompts, resource descriptors, errors."""

from __future__ import annotations

import pydantic
import pytest

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    ActionError,
    ActionSpec,
    Agent,
    AgentsError,
    ChatMessage,
    ChatModelSetup,
    ChatRequestEvent,
    ChatResponse,
    ChatResponseError,
    ChatResponseEvent,
    DurableExecutionError,
    Event,
    FunctionTool,
    InputEvent,
    MessageRole,
    NotInActionContextError,
    OutputEvent,
    PlanError,
    Prompt,
    ProviderError,
    ResourceDescriptor,
    ResourceError,
    ResourceNotFoundError,
    ResourceType,
    RunnerContext,
    SerializationError,
    ToolCall,
    ToolRequestEvent,
    ToolResponseEvent,
    ToolResult,
    UnsupportedAwaitError,
    action,
    tool,
)
from flink_agents_py.api._events import event_class_for, event_from_json, event_type_of
from flink_agents_py.api._prompts import fill_placeholders

# --------------------------------------------------------------------------- events


class ReviewScored(Event):
    score: int
    reasons: list[str] = []


class Renamed(Event):
    EVENT_TYPE = "acme.renamed"
    new_name: str


def test_builtin_event_type_constants():
    assert InputEvent.EVENT_TYPE == "InputEvent"
    assert OutputEvent.EVENT_TYPE == "OutputEvent"
    assert ChatRequestEvent.EVENT_TYPE == "ChatRequestEvent"
    assert ChatResponseEvent.EVENT_TYPE == "ChatResponseEvent"
    assert ToolRequestEvent.EVENT_TYPE == "ToolRequestEvent"
    assert ToolResponseEvent.EVENT_TYPE == "ToolResponseEvent"
    # an instance carries its class's type without being told
    assert InputEvent(input=1).type == "InputEvent"
    assert OutputEvent(output=1).type == "OutputEvent"
    assert event_type_of(InputEvent) == "InputEvent"
    assert event_type_of("Whatever") == "Whatever"
    with pytest.raises(TypeError):
        event_type_of(42)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "event",
    [
        InputEvent(id="i1", input={"text": "hi", "n": [1, 2.5, None]}),
        OutputEvent(output="done", attributes={"a": 1}),
        ChatRequestEvent(
            model="m",
            messages=[ChatMessage(role=MessageRole.SYSTEM, content="be brief"),
                      ChatMessage(content="hello")],
            prompt_args={"x": 1},
            output_schema={"type": "object"},
        ),
        ChatResponseEvent(
            request_id="r0/a/e0",
            response=ChatResponse(
                message=ChatMessage(role=MessageRole.ASSISTANT, content="ok",
                                    tool_calls=[ToolCall(id="c1", name="t", arguments={"q": 1})]),
                finish_reason="tool_calls",
            ),
        ),
        ChatResponseEvent(request_id="r1", error="boom"),
        ToolRequestEvent(model="m", tool_calls=[ToolCall(id="c1", name="t", arguments={"a": 1})]),
        ToolResponseEvent(
            request_id="q",
            responses={"c1": ToolResult(call_id="c1", name="t", content={"v": 1}),
                       "c2": ToolResult(call_id="c2", name="u", ok=False, error="bad")},
        ),
        ReviewScored(score=4, reasons=["fast"]),
        Renamed(new_name="x"),
        Event(type="AdHoc", attributes={"k": [1, {"z": "y"}]}),
    ],
    ids=lambda e: e.type,
)
def test_event_json_round_trip_keeps_class_and_fields(event):
    data = event.to_json()
    assert data["type"] == event.type
    back = event_from_json(data)
    assert type(back) is type(event)
    assert back == event
    assert back.to_json() == data


def test_user_event_subclass_type_and_registry():
    assert ReviewScored.EVENT_TYPE == "ReviewScored"
    assert ReviewScored(score=1).type == "ReviewScored"
    assert event_class_for("ReviewScored") is ReviewScored
    # an explicit EVENT_TYPE is the routing type
    assert Renamed(new_name="a").type == "acme.renamed"
    assert event_class_for("acme.renamed") is Renamed
    assert event_type_of(Renamed) == "acme.renamed"
    # an unknown type string maps to the plain Event class
    assert event_class_for("NeverDeclared") is Event


def test_user_event_rejects_foreign_type_and_keeps_unknown_fields_as_attributes():
    # a class with an EVENT_TYPE of its own keeps it; one without takes the type it is given
    # (Flink Agents 0.3's events require one: ``MyEvent(type="my_event", value=...)``)
    with pytest.raises(pydantic.ValidationError):
        Renamed(type="SomethingElse", new_name="a")
    assert ReviewScored(type="SomethingElse", score=1).type == "SomethingElse"
    # Flink Agents' events take keywords they do not declare (``extra="allow"``): kept as
    # attributes, read and set as fields (they were refused before this port found it)
    extra = ReviewScored(score=1, source="web")  # type: ignore[call-arg]
    assert extra.source == "web" and extra.attributes == {"source": "web"}  # type: ignore[attr-defined]
    extra.seen = True  # type: ignore[attr-defined]
    assert extra.get_attr("seen") is True
    assert ReviewScored.model_validate_json(extra.model_dump_json()).source == "web"  # type: ignore[attr-defined]
    with pytest.raises(TypeError, match="once"):
        ReviewScored(score=1, source="a", attributes={"source": "b"})  # type: ignore[call-arg]
    with pytest.raises(pydantic.ValidationError):
        ReviewScored(score="high")  # a declared field keeps its type
    with pytest.raises(pydantic.ValidationError):
        ReviewScored()  # type: ignore[call-arg]  # required field missing
    with pytest.raises(pydantic.ValidationError):
        InputEvent(input=1, not_a_field=2)  # type: ignore[call-arg]  # a built-in refuses


def test_adhoc_event_needs_a_type():
    with pytest.raises(pydantic.ValidationError, match="type"):
        Event()
    with pytest.raises(pydantic.ValidationError):
        Event(type="")
    e = Event(type="ReviewFlagged", attributes={"why": "spam"})
    assert e.type == "ReviewFlagged"
    assert e.attributes == {"why": "spam"}


def test_events_are_frozen():
    e = InputEvent(input={"a": 1})
    with pytest.raises(pydantic.ValidationError):
        e.input = 2  # type: ignore[misc]
    e.id = "other"  # Flink Agents' typed copies take the id of what they copy
    assert e.id == "other" and e.input == {"a": 1}
    # a program's own event, built and not sent, takes a field (Flink Agents' events are
    # mutable), validated; one with an id it was sent under (or received with) refuses it
    r = ReviewScored(score=1)
    r.score = 2
    assert r.score == 2 and r.model_dump()["score"] == 2
    with pytest.raises(pydantic.ValidationError):
        r.score = "many"
    assert r.score == 2
    r.id = "r0/start/e0"
    with pytest.raises(pydantic.ValidationError, match="sent or received"):
        r.score = 3
    assert r.score == 2


# --------------------------------------------------------------------------- @action


class TwoKinds(Agent):
    @action(InputEvent, config={"factor": 3})
    @staticmethod
    def plain(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(ReviewScored(score=event.input["n"] * ctx.action_config["factor"]))

    @action(ReviewScored, "acme.renamed")
    @staticmethod
    async def asynchronous(event: Event, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output={"key": ctx.key, "score": event.score}))


def test_action_decorator_attaches_spec_and_returns_function():
    fn = TwoKinds.__dict__["plain"]
    assert isinstance(fn, staticmethod)
    spec = fn.__func__.__action_spec__
    assert isinstance(spec, ActionSpec)
    assert spec.triggers == ("InputEvent",)
    assert spec.config == {"factor": 3}
    aspec = TwoKinds.__dict__["asynchronous"].__func__.__action_spec__
    assert aspec.triggers == ("ReviewScored", "acme.renamed")
    # the decorated function is still callable as written
    assert TwoKinds.plain.__name__ == "plain"
    names = [n for n, _, _ in TwoKinds().declared_actions()]
    assert names == ["plain", "asynchronous"]


def test_plain_and_async_static_actions_both_run():
    out = (
        AgentsExecutionEnvironment.local()
        .from_list([{"key": "a", "n": 2}, {"key": "b", "n": 5}])
        .apply(TwoKinds())
        .collect()
    )
    assert sorted(out, key=lambda o: o["key"]) == [
        {"key": "a", "score": 6},
        {"key": "b", "score": 15},
    ]


# --------------------------------------------------------------------------- @tool


@tool
def search(query: str, limit: int = 5, tags: list[str] | None = None, *,
           exact: bool = False) -> list[str]:
    """Search the catalog
    for matching items.

    Args:
        query: what to look for.
        limit (int): the most results
            to return.
        tags: only items with these tags.
        exact: match the whole query.

    Returns:
        matching ids, best first.

    Raises:
        ValueError: never.
    """
    return [query] * limit


def test_tool_schema_from_signature_and_google_docstring():
    meta = FunctionTool.from_function(search).metadata
    assert meta.name == "search"
    assert meta.description == "Search the catalog for matching items."
    assert meta.parameters == {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "what to look for."},
            "limit": {"type": "integer", "default": 5,
                      "description": "the most results to return."},
            "tags": {
                "anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}],
                "default": None,
                "description": "only items with these tags.",
            },
            "exact": {"type": "boolean", "default": False,
                      "description": "match the whole query."},
        },
        "required": ["query"],
    }


def test_tool_spec_name_and_description_override():
    @tool(name="lookup", description="Find one item.")
    def find(item_id: int) -> str:
        """Ignored summary."""
        return str(item_id)

    assert find.__tool_spec__.name == "lookup"
    assert find(3) == "3"  # still the plain function
    meta = FunctionTool.from_function(find).metadata
    assert meta.name == "lookup"
    assert meta.description == "Find one item."
    assert meta.parameters["required"] == ["item_id"]
    assert meta.parameters["properties"]["item_id"]["type"] == "integer"


def test_tool_without_docstring_or_hints():
    def bare(a, b=2):
        return a

    meta = FunctionTool.from_function(bare).metadata
    assert meta.name == "bare"
    assert meta.description == ""
    assert set(meta.parameters["properties"]) == {"a", "b"}
    assert meta.parameters["required"] == ["a"]


async def _async_add(a: int, b: int) -> int:
    return a + b


def test_function_tool_acall_runs_sync_and_async_functions():
    import asyncio

    assert asyncio.run(FunctionTool.from_function(search).acall(query="q", limit=2)) == ["q", "q"]
    assert asyncio.run(FunctionTool.from_function(_async_add).acall(a=2, b=3)) == 5


# --------------------------------------------------------------------------- prompts


def test_prompt_fills_placeholders_leaves_unfilled_and_ignores_unused():
    p = Prompt.from_text("Rate {product} for {audience}.")
    assert p.format_string(product="the lamp", unused="x") == "Rate the lamp for {audience}."


def test_prompt_leaves_json_braces_untouched():
    template = 'Answer as JSON like {"score": 1, "tags": ["a"]} about {item}. Empty: {} {1} { x }'
    out = fill_placeholders(template, {"item": "tea", "score": 9, "x": "no"})
    assert out == 'Answer as JSON like {"score": 1, "tags": ["a"]} about tea. Empty: {} {1} { x }'


def test_prompt_multiline_json_with_placeholder_inside():
    template = '{\n  "name": "{name}",\n  "n": {count}\n}'
    filled = fill_placeholders(template, {"name": "a", "count": 3})
    assert filled == '{\n  "name": "a",\n  "n": 3\n}'


def test_prompt_messages_form_and_text_form_roles():
    p = Prompt.from_messages([
        ChatMessage(role=MessageRole.SYSTEM, content="You review {kind}."),
        ChatMessage(role=MessageRole.USER, content="Review: {text} {missing}"),
    ])
    msgs = p.format_messages(kind="books", text="great")
    assert [(m.role, m.content) for m in msgs] == [
        ("system", "You review books."),
        ("user", "Review: great {missing}"),
    ]
    assert (p.format_string(kind="books", text="great")
            == "system: You review books.\nuser: Review: great {missing}")
    t = Prompt.from_text("Hi {who}", role=MessageRole.USER).format_messages(who="Ann")
    assert [(m.role, m.content) for m in t] == [("user", "Hi Ann")]


# --------------------------------------------------------------------------- resource descriptors


def test_resource_descriptor_accepts_class_or_path_and_builds():
    by_class = ResourceDescriptor(clazz=ChatModelSetup, connection="conn", model="m1")
    assert by_class.clazz == "flink_agents_py.api._chat_models.ChatModelSetup"
    assert by_class.arguments == {"connection": "conn", "model": "m1"}
    positional = ResourceDescriptor(ChatModelSetup, arguments={"connection": "conn"})
    by_path = ResourceDescriptor(clazz="flink_agents_py.api.ChatModelSetup", connection="conn")
    for d in (by_class, positional, by_path):
        built = d.build()
        assert isinstance(built, ChatModelSetup)
        assert built.connection == "conn"
    assert by_class.build().model == "m1"


def test_resource_descriptor_merges_both_argument_forms():
    # as Apache Flink Agents does; one argument given two values is refused
    merged = ResourceDescriptor(ChatModelSetup, arguments={"connection": "c"}, model="m")
    assert merged.arguments == {"connection": "c", "model": "m"}
    with pytest.raises(TypeError, match="different values"):
        ResourceDescriptor(ChatModelSetup, arguments={"model": "a"}, model="b")


@pytest.mark.parametrize(
    "clazz, named",
    [
        ("no_such_pkg_xyz.Thing", "no_such_pkg_xyz"),
        ("flink_agents_py.api.NoSuchResource", "NoSuchResource"),
        ("collections.OrderedDict", "collections.OrderedDict"),
        ("JustAName", "JustAName"),
    ],
)
def test_resource_descriptor_build_errors_name_the_class(clazz, named):
    with pytest.raises(ResourceError) as info:
        ResourceDescriptor(clazz=clazz).build()
    assert named in str(info.value)


def test_resource_descriptor_bad_arguments_name_class_and_field():
    with pytest.raises(ResourceError) as info:
        ResourceDescriptor(clazz=ChatModelSetup, connection="c", temprature=0.2).build()
    msg = str(info.value)
    assert "ChatModelSetup" in msg
    assert "temprature" in msg
    with pytest.raises(ResourceError) as info:
        ResourceDescriptor(clazz=ChatModelSetup).build()  # 'connection' is required
    assert "ChatModelSetup" in str(info.value)
    assert "connection" in str(info.value)


def test_resource_type_values():
    assert ResourceType("chat_model") is ResourceType.CHAT_MODEL
    assert {t.value for t in ResourceType} == {
        "chat_model_connection", "chat_model", "tool", "prompt", "mcp_server", "agent",
        "embedding_model_connection", "embedding_model", "vector_store"}


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "cls",
    [PlanError, ActionError, ResourceNotFoundError, ResourceError, ProviderError,
     NotInActionContextError, ChatResponseError, DurableExecutionError, SerializationError,
     UnsupportedAwaitError],
)
def test_every_error_derives_from_agents_error(cls):
    assert issubclass(cls, AgentsError)
    assert issubclass(AgentsError, Exception)


def test_error_hierarchy_details():
    assert issubclass(SerializationError, DurableExecutionError)
    assert issubclass(ResourceNotFoundError, KeyError)
    assert issubclass(UnsupportedAwaitError, TypeError)

    pe = PlanError(["action 'a' is bad", "tool 'b' is bad"])
    assert pe.problems == ["action 'a' is bad", "tool 'b' is bad"]
    assert "2 problem(s)" in str(pe)
    assert "action 'a' is bad" in str(pe) and "tool 'b' is bad" in str(pe)

    ae = ActionError("score", "r0/score", ValueError("nope"))
    assert (ae.action, ae.execution_id, ae.cause_type) == ("score", "r0/score", "ValueError")
    assert "score" in str(ae) and "ValueError: nope" in str(ae)

    assert str(ResourceNotFoundError("no tool named 'x'")) == "no tool named 'x'"

    prov = ProviderError("rate limited", status_code=429, retryable=True)
    assert prov.status_code == 429 and prov.retryable
    assert str(prov) == "rate limited (status 429)"
    assert str(ProviderError("down")) == "down"
    assert ProviderError("down").retryable is False

    assert ChatResponseError("too many rounds").reason == "too many rounds"


# --------------------------------------------------------------------------- public surface

# What a user imports from ``flink_agents_py.api``: a name added to or dropped from the public
# surface is a decision, so it changes this list too.
PUBLIC_API = {
    # agents, actions, decorators
    "Agent", "ActionSpec", "ResourceSpec", "action", "tool", "prompt", "chat_model_connection",
    "chat_model_setup", "embedding_model_connection", "embedding_model_setup", "mcp_server",
    "vector_store", "RunnerContext", "AgentConfig", "DurableCallSpec", "Outcome", "Memory",
    "MemoryObject", "MemoryRef",
    "MetricGroup", "Collection",
    # events
    "Event", "DynamicEvent", "InputEvent", "OutputEvent", "ChatRequestEvent", "ChatResponseEvent",
    "ToolRequestEvent", "ToolResponseEvent", "ContextRetrievalRequestEvent",
    "ContextRetrievalResponseEvent", "EventType",
    # chat models, messages, prompts, tools
    "ChatModelConnection", "ChatModelSetup", "ChatMessage", "ChatResponse",
    "ChatResult", "MessageRole", "TokenUsage", "ToolCall", "ToolResult", "Prompt",
    "FunctionTool", "ToolMetadata", "ToolResponse", "ToolFailure", "ToolSpec", "ToolDocWarning",
    "RESERVED_TOOL_PREFIX",
    # resources
    "Resource", "ResourceDescriptor", "ResourceType", "ResourceName", "qualified_name",
    # embeddings, vector stores, long-term memory
    "EmbeddingModelConnection",
    "EmbeddingModelSetup", "EmbeddingResult", "EmbeddingTokenUsage", "EmbeddingError",
    "VectorStore", "VectorStoreQuery", "VectorStoreQueryMode",
    "VectorStoreQueryResult", "Document", "format_context", "VectorStoreError",
    "CollectionNotFoundError", "DimensionMismatchError", "UnknownFilterFieldError",
    "BaseLongTermMemory", "LongTermMemoryOptions", "MemorySet", "MemorySetItem",
    # Flink Agents 0.2's forms of long-term memory sets
    "VersionedMemorySet", "CompactionStrategy", "CompactionStrategyType",
    "SummarizationStrategy", "CompactionConfig", "DatetimeRange",
    # sub-agents
    "InternalSubagent", "SubagentSetup", "AsyncSubagentSetup", "DeferredSubagentSetup",
    "PreparedCall", "SubagentFuture", "SubagentResult", "RunStatus",
    # secrets known by value, masked wherever text leaves the process
    "register_secret", "secret_from_env", "mask_secrets",
    # flow control
    "FlowControl", "RateLimitInfo", "ErrorClass", "error_class", "report_rate_limit",
    "Budget", "BudgetExceededError", "BudgetStateError", "ModelPrice",
    # waits for outside events, tool approval
    "ExternalEvent", "ExternalEventError", "WaitTimeoutError", "UnmatchedEventError",
    "ApprovalRequest", "APPROVAL_REQUEST_KIND",
    # errors
    "AgentsError", "ActionError", "ChatResponseError", "DurableExecutionError",
    "EventChainLimitError", "CallLimitError",
    "MissingApiKeyError", "NotInActionContextError", "PlanError", "DuplicateNameError",
    "ProviderError",
    "ReplayDivergenceError", "ResourceError", "ResourceNotFoundError", "SerializationError",
    "SubagentInputError", "UnsupportedAwaitError", "UsageError", "AgentAlreadyAppliedError",
    "AgentNotInitializedError",
    "UnkeyedRecordError",
    "UnfinishedRunError",
    "UnreadErrorsError",
}


def test_public_api_is_exactly_the_documented_surface():
    import flink_agents_py.api as api

    assert set(api.__all__) == PUBLIC_API
    assert len(api.__all__) == len(PUBLIC_API), "a name is listed twice in api.__all__"
    assert all(not n.startswith("_") for n in api.__all__)
    for name in api.__all__:
        assert getattr(api, name) is not None, name


@pytest.mark.parametrize("name", [
    "import_qualified", "event_from_json", "event_class_for", "event_type_of",
    "subagent_callable", "SUBAGENT_DESCRIPTION_MARKER", "fill_placeholders",
])
def test_runtime_plumbing_is_not_public(name):
    import flink_agents_py.api as api

    assert name not in api.__all__
    namespace: dict[str, object] = {}
    exec("from flink_agents_py.api import *", namespace)
    assert name not in namespace


def test_the_api_opens_with_agent_action_and_runner_context():
    import flink_agents_py.api as api

    assert api.__all__[:3] == ["Agent", "action", "RunnerContext"]


def test_flink_agents_aliases_live_in_compat_only():
    import flink_agents_py.api as api
    import flink_agents_py.compat as compat

    aliases = {"BaseEmbeddingModelConnection", "BaseEmbeddingModelSetup", "BaseVectorStore",
               "BaseChatModelConnection", "BaseChatModelSetup", "SerializableResource"}
    assert aliases <= set(compat.__all__)
    assert not aliases & set(api.__all__)
    assert compat.BaseEmbeddingModelConnection is api.EmbeddingModelConnection
    assert compat.BaseVectorStore is api.VectorStore


@pytest.mark.parametrize(("name", "home"), [
    ("BaseEmbeddingModelConnection", "flink_agents_py.compat"),
    ("BaseEmbeddingModelSetup", "flink_agents_py.compat"),
    ("BaseVectorStore", "flink_agents_py.compat"),
    ("ScriptedRequest", "flink_agents_py.testing"),
])
def test_a_name_that_moved_out_of_the_api_still_imports_with_a_warning_naming_its_home(
        name, home):
    import importlib

    import flink_agents_py.api as api

    with pytest.warns(DeprecationWarning, match=f"import it from {home}"):
        old = getattr(api, name)
    assert old is getattr(importlib.import_module(home), name)
    namespace: dict[str, object] = {}
    exec("from flink_agents_py.api import *", namespace)
    assert name not in namespace


def test_an_unknown_api_name_is_an_attribute_error():
    import flink_agents_py.api as api

    with pytest.raises(AttributeError, match="no attribute 'NoSuchThing'"):
        api.NoSuchThing  # noqa: B018
    with pytest.raises(ImportError):
        exec("from flink_agents_py.api import NoSuchThing", {})


def test_scripted_request_is_a_testing_name_and_the_one_scripted_models_receive():
    from flink_agents_py.integrations import chat_models
    from flink_agents_py.testing import ScriptedRequest, model_from_function

    assert chat_models.ScriptedRequest is ScriptedRequest
    seen: list[object] = []

    def answer(request: ScriptedRequest) -> str:
        seen.append(request)
        return f"echo {request.last_user_text}"

    model = model_from_function(answer)
    reply = model.chat([ChatMessage(role=MessageRole.USER, content="hi")])
    assert reply.message.content == "echo hi"
    assert isinstance(seen[0], ScriptedRequest) and seen[0].last_user_text == "hi"


def test_a_user_script_tests_its_agent_with_the_public_names_only(tmp_path):
    # the way a user works: their own module, in their own folder, run by the interpreter
    import subprocess
    import sys
    import textwrap

    (tmp_path / "my_agent.py").write_text(textwrap.dedent('''
        from flink_agents_py import AgentsExecutionEnvironment
        from flink_agents_py.api import *  # noqa: F403 - the public surface only
        from flink_agents_py.testing import ScriptedRequest, model_from_function


        def answer(request: ScriptedRequest) -> str:
            return "positive" if "love" in request.last_user_text else "negative"


        class Rater(Agent):
            @action(InputEvent)
            @staticmethod
            async def rate(event: InputEvent, ctx: RunnerContext) -> None:
                reply = await ctx.chat("rater", [ChatMessage.user(str(event.input))])
                ctx.send_event(OutputEvent(output=reply.message.content))


        agent = Rater()
        agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION,
                           model_from_function(answer))
        agent.add_resource("rater", ResourceType.CHAT_MODEL,
                           ResourceDescriptor(ChatModelSetup, connection="conn"))
        env = AgentsExecutionEnvironment.local()
        outs = env.from_list([{"key": "a", "v": "I love it"},
                              {"key": "b", "v": "broke"}]).apply(agent).collect()
        print(sorted(str(o) for o in outs))
        print(sorted(n for n in ("import_qualified", "event_from_json") if n in globals()))
    '''))
    proc = subprocess.run([sys.executable, "my_agent.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    outs, plumbing = proc.stdout.strip().splitlines()[-2:]
    assert outs.count("positive") == 1 and outs.count("negative") == 1, outs
    assert plumbing == "[]"


def test_the_api_reference_page_shows_every_public_name_once_in_the_order_of_all():
    import re
    from pathlib import Path

    import flink_agents_py.api as api

    page = (Path(__file__).resolve().parents[1] / "docs" / "reference" / "api.md").read_text()
    shown = re.findall(r"^::: flink_agents_py\.api\.(\w+)$", page, flags=re.MULTILINE)
    assert shown == api.__all__
