"""Apache Flink Agents' e2e test programs, ported with their imports changed only and run
from a directory outside the repository as a user's own modules (round 4 of the port).

- Its ReAct e2e test as Flink Agents 0.2 wrote it (``e2e_tests_integration/
  react_agent_test.py``): the retry options set as ``AgentConfigOptions.ERROR_HANDLING_STRATEGY``
  and ``AgentConfigOptions.MAX_RETRIES`` (0.3 moved them to ``AgentExecutionOptions``). The
  program stopped there, an ``AttributeError``, before this port found it. Its model is an
  Ollama-compatible server on 127.0.0.1 (``tests/support/arith_ollama.py``), found through
  ``OLLAMA_HOST``, so not even the connection line changed; the tool calls are read back from
  the file event log as its ``test_utils.collect_tool_invocations`` reads them.
- Its workflow e2e test (``workflow_test.py``): an event class with its own ``__init__``
  carrying a ``MemoryRef``, short-term memory read through it, records without a key.
- Trigger conditions (its main branch, 0.4: ``@action(EventType.InputEvent,
  "attributes.ready == true")``, CEL) are not evaluated here: such a trigger was taken for an
  event type no event has, so its action never ran without a word; the plan now says so.
- Its ReAct agent raises a ``RuntimeError`` for an input it cannot make a message of, and
  sends ``str(input)`` for a primitive (``None`` is ``"None"``); ours raised an error that was
  no ``RuntimeError`` and sent an empty message for ``None``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from flink_agents_py.agents import ReActAgentError
from flink_agents_py.api import PlanError
from flink_agents_py.compat import (
    Agent,
    AgentConfigOptions,
    AgentExecutionOptions,
    AgentsExecutionEnvironment,
    BaseChatModelConnection,
    BaseChatModelSetup,
    ChatMessage,
    Event,
    EventType,
    MessageRole,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    action,
)
from flink_agents_py.compat import ReActAgent as CompatReActAgent
from tests.support.arith_ollama import TOOLS_MODULE, arith_ollama

ROOT = Path(__file__).resolve().parents[1]
VENV_PY = ROOT / ".venv" / "bin" / "python"
PYTHON = VENV_PY if VENV_PY.exists() else Path(sys.executable)

pytestmark = pytest.mark.timeout(120)


def _run(tmp_path: Path, script: str, **env: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "prog.py").write_text(textwrap.dedent(script))
    environ = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    return subprocess.run(
        [str(PYTHON), "prog.py"],
        cwd=tmp_path,
        env=environ,
        capture_output=True,
        text=True,
        timeout=100,
    )


# Flink Agents 0.2's react_agent_test.py, test_react_agent_on_local_runner, its imports changed;
# the event log lines (baseLogDir, collect_tool_invocations) are its 0.3 version's.
REACT_0_2 = """
    import json
    import os
    import sys
    import tempfile
    from pathlib import Path

    from pydantic import BaseModel

    from flink_agents_py.compat import (
        AgentConfigOptions, AgentsExecutionEnvironment, ChatMessage, ErrorHandlingStrategy,
        MessageRole, Prompt, ReActAgent, ResourceDescriptor, ResourceName, ResourceType, Tool)
    from react_agent_tools import add, multiply

    OLLAMA_MODEL = os.environ.get("REACT_OLLAMA_MODEL", "qwen3:1.7b")
    os.environ["OLLAMA_CHAT_MODEL"] = OLLAMA_MODEL


    class InputData(BaseModel):
        a: int
        b: int
        c: int


    class OutputData(BaseModel):
        result: int


    def collect_tool_invocations(log_dir):
        invocations = []
        for log_file in sorted(Path(log_dir).glob("events-*.log")):
            with log_file.open() as handle:
                for line in handle:
                    if not line.strip():
                        continue
                    record = json.loads(line)
                    if record.get("eventType") != "_tool_request_event":
                        continue
                    for tool_call in record["event"]["attributes"].get("tool_calls", []):
                        function = tool_call["function"]
                        invocations.append({"name": function["name"],
                                            "arguments": function["arguments"]})
        return invocations


    env = AgentsExecutionEnvironment.get_execution_environment()
    env.get_config().set(
        AgentConfigOptions.ERROR_HANDLING_STRATEGY, ErrorHandlingStrategy.RETRY
    )
    env.get_config().set(AgentConfigOptions.MAX_RETRIES, 3)
    log_dir = Path(tempfile.mkdtemp()) / "event_logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    env.get_config().set_str("baseLogDir", str(log_dir))

    (
        env.add_resource(
            "ollama",
            ResourceType.CHAT_MODEL_CONNECTION,
            ResourceDescriptor(clazz=ResourceName.ChatModel.OLLAMA_CONNECTION,
                               request_timeout=240.0),
        )
        .add_resource("add", ResourceType.TOOL, Tool.from_callable(add))
        .add_resource("multiply", ResourceType.TOOL, Tool.from_callable(multiply))
    )

    prompt = Prompt.from_messages(
        messages=[
            ChatMessage(
                role=MessageRole.SYSTEM,
                content='An example of output is {"result": 30.32}.',
            ),
            ChatMessage(role=MessageRole.USER, content="What is ({a} + {b}) * {c}"),
        ],
    )

    agent = ReActAgent(
        chat_model=ResourceDescriptor(
            clazz=ResourceName.ChatModel.OLLAMA_SETUP,
            connection="ollama",
            model=OLLAMA_MODEL,
            tools=["add", "multiply"],
        ),
        prompt=prompt,
        output_schema=OutputData,
    )

    input_list = []
    output_list = env.from_list(input_list).apply(agent).to_list()
    input_list.append({"key": "0001", "value": InputData(a=2123, b=2321, c=312)})

    env.execute()

    assert len(output_list) == 1, output_list
    assert output_list[0]["0001"].result == 1386528
    print("INVOCATIONS", json.dumps(collect_tool_invocations(log_dir)))
    print("OPTIONS", env.get_config().get(AgentConfigOptions.ERROR_HANDLING_STRATEGY),
          env.get_config().get(AgentConfigOptions.MAX_RETRIES))
