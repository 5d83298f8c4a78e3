"""The call shapes of Apache Flink Agents' public Python API (0.3) that programs rely on.

Each table below is written by hand from Flink Agents' API: the parameter names (in order)
of a call a program makes, checked against what ``flink_agents_py.compat`` gives, and each
call a program makes in those shapes is run on the local runner.
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from flink_agents_py.api import MetricGroup
from flink_agents_py.compat import (
    Agent,
    AgentExecutionOptions,
    AgentsExecutionEnvironment,
    BaseEmbeddingModelConnection,
    BaseEmbeddingModelSetup,
    BaseLongTermMemory,
    BaseVectorStore,
    ChatMessage,
    ChatRequestEvent,
    ChatResponseEvent,
    ConfigOption,
    ContextRetrievalRequestEvent,
    ContextRetrievalResponseEvent,
    Document,
    Event,
    InputEvent,
    LongTermMemoryOptions,
    MessageRole,
    OllamaChatModelConnection,
    OutputEvent,
    Prompt,
    ResourceDescriptor,
    ResourceName,
    ResourceType,
    RunnerContext,
    SerializableResource,
    Skills,
    Tool,
    ToolRequestEvent,
    ToolResponseEvent,
    action,
    embedding_model_connection,
    embedding_model_setup,
    prompt,
    vector_store,
)


def _params(fn: Any) -> list[str]:
    """The names of ``fn``'s parameters a caller can pass, ``self`` and ``*args`` left out."""
    return [p.name for p in inspect.signature(fn).parameters.values()
            if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


def _takes(fn: Any, names: list[str]) -> None:
    """``fn`` takes ``names`` in that order (others of ours may follow)."""
    assert _params(fn)[:len(names)] == names, (fn, _params(fn))


def _run(agent: Agent, records: list[dict[str, Any]]) -> list[dict[Any, Any]]:
    env = AgentsExecutionEnvironment.get_execution_environment()
    out = env.from_list(records).apply(agent).to_list()
    env.execute()
    return out


# -- built-in events, built by position as Flink Agents' constructors take them --------------

def test_built_in_events_take_flink_agents_positional_arguments():
    msg = ChatMessage(role=MessageRole.USER, content="hi")
    assert InputEvent("x").input == "x"
    assert OutputEvent({"a": 1}).output == {"a": 1}
    req = ChatRequestEvent("setup", [msg], {"topic": "tea"}, None)
    assert (req.model, req.messages, req.prompt_args) == ("setup", [msg], {"topic": "tea"})
    assert ToolRequestEvent("setup", [{"id": "c1", "type": "function", "function": {
        "name": "add", "arguments": {"a": 1}}}]).tool_calls[0].name == "add"
    retrieval = ContextRetrievalRequestEvent("what is tea", "store", 5)
    assert (retrieval.query, retrieval.vector_store, retrieval.max_results) == (
        "what is tea", "store", 5)
    assert ContextRetrievalResponseEvent("r1", "q", []).documents == []
    with pytest.raises(TypeError, match="at most 1 positional"):
        OutputEvent(1, 2)
    with pytest.raises(TypeError, match="by position and by keyword"):
        OutputEvent(1, output=2)


def test_chat_response_event_takes_a_message_and_retry_counts():
    # Flink Agents: ChatResponseEvent(request_id, response: ChatMessage, retry_count,
    # total_retry_wait_sec), read back as .response (a message), .retry_count...
    answer = ChatMessage(role=MessageRole.ASSISTANT, content="yes")
    event = ChatResponseEvent("r1", answer, 2, 3)
    assert (event.request_id, event.response.content, event.response.role) == (
        "r1", "yes", MessageRole.ASSISTANT)
    assert (event.retry_count, event.total_retry_wait_sec) == (2, 3)
    plain = ChatResponseEvent(request_id="r2", response=answer)
    assert (plain.retry_count, plain.total_retry_wait_sec) == (0, 0)
    # the counts survive the event's JSON form (a sent event, a restore)
    again = ChatResponseEvent.model_validate(event.to_json())
    assert (again.retry_count, again.response.content) == (2, "yes")


def test_tool_response_event_takes_flink_agents_results():
    # Flink Agents: ToolResponseEvent(request_id, responses: {id: value}, external_ids,
    # success: {id: bool}, error: {id: str}), with .success / .error / .external_ids
    event = ToolResponseEvent("r1", {"c1": 3, "c2": None}, {"c1": "toolu_1"},
                              {"c1": True, "c2": False}, {"c2": "boom"})
    assert event.responses["c1"].content == 3
    assert event.success == {"c1": True, "c2": False}
    assert event.error == {"c2": "boom"}
    assert event.external_ids == {"c1": "toolu_1"}
    assert ToolResponseEvent.model_validate(event.to_json()).success == event.success


class _PositionalAgent(Agent):
    @action(InputEvent)
    @staticmethod
    def start(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(f"got {event.input}"))


def test_an_action_sends_an_output_event_built_by_position():
    out = _run(_PositionalAgent(), [{"key": "k", "value": "tea"}])
    assert out == [{"k": "got tea"}]


# -- the RunnerContext an action gets ---------------------------------------------------------

RUNNER_CONTEXT = {
    # Flink Agents 0.3's RunnerContext: method -> its parameter names, in order
    "send_event": ["event", "identifier"],
    "get_resource": ["name", "resource_type", "metric_group"],  # theirs: (name, type, ...)
    "get_action_config_value": ["key"],
    "durable_execute": ["fn"],
    "durable_execute_async": ["fn"],
}
RUNNER_CONTEXT_PROPERTIES = ["action_config", "sensory_memory", "short_term_memory",
                             "long_term_memory", "agent_metric_group", "action_metric_group",
                             "config"]


def test_runner_context_has_flink_agents_methods_and_properties():
    for name, params in RUNNER_CONTEXT.items():
        _takes(getattr(RunnerContext, name), params)
    assert "type" in _params(RunnerContext.get_resource)
    for name in RUNNER_CONTEXT_PROPERTIES:
        assert isinstance(getattr(RunnerContext, name), property), name


class _DynamicEventAgent(Agent):
    @action(InputEvent)
    @staticmethod
    def start(event: InputEvent, ctx: RunnerContext) -> None:
        # Flink Agents' dynamic event: a type string and keyword attributes
        ctx.send_event(identifier="SignatureScored", text=event.input, score=len(event.input))

    @action("SignatureScored")
    @staticmethod
    def scored(event: Any, ctx: RunnerContext) -> None:
        # get_resource with Flink Agents' metric_group argument (taken, not used)
        prompt = ctx.get_resource("greeting", ResourceType.PROMPT, ctx.action_metric_group)
        text = prompt.format_string(name=event.get_attr("text"))
        ctx.send_event(OutputEvent(output=(text, event.get_attr("score"))))


def test_an_action_sends_a_dynamic_event_and_gets_a_resource_with_a_metric_group():
    agent = _DynamicEventAgent()
    agent.add_resource("greeting", ResourceType.PROMPT, Prompt.from_text("hello {name}"))
    assert _run(agent, [{"key": "k", "value": "tea"}]) == [{"k": ("hello tea", 3)}]


def test_send_event_refuses_an_event_and_an_identifier_together():
    from flink_agents_py.api.internal import event_to_send

    with pytest.raises(TypeError, match="not both"):
        event_to_send(OutputEvent(output=1), "Scored", {})
    with pytest.raises(TypeError, match="beside an event"):
        event_to_send(OutputEvent(output=1), None, {"score": 1})
    with pytest.raises(TypeError, match="needs an event"):
        event_to_send(None, None, {})


# -- Agent ------------------------------------------------------------------------------------

def _echo(event: Any, ctx: RunnerContext) -> None:
    prompt = ctx.get_resource("p", ResourceType.PROMPT)
    ctx.send_event(OutputEvent(output=prompt.format_string(x=event.input)))


def test_agent_add_action_and_add_resource_take_flink_agents_keywords():
    _takes(Agent.add_action, ["name"])
    assert {"trigger_conditions", "func"} <= set(_params(Agent.add_action))
    assert "instance" in _params(Agent.add_resource)
    agent = Agent()
    agent.add_action(name="echo", trigger_conditions=[InputEvent.EVENT_TYPE], func=_echo,
                     mode="fast")
    agent.add_resource(name="p", resource_type=ResourceType.PROMPT,
                       instance=Prompt.from_text("<{x}>"))
    # Flink Agents' read-only views of what was added
    triggers, fn, config = agent.actions["echo"]
    assert (triggers, fn, config) == ([InputEvent.EVENT_TYPE], _echo, {"mode": "fast"})
    assert list(agent.resources[ResourceType.PROMPT]) == ["p"]
    assert agent.resources[ResourceType.TOOL] == {}
    assert _run(agent, [{"key": "k", "value": "v"}]) == [{"k": "<v>"}]
    with pytest.raises(Exception, match="needs the resource"):
        Agent().add_resource("p", ResourceType.PROMPT)


# -- configuration ----------------------------------------------------------------------------

def test_config_option_takes_key_type_default_in_flink_agents_order():
    _takes(ConfigOption, ["key", "config_type", "default"])
    option = ConfigOption("my.threshold", int, 5)
    assert (option.get_key(), option.get_type(), option.get_default_value()) == (
        "my.threshold", int, 5)
    assert AgentExecutionOptions.MAX_RETRIES.get_default_value() == 3
    assert AgentExecutionOptions.MAX_RETRIES.get_type() is int
    env = AgentsExecutionEnvironment.get_execution_environment()
    config = env.get_config()
    assert config.get(option) == 5  # the option's default, not its type
    config.set(option, 7)
    assert config.get(option) == 7
    assert config.get_int("my.threshold") == 7


# -- Event's own methods ----------------------------------------------------------------------

def test_event_get_type_and_from_json():
    import json

    assert OutputEvent(output=1).get_type() == OutputEvent.EVENT_TYPE
    ad_hoc = Event.from_json('{"type": "SignatureAudit", "attributes": {"score": 3}}')
    assert (ad_hoc.get_type(), ad_hoc.get_attr("score")) == ("SignatureAudit", 3)
    typed = Event.from_json(json.dumps(ChatRequestEvent("m", []).to_json()))
    assert isinstance(typed, ChatRequestEvent) and typed.model == "m"
    with pytest.raises(ValueError, match="non-empty 'type'"):
        Event.from_json("[1]")


# -- resources --------------------------------------------------------------------------------

def test_resource_descriptor_takes_flink_agents_forms():
    by_parts = ResourceDescriptor(target_module="flink_agents_py.compat",
                                  target_clazz="OllamaChatModelConnection",
                                  arguments={"base_url": "http://h:1"}, request_timeout=5)
    assert by_parts.clazz == "flink_agents_py.compat.OllamaChatModelConnection"
    assert by_parts.arguments == {"base_url": "http://h:1", "request_timeout": 5}
    assert (by_parts.target_module, by_parts.target_clazz) == (
        "flink_agents_py.compat", "OllamaChatModelConnection")
    by_class = ResourceDescriptor(clazz=OllamaChatModelConnection, base_url="http://h:1")
    assert by_class.target_clazz == "OllamaChatModelConnection"
    assert by_class.arguments == {"base_url": "http://h:1"}


class _DescribedAgent(Agent):
    @prompt
    @staticmethod
    def greeting() -> Any:
        return ResourceDescriptor(target_module="flink_agents_py.api", target_clazz="Prompt",
                                  arguments={"template": "hi {x}"})

    @action(InputEvent)
    @staticmethod
    def start(event: InputEvent, ctx: RunnerContext) -> None:
        text = ctx.get_resource("greeting", ResourceType.PROMPT).format_string(x=event.input)
        ctx.send_event(OutputEvent(output=text))


def test_a_resource_described_by_module_and_class_is_built():
    assert _run(_DescribedAgent(), [{"key": "k", "value": "v"}]) == [{"k": "hi v"}]


class _Glossary(SerializableResource):
    """A resource class written for Flink Agents: its type is a ``resource_type()``."""

    terms: dict[str, str] = {}

    @classmethod
    def resource_type(cls) -> ResourceType:
        return ResourceType.PROMPT


def test_resource_type_classmethod_both_ways():
    assert _Glossary.RESOURCE_TYPE is ResourceType.PROMPT
    assert _Glossary(terms={"a": "b"}).resource_type() is ResourceType.PROMPT
    assert Prompt.from_text("x").resource_type() is ResourceType.PROMPT
    assert Tool.from_callable(_echo).resource_type() is ResourceType.TOOL
    assert OllamaChatModelConnection.resource_type() is ResourceType.CHAT_MODEL_CONNECTION


class _GlossaryAgent(Agent):
    @action(InputEvent)
    @staticmethod
    def start(event: InputEvent, ctx: RunnerContext) -> None:
        glossary = ctx.get_resource("glossary", ResourceType.PROMPT)
        ctx.send_event(OutputEvent(output=(glossary.resource_type().name,
                                           glossary.terms[event.input])))


def test_a_resource_typed_by_its_classmethod_runs():
    agent = _GlossaryAgent()
    agent.add_resource("glossary", ResourceType.PROMPT, _Glossary(terms={"tea": "a drink"}))
    assert _run(agent, [{"key": "k", "value": "tea"}]) == [{"k": ("PROMPT", "a drink")}]


# -- long-term memory -------------------------------------------------------------------------

def test_long_term_memory_takes_flink_agents_set_taking_calls():
    for name, params in {"add": ["memory_set", "memory_items", "metadatas"],
                         "get": ["memory_set", "ids", "filters", "limit"],
                         "delete": ["memory_set", "ids"],
                         "search": ["memory_set", "query", "limit", "filters"],
                         "get_memory_set": ["name"], "delete_memory_set": ["name"]}.items():
        _takes(getattr(BaseLongTermMemory, name), params)


class _NotesAgent(Agent):
    @embedding_model_connection
    @staticmethod
    def hashing() -> ResourceDescriptor:
        return ResourceDescriptor(clazz="flink_agents_py.integrations.embedding_models."
                                        "HashingEmbeddingModel", dimension=16)

    @embedding_model_setup
    @staticmethod
    def embedder() -> ResourceDescriptor:
        return ResourceDescriptor(clazz=ResourceName.EmbeddingModel.OLLAMA_SETUP,
                                  connection="hashing", model="hashing")

    @vector_store
    @staticmethod
    def notes_store() -> ResourceDescriptor:
        return ResourceDescriptor(clazz=ResourceName.VectorStore.CHROMA_VECTOR_STORE,
                                  embedding_model="embedder",
                                  collection="signature_audit_notes")

    @action(InputEvent)
    @staticmethod
    def remember(event: InputEvent, ctx: RunnerContext) -> None:
        ltm = ctx.long_term_memory
        notes = ltm.get_memory_set("notes")
        # what earlier runs stored (this run's adds are stored when the action completes)
        found = sorted(i.value for i in ltm.search(notes, event.input, 5))
        stored = len(ltm.get(notes))
        ltm.add(notes, event.input)
        ltm.add("notes", [event.input + " again"])
        ctx.send_event(OutputEvent(output=(stored, found, notes.size())))


def test_an_action_uses_the_long_term_memory_in_flink_agents_form():
    pytest.importorskip("chromadb")
    env = AgentsExecutionEnvironment.get_execution_environment()
    env.get_config().set(LongTermMemoryOptions.Mem0.VECTOR_STORE, "notes_store")
    out = env.from_list([{"key": "k", "value": "tea"}, {"key": "k", "value": "tea"}]
                        ).apply(_NotesAgent()).to_list()
    env.execute()
    assert out == [{"k": (0, [], 2)}, {"k": (2, ["tea", "tea again"], 4)}]


# -- a connection written against Flink Agents' base classes ----------------------------------

class _LengthEmbeddings(BaseEmbeddingModelConnection):
    """Flink Agents' form: only ``embed(text, **kwargs)`` is implemented."""

    def embed(self, text: Any, **kwargs: Any) -> Any:
        def vector(t: str) -> list[float]:
            return [float(len(t)), float(kwargs.get("model") == "len")]

        return vector(text) if isinstance(text, str) else [vector(t) for t in text]


class _EmbeddingAgent(Agent):
    @embedding_model_connection
    @staticmethod
    def lengths() -> ResourceDescriptor:
        return ResourceDescriptor(clazz=_LengthEmbeddings)

    @embedding_model_setup
    @staticmethod
    def embedder() -> ResourceDescriptor:
        return ResourceDescriptor(clazz=BaseEmbeddingModelSetup, connection="lengths",
                                  model="len")

    @action(InputEvent)
    @staticmethod
    def start(event: InputEvent, ctx: RunnerContext) -> None:
        embedder = ctx.get_resource("embedder", ResourceType.EMBEDDING_MODEL)
        ctx.send_event(OutputEvent(output=(embedder.embed(event.input),
                                           embedder.embed([event.input, "ab"]))))


def test_an_embedding_connection_implementing_only_embed_serves_a_setup():
    assert _LengthEmbeddings().embed_texts(["abc"]).embeddings == [[3.0, 0.0]]
    out = _run(_EmbeddingAgent(), [{"key": "k", "value": "tea!"}])
    assert out == [{"k": ([4.0, 1.0], [[4.0, 1.0], [2.0, 1.0]])}]


def test_an_embedding_connection_implementing_neither_is_refused():
    class _Nothing(BaseEmbeddingModelConnection):
        pass

    with pytest.raises(TypeError, match="embed_texts"):
        _Nothing()


class _ListStore(BaseVectorStore):
    """A store written against Flink Agents' BaseVectorStore: keyword-only ``_add_embedding``
    and ``_update_embedding``, no ``size``."""

    @property
    def store_kwargs(self) -> dict[str, Any]:
        return {}

    def _add_embedding(self, *, documents: list[Any], collection_name: str | None = None,
                       **kwargs: Any) -> list[str]:
        rows = _STORED.setdefault(collection_name or "default", {})
        for doc in documents:
            rows[doc.id] = doc
        return [doc.id for doc in documents]

    def _update_embedding(self, *, documents: list[Any], collection_name: str | None = None,
                          **kwargs: Any) -> None:
        self._add_embedding(documents=documents, collection_name=collection_name)

    def _query_embedding(self, embedding: list[float], limit: int = 10,
                         collection_name: str | None = None, filters: Any = None,
                         **kwargs: Any) -> list[Any]:
        rows = _STORED.get(collection_name or "default", {}).values()
        return sorted(rows, key=lambda d: abs(d.embedding[0] - embedding[0]))[:limit]

    def get(self, ids: Any = None, collection_name: str | None = None, filters: Any = None,
            limit: int | None = 100, **kwargs: Any) -> list[Any]:
        return list(_STORED.get(collection_name or "default", {}).values())[:limit]

    def delete(self, ids: Any = None, collection_name: str | None = None, filters: Any = None,
               **kwargs: Any) -> None:
        _STORED.pop(collection_name or "default", None)


_STORED: dict[str, dict[str, Any]] = {}


class _RetrievalAgent(_EmbeddingAgent):
    @vector_store
    @staticmethod
    def shelf() -> ResourceDescriptor:
        return ResourceDescriptor(clazz=_ListStore, embedding_model="embedder")

    @action(InputEvent)
    @staticmethod
    def start(event: InputEvent, ctx: RunnerContext) -> None:
        store = ctx.get_resource("shelf", ResourceType.VECTOR_STORE)
        store.add([Document(id="a", content="ab"), Document(id="b", content="abcdef")])
        store.update(Document(id="a", content="abc"))
        ctx.send_event(ContextRetrievalRequestEvent(event.input, "shelf", 1))

    @action(ContextRetrievalResponseEvent)
    @staticmethod
    def answer(event: ContextRetrievalResponseEvent, ctx: RunnerContext) -> None:
        store = ctx.get_resource("shelf", ResourceType.VECTOR_STORE)
        ctx.send_event(OutputEvent(output=([d.content for d in event.documents],
                                           store.size())))


def test_a_vector_store_written_for_flink_agents_serves_retrieval():
    _STORED.clear()
    out = _run(_RetrievalAgent(), [{"key": "k", "value": "xyz"}])
    assert out == [{"k": (["abc"], 2)}]


def test_skills_registered_as_resource_type_skills_are_wired_as_tools():
    from pathlib import Path

    folder = Path(__file__).parent / "flink_agents_examples/agents/resources/skills"
    assert ResourceType.SKILLS is ResourceType.TOOL
    agent = Agent()
    agent.add_resource("my_skills", ResourceType.SKILLS, Skills.from_local_dir(str(folder)))
    agent.add_resource("math", ResourceType.CHAT_MODEL, ResourceDescriptor(
        clazz=ResourceName.ChatModel.OLLAMA_SETUP, connection="c", model="m",
        skills=["math-calculator"]))
    tools = agent.resources[ResourceType.TOOL]
    assert "math.load_skill" in tools and "my_skills" not in tools
    assert agent.resources[ResourceType.CHAT_MODEL]["math"].arguments["tools"] == [
        "math.load_skill"]


# -- tools ------------------------------------------------------------------------------------

def _add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: the first.
        b: the second.
    """
    return a + b


def test_tool_from_callable_takes_func_by_keyword_and_injected_args():
    _takes(Tool.from_callable, ["func", "injected_args"])
    add = Tool.from_callable(func=_add)
    assert (add.name, add.call(1, b=2)) == ("_add", 3)
    assert add.metadata.get_parameters_dict()["required"] == ["a", "b"]
    hidden = Tool.from_callable(_add, injected_args={"b": {"source": "CONFIG"}})
    assert hidden.metadata.get_parameters_dict()["required"] == ["a"]
    assert hidden.injected_args == {"b": {"source": "config", "key": "b"}}
    with pytest.raises(ValueError, match="'c' is not a parameter"):
        Tool.from_callable(_add, injected_args={"c": {"source": "config"}})


# -- Flink Agents' type strings of the built-in events ----------------------------------------

def test_flink_agents_built_in_type_strings_trigger_the_built_in_events():
    # Flink Agents' Agent docstring: add_action(..., trigger_conditions=["_input_event"], ...)
    agent = Agent()
    agent.add_action(name="echo", trigger_conditions=["_input_event"], func=_echo)
    agent.add_resource("p", ResourceType.PROMPT, Prompt.from_text("[{x}]"))
    assert agent.actions["echo"][0] == [InputEvent.EVENT_TYPE]
    assert _run(agent, [{"key": "k", "value": "v"}]) == [{"k": "[v]"}]

    class _Listener(Agent):
        @action("_chat_response_event", "_context_retrieval_response_event")
        @staticmethod
        def heard(event: Any, ctx: RunnerContext) -> None:
            pass

    assert _Listener().actions["heard"][0] == [ChatResponseEvent.EVENT_TYPE,
                                                ContextRetrievalResponseEvent.EVENT_TYPE]


class _CountingGlossary(_Glossary):
    def lookup(self, term: str) -> str:
        # a resource written for Flink Agents records its own metrics on its metric group
        self.metric_group.get_counter("lookups").inc()
        return self.terms[term]


class _CountingAgent(Agent):
    @action(InputEvent)
    @staticmethod
    def start(event: InputEvent, ctx: RunnerContext) -> None:
        glossary = ctx.get_resource("glossary", ResourceType.PROMPT)
        text = glossary.lookup(event.input)
        ctx.send_event(OutputEvent(output=(text,
                                           glossary.metric_group.get_counter("lookups")
                                           .get_count())))


def test_a_resource_has_a_metric_group():
    bare = _Glossary()
    assert bare.metric_group is None
    group = MetricGroup()
    bare.set_metric_group(group)
    assert bare.metric_group is group
    agent = _CountingAgent()
    agent.add_resource("glossary", ResourceType.PROMPT, _CountingGlossary(terms={"a": "b"}))
    out = _run(agent, [{"key": "k", "value": "a"}, {"key": "k", "value": "a"}])
    assert out == [{"k": ("b", 1)}, {"k": ("b", 2)}]


# -- the table: every other call a Flink Agents 0.3 program makes, by parameter names ---------

def _table() -> list[tuple[Any, list[str]]]:
    from flink_agents_py.compat import (
        Configuration,
        MemoryObject,
        MemoryRef,
        MemorySet,
        ReActAgent,
        VectorStoreQuery,
    )

    local_env = type(AgentsExecutionEnvironment.get_execution_environment())
    builder = type(AgentsExecutionEnvironment.get_execution_environment().from_list([]))
    return [
        (AgentsExecutionEnvironment.get_execution_environment, ["env", "t_env"]),
        (local_env.get_config, ["path"]),
        (local_env.add_resource, ["name", "resource_type", "instance"]),
        (local_env.from_list, ["input"]),
        (local_env.from_datastream, ["input", "key_selector"]),
        (local_env.from_table, ["input", "key_selector"]),
        (local_env.execute, ["job_name"]),
        (builder.apply, ["agent"]),
        (builder.to_list, []),
        (Agent.add_resource, ["name", "resource_type"]),
        (Prompt.from_text, ["text"]),
        (Prompt.from_messages, ["messages"]),
        (Prompt.format_messages, ["role"]),
        (MemoryObject.set, ["path", "value"]),
        (MemoryObject.new_object, ["path"]),
        (MemoryObject.is_exist, ["path"]),
        (MemoryObject.get_field_names, []),
        (MemoryObject.get_fields, []),
        (MemoryRef.create, ["path", "type_name"]),
        (MemoryRef.resolve, ["ctx"]),
        (MetricGroup.get_sub_group, ["name"]),
        (MetricGroup.get_counter, ["name"]),
        (MetricGroup.get_meter, ["name"]),
        (MetricGroup.get_gauge, ["name"]),
        (MetricGroup.get_histogram, ["name", "window_size"]),
        (Configuration.set_str, ["key", "value"]),
        (Configuration.set_int, ["key", "value"]),
        (Configuration.set_float, ["key", "value"]),
        (Configuration.set_bool, ["key", "value"]),
        (Configuration.set, ["option", "value"]),
        (Configuration.get_int, ["key", "default"]),
        (Configuration.get_str, ["key", "default"]),
        (Configuration.get, ["option"]),
        (BaseVectorStore.add, ["documents", "collection_name"]),
        (BaseVectorStore.query, ["query"]),
        (BaseVectorStore.update, ["documents", "collection_name"]),
        (BaseVectorStore.get, ["ids", "collection_name", "filters", "limit"]),
        (BaseVectorStore.delete, ["ids", "collection_name", "filters"]),
        (MemorySet.add, ["items", "metadatas"]),
        (MemorySet.get, ["ids", "filters", "limit"]),
        (MemorySet.search, ["query", "limit", "filters"]),
        (MemorySet.delete, ["ids"]),
        (BaseEmbeddingModelSetup.embed, ["text"]),
        (BaseEmbeddingModelConnection.embed, ["text"]),
        (VectorStoreQuery, ["mode", "query_text"]),
        (Document, ["content", "metadata", "id", "embedding", "score"]),
        (ChatMessage, ["role", "content", "tool_calls"]),
        (ChatMessage.user, ["content"]),
        (ChatMessage.system, ["content"]),
        (ChatMessage.assistant, ["content"]),
        (ChatRequestEvent, ["model", "messages", "prompt_args", "output_schema"]),
        (ToolRequestEvent, ["model", "tool_calls"]),
        (ReActAgent, ["chat_model", "prompt", "output_schema"]),
    ]


def test_flink_agents_call_shapes_by_parameter_names():
    failed = []
    for fn, names in _table():
        params = _params(fn)
        if [p for p in params if p in names] != names:
            failed.append((getattr(fn, "__qualname__", fn), names, params))
    assert not failed, failed


def test_built_in_event_positional_orders_are_flink_agents():
    assert ChatRequestEvent.POSITIONAL == ("model", "messages", "prompt_args",
                                           "output_schema")
    assert ChatResponseEvent.POSITIONAL == ("request_id", "response", "retry_count",
                                            "total_retry_wait_sec")
    assert ToolResponseEvent.POSITIONAL == ("request_id", "responses", "external_ids",
                                            "success", "error")
    assert ContextRetrievalRequestEvent.POSITIONAL == ("query", "vector_store",
                                                       "max_results")


def test_prompt_format_string_of_messages_names_each_role():
    p = Prompt.from_messages([ChatMessage(role=MessageRole.SYSTEM, content="You sell {x}."),
                              ChatMessage(role=MessageRole.USER, content="Price of {x}?")])
    assert p.format_string(x="tea") == "system: You sell tea.\nuser: Price of tea?"
    assert Prompt.from_text("You sell {x}.").format_string(x="tea") == "You sell tea."


def test_environment_resources_view():
    env = AgentsExecutionEnvironment.get_execution_environment()
    greeting = Prompt.from_text("hi {x}")
    env.add_resource(name="greeting", resource_type=ResourceType.PROMPT, instance=greeting)
    assert env.resources[ResourceType.PROMPT] == {"greeting": greeting}
    assert env.resources[ResourceType.TOOL] == {}
