"""Apache Flink Agents 0.3's own API tests (``api/tests/test_event.py``, ``test_prompt.py``,
``test_vector_store_query.py``) and an agent written on their idioms, ported with their
imports changed only and run from a directory outside the repository as a user runs them.

Each finding of this port is pinned by a test that failed before its fix:

- ``SomeEvent.from_event(event)`` of an ``Event`` built by type and attributes, as Flink
  Agents 0.3's unified events are sent (``Event(type="review_done", attributes={...})``), is
  that class with those attributes as its fields. A class with a default for the field got
  the default (a silent wrong value: ``0`` for a score of ``5``), one without failed
  (``Field required``), and a built-in event given Flink Agents' type literal
  (``InputEvent.from_event(Event(type="_input_event", attributes={"input": x}))``) was
  refused (``has type 'InputEvent', not '_input_event'``).
- ``event.model_dump_json()`` of an event carrying a PyFlink ``Row`` (what a table agent
  receives and emits) raised ``PydanticSerializationError``; Flink Agents writes the row as
  ``{"type": "Row", "values": [...], "fields": [...]}``.
- ``LocalPrompt`` (what ``Prompt.from_text`` / ``from_messages`` return there, and what its
  tests build with ``LocalPrompt(template=[messages])``) was an ``ImportError``.
- ``str(VectorStoreQuery(...))`` and ``str(VectorStoreQueryResult(...))`` printed pydantic's
  field dump, not Flink Agents' ``semantic query: 'x' (limit=3)`` / ``QueryResult: 1
  documents``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VENV_PY = ROOT / ".venv" / "bin" / "python"
PYTHON = VENV_PY if VENV_PY.exists() else Path(sys.executable)

pytestmark = pytest.mark.timeout(180)


def _run(tmp_path: Path, script: str) -> dict[str, object]:
    """Run ``script`` as ``prog.py`` in ``tmp_path``; return its ``OUT`` lines by label."""
    assert ROOT not in tmp_path.resolve().parents
    (tmp_path / "prog.py").write_text(textwrap.dedent(script))
    proc = subprocess.run(
        [str(PYTHON), "prog.py"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=150,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    found: dict[str, object] = {}
    for line in proc.stdout.splitlines():
        if line.startswith("OUT "):
            label, value = line[4:].split(" ", 1)
            found[label] = json.loads(value)
    return found


# An agent sending Flink Agents 0.3's unified events (a type string and attributes) and
# reading them back through event classes of its own and the built-in ones.
UNIFIED_EVENTS = """
    import json
    from typing import ClassVar

    from flink_agents_py.compat import (
        Agent, AgentsExecutionEnvironment, ChatMessage, ChatResponseEvent, Event, EventType,
        InputEvent, MessageRole, OutputEvent, RunnerContext, action)


    class ReviewDone(Event):
        EVENT_TYPE: ClassVar[str] = "review_done"
        score: int = 0
        note: str


    class ReviewAgent(Agent):
        @action(EventType.InputEvent)
        @staticmethod
        def start(event: Event, ctx: RunnerContext) -> None:
            review = InputEvent.from_event(event).input
            ctx.send_event(Event(type="review_done",
                                 attributes={"score": len(review), "note": review}))

        @action("review_done")
        @staticmethod
        def done(event: Event, ctx: RunnerContext) -> None:
            done = ReviewDone.from_event(event)
            # the built-in events from their Flink Agents form (type literal, attributes)
            raw = Event(type="_input_event", attributes={"input": done.note})
            chat = Event(type="_chat_response_event", attributes={
                "request_id": "r1",
                "response": ChatMessage(role=MessageRole.ASSISTANT, content="fine")})
            answer = ChatResponseEvent.from_event(chat)
            ctx.send_event(OutputEvent(output={
                "score": done.score, "note": done.note, "id_kept": done.id == event.id,
                "input": InputEvent.from_event(raw).input,
                "answer": [answer.request_id, answer.response.content]}))


    env = AgentsExecutionEnvironment.get_execution_environment()
    out = env.from_list([{"key": "k", "value": "works well"}]).apply(ReviewAgent()).to_list()
    env.execute()
    print("OUT agent", json.dumps(out))