"""


def test_flink_agents_0_2_react_e2e_program(tmp_path: Path) -> None:
    (tmp_path / "react_agent_tools.py").write_text(TOOLS_MODULE)
    with arith_ollama() as (url, requests):
        proc = _run(tmp_path, REACT_0_2, OLLAMA_HOST=url)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("INVOCATIONS "))
    # the model's reasoning chain, as its 0.3 test asserts it from the event log
    assert json.loads(line.split(" ", 1)[1]) == [
        {"name": "add", "arguments": {"a": 2123, "b": 2321}},
        {"name": "multiply", "arguments": {"a": 4444, "b": 312}},
    ]
    assert "OPTIONS ErrorHandlingStrategy.RETRY 3" in proc.stdout
    # the prompt's literal JSON braces reached the model as written, the input filled it
    first = requests[0]["messages"]
    assert first[0] == {"role": "system", "content": 'An example of output is {"result": 30.32}.'}
    assert first[-1] == {"role": "user", "content": "What is (2123 + 2321) * 312"}


def test_flink_agents_0_2_option_names_are_the_0_3_options() -> None:
    assert (
        AgentConfigOptions.ERROR_HANDLING_STRATEGY is AgentExecutionOptions.ERROR_HANDLING_STRATEGY
    )
    assert AgentConfigOptions.MAX_RETRIES is AgentExecutionOptions.MAX_RETRIES
    assert AgentConfigOptions.MAX_RETRIES.get_key() == "max-retries"


# Flink Agents' workflow_test.py (e2e_tests_integration), its imports changed; its ground
# truth (resources/ground_truth/test_workflow.txt) is what each key's outputs must be.
WORKFLOW = """
    import json
    from typing import TYPE_CHECKING, Any, ClassVar

    from pydantic import BaseModel

    from flink_agents_py.compat import (
        Agent, AgentsExecutionEnvironment, Event, EventType, InputEvent, OutputEvent,
        RunnerContext, action)

    if TYPE_CHECKING:
        from flink_agents_py.compat import MemoryRef


    class ProcessedData(BaseModel):
        content: str
        visit_count: int


    class MyEvent(Event):
        EVENT_TYPE: ClassVar[str] = "_my_event"

        def __init__(self, value: Any) -> None:
            super().__init__(
                type=MyEvent.EVENT_TYPE,
                attributes={"value": value},
            )

        @classmethod
        def from_event(cls, event: "Event") -> "MyEvent":
            assert "value" in event.attributes, "Missing 'value' in event attributes"
            return cls(value=event.attributes["value"])

        @property
        def value(self) -> Any:
            return self.attributes["value"]


    class MyAgent(Agent):
        @action(EventType.InputEvent)
        @staticmethod
        def first_action(event: Event, ctx: RunnerContext) -> None:
            key = ctx.key
            input_message = InputEvent.from_event(event).input
            memory = ctx.short_term_memory

            data_path = f"user_data.{key}"
            stored = memory.get(data_path)
            previous_data = ProcessedData.model_validate(stored) if stored else None
            current_count = previous_data.visit_count if previous_data else 0
            new_count = current_count + 1

            data_to_store = ProcessedData(content=input_message, visit_count=new_count)
            data_ref = memory.set(data_path, data_to_store.model_dump(mode="json"))

            ctx.send_event(MyEvent(value=data_ref))

            processed_content = f"{input_message} -> processed_by_first_action"
            key_with_count = f"(visit {new_count} times)"
            ctx.send_event(OutputEvent(output={key_with_count: processed_content}))

        @action(MyEvent.EVENT_TYPE)
        @staticmethod
        def second_action(event: Event, ctx: RunnerContext) -> None:
            content_ref: MemoryRef = MyEvent.from_event(event).value
            memory = ctx.short_term_memory

            processed_data = ProcessedData.model_validate(memory.get(content_ref))

            base_message = processed_data.content
            current_count = processed_data.visit_count
            new_count = current_count + 1

            updated_data_to_store = ProcessedData(
                content=base_message, visit_count=new_count
            )
            memory.set(content_ref.path, updated_data_to_store.model_dump(mode="json"))

            final_content = f"{base_message} -> processed by second_action"
            key_with_count = f"(visit {new_count} times)"
            ctx.send_event(OutputEvent(output={key_with_count: final_content}))


    env = AgentsExecutionEnvironment.get_execution_environment()
    input_list = []
    agent = MyAgent()
    output_list = env.from_list(input_list).apply(agent).to_list()
    input_list.append({"key": "bob", "value": "The message from bob"})
    input_list.append({"k": "john", "v": "The message from john"})
    input_list.append({"key": "john", "value": "Second message from john"})
    input_list.append({"key": "bob", "value": "Second message from bob"})
    input_list.append({"value": "Message from unknown"})
    env.execute()
    for output in output_list:
        print("OUT", json.dumps(output))
