"""Apache Flink Agents programs ported with their imports changed only, run from a directory
outside the repository as a user runs them (each finding of the porting audit, one test)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VENV_PY = ROOT / ".venv" / "bin" / "python"
PYTHON = VENV_PY if VENV_PY.exists() else Path(sys.executable)

pytestmark = pytest.mark.timeout(120)


def _run(tmp_path: Path, script: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run ``script`` (dedented) as ``prog.py`` in ``tmp_path`` with the project importable.

    ``OPENAI_API_KEY`` is unset in its environment.
    """
    (tmp_path / "prog.py").write_text(textwrap.dedent(script))
    environ = {**{k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"},
               "PYTHONPATH": str(ROOT), **env}
    return subprocess.run([str(PYTHON), "prog.py"], cwd=tmp_path, env=environ,
                          capture_output=True, text=True, timeout=100)


# Flink Agents' long-term memory e2e agent: provider setups given arguments their classes
# there ignore (pydantic models drop what they do not declare): think=False on the OpenAI
# setup and on the Ollama embedding setup. The plan refused both ("takes no argument").
PROVIDER_ARGUMENTS = """
    import json
    from flink_agents_py.compat import (
        Agent, AgentsExecutionEnvironment, Event, EventType, InputEvent, OutputEvent,
        ResourceDescriptor, ResourceName, RunnerContext, action, chat_model_connection,
        chat_model_setup, embedding_model_connection, embedding_model_setup)


    class LtmAgent(Agent):
        @chat_model_connection
        @staticmethod
        def openai_connection() -> ResourceDescriptor:
            return ResourceDescriptor(
                clazz=ResourceName.ChatModel.OPENAI_COMPLETIONS_CONNECTION, api_key="sk-x",
                api_base_url="http://127.0.0.1:9/v1", request_timeout=300)

        @chat_model_setup
        @staticmethod
        def qwen() -> ResourceDescriptor:
            return ResourceDescriptor(
                clazz=ResourceName.ChatModel.OPENAI_COMPLETIONS_SETUP,
                connection="openai_connection", model="qwen", extract_reasoning=True,
                think=False, strict=True, logprobs=True, top_logprobs=2)

        @embedding_model_connection
        @staticmethod
        def ollama_embedding_connection() -> ResourceDescriptor:
            return ResourceDescriptor(clazz=ResourceName.EmbeddingModel.OLLAMA_CONNECTION,
                                      request_timeout=240.0)

        @embedding_model_setup
        @staticmethod
        def nomic() -> ResourceDescriptor:
            return ResourceDescriptor(
                clazz=ResourceName.EmbeddingModel.OLLAMA_SETUP,
                connection="ollama_embedding_connection", model="nomic-embed-text",
                think=False, truncate=True, keep_alive="5m",
                additional_kwargs={"num_ctx": 512})

        @embedding_model_setup
        @staticmethod
        def small() -> ResourceDescriptor:
            return ResourceDescriptor(
                clazz=ResourceName.EmbeddingModel.OPENAI_SETUP,
                connection="ollama_embedding_connection",
                model="text-embedding-3-small", encoding_format="float", dimensions=64,
                user="u1", additional_kwargs={"tag": "t"})

        @action(EventType.InputEvent)
        @staticmethod
        def go(event: Event, ctx: RunnerContext) -> None:
            chat = ctx.get_resource("qwen", "chat_model")
            nomic = ctx.get_resource("nomic", "embedding_model")
            small = ctx.get_resource("small", "embedding_model")
            ctx.send_event(OutputEvent(output={
                "input": InputEvent.from_event(event).input,
                "chat": chat.options, "nomic": nomic.options, "small": small.options}))


    env = AgentsExecutionEnvironment.get_execution_environment()
    out = env.from_list([{"key": "alice", "value": "likes bananas"}]).apply(LtmAgent()).to_list()
    env.execute()
    print("OUT", json.dumps(out[0]["alice"], sort_keys=True))
"""


def test_provider_setups_take_the_arguments_flink_agents_classes_drop(tmp_path):
    proc = _run(tmp_path, PROVIDER_ARGUMENTS)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = next(line for line in proc.stdout.splitlines() if line.startswith("OUT "))
    assert out == ('OUT {"chat": {"logprobs": true, "top_logprobs": 2}, "input": "likes bananas", '
                   '"nomic": {"num_ctx": 512}, "small": {"dimensions": 64, '
                   '"extra_body": {"tag": "t"}, "user": "u1"}}')
    for dropped in ("OpenAIChatModelSetup: argument 'think'", "argument 'strict'",
                    "OllamaEmbeddingModelSetup: argument 'think'", "argument 'keep_alive'",
                    "OpenAIEmbeddingModelSetup: argument 'encoding_format'"):
        assert dropped in proc.stderr, proc.stderr[-3000:]


def test_a_misspelt_provider_argument_is_still_refused(tmp_path):
    proc = _run(tmp_path, PROVIDER_ARGUMENTS.replace("think=False, truncate", "thnik=False, "
                                                     "truncate"))
    assert proc.returncode != 0
    assert "OllamaEmbeddingModelSetup takes no argument 'thnik'" in proc.stderr


# Flink Agents' chat model e2e agent declares a connection per provider (its key read with
# os.environ.get, None when unset) and one setup per provider, choosing by an environment
# variable. The unused OpenAI connection, without a key, stopped the job at start-up
# (MissingApiKeyError) although nothing named it.
EVERY_PROVIDER = """
    import os
    from flink_agents_py.compat import (
        Agent, AgentsExecutionEnvironment, ChatMessage, ChatRequestEvent, ChatResponseEvent,
        Event, EventType, InputEvent, MessageRole, OutputEvent, ResourceDescriptor,
        ResourceName, RunnerContext, action, chat_model_connection, chat_model_setup)


    def answer(request):
        return "echo: " + request.messages[-1].content


    class ChatModelTestAgent(Agent):
        @chat_model_connection
        @staticmethod
        def openai_connection() -> ResourceDescriptor:
            return ResourceDescriptor(
                clazz=ResourceName.ChatModel.OPENAI_COMPLETIONS_CONNECTION,
                api_key=os.environ.get("OPENAI_API_KEY"))

        @chat_model_connection
        @staticmethod
        def offline_connection() -> ResourceDescriptor:
            return ResourceDescriptor(clazz=ResourceName.ChatModel.SCRIPTED_CONNECTION,
                                      function=f"{__name__}:answer")

        @chat_model_setup
        @staticmethod
        def creative_chat_model() -> ResourceDescriptor:
            if os.environ.get("MODEL_PROVIDER") == "OpenAI":
                return ResourceDescriptor(
                    clazz=ResourceName.ChatModel.OPENAI_COMPLETIONS_SETUP,
                    connection="openai_connection", model="gpt-3.5-turbo")
            return ResourceDescriptor(clazz=ResourceName.ChatModel.OLLAMA_SETUP,
                                      connection="offline_connection", model="qwen3:1.7b")

        @action(EventType.InputEvent)
        @staticmethod
        def process_input(event: Event, ctx: RunnerContext) -> None:
            text = InputEvent.from_event(event).input
            ctx.send_event(ChatRequestEvent(
                model="creative_chat_model",
                messages=[ChatMessage(role=MessageRole.USER, content=text)]))

        @action(EventType.ChatResponseEvent)
        @staticmethod
        def process_chat_response(event: Event, ctx: RunnerContext) -> None:
            response = ChatResponseEvent.from_event(event).response
            if response and response.content:
                ctx.send_event(OutputEvent(output=response.content))


    env = AgentsExecutionEnvironment.get_execution_environment()
    out = env.from_list([{"key": "1", "value": "a joke"}]).apply(ChatModelTestAgent()).to_list()
    env.execute()
    print("OUT", out)
"""


def test_an_unused_connection_without_a_key_does_not_stop_the_job(tmp_path):
    proc = _run(tmp_path, EVERY_PROVIDER, MODEL_PROVIDER="Ollama")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "OUT [{'1': 'echo: a joke'}]" in proc.stdout
    # the connection a setup names is still checked when the job starts
    proc = _run(tmp_path, EVERY_PROVIDER, MODEL_PROVIDER="OpenAI")
    assert proc.returncode != 0
    assert "MissingApiKeyError" in proc.stderr and "'openai_connection'" in proc.stderr


# Flink Agents' event attachments e2e agent: an event carrying named payloads beside its
# attributes (``Event(..., attachments={...})``, ``event.attachments``,
# ``event.get_attachment(name)``). Building the event was refused (``attachments``: extra
# inputs are not permitted).
EVENT_ATTACHMENTS = """
    from flink_agents_py.compat import (
        Agent, AgentsExecutionEnvironment, Event, InputEvent, OutputEvent, RunnerContext,
        action)


    class EventAttachmentsAgent(Agent):
        @action(InputEvent.EVENT_TYPE)
        @staticmethod
        def send_attachment(event: Event, ctx: RunnerContext) -> None:
            value = InputEvent.from_event(event).input
            step = Event(type="AttachmentStep", attributes={"kind": "inline"},
                         attachments={"payload": {"value": value, "items": [1, 2, 3]}})
            step.set_attachment("extra", "x")
            ctx.send_event(step)

        @action("AttachmentStep")
        @staticmethod
        def receive_attachment(event: Event, ctx: RunnerContext) -> None:
            print(f"received attachments: {sorted(event.attachments)}")
            ctx.send_event(OutputEvent(output={
                "kind": event.get_attr("kind"), "payload": event.get_attachment("payload"),
                "extra": event.get_attachment("extra"),
                "missing": event.get_attachment("missing", "none")}))


    env = AgentsExecutionEnvironment.get_execution_environment()
    out = env.from_list([{"key": "k1", "value": {"message": "hello"}}]).apply(
        EventAttachmentsAgent()).to_list()
    env.execute()
    print(out)
"""


def test_an_event_carries_attachments(tmp_path):
    proc = _run(tmp_path, EVENT_ATTACHMENTS)
    assert proc.returncode == 0, proc.stderr
    assert "received attachments: ['extra', 'payload']" in proc.stdout
    assert ("[{'k1': {'kind': 'inline', 'payload': {'value': {'message': 'hello'}, "
            "'items': [1, 2, 3]}, 'extra': 'x', 'missing': 'none'}}]") in proc.stdout


class _FakeOllama(BaseHTTPRequestHandler):
    """``/api/chat``: calls the ``add`` tool when offered (with the first two numbers of the
    user's text), then answers with the tool's result; otherwise echoes the last message."""

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
        messages = body.get("messages", [])
        tools = [t["function"]["name"] for t in body.get("tools") or []]
        results = [m["content"] for m in messages if m.get("role") == "tool"]
        numbers = [int(n) for m in messages if m.get("role") == "user"
                   for n in re.findall(r"\d+", m.get("content") or "")]
        if "add" in tools and not results:
            message = {"role": "assistant", "content": "", "tool_calls": [{"function": {
                "name": "add", "arguments": {"a": numbers[0], "b": numbers[1]}}}]}
        else:
            text = f"sum={results[-1]}" if results else "echo: " + messages[-1]["content"]
            message = {"role": "assistant", "content": text}
        data = json.dumps({"model": body.get("model"), "message": message, "done": True,
                           "created_at": "2025-01-01T00:00:00Z"}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def fake_ollama():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeOllama)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


# Flink Agents' chained YAML e2e agents (``yaml_multi_agent.yaml``): a connection and an
# action declared once at the top of the document for both agents, an agent listing that
# action by its name alone, ``trigger_conditions:`` for the event types. The document was
# refused (10 problems: unknown keys 'trigger_conditions', 'chat_model_connections',
# 'actions'; an action entry must be a mapping).
YAML_ACTIONS = """
    from pydantic import BaseModel
    from flink_agents_py.compat import (
        ChatMessage, ChatRequestEvent, ChatResponseEvent, Event, InputEvent, MessageRole,
        OutputEvent, RunnerContext)


    class YamlChatInput(BaseModel):
        id: int
        text: str


    class YamlChatOutput(BaseModel):
        id: int
        answer: str


    def add(a: int, b: int) -> int:
        '''Calculate the sum of a and b.

        Parameters
        ----------
        a : int
            The first operand
        b : int
            The second operand
        '''
        return a + b


    def chat_request(event: Event, ctx: RunnerContext) -> None:
        data = YamlChatInput.model_validate(InputEvent.from_event(event).input)
        ctx.short_term_memory.set("input_id", data.id)
        ctx.send_event(ChatRequestEvent(model="chat_model", messages=[
            ChatMessage(role=MessageRole.USER, content=data.text)]))


    def commentary_request(event: Event, ctx: RunnerContext) -> None:
        data = YamlChatOutput.model_validate(InputEvent.from_event(event).input)
        ctx.short_term_memory.set("input_id", data.id)
        ctx.send_event(ChatRequestEvent(model="chat_model", messages=[ChatMessage(
            role=MessageRole.USER, content=f"Restate {data.answer!r}.")]))


    def process_chat_response(event: Event, ctx: RunnerContext) -> None:
        response = ChatResponseEvent.from_event(event).response
        if response and response.content:
            ctx.send_event(OutputEvent(output=YamlChatOutput(
                id=ctx.short_term_memory.get("input_id"), answer=response.content)))
"""

YAML_MULTI_AGENT = """
    agents:
      - name: math_agent
        description: Stage 1, solves the math question via the add tool.
        chat_model_setups:
          - name: chat_model
            clazz: ollama
            connection: ollama_connection
            model: qwen3:1.7b
            tools: [add]
            extract_reasoning: true
        tools:
          - name: add
            function: yaml_test_actions:add
        actions:
          - name: chat_request
            function: yaml_test_actions:chat_request
            trigger_conditions: [input]
          - process_chat_response
      - name: commentator_agent
        chat_model_setups:
          - name: chat_model
            clazz: ollama
            connection: ollama_connection
            model: qwen3:1.7b
        actions:
          - name: commentary_request
            function: yaml_test_actions:commentary_request
            trigger_conditions: [input]
          - process_chat_response
    chat_model_connections:
      - name: ollama_connection
        clazz: ollama
        request_timeout: 240.0
    actions:
      - name: process_chat_response
        function: yaml_test_actions:process_chat_response
        trigger_conditions: [chat_response]
"""

YAML_CHAIN = """
    from flink_agents_py.compat import AgentsExecutionEnvironment
    from yaml_test_actions import YamlChatInput, YamlChatOutput

    env = AgentsExecutionEnvironment.get_execution_environment()
    env.load_yaml("yaml_multi_agent.yaml")
    math = env.from_list([{"key": 1, "value": YamlChatInput(id=1, text="sum of 1 and 2")}]
                         ).apply("math_agent").to_list()
    env.execute()
    print("math", math)
    env = AgentsExecutionEnvironment.get_execution_environment()
    env.load_yaml("yaml_multi_agent.yaml")
    final = env.from_list([{"key": 1, "value": YamlChatOutput.model_validate(math[0][1])}]
                          ).apply("commentator_agent").to_list()
    env.execute()
    print("final", final)
"""


def test_yaml_file_level_resources_and_actions(tmp_path, fake_ollama):
    (tmp_path / "yaml_test_actions.py").write_text(textwrap.dedent(YAML_ACTIONS))
    (tmp_path / "yaml_multi_agent.yaml").write_text(textwrap.dedent(YAML_MULTI_AGENT))
    proc = _run(tmp_path, YAML_CHAIN, OLLAMA_HOST=fake_ollama)
    assert proc.returncode == 0, proc.stderr
    assert "math [{1: YamlChatOutput(id=1, answer='sum=3')}]" in proc.stdout
    assert "final [{1: YamlChatOutput(id=1, answer=\"echo: Restate 'sum=3'.\")}]" in proc.stdout


def test_yaml_bare_action_naming_no_file_level_action_is_reported(tmp_path):
    (tmp_path / "yaml_test_actions.py").write_text(textwrap.dedent(YAML_ACTIONS))
    (tmp_path / "a.yaml").write_text(textwrap.dedent("""
        agents:
          - name: a
            actions:
              - process_chat_respons
              - name: start
                function: yaml_test_actions:chat_request
                on: [input]
                trigger_conditions: [input]
        actions:
          - name: process_chat_response
            function: yaml_test_actions:process_chat_response
            trigger_conditions: [chat_response]
    """))
    proc = _run(tmp_path, """
        from flink_agents_py.yaml import load_agents
        load_agents("a.yaml")
    """)
    assert proc.returncode == 1
    assert ("a.yaml:5: agents[0].actions[0]: names action 'process_chat_respons', which the "
            "document does not declare at its top level (actions: process_chat_response)"
            ) in proc.stderr, proc.stderr
    assert "not 'on' and 'trigger_conditions'" in proc.stderr


# Flink Agents' skills e2e agent (agent_skills_test.py) reads a dataclass input as the dict
# of its fields: ``if isinstance(input, dict): Operation(**input)``, its job fed with
# ``env.from_collection([Operation(a=2, b=3)])``. Every such record was refused here
# (SerializationError: Operation at $ has no JSON form), going to the error output.
DATACLASS_INPUT = """
    from dataclasses import dataclass
    from flink_agents_py.compat import (
        Agent, AgentsExecutionEnvironment, Event, EventType, InputEvent, OutputEvent,
        RunnerContext, action)


    @dataclass
    class Operation:
        a: int
        b: int


    @dataclass
    class Batch:
        name: str
        ops: list


    class SkillTestAgent(Agent):
        @action(EventType.InputEvent)
        @staticmethod
        def process_input(event: Event, ctx: RunnerContext) -> None:
            input_event = InputEvent.from_event(event)
            if isinstance(input_event.input, dict) and "a" in input_event.input:
                input: Operation = Operation(**input_event.input)
                ctx.send_event(OutputEvent(output=f"({input.a} ^ {input.b})"))
            else:
                ctx.send_event(OutputEvent(output=repr(input_event.input)))


    env = AgentsExecutionEnvironment.get_execution_environment()
    out = env.from_list([{"key": "k1", "value": Operation(a=2, b=3)},
                         {"key": "k2", "value": Batch("b", [Operation(1, 2), (3, 4)])}]
                        ).apply(SkillTestAgent()).to_list()
    env.execute()
    for record in out:
        print("OUT", record)
"""


def test_a_dataclass_input_reaches_the_action_as_the_dict_of_its_fields(tmp_path):
    proc = _run(tmp_path, DATACLASS_INPUT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [line for line in proc.stdout.splitlines() if line.startswith("OUT")] == [
        "OUT {'k1': '(2 ^ 3)'}",
        "OUT {'k2': \"{'name': 'b', 'ops': [{'a': 1, 'b': 2}, [3, 4]]}\"}"]


# Flink Agents 0.2's long-term memory page, ported: a ChatMessage set made with
# get_or_create_memory_set(name, item_type, capacity, compaction_strategy), its size read as
# a property, one item got by its id, and an add that fills the set summarizing it with the
# strategy's chat model. get_or_create_memory_set, SummarizationStrategy and the 0.2 item
# fields were missing (ImportError, then AttributeError) before this port found them.
LONG_TERM_MEMORY_02 = """
    import json
    from flink_agents_py.compat import (
        Agent, AgentConfigOptions, AgentsExecutionEnvironment, ChatMessage, CompactionConfig,
        InputEvent, LongTermMemoryBackend, LongTermMemoryOptions, MemorySetItem, MessageRole,
        OutputEvent, ResourceDescriptor, ResourceName, ResourceType, RunnerContext,
        SummarizationStrategy, action, chat_model_setup, embedding_model_connection,
        embedding_model_setup, vector_store)
    from flink_agents_py.testing import model_from_function


    def summarize(request):
        return "summary of " + str(request.last_user_text.count("- "))


    class ConversationAgent(Agent):
        @chat_model_setup
        @staticmethod
        def summarizer() -> ResourceDescriptor:
            return ResourceDescriptor(clazz=ResourceName.ChatModel.OLLAMA_SETUP,
                                      connection="scripted", model="m")

        @embedding_model_connection
        @staticmethod
        def hashing_connection() -> ResourceDescriptor:
            return ResourceDescriptor(clazz="flink_agents_py.integrations.embedding_models."
                                            "HashingEmbeddingModel", dimension=32)

        @embedding_model_setup
        @staticmethod
        def hashing() -> ResourceDescriptor:
            return ResourceDescriptor(clazz=ResourceName.EmbeddingModel.OLLAMA_SETUP,
                                      connection="hashing_connection", model="hashing")

        @vector_store
        @staticmethod
        def my_vector_store() -> ResourceDescriptor:
            return ResourceDescriptor(clazz=ResourceName.VectorStore.CHROMA_VECTOR_STORE,
                                      embedding_model="hashing", persist_directory="chroma")

        @action(InputEvent)
        @staticmethod
        def process_event(event: InputEvent, ctx: RunnerContext) -> None:
            ltm = ctx.long_term_memory
            memory_set = ltm.get_or_create_memory_set(
                name="conversations", item_type=ChatMessage, capacity=3,
                compaction_strategy=SummarizationStrategy(model="summarizer", limit=1))
            item_id = memory_set.add(ChatMessage(role=MessageRole.USER, content=event.input))[0]
            item: MemorySetItem = memory_set.get(ids=item_id)
            notes = ltm.get_or_create_memory_set("notes", str, 10,
                                                 compaction_config=CompactionConfig(model="x"))
            notes.add(["a note"], [{"kind": "note"}])
            everything = memory_set.get()
            ctx.send_event(OutputEvent(output={
                "size": memory_set.size, "capacity": memory_set.capacity,
                "mine": None if item is None else [item.value.role.value, item.value.content,
                                                   item.compacted],
                "values": sorted(i.value.content for i in everything),
                "compacted": sum(i.compacted for i in everything),
                "notes": ltm.size(notes),
                # 0.3's form of the same set: its size read as 0.2's property and called
                "by_name": [ltm.get_memory_set("notes").size,
                            ltm.get_memory_set("notes").size() + 0]}))


    agents_env = AgentsExecutionEnvironment.get_execution_environment()
    config = agents_env.get_config()
    config.set(AgentConfigOptions.JOB_IDENTIFIER, "my_job_id")
    config.set(LongTermMemoryOptions.BACKEND, LongTermMemoryBackend.EXTERNAL_VECTOR_STORE)
    config.set(LongTermMemoryOptions.EXTERNAL_VECTOR_STORE_NAME, "my_vector_store")
    config.set(LongTermMemoryOptions.ASYNC_COMPACTION, False)
    agents_env.add_resource("scripted", ResourceType.CHAT_MODEL_CONNECTION,
                            model_from_function(summarize))
    out = agents_env.from_list([{"key": "u", "value": t} for t in ("hi", "tea?", "bye", "again")]
                               ).apply(ConversationAgent()).to_list()
    agents_env.execute()
    print(json.dumps(out))
"""


def test_flink_agents_0_2_long_term_memory_program(tmp_path):
    pytest.importorskip("chromadb")
    done = _run(tmp_path, LONG_TERM_MEMORY_02)
    assert done.returncode == 0, done.stderr[-3000:]
    out = [r["u"] for r in json.loads(done.stdout.strip().splitlines()[-1])]
    assert [(r["size"], r["capacity"], r["notes"]) for r in out] == [
        (1, 3, 1), (2, 3, 2), (1, 3, 3), (2, 3, 4)]
    assert [r["by_name"] for r in out] == [[1, 1], [2, 2], [3, 3], [4, 4]]
    assert out[0]["mine"] == ["user", "hi", False] and out[1]["values"] == ["hi", "tea?"]
    # the third add filled the set: its three messages became one summary (the added item
    # went with them, so its id finds nothing)
    assert out[2]["mine"] is None and out[2]["values"] == ["summary of 3"]
    assert out[2]["compacted"] == 1
    assert out[3]["values"] == ["again", "summary of 3"] and out[3]["mine"][1] == "again"


# A tool whose parameters are typing.TypedDict classes, as Flink Agents' tool pages type
# them: on Python 3.10 and 3.11 pydantic refuses typing.TypedDict ("Please use
# typing_extensions.TypedDict"), so the agent's plan failed before this port found it.
TYPED_DICT_TOOL = """
    import json
    from typing import List, Optional, TypedDict
    from flink_agents_py.compat import (
        Agent, AgentsExecutionEnvironment, ChatMessage, ChatRequestEvent, ChatResponseEvent,
        InputEvent, MessageRole, OutputEvent, ResourceDescriptor, ResourceName, ResourceType,
        RunnerContext, Tool, action, chat_model_setup, tool)
    from flink_agents_py.testing import model_from_function, tool_call


    class Address(TypedDict):
        city: str
        zip: str


    class Line(TypedDict, total=False):
        sku: str
        qty: int


    class Order(TypedDict):
        address: Address
        lines: List[Line]


    def answer(request):
        if request.tool_results:
            return "shipped: " + request.tool_results[-1].content
        schema = next(t for t in request.tools if t.name == "ship_order").parameters
        return tool_call("ship_order", order={
            "address": {"city": "Oslo", "zip": "0150"},
            "lines": [{"sku": "tea", "qty": "2"}, {"sku": "cup"}]},
            note="fast" if "order" in schema["required"] else "schema?")


    class ShopAgent(Agent):
        @chat_model_setup
        @staticmethod
        def shop_model() -> ResourceDescriptor:
            return ResourceDescriptor(clazz=ResourceName.ChatModel.OLLAMA_SETUP,
                                      connection="scripted", model="m", tools=["ship_order"])

        @tool
        @staticmethod
        def ship_order(order: Order, note: Optional[str] = None) -> str:
            \"\"\"Ship an order.

            Args:
                order: the order.
                note: a note for the courier.
            \"\"\"
            qty = sum(line.get("qty", 1) for line in order["lines"])
            return f"{qty} to {order['address']['city']} ({note})"

        @action(InputEvent)
        @staticmethod
        def ask(event: InputEvent, ctx: RunnerContext) -> None:
            ctx.send_event(ChatRequestEvent(model="shop_model", messages=[
                ChatMessage(role=MessageRole.USER, content=event.input)]))

        @action(ChatResponseEvent)
        @staticmethod
        def done(event: ChatResponseEvent, ctx: RunnerContext) -> None:
            ctx.send_event(OutputEvent(output=event.response.content))


    def lookup(address: Address) -> str:
        \"\"\"Look an address up.\"\"\"
        return address["zip"]


    direct = Tool.from_callable(lookup)
    env = AgentsExecutionEnvironment.get_execution_environment()
    env.add_resource("scripted", ResourceType.CHAT_MODEL_CONNECTION,
                     model_from_function(answer))
    out = env.from_list([{"key": "k", "value": "ship it"}]).apply(ShopAgent()).to_list()
    env.execute()
    print(json.dumps([out, direct.metadata.get_parameters_dict()["required"],
                      direct.call(address={"city": "x", "zip": "9"})]))
"""


def test_a_tool_with_typed_dict_parameters(tmp_path):
    done = _run(tmp_path, TYPED_DICT_TOOL)
    assert done.returncode == 0, done.stderr[-3000:]
    out, required, called = json.loads(done.stdout.strip().splitlines()[-1])
    assert out == [{"k": "shipped: 3 to Oslo (fast)"}]
    assert required == ["address"] and called == "9"


# Decorators stacked either way round (``@staticmethod`` above ``@prompt``, ``@tool``,
# ``@chat_model_setup`` and ``@action``, as some Flink Agents programs write them), the
# prompt and tool fetched with ctx.get_resource, and an event class of the program's own
# given keywords it does not declare (Flink Agents' events are ``extra="allow"``: they were
# refused, "extra inputs are not permitted", before this port found it).
STACKED_DECORATORS = """
    import json
    from flink_agents_py.compat import (
        Agent, AgentsExecutionEnvironment, ChatMessage, ChatRequestEvent, ChatResponseEvent,
        Event, InputEvent, MessageRole, OutputEvent, Prompt, ResourceDescriptor, ResourceName,
        ResourceType, RunnerContext, Tool, action, chat_model_setup, prompt, tool)
    from flink_agents_py.testing import model_from_function, tool_call


    def answer(request):
        if request.tool_results:
            return "sum " + request.tool_results[-1].content
        return tool_call("add", a=1, b=2)


    class Counted(Event):
        value: int


    class StackedAgent(Agent):
        @staticmethod
        @prompt
        def my_prompt() -> Prompt:
            return Prompt.from_text("Answer: {input}")

        @staticmethod
        @chat_model_setup
        def my_model() -> ResourceDescriptor:
            return ResourceDescriptor(clazz=ResourceName.ChatModel.OLLAMA_SETUP,
                                      connection="scripted", model="m", tools=["add"],
                                      prompt="my_prompt")

        @staticmethod
        @tool
        def add(a: int, b: int) -> int:
            \"\"\"Add two numbers.

            Args:
                a: the first.
                b: the second.
            \"\"\"
            return a + b

        @staticmethod
        @action(InputEvent)
        def start(event: InputEvent, ctx: RunnerContext) -> None:
            adder = ctx.get_resource("add", ResourceType.TOOL)
            assert isinstance(adder, Tool), type(adder)  # (it was not, before this port)
            total = adder.call(a=2, b=3)
            text = ctx.get_resource("my_prompt", ResourceType.PROMPT).format_string(input="x")
            counted = Counted(value=total, source=event.input, note=text)
            counted.seen = True
            ctx.send_event(counted)

        @action(Counted)
        @staticmethod
        def middle(event: Counted, ctx: RunnerContext) -> None:
            ctx.short_term_memory.set("first", [event.value, event.source, event.note,
                                                event.get_attr("seen")])
            ctx.send_event(ChatRequestEvent(model="my_model", messages=[
                ChatMessage(role=MessageRole.USER, content="", extra_args={"input": "q"})]))

        @action(ChatResponseEvent)
        @staticmethod
        def end(event: ChatResponseEvent, ctx: RunnerContext) -> None:
            ctx.send_event(OutputEvent(output=[ctx.short_term_memory.get("first"),
                                               event.response.content]))


    env = AgentsExecutionEnvironment.get_execution_environment()
    env.add_resource("scripted", ResourceType.CHAT_MODEL_CONNECTION,
                     model_from_function(answer))
    out = env.from_list([{"key": "k", "value": "web"}]).apply(StackedAgent()).to_list()
    env.execute()
    print(json.dumps(out))
"""


def test_stacked_decorators_and_an_event_with_undeclared_fields(tmp_path):
    done = _run(tmp_path, STACKED_DECORATORS)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [
        {"k": [[5, "web", "Answer: x", True], "sum 3"]}]


# Flink Agents' events are mutable: a program builds one, sets its fields, then sends it.
# Here a program's own event takes that until it is sent; once sent (or received by an
# action) it is what was recorded, and setting a field says to send a changed copy. A
# message stays immutable, saying how to get a changed one.
MUTATED_EVENTS = """
    import json
    from flink_agents_py.compat import (
        Agent, AgentsExecutionEnvironment, ChatMessage, Event, InputEvent, OutputEvent,
        RunnerContext, action)
    from flink_agents_py.testing import check_replay_safety


    class Step(Event):
        value: int = 0
        note: str = ""


    class MutatingAgent(Agent):
        @action(InputEvent)
        @staticmethod
        def start(event: InputEvent, ctx: RunnerContext) -> None:
            step = Step()
            step.value = event.input * 2
            step.note = "built"
            step.origin = "start"  # an undeclared field: an attribute, as there
            ctx.send_event(step)
            refused = []
            for name, value in (("value", 99), ("origin", "later")):
                try:
                    setattr(step, name, value)
                except Exception as e:
                    refused.append([name, "sent or received" in str(e),
                                    "model_copy(update={'attributes'" in str(e)])
            ctx.short_term_memory.set("refused", refused)

        @action(Step)
        @staticmethod
        def on_step(event: Step, ctx: RunnerContext) -> None:
            try:
                event.value = -1
                received = "set"
            except Exception as e:
                received = "sent or received" in str(e)
            message = ChatMessage(role="user", content="hi")
            try:
                message.content = "changed"
                changed = "set"
            except Exception as e:
                changed = "model_copy(update={'content'" in str(e)
            ctx.send_event(OutputEvent(output=[
                event.value, event.note, event.origin, received, changed,
                ctx.short_term_memory.get("refused"),
                message.model_copy(update={"content": "copy"}).content]))


    env = AgentsExecutionEnvironment.get_execution_environment()
    out = env.from_list([{"key": "k", "value": 3}]).apply(MutatingAgent()).to_list()
    env.execute()
    print(json.dumps(out))
    try:
        Step().value = "not a number"
    except Exception as e:
        print(json.dumps(["invalid", type(e).__name__]))
    report = check_replay_safety(MutatingAgent(), [{"key": "k", "value": 3}])
    report.assert_ok()
    print(json.dumps(["replay", report.ok]))
"""


def test_an_event_s_fields_are_set_until_it_is_sent(tmp_path):
    done = _run(tmp_path, MUTATED_EVENTS)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(line) for line in done.stdout.strip().splitlines()[-3:]]
    assert lines[0] == [{"k": [6, "built", "start", True, True,
                               [["value", True, False], ["origin", True, True]], "copy"]}]
    assert lines[1] == ["invalid", "ValidationError"]
    assert lines[2] == ["replay", True]


# Flink Agents' e2e agents (e2e_tests_integration/mock_chat_model_agent.py and
# tool_parameter_injection_agent.py), their imports changed only: chat model connections and
# setups of the program's own (a setup overriding chat() to format its prompt and fetch its
# tools through resource_context, a setup with descriptor fields of its own, a connection
# reading tool.metadata and returning OpenAI-form tool calls with a UUID id and
# ToolType.FUNCTION), a tool with an argument injected from the configuration. Each output
# is Flink Agents' ground truth for the record (resources/ground_truth/...).
MOCK_CHAT_MODEL_AGENTS = r'''import uuid
from typing import Any, Dict, List, Sequence

from pydantic import BaseModel

from flink_agents_py.compat import (
    Agent, AgentsExecutionEnvironment, BaseChatModelConnection, BaseChatModelSetup,
    ChatMessage, ChatRequestEvent, ChatResponseEvent, Event, EventType, InputEvent,
    MessageRole, OutputEvent, Prompt, ResourceDescriptor, ResourceType, RunnerContext,
    ToolType, action, chat_model_connection, chat_model_setup, prompt, tool)


class MockChatModelInput(BaseModel):
    id: int
    content: str


class MockChatModelOutput(BaseModel):
    id: int
    result: str


class MockChatModelConnection(BaseChatModelConnection):
    def chat(self, messages: Sequence[ChatMessage], tools: List | None = None,
             **kwargs: Any) -> ChatMessage:
        if "sum" in messages[-1].content:
            input = messages[-1].content
            assert tools[0].name == "add"
            function = {"name": "add", "arguments": {"a": 1, "b": 2}}
            tool_call = {"id": uuid.uuid4(), "type": ToolType.FUNCTION, "function": function}
            return ChatMessage(role=MessageRole.ASSISTANT, content=input, tool_calls=[tool_call])
        content = "\n".join([message.content for message in messages])
        return ChatMessage(role=MessageRole.ASSISTANT, content=content)


class MockChatModel(BaseChatModelSetup):
    def open(self) -> None:
        """Do nothing."""

    @property
    def model_kwargs(self) -> Dict[str, Any]:
        return {}

    def chat(self, messages: Sequence[ChatMessage], prompt_args: Dict[str, Any] | None = None,
             **kwargs: Any) -> ChatMessage:
        server = self.resource_context.get_resource(
            self.connection, ResourceType.CHAT_MODEL_CONNECTION)
        if self.prompt is not None:
            if isinstance(self.prompt, str):
                prompt = self.resource_context.get_resource(self.prompt, ResourceType.PROMPT)
            else:
                prompt = self.prompt
            if "sum" in messages[-1].content:
                str_prompt_args = ({k: str(v) for k, v in prompt_args.items()}
                                   if prompt_args else {})
                messages = prompt.format_messages(**str_prompt_args)
        tools = None
        if self.tools is not None:
            tools = [self.resource_context.get_resource(tool_name, ResourceType.TOOL)
                     for tool_name in self.tools]
        return server.chat(messages, tools=tools, **kwargs)


class BuiltInActionAgent(Agent):
    @prompt
    @staticmethod
    def prompt() -> Prompt:
        return Prompt.from_text(
            text="Please call the appropriate tool to do the following task: {task}")

    @chat_model_connection
    @staticmethod
    def mock_connection() -> ResourceDescriptor:
        return ResourceDescriptor(
            clazz=f"{MockChatModelConnection.__module__}.{MockChatModelConnection.__name__}")

    @chat_model_setup
    @staticmethod
    def mock_chat_model() -> ResourceDescriptor:
        return ResourceDescriptor(
            clazz=f"{MockChatModel.__module__}.{MockChatModel.__name__}",
            connection="mock_connection", model="mock-model", prompt="prompt", tools=["add"])

    @tool
    @staticmethod
    def add(a: int, b: int) -> int:
        """Calculate the sum of a and b.

        Parameters
        ----------
        a : int
            The first operand
        b : int
            The second operand

        Returns:
        -------
        int:
            The sum of a and b
        """
        return a + b

    @action(EventType.InputEvent)
    @staticmethod
    def process_input(event: Event, ctx: RunnerContext) -> None:
        input_data = MockChatModelInput.model_validate(InputEvent.from_event(event).input)
        ctx.short_term_memory.set("input_id", input_data.id)
        ctx.send_event(ChatRequestEvent(
            model="mock_chat_model",
            messages=[ChatMessage(role=MessageRole.USER, content=input_data.content)],
            prompt_args={"task": input_data.content}))

    @action(EventType.ChatResponseEvent)
    @staticmethod
    def process_chat_response(event: Event, ctx: RunnerContext) -> None:
        response = ChatResponseEvent.from_event(event).response
        input_id = ctx.short_term_memory.get("input_id")
        ctx.send_event(OutputEvent(
            output=MockChatModelOutput(id=input_id, result=response.content)))


class GetResourceChatModel(BaseChatModelSetup):
    host: str
    desc: str

    def open(self) -> None:
        """Do nothing."""

    @property
    def model_kwargs(self) -> Dict[str, Any]:
        return {}

    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        return ChatMessage(role=MessageRole.ASSISTANT,
                           content=f"{messages[0].content} {self.host} {self.desc}")


class GetResourceAgent(Agent):
    @chat_model_setup
    @staticmethod
    def mock_chat_model() -> ResourceDescriptor:
        return ResourceDescriptor(
            clazz=f"{GetResourceChatModel.__module__}.{GetResourceChatModel.__name__}",
            host="8.8.8.8", desc="mock chat model just for testing.", connection="mock",
            model="mock-model")

    @action(EventType.InputEvent)
    @staticmethod
    def mock_action(event: Event, ctx: RunnerContext) -> None:
        input_data = MockChatModelInput.model_validate(InputEvent.from_event(event).input)
        mock_chat_model = ctx.get_resource(name="mock_chat_model", type=ResourceType.CHAT_MODEL)
        content = mock_chat_model.chat(
            messages=[ChatMessage(role=MessageRole.USER, content=input_data.content)]).content
        ctx.send_event(OutputEvent(output=MockChatModelOutput(id=input_data.id, result=content)))


if __name__ == "__main__":
    rows = [MockChatModelInput(id=1, content="calculate the sum of 1 and 2."),
            MockChatModelInput(id=2, content="hello there")]
    for agent in (BuiltInActionAgent(), GetResourceAgent()):
        env = AgentsExecutionEnvironment.get_execution_environment()
        out = env.from_list([{"key": r.id, "value": r} for r in rows]).apply(agent).to_list()
        env.execute()
        print(type(agent).__name__, out)
'''

TOOL_PARAMETER_INJECTION = r'''from pyflink.datastream import KeySelector

from flink_agents_py.compat import (
    Agent, AgentsExecutionEnvironment, BaseChatModelConnection, BaseChatModelSetup,
    ChatMessage, ChatRequestEvent, ChatResponseEvent, Event, InjectedArg, InputEvent,
    MessageRole, OutputEvent, OutputSchema, ResourceDescriptor, RunnerContext, action,
    chat_model_connection, chat_model_setup, tool)
from flink_agents_py.compat import Tool as BaseTool


class OrderKeySelector(KeySelector):
    def get_key(self, value: str) -> str:
        return value


class ToolParameterInjectionAgent(Agent):
    @chat_model_connection
    @staticmethod
    def mock_connection() -> ResourceDescriptor:
        return ResourceDescriptor(
            clazz=f"{MockToolChatConnection.__module__}.{MockToolChatConnection.__name__}")

    @chat_model_setup
    @staticmethod
    def mock_model() -> ResourceDescriptor:
        return ResourceDescriptor(
            clazz=f"{MockToolChatModel.__module__}.{MockToolChatModel.__name__}",
            connection="mock_connection", model="mock", tools=["query_order"])

    @tool(injected_args={"tenant_id": InjectedArg.from_config("tenant_id")})
    @staticmethod
    def query_order(order_id: str, tenant_id: str) -> str:
        """Query order in the current tenant.

        Parameters
        ----------
        order_id : str
            The order id requested by the model.
        tenant_id : str
            The tenant id injected by runtime.

        Returns:
        -------
        str:
            The tenant-scoped order identifier.
        """
        return f"checked:{tenant_id}:{order_id}"

    @action(InputEvent.EVENT_TYPE)
    @staticmethod
    def request_chat(event: Event, ctx: RunnerContext) -> None:
        order_id = str(InputEvent.from_event(event).input)
        ctx.send_event(ChatRequestEvent(
            model="mock_model", messages=[ChatMessage.of(MessageRole.USER, order_id)]))

    @action(ChatResponseEvent.EVENT_TYPE)
    @staticmethod
    def emit_result(event: Event, ctx: RunnerContext) -> None:
        response_event = ChatResponseEvent.from_event(event)
        ctx.send_event(OutputEvent(output=response_event.response.text))


class MockToolChatConnection(BaseChatModelConnection):
    def chat(self, messages: list[ChatMessage], tools: list[BaseTool] | None = None,
             output_schema: OutputSchema | None = None, **kwargs: object) -> ChatMessage:
        self._reject_unsupported_output_schema(output_schema)
        last_message = messages[-1]
        if last_message.role == MessageRole.TOOL:
            return ChatMessage.of(MessageRole.ASSISTANT, last_message.text)
        for candidate_tool in tools or []:
            if "tenant_id" in str(candidate_tool.metadata.get_parameters_dict()):
                msg = "Injected argument leaked into tool schema."
                raise RuntimeError(msg)
        order_id = str(last_message.text)
        return ChatMessage.of(MessageRole.ASSISTANT, "", tool_calls=[{
            "id": f"call-{order_id}", "type": "function",
            "function": {"name": "query_order", "arguments": {"order_id": order_id}}}])


class MockToolChatModel(BaseChatModelSetup):
    @property
    def model_kwargs(self):
        return {}


if __name__ == "__main__":
    agents_env = AgentsExecutionEnvironment.get_execution_environment()
    agents_env.get_config().set_str("tenant_id", "tenant-python")
    out = agents_env.from_list([{"key": o, "value": o} for o in ("order-1", "order-2")]
                               ).apply(ToolParameterInjectionAgent()).to_list()
    agents_env.execute()
    print(out)
'''


def test_flink_agents_mock_chat_model_e2e_agents(tmp_path):
    done = _run(tmp_path, MOCK_CHAT_MODEL_AGENTS)
    assert done.returncode == 0, done.stderr[-3000:]
    built_in, get_resource = done.stdout.strip().splitlines()[-2:]
    task = "calculate the sum of 1 and 2."
    summed = f"{task}\\nPlease call the appropriate tool to do the following task: {task}\\n3"
    assert built_in == (f"BuiltInActionAgent [{{1: MockChatModelOutput(id=1, result='{summed}')}}, "
                        "{2: MockChatModelOutput(id=2, result='hello there')}]")
    suffix = " 8.8.8.8 mock chat model just for testing."
    assert get_resource == (
        f"GetResourceAgent [{{1: MockChatModelOutput(id=1, result='{task}{suffix}')}}, "
        f"{{2: MockChatModelOutput(id=2, result='hello there{suffix}')}}]")


def test_flink_agents_tool_parameter_injection_e2e_agent(tmp_path):
    pytest.importorskip("pyflink")
    done = _run(tmp_path, TOOL_PARAMETER_INJECTION)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == (
        "[{'order-1': 'checked:tenant-python:order-1'}, "
        "{'order-2': 'checked:tenant-python:order-2'}]")


# Flink Agents' custom tool, a subclass of its Tool (metadata, tool_type(), call()), has no
# counterpart here: the class statement itself says how to write the tool instead (it was a
# plain class before, failing later, when built or called, with no word of what to do).
def test_subclassing_tool_says_how_to_write_the_tool(tmp_path):
    done = _run(tmp_path, """
        from flink_agents_py.compat import Tool, ToolType

        class Upper(Tool):
            @classmethod
            def tool_type(cls):
                return ToolType.FUNCTION

            def call(self, *args, **kwargs):
                return kwargs["text"].upper()
    """)
    assert done.returncode == 1
    assert "TypeError: Upper subclasses Tool, which a program cannot extend here" in done.stderr
    assert "@tool, or given as Tool.from_callable(fn)" in done.stderr