"""


def test_event_classes_read_the_attributes_of_events_sent_by_type(tmp_path):
    out = _run(tmp_path, UNIFIED_EVENTS)
    assert out["agent"] == [
        {
            "k": {
                "score": 10,
                "note": "works well",
                "id_kept": True,
                "input": "works well",
                "answer": ["r1", "fine"],
            }
        }
    ]


# Flink Agents 0.3's api/tests/test_event.py, test_prompt.py and test_vector_store_query.py,
# their assertions kept (an event's ``type`` is ours: "InputEvent" for "_input_event").
API_TESTS = """
    import json

    from pyflink.common import Row

    from flink_agents_py.compat import (
        ChatMessage, Document, Event, InputEvent, LocalPrompt, MessageRole, OutputEvent,
        Prompt, VectorStoreQuery, VectorStoreQueryMode, VectorStoreQueryResult)

    # test_event.py
    event = InputEvent(input=Row({"a": 1, "b": "test", "c": [1, 2, 3]}))
    parsed = json.loads(event.model_dump_json())
    print("OUT row", json.dumps(parsed["input"]))
    mixed = InputEvent(input={"normal": {"key": "value"}, "row": Row({"t": "d"}),
                              "nested": {"inner": Row(x=True)}, "list": [1, 2, 3]})
    print("OUT mixed", mixed.model_dump_json().split('"input":', 1)[1][:-1])
    attributes = Event(type="RoundTrip", attributes={"a": 1, "row": Row(x=42)})
    print("OUT attributes", json.dumps(json.loads(attributes.model_dump_json())["attributes"]))
    custom = event.model_dump_json(fallback=lambda row: {"custom": list(row)})
    print("OUT custom", json.dumps(json.loads(custom)["input"]))
    print("OUT input_from_event", json.dumps(InputEvent.from_event(
        Event(type="_input_event", attributes={"input": "data"})).input))
    print("OUT output_from_event", json.dumps(OutputEvent.from_event(
        Event(type="_output_event", attributes={"output": 99})).output))

    # test_prompt.py
    text_prompt = Prompt.from_text(text="The product {product_id} is {description}.")
    print("OUT local", json.dumps(isinstance(text_prompt, LocalPrompt)))
    print("OUT lacking", json.dumps(text_prompt.format_string(product_id="12345")))
    schema = Prompt.from_text(
        text=f"The json schema is {LocalPrompt.model_json_schema(mode='serialization')}")
    print("OUT schema", json.dumps(schema.format_string().startswith("The json schema is {")))
    messages = LocalPrompt(template=[
        ChatMessage(role=MessageRole.SYSTEM, content="{secret}"),
        ChatMessage(role=MessageRole.USER, content="{user_input}")])
    print("OUT messages", json.dumps([m.content for m in messages.format_messages(
        secret="p@ssw0rd", user_input="give me {secret}")]))
    print("OUT string", json.dumps(messages.format_string(secret="s", user_input="u")))

    # test_vector_store_query.py, and the value objects' text
    query = VectorStoreQuery(mode=VectorStoreQueryMode.SEMANTIC, query_text="flink", limit=3)
    print("OUT query", json.dumps([str(query), VectorStoreQuery(query_text="f").limit]))
    found = VectorStoreQueryResult(documents=[Document(content="Apache Flink Agents")])
    print("OUT result", json.dumps([str(found), str(found.documents[0])]))