"""


def test_flink_agents_workflow_e2e_program(tmp_path: Path) -> None:
    proc = _run(tmp_path, WORKFLOW)
    assert proc.returncode == 0, proc.stderr[-3000:]
    outs = [json.loads(x[4:]) for x in proc.stdout.splitlines() if x.startswith("OUT ")]
    first, second = "processed_by_first_action", "processed by second_action"
    assert outs[:8] == [
        {"bob": {"(visit 1 times)": f"The message from bob -> {first}"}},
        {"bob": {"(visit 2 times)": f"The message from bob -> {second}"}},
        {"john": {"(visit 1 times)": f"The message from john -> {first}"}},
        {"john": {"(visit 2 times)": f"The message from john -> {second}"}},
        {"john": {"(visit 3 times)": f"Second message from john -> {first}"}},
        {"john": {"(visit 4 times)": f"Second message from john -> {second}"}},
        {"bob": {"(visit 3 times)": f"Second message from bob -> {first}"}},
        {"bob": {"(visit 4 times)": f"Second message from bob -> {second}"}},
    ]
    # the record without a key ran under a key of its own, both outputs under it
    (unknown,) = {next(iter(o)) for o in outs[8:]}
    assert unknown not in ("bob", "john")
    assert [next(iter(o.values())) for o in outs[8:]] == [
        {"(visit 1 times)": f"Message from unknown -> {first}"},
        {"(visit 2 times)": f"Message from unknown -> {second}"},
    ]


class _Conditional(Agent):
    @action(EventType.InputEvent)
    @staticmethod
    def first(event: Event, ctx: RunnerContext) -> None:
        ctx.send_event(Event(type="Scored", attributes={"score": event.input}))

    @action(EventType.InputEvent, "attributes.ready == true")
    @staticmethod
    def high(event: Event, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output="high"))


def _outputs(agent: Agent, records: list[dict]) -> list[dict]:
    env = AgentsExecutionEnvironment.get_execution_environment()
    out = env.from_list(records).apply(agent).to_list()
    env.execute()
    return out


def test_a_condition_expression_trigger_is_refused_naming_it() -> None:
    with pytest.raises(PlanError) as err:
        _outputs(_Conditional(), [{"key": "a", "value": 5}])
    text = str(err.value)
    assert "action 'high'" in text and "'attributes.ready == true'" in text
    assert "condition expression" in text and "test the condition in the action" in text
    # the same through add_action, as Flink Agents' programmatic form writes it
    agent = Agent()
    agent.add_action(
        name="gate", trigger_conditions=["Scored && attributes.score > 3"], func=_Conditional.first
    )
    with pytest.raises(PlanError, match="'gate' is triggered by 'Scored && attributes"):
        _outputs(agent, [{"key": "a", "value": 5}])


def test_a_condition_expression_in_yaml_is_refused_at_its_line(tmp_path: Path) -> None:
    (tmp_path / "agents.yaml").write_text(
        textwrap.dedent("""\
        agents:
          - name: cond_agent
            actions:
              - name: echo
                function: tests.test_compat_e2e_programs:_echo
                trigger_conditions: [input, "attributes.ready == true"]
        """)
    )
    env = AgentsExecutionEnvironment.get_execution_environment()
    with pytest.raises(
        Exception,
        match=r"agents.yaml:2: .*'echo' is triggered by "
        r"'attributes.ready == true', a condition expression",
    ):
        env.load_yaml(str(tmp_path / "agents.yaml"))


def _echo(event: Event, ctx: RunnerContext) -> None:
    ctx.send_event(OutputEvent(output=event.input))


class _DottedTypes(Agent):
    @action(EventType.InputEvent)
    @staticmethod
    def first(event: Event, ctx: RunnerContext) -> None:
        ctx.send_event(Event(type="com.example.Review-Done", attributes={"n": event.input}))

    @action("com.example.Review-Done")
    @staticmethod
    def done(event: Event, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output=event.get_attr("n")))


def test_an_event_type_with_dots_and_dashes_is_still_a_type() -> None:
    assert _outputs(_DottedTypes(), [{"key": "a", "value": 5}]) == [{"a": 5}]


SENT: list[str] = []


class _Seen(BaseChatModelConnection):
    """Answers ``ok``, keeping the user messages it was sent in ``SENT``."""

    def chat(self, messages, tools=None, **kwargs):  # noqa: ANN001, ANN201, ARG002
        SENT.extend(m.content for m in messages if m.role == MessageRole.USER)
        return ChatMessage(role=MessageRole.ASSISTANT, content="ok")


class _Setup(BaseChatModelSetup):
    @property
    def model_kwargs(self) -> dict:
        return {}


def test_react_agent_sends_str_of_a_primitive_and_raises_a_runtime_error() -> None:
    env = AgentsExecutionEnvironment.get_execution_environment()
    env.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ResourceDescriptor(clazz=_Seen))
    agent = CompatReActAgent(chat_model=ResourceDescriptor(clazz=_Setup, connection="conn"))
    SENT.clear()
    out = (
        env.from_list(
            [
                {"key": "a", "value": None},
                {"key": "b", "value": True},
                {"key": "c", "value": {"x": 1}},
            ]
        )
        .apply(agent)
        .to_list()
    )
    with pytest.raises(Exception, match="1 record"):
        env.execute()
    assert SENT == ["None", "True"]  # None was sent as an empty message
    assert out == [{"a": "ok"}, {"b": "ok"}]
    assert issubclass(ReActAgentError, RuntimeError)


# Flink Agents 0.3's api/tests/test_agent_add_action.py as a program (its imports changed),
# then an agent whose actions are named by PythonFunction descriptors, run on the local runner
# from the user's own module. PythonFunction and JavaFunction were an ImportError before this
# port found them; a JavaFunction action is refused when the plan is built, naming it.
HANDLERS = """
from flink_agents_py.compat import Event, OutputEvent