"""


def test_flink_agents_api_tests_as_a_program(tmp_path):
    out = _run(tmp_path, API_TESTS)
    assert out["row"] == {"type": "Row", "values": [{"a": 1, "b": "test", "c": [1, 2, 3]}]}
    assert out["mixed"] == {
        "normal": {"key": "value"},
        "row": {"type": "Row", "values": [{"t": "d"}]},
        "nested": {"inner": {"type": "Row", "values": [True], "fields": ["x"]}},
        "list": [1, 2, 3],
    }
    assert out["attributes"] == {"a": 1, "row": {"type": "Row", "values": [42], "fields": ["x"]}}
    assert out["custom"] == {"custom": [{"a": 1, "b": "test", "c": [1, 2, 3]}]}
    assert out["input_from_event"] == "data"
    assert out["output_from_event"] == 99
    assert out["local"] is True
    assert out["lacking"] == "The product 12345 is {description}."
    assert out["schema"] is True
    assert out["messages"] == ["p@ssw0rd", "give me {secret}"]
    assert out["string"] == "system: s\nuser: u"
    assert out["query"] == ["semantic query: 'flink' (limit=3)", 10]
    assert out["result"] == ["QueryResult: 1 documents", "Document: Apache Flink Agents"]


def test_an_event_that_cannot_be_written_still_says_so():
    from pydantic_core import PydanticSerializationError

    from flink_agents_py.api import Event

    with pytest.raises(PydanticSerializationError, match="Unable to serialize unknown type"):
        Event(type="x", attributes={"f": object()}).model_dump_json()


def test_from_event_keeps_a_typed_event_and_refuses_another_type():
    from pydantic import ValidationError

    from flink_agents_py.api import Event, InputEvent, OutputEvent

    typed = InputEvent(input=1)
    assert InputEvent.from_event(typed) is typed
    with pytest.raises(ValidationError, match="not '_output_event'"):
        InputEvent.from_event(Event(type="_output_event", attributes={"output": 1}))
    # a payload name among free attributes of another class's event stays where it is
    moved = OutputEvent.from_event(Event(type="OutputEvent", attributes={"output": 2, "n": 3}))
    assert (moved.output, moved.attributes["n"], moved.attributes["output"]) == (2, 3, 2)


def test_a_prompt_takes_messages_as_template_or_messages_but_not_both():
    from pydantic import ValidationError

    from flink_agents_py.api import ChatMessage, Prompt

    message = ChatMessage(role="user", content="{a}")
    assert Prompt(template=(message,)).format_string(a=1) == "user: 1"
    with pytest.raises(ValidationError, match="not both"):
        Prompt(template=[message], messages=[message])


def test_an_event_carrying_a_row_is_written_as_flink_agents_writes_it():
    from pyflink.common import Row

    from flink_agents_py.api import InputEvent

    event = InputEvent(input={"row": Row(id=1, review="ok"), "bare": Row(2, "x")})
    assert json.loads(event.model_dump_json())["input"] == {
        "row": {"type": "Row", "values": [1, "ok"], "fields": ["id", "review"]},
        "bare": {"type": "Row", "values": [2, "x"]},
    }
    assert event.to_json()["input"]["row"]["fields"] == ["id", "review"]


def test_query_and_result_print_as_in_flink_agents():
    from flink_agents_py.api import Document, VectorStoreQuery, VectorStoreQueryResult

    assert str(VectorStoreQuery(query_text="a b", limit=0)) == "semantic query: 'a b' (limit=0)"
    assert (
        str(VectorStoreQueryResult(documents=[Document(content="x")] * 2))
        == "QueryResult: 2 documents"
    )


# Flink Agents' runtime/tests/test_local_execution_environment.py as a program: records
# appended after from_list, an async action awaiting ``ctx.execute_async`` (its first name of
# durable_execute_async), and a second agent applied to the same input refused at the call
# with a RuntimeError. ``await ctx.execute_async(...)`` failed every record ("object
# generator can't be used in 'await' expression"), and the chained apply ran both agents on
# the same records, mixing their outputs in one list ([{'bob': 2}, {'bob': 0}]).
LOCAL_ENVIRONMENT = """
    import json
    import time

    from flink_agents_py.compat import (
        Agent, AgentsExecutionEnvironment, Event, InputEvent, OutputEvent, RunnerContext,
        action)


    class Agent1(Agent):
        @action(InputEvent)
        @staticmethod
        def increment(event: Event, ctx: RunnerContext):
            ctx.send_event(OutputEvent(output=event.input + 1))


    class Agent1WithAsync(Agent):
        @action(InputEvent)
        @staticmethod
        async def increment(event: Event, ctx: RunnerContext):
            def my_func(value: int) -> int:
                time.sleep(0.01)
                return value + 1

            value = await ctx.execute_async(my_func, event.input)
            ctx.send_event(OutputEvent(output=value))


    class Agent1AsGenerator(Agent):
        @action(InputEvent)
        @staticmethod
        def increment(event: Event, ctx: RunnerContext):
            value = yield from ctx.execute_async(lambda v: v + 1, event.input)
            ctx.send_event(OutputEvent(output=value))


    class Agent2(Agent):
        @action(InputEvent)
        @staticmethod
        def decrease(event: Event, ctx: RunnerContext):
            ctx.send_event(OutputEvent(output=event.input - 1))


    for agent in (Agent1(), Agent1WithAsync(), Agent1AsGenerator()):
        env = AgentsExecutionEnvironment.get_execution_environment()
        input_list = []
        output_list = env.from_list(input_list).apply(agent).to_list()
        input_list.append({"key": "bob", "value": 1})
        input_list.append({"k": "john", "v": 2})
        env.execute()
        print("OUT", type(agent).__name__, json.dumps(output_list))

    env = AgentsExecutionEnvironment.get_execution_environment()
    try:
        env.from_list([{"key": "bob", "value": 1}]).apply(Agent1()).apply(Agent2()).to_list()
        print("OUT chained", json.dumps("applied"))
    except RuntimeError as e:
        print("OUT chained", json.dumps(type(e).__name__))