class Handlers:
    @staticmethod
    def handle(event, ctx):
        ctx.send_event(Event(type="Scaled", attributes={"v": event.input * 10}))


def done(event, ctx):
    ctx.send_event(OutputEvent(output=event.get_attr("v")))
"""

ADD_ACTION = """
    import pytest

    from flink_agents_py.compat import (
        Agent, AgentsExecutionEnvironment, Event, InputEvent, JavaFunction, PythonFunction,
        RunnerContext)
    import handlers


    def _dummy_action(event: Event, ctx: RunnerContext) -> None:
        pass


    def _make_java_function() -> JavaFunction:
        return JavaFunction.for_action("com.example.Handlers", "handle")


    jf = JavaFunction.for_action("com.example.Handlers", "handle")
    assert jf.parameter_types == [
        "org.apache.flink.agents.api.Event",
        "org.apache.flink.agents.api.context.RunnerContext",
    ]

    agent = Agent()
    pf = PythonFunction(module="pkg.mod", qualname="MyClass.method")
    agent.add_action(name="act", trigger_conditions=[InputEvent.EVENT_TYPE], func=pf)
    trigger_conditions, stored, config = agent.actions["act"]
    assert trigger_conditions == [InputEvent.EVENT_TYPE]
    assert stored is pf, "PythonFunction descriptor should not be re-wrapped."
    assert config is None

    agent = Agent()
    jf = _make_java_function()
    agent.add_action(name="act", trigger_conditions=[InputEvent.EVENT_TYPE], func=jf)
    trigger_conditions, stored, _ = agent.actions["act"]
    assert stored is jf and isinstance(stored, JavaFunction)

    for make in (lambda: _dummy_action, _make_java_function):
        agent = Agent()
        agent.add_action(name="act", trigger_conditions=[InputEvent.EVENT_TYPE], func=make())
        with pytest.raises(ValueError, match="act"):
            agent.add_action(name="act", trigger_conditions=[InputEvent.EVENT_TYPE],
                             func=make())

    agent = Agent()
    agent.add_action(name="act", trigger_conditions=[InputEvent.EVENT_TYPE],
                     func=_dummy_action, retry=3, timeout_sec=10)
    assert agent.actions["act"][2] == {"retry": 3, "timeout_sec": 10}
    agent = Agent()
    result = agent.add_action(name="act", trigger_conditions=[InputEvent.EVENT_TYPE],
                              func=_dummy_action)
    assert result is agent and agent.actions["act"][2] is None
    agent = Agent()
    agent.add_action(name="multi", trigger_conditions=["evt_a", "evt_b", "evt_c"],
                     func=_make_java_function())
    assert agent.actions["multi"][0] == ["evt_a", "evt_b", "evt_c"]

    # an agent of PythonFunction actions runs the functions they name
    agent = (
        Agent()
        .add_action(name="scale", trigger_conditions=[InputEvent.EVENT_TYPE],
                    func=PythonFunction(module="handlers", qualname="Handlers.handle"))
        .add_action(name="done", trigger_conditions=["Scaled"],
                    func=PythonFunction.from_callable(handlers.done))
    )
    env = AgentsExecutionEnvironment.get_execution_environment()
    out = env.from_list([{"key": "a", "value": 2}, {"key": "b", "value": 5}]).apply(agent).to_list()
    env.execute()
    print("OUT", out)

    java = Agent().add_action(name="j", trigger_conditions=[InputEvent.EVENT_TYPE],
                              func=_make_java_function())
    env = AgentsExecutionEnvironment.get_execution_environment()
    try:
        env.from_list([{"key": "a", "value": 1}]).apply(java)
        env.execute()
    except Exception as err:
        print("JAVA", type(err).__name__, err)
"""


def test_flink_agents_add_action_tests_and_python_function_actions(tmp_path: Path) -> None:
    (tmp_path / "handlers.py").write_text(HANDLERS)
    proc = _run(tmp_path, ADD_ACTION)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "OUT [{'a': 20}, {'b': 50}]" in proc.stdout
    assert "JAVA PlanError" in proc.stdout
    assert "action 'j' is the Java method com.example.Handlers.handle (JavaFunction)" in (
        proc.stdout
    )
    assert "write the action as a Python function taking (event, ctx)" in proc.stdout


def test_a_python_function_naming_nothing_is_a_plan_error_naming_it() -> None:
    from flink_agents_py.compat import PythonFunction

    agent = Agent().add_action(
        name="p",
        trigger_conditions=[EventType.InputEvent],
        func=PythonFunction(module="tests.test_compat_e2e_programs", qualname="nope"),
    )
    with pytest.raises(
        PlanError,
        match=r"action 'p' is PythonFunction\(module='tests.test_"
        r"compat_e2e_programs', qualname='nope'\), which "
        r"names no function: AttributeError",
    ):
        _outputs(agent, [{"key": "a", "value": 1}])


# Flink Agents' ToolMetadata (api/tools/tool.py, 0.3): built with args_schema (a pydantic
# class), read back through args_schema.model_json_schema(), as a connection written for it
# builds its provider's tool list. ToolMetadata was an ImportError and args_schema an
# AttributeError (ours kept only parameters) before this port found them.
TOOL_METADATA = """
    from typing import Any, List, Sequence

    from pydantic import BaseModel, Field

    from flink_agents_py.compat import (
        Agent, AgentsExecutionEnvironment, BaseChatModelConnection, BaseChatModelSetup,
        ChatMessage, ChatRequestEvent, ChatResponseEvent, EventType, InputEvent, MessageRole,
        OutputEvent, ResourceDescriptor, RunnerContext, ToolMetadata, action,
        chat_model_connection, chat_model_setup, tool)


    def to_provider_tool(metadata: ToolMetadata) -> dict:
        return {"type": "function", "function": {
            "name": metadata.name, "description": metadata.description,
            "parameters": metadata.args_schema.model_json_schema()}}


    class ToolListingConnection(BaseChatModelConnection):
        def chat(self, messages: Sequence[ChatMessage], tools: List[Any] | None = None,
                 **kwargs: Any) -> ChatMessage:
            specs = [to_provider_tool(t.metadata) for t in tools or []]
            return ChatMessage(role=MessageRole.ASSISTANT, content=repr(specs))


    class Setup(BaseChatModelSetup):
        @property
        def model_kwargs(self) -> dict:
            return {}


    class ListingAgent(Agent):
        @chat_model_connection
        @staticmethod
        def conn() -> ResourceDescriptor:
            return ResourceDescriptor(clazz=ToolListingConnection)

        @chat_model_setup
        @staticmethod
        def model() -> ResourceDescriptor:
            return ResourceDescriptor(clazz=Setup, connection="conn", tools=["add"])

        @tool
        @staticmethod
        def add(a: int, b: int) -> int:
            \"\"\"Calculate the sum of a and b.\"\"\"
            return a + b

        @action(EventType.InputEvent)
        @staticmethod
        def ask(event, ctx: RunnerContext) -> None:
            ctx.send_event(ChatRequestEvent(model="model", messages=[
                ChatMessage(role=MessageRole.USER, content=InputEvent.from_event(event).input)]))

        @action(EventType.ChatResponseEvent)
        @staticmethod
        def answer(event, ctx: RunnerContext) -> None:
            ctx.send_event(OutputEvent(output=ChatResponseEvent.from_event(event).response.content))


    env = AgentsExecutionEnvironment.get_execution_environment()
    out = env.from_list([{"key": "k", "value": "hi"}]).apply(ListingAgent()).to_list()
    env.execute()
    print("LISTED", out[0]["k"])


    class AddArgs(BaseModel):
        a: int = Field(description="The first operand")
        b: int = Field(description="The second operand")


    metadata = ToolMetadata(name="add", description="Add two numbers.", args_schema=AddArgs)
    direct = ToolListingConnection().chat([ChatMessage(role=MessageRole.USER, content="x")],
                                          tools=[metadata])
    print("DIRECT", direct.content)
    assert metadata.get_parameters_dict()["required"] == ["a", "b"]
    assert metadata.args_schema(a=1, b=2).a == 1