"""


def test_flink_agents_local_environment_tests_as_a_program(tmp_path):
    out = _run(tmp_path, LOCAL_ENVIRONMENT)
    for name in ("Agent1", "Agent1WithAsync", "Agent1AsGenerator"):
        assert out[name] == [{"bob": 2}, {"john": 3}], name
    assert out["chained"] == "_ChainedApplyError"


def test_a_chained_apply_is_also_a_usage_error_naming_the_way_on():
    from flink_agents_py.api import UsageError
    from flink_agents_py.compat import Agent, AgentsExecutionEnvironment

    builder = AgentsExecutionEnvironment.get_execution_environment().from_list([])
    builder.apply(Agent())
    with pytest.raises(UsageError, match="its own from_list"):
        builder.apply(Agent())


def test_applying_an_agent_name_never_loaded_is_a_value_error_naming_it():
    # Flink Agents' test_remote_execution_environment.py: ``pytest.raises(ValueError,
    # match="ghost")``; it was a KeyError only (still one, for programs catching that)
    from flink_agents_py.compat import AgentsExecutionEnvironment

    builder = AgentsExecutionEnvironment.get_execution_environment().from_list([])
    with pytest.raises(ValueError, match="ghost") as raised:
        builder.apply("ghost")
    assert isinstance(raised.value, KeyError)


# Flink Agents' api/yaml/tests (test_loader.py and its fixtures) as a program: actions named
# ``module:function`` and ``module:Class.method``, short trigger names, a connection by its
# ``clazz`` alias, a file-level action two agents list by name, files loaded in one call and
# in another, and a file loaded twice: a ValueError naming the agent, as there (the second
# load replaced the first agents without a word before).
LOADER_TARGETS = """
    from flink_agents_py.compat import Event, InputEvent, OutputEvent, RunnerContext


    def increment(event: Event, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output=InputEvent.from_event(event).input + 1))


    def decrement(event: Event, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output=InputEvent.from_event(event).input - 1))


    class Counter:
        @staticmethod
        def bump(event: Event, ctx: RunnerContext) -> None:
            ctx.send_event(OutputEvent(output=InputEvent.from_event(event).input + 100))