"""


def test_tool_metadata_args_schema_as_flink_agents_reads_it(tmp_path: Path) -> None:
    proc = _run(tmp_path, TOOL_METADATA)
    assert proc.returncode == 0, proc.stderr[-3000:]
    listed = next(x for x in proc.stdout.splitlines() if x.startswith("LISTED "))
    assert "'name': 'add', 'description': 'Calculate the sum of a and b.'" in listed
    assert "'required': ['a', 'b']" in listed and "'a': {'type': 'integer'}" in listed
    direct = next(x for x in proc.stdout.splitlines() if x.startswith("DIRECT "))
    assert "'a': {'description': 'The first operand', 'title': 'A', 'type': 'integer'}" in direct


def test_tool_metadata_refuses_args_schema_of_another_kind() -> None:
    from flink_agents_py.compat import ToolMetadata

    with pytest.raises(TypeError, match="args_schema must be a pydantic model class or a "):
        ToolMetadata(name="t", description="d", args_schema=42)


# Flink Agents' ToolResponse (api/tools/tool_response.py, its main branch): a tool returning
# ToolResponse.failure(...) tells the model the operation failed, ToolResponse.success(x)
# gives it x; its own API test's assertions kept. ToolResponse was an ImportError, and a tool
# returning one sent the model the object's fields as a success, before this port found it.
TOOL_RESPONSE = """
    from flink_agents_py.compat import (
        Agent, AgentsExecutionEnvironment, ChatMessage, ChatRequestEvent, ChatResponseEvent,
        EventType, InputEvent, MessageRole, OutputEvent, ResourceDescriptor, ResourceName,
        RunnerContext, ToolResponse, action, chat_model_connection, chat_model_setup, tool)

    response = ToolResponse.success({"answer": 42}, tool_name="calculator")
    assert response.is_success() and not response.is_error()
    assert response.result == {"answer": 42} and str(response) == "{'answer': 42}"
    response = ToolResponse.failure("not found", tool_name="lookup")
    assert response.is_error() and not response.is_success()
    assert response.error == "not found" and str(response) == "not found"

    STOCK = {"pen": 3}


    class Inventory(Agent):
        @chat_model_connection
        @staticmethod
        def ollama() -> ResourceDescriptor:
            return ResourceDescriptor(clazz=ResourceName.ChatModel.OLLAMA_CONNECTION)

        @chat_model_setup
        @staticmethod
        def model() -> ResourceDescriptor:
            return ResourceDescriptor(clazz=ResourceName.ChatModel.OLLAMA_SETUP,
                                      connection="ollama", model="qwen3:1.7b", tools=["lookup"])

        @tool
        @staticmethod
        def lookup(item: str) -> ToolResponse:
            \"\"\"Look an item up in the stock.\"\"\"
            if item not in STOCK:
                return ToolResponse.failure(f"{item} not found", tool_name="lookup")
            return ToolResponse.success(STOCK[item], tool_name="lookup")

        @action(EventType.InputEvent)
        @staticmethod
        def ask(event, ctx: RunnerContext) -> None:
            ctx.send_event(ChatRequestEvent(model="model", messages=[
                ChatMessage(role=MessageRole.USER, content=InputEvent.from_event(event).input)]))

        @action(EventType.ChatResponseEvent)
        @staticmethod
        def answer(event, ctx: RunnerContext) -> None:
            ctx.send_event(OutputEvent(output=ChatResponseEvent.from_event(event).response.content))


    env = AgentsExecutionEnvironment.get_execution_environment()
    out = env.from_list([{"key": "a", "value": "pen"}, {"key": "b", "value": "ink"}]).apply(
        Inventory()).to_list()
    env.execute()
    print("OUT", out)
    print("DIRECT", repr(Inventory.lookup("ink")))
"""


class _LookupOllama(BaseHTTPRequestHandler):
    """Calls ``lookup`` with the user's word, then answers with the tool's message."""

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
        messages = body["messages"]
        tool_messages = [m["content"] for m in messages if m.get("role") == "tool"]
        if tool_messages:
            message = {"role": "assistant", "content": f"tool said: {tool_messages[-1]}"}
        else:
            call = {"name": "lookup", "arguments": {"item": messages[-1]["content"]}}
            message = {"role": "assistant", "content": "", "tool_calls": [{"function": call}]}
        data = json.dumps({"model": "m", "message": message, "done": True}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def test_a_tool_returning_a_tool_response(tmp_path: Path) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _LookupOllama)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        proc = _run(tmp_path, TOOL_RESPONSE, OLLAMA_HOST=url)
    finally:
        server.shutdown()
        server.server_close()
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = next(x for x in proc.stdout.splitlines() if x.startswith("OUT "))
    # the success's result, and the failure as a failed tool result naming its error
    assert "{'a': 'tool said: 3'}" in out
    assert "'b': 'tool said: " in out and "ink not found" in out and "ToolFailure" in out
    # called directly, the tool returns the ToolResponse itself, as there
    assert "DIRECT ToolResponse(result=None, error='ink not found'" in proc.stdout


# Flink Agents' ReActAgent: "User can extend this class and overwrite the start_action and
# stop_action to define their own logic to handle input and output" (its docstring; its
# stop_action reads STRUCTURED_OUTPUT from the response's extra_args, else its text). Both
# overrides were ignored before this port found it: the base's answer came out.
REACT_SUBCLASS = """
    from pydantic import BaseModel

    from flink_agents_py.compat import (
        STRUCTURED_OUTPUT, AgentsExecutionEnvironment, BaseChatModelConnection,
        BaseChatModelSetup, ChatMessage, ChatRequestEvent, ChatResponseEvent, Event, EventType,
        InputEvent, MessageRole, OutputEvent, ReActAgent, ResourceDescriptor, ResourceType,
        RunnerContext, action)


    class Scripted(BaseChatModelConnection):
        def chat(self, messages, tools=None, **kwargs):
            if kwargs.get("output_schema") is not None:
                return ChatMessage(role=MessageRole.ASSISTANT, content='{"result": 7}')
            return ChatMessage(role=MessageRole.ASSISTANT,
                               content="answer to " + messages[-1].content)


    class Setup(BaseChatModelSetup):
        @property
        def model_kwargs(self) -> dict:
            return {}


    class OutputData(BaseModel):
        result: int


    class CheckedReAct(ReActAgent):
        @action(EventType.ChatResponseEvent)
        @staticmethod
        def stop_action(event: Event, ctx: RunnerContext) -> None:
            response = ChatResponseEvent.from_event(event).response
            if STRUCTURED_OUTPUT in response.extra_args:
                output = response.extra_args[STRUCTURED_OUTPUT]
            else:
                output = response.text
            ctx.send_event(OutputEvent(output={"checked": True, "answer": output}))


    class OwnInput(ReActAgent):
        @staticmethod
        def start_action(event: Event, ctx: RunnerContext) -> None:
            text = str(InputEvent.from_event(event).input).upper()
            ctx.send_event(ChatRequestEvent(
                model="_default_chat_model",
                messages=[ChatMessage(role=MessageRole.USER, content=text)]))


    def run(agent):
        env = AgentsExecutionEnvironment.get_execution_environment()
        env.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION,
                         ResourceDescriptor(clazz=Scripted))
        out = env.from_list([{"key": "a", "value": "hi"}]).apply(agent).to_list()
        env.execute()
        return out[0]["a"]


    model = ResourceDescriptor(clazz=Setup, connection="conn")
    print("STOP", run(CheckedReAct(chat_model=model)))
    structured = run(CheckedReAct(chat_model=model, output_schema=OutputData))
    print("STRUCTURED", structured["checked"], dict(structured["answer"]))
    print("START", run(OwnInput(chat_model=model)))
    print("PLAIN", run(ReActAgent(chat_model=model)))
"""


def test_a_react_agent_subclass_overrides_start_and_stop_action(tmp_path: Path) -> None:
    proc = _run(tmp_path, REACT_SUBCLASS)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "STOP {'checked': True, 'answer': 'answer to hi'}" in proc.stdout
    assert "STRUCTURED True {'result': 7}" in proc.stdout
    assert "START answer to HI" in proc.stdout  # its own input handling, the base's output
    assert "PLAIN answer to hi" in proc.stdout