"""

YAML_FILES = {
    "single_agent.yaml": """
        agents:
          - name: incrementer
            actions:
              - name: increment
                function: loader_targets:increment
                trigger_conditions: [input]
          - name: bumper
            actions:
              - name: bump
                function: loader_targets:Counter.bump
                trigger_conditions: [input]
    """,
    "with_descriptors.yaml": """
        agents:
          - name: chat_agent
            actions:
              - name: increment
                function: loader_targets:increment
                trigger_conditions: [input]
              - name: decrement
                function: loader_targets:decrement
                trigger_conditions: [chat_response]
            chat_model_connections:
              - name: ollama_conn
                clazz: ollama
                base_url: http://localhost:11434
                request_timeout: 30
    """,
    "with_shared.yaml": """
        agents:
          - name: a1
            actions:
              - shared_inc
              - name: own_dec
                function: loader_targets:decrement
                trigger_conditions: [chat_response]
          - name: a2
            actions:
              - shared_inc
        chat_model_connections:
          - name: shared_conn
            clazz: ollama
            base_url: http://example
        actions:
          - name: shared_inc
            function: loader_targets:increment
            trigger_conditions: [input]
    """,
    "multi_file_b.yaml": """
        agents:
          - name: file_b_agent
            actions:
              - name: decrement
                function: loader_targets:decrement
                trigger_conditions: [input]
        chat_model_connections:
          - name: conn_from_b
            clazz: ollama
            base_url: http://b
    """,
}

LOADER_PROGRAM = """
    import json

    from flink_agents_py.compat import AgentsExecutionEnvironment

    env = AgentsExecutionEnvironment.get_execution_environment()
    env.load_yaml(["single_agent.yaml", "with_descriptors.yaml", "with_shared.yaml"])
    env.load_yaml("multi_file_b.yaml")
    outs = {}
    for name in ("incrementer", "bumper", "chat_agent", "a1", "a2", "file_b_agent"):
        outs[name] = env.from_list([{"key": name, "value": 1}]).apply(name).to_list()
    env.execute()
    print("OUT outputs", json.dumps(outs))
    try:
        env.load_yaml("multi_file_b.yaml")
        print("OUT again", json.dumps("loaded"))
    except ValueError as e:
        print("OUT again", json.dumps(str(e)))
"""


def test_flink_agents_yaml_loader_tests_as_a_program(tmp_path):
    (tmp_path / "loader_targets.py").write_text(textwrap.dedent(LOADER_TARGETS))
    for name, text in YAML_FILES.items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    out = _run(tmp_path, LOADER_PROGRAM)
    assert out["outputs"] == {
        "incrementer": [{"incrementer": 2}],
        "bumper": [{"bumper": 101}],
        "chat_agent": [{"chat_agent": 2}],
        "a1": [{"a1": 2}],
        "a2": [{"a2": 2}],
        "file_b_agent": [{"file_b_agent": 0}],
    }
    assert "'file_b_agent'" in out["again"] and "already loaded" in out["again"]


def test_every_built_in_event_is_rebuilt_from_its_flink_agents_form():
    from flink_agents_py.compat import (
        ChatMessage,
        ChatRequestEvent,
        ContextRetrievalRequestEvent,
        Event,
        MessageRole,
        ToolRequestEvent,
        ToolResponseEvent,
    )

    def form(kind: str, **attributes: object) -> Event:
        return Event(type=f"_{kind}_event", attributes=attributes)

    call = {"id": "c1", "type": "function", "function": {"name": "add", "arguments": {"a": 1}}}
    request = ToolRequestEvent.from_event(form("tool_request", model="m", tool_calls=[call]))
    assert [(c.id, c.name, c.arguments) for c in request.tool_calls] == [("c1", "add", {"a": 1})]
    answered = ToolResponseEvent.from_event(
        form("tool_response", request_id="r", responses={"c1": 3})
    )
    assert answered.responses["c1"].content == 3
    query = ContextRetrievalRequestEvent.from_event(
        form("context_retrieval_request", query="q", vector_store="vs", max_results=2)
    )
    assert (query.query, query.vector_store, query.max_results) == ("q", "vs", 2)
    chat = ChatRequestEvent.from_event(
        form(
            "chat_request",
            model="m",
            prompt_args={"a": 1},
            messages=[ChatMessage(role=MessageRole.USER, content="hi")],
        )
    )
    assert (chat.model, chat.messages[0].content, chat.prompt_args) == ("m", "hi", {"a": 1})


def test_memory_type_is_importable_with_flink_agents_members():
    # Flink Agents' memory tests import it beside MemoryObject (an ImportError before)
    from flink_agents_py.compat import MemoryObject, MemoryType

    assert [m.name for m in MemoryType] == ["SENSORY", "SHORT_TERM"]
    assert MemoryType("short_term") is MemoryType.SHORT_TERM and MemoryObject is not None
