"""Apache Flink Agents' documentation snippets, assembled into programs with their imports
changed only and run from a directory outside the repository as a user runs them (each
finding of the docs audit, one test)."""

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

ROOT = Path(__file__).resolve().parents[1]
VENV_PY = ROOT / ".venv" / "bin" / "python"
PYTHON = VENV_PY if VENV_PY.exists() else Path(sys.executable)

pytestmark = pytest.mark.timeout(120)


def _run(tmp_path: Path, script: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run ``script`` (dedented) as ``prog.py`` in ``tmp_path`` with the project importable."""
    (tmp_path / "prog.py").write_text(textwrap.dedent(script))
    environ = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    return subprocess.run([str(PYTHON), "prog.py"], cwd=tmp_path, env=environ,
                          capture_output=True, text=True, timeout=100)


# chat_models.md, "Custom Providers": a connection implementing ``chat(messages, tools,
# **kwargs)`` and a setup whose ``model_kwargs`` returns ``{"model": self.model, ...}``. The
# model was passed twice (``achat() got multiple values for keyword argument 'model'``), so
# every chat failed.
CUSTOM_PROVIDER = """
    from typing import Any, Dict, List, Sequence
    from flink_agents_py.compat import (
        Agent, AgentsExecutionEnvironment, BaseChatModelConnection, BaseChatModelSetup,
        ChatMessage, ChatRequestEvent, ChatResponseEvent, Event, InputEvent, MessageRole,
        OutputEvent, ResourceDescriptor, RunnerContext, Tool, action, chat_model_connection,
        chat_model_setup)


    class MyChatModelConnection(BaseChatModelConnection):
        def chat(self, messages: Sequence[ChatMessage], tools: List[Tool] | None = None,
                 **kwargs: Any) -> ChatMessage:
            return ChatMessage(role=MessageRole.ASSISTANT, content=(
                f"{kwargs['model']} t={kwargs['temperature']}: {messages[-1].content}"))


    class MyChatModelSetup(BaseChatModelSetup):
        @property
        def model_kwargs(self) -> Dict[str, Any]:
            return {"model": self.model, "temperature": 0.7}


    class MyAgent(Agent):
        @chat_model_connection
        @staticmethod
        def my_connection() -> ResourceDescriptor:
            return ResourceDescriptor(clazz=MyChatModelConnection)

        @chat_model_setup
        @staticmethod
        def my_chat_model() -> ResourceDescriptor:
            return ResourceDescriptor(clazz=MyChatModelSetup, connection="my_connection",
                                      model="mine")

        @action(InputEvent.EVENT_TYPE)
        @staticmethod
        def process_input(event: Event, ctx: RunnerContext) -> None:
            input_event = InputEvent.from_event(event)
            user_message = ChatMessage(role=MessageRole.USER,
                                       content=f"input: {input_event.input}")
            ctx.send_event(ChatRequestEvent(model="my_chat_model", messages=[user_message]))

        @action(ChatResponseEvent.EVENT_TYPE)
        @staticmethod
        def process_response(event: Event, ctx: RunnerContext) -> None:
            chat_response = ChatResponseEvent.from_event(event)
            ctx.send_event(OutputEvent(output=chat_response.response.content))


    env = AgentsExecutionEnvironment.get_execution_environment()
    out = env.from_list([{"key": "k", "value": "hello"}]).apply(MyAgent()).to_list()
    env.execute()
    print("OUT", out)
"""


def test_a_custom_setup_naming_the_model_in_model_kwargs(tmp_path):
    proc = _run(tmp_path, CUSTOM_PROVIDER)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "OUT [{'k': 'mine t=0.7: input: hello'}]" in proc.stdout, proc.stderr[-3000:]


class _FakeProvider(BaseHTTPRequestHandler):
    """Ollama's ``/api/chat`` and OpenAI's ``/v1/chat/completions``: each echoes the last
    message and keeps the request body in ``bodies``."""

    bodies: list[tuple[str, dict]] = []

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
        self.bodies.append((self.path, body))
        text = "echo: " + body["messages"][-1]["content"]
        if self.path.startswith("/api/chat"):
            answer: dict = {"model": body["model"], "done": True,
                            "created_at": "2025-01-01T00:00:00Z",
                            "message": {"role": "assistant", "content": text}}
        else:
            answer = {"id": "c", "object": "chat.completion", "created": 1,
                      "model": body["model"], "choices": [{
                          "index": 0, "finish_reason": "stop",
                          "message": {"role": "assistant", "content": text}}],
                      "usage": {"prompt_tokens": 1, "completion_tokens": 1,
                                "total_tokens": 2}}
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def fake_provider():
    _FakeProvider.bodies = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeProvider)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


# chat_models.md, the OpenAI and Ollama setups' ``additional_kwargs`` ("Additional OpenAI API
# parameters"): Flink Agents merges them into the request. They were sent as one request
# field named ``additional_kwargs`` (OpenAI refuses an unknown field; Ollama ignored it).
ADDITIONAL_KWARGS = """
    import os
    from flink_agents_py.compat import (
        Agent, AgentsExecutionEnvironment, ChatMessage, ChatRequestEvent, ChatResponseEvent,
        Event, InputEvent, MessageRole, OutputEvent, ResourceDescriptor, ResourceName,
        RunnerContext, action, chat_model_connection, chat_model_setup)

    BASE = os.environ["FAKE_PROVIDER"]


    class MyAgent(Agent):
        @chat_model_connection
        @staticmethod
        def openai_connection() -> ResourceDescriptor:
            return ResourceDescriptor(
                clazz=ResourceName.ChatModel.OPENAI_COMPLETIONS_CONNECTION,
                api_key="<your-api-key>", api_base_url=BASE + "/v1", max_retries=3,
                timeout=60.0)

        @chat_model_setup
        @staticmethod
        def openai_chat_model() -> ResourceDescriptor:
            return ResourceDescriptor(
                clazz=ResourceName.ChatModel.OPENAI_COMPLETIONS_SETUP,
                connection="openai_connection", model="gpt-4", temperature=0.7,
                max_tokens=1000, additional_kwargs={"seed": 7, "user": "u1"})

        @chat_model_connection
        @staticmethod
        def ollama_connection() -> ResourceDescriptor:
            return ResourceDescriptor(clazz=ResourceName.ChatModel.OLLAMA_CONNECTION,
                                      base_url=BASE, request_timeout=120.0)

        @chat_model_setup
        @staticmethod
        def my_chat_model() -> ResourceDescriptor:
            return ResourceDescriptor(
                clazz=ResourceName.ChatModel.OLLAMA_SETUP, connection="ollama_connection",
                model="qwen3:8b", temperature=0.7, num_ctx=4096, keep_alive="10m",
                think=True, extract_reasoning=True, additional_kwargs={"top_k": 5})

        @action(InputEvent.EVENT_TYPE)
        @staticmethod
        def process_input(event: Event, ctx: RunnerContext) -> None:
            for model in ("openai_chat_model", "my_chat_model"):
                message = ChatMessage(role=MessageRole.USER,
                                      content=f"input: {InputEvent.from_event(event).input}")
                ctx.send_event(ChatRequestEvent(model=model, messages=[message]))

        @action(ChatResponseEvent.EVENT_TYPE)
        @staticmethod
        def process_response(event: Event, ctx: RunnerContext) -> None:
            ctx.send_event(OutputEvent(output=ChatResponseEvent.from_event(event)
                                       .response.content))


    env = AgentsExecutionEnvironment.get_execution_environment()
    out = env.from_list([{"key": "k", "value": "hello"}]).apply(MyAgent()).to_list()
    env.execute()
    print("OUT", out)
"""


def test_a_setups_additional_kwargs_are_request_fields(tmp_path, fake_provider):
    proc = _run(tmp_path, ADDITIONAL_KWARGS, FAKE_PROVIDER=fake_provider)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("echo: input: hello") == 2, proc.stderr[-3000:]
    bodies = dict(_FakeProvider.bodies)
    openai = bodies["/v1/chat/completions"]
    assert "additional_kwargs" not in openai
    assert (openai["seed"], openai["user"], openai["max_tokens"]) == (7, "u1", 1000)
    ollama = bodies["/api/chat"]
    assert ollama["options"] == {"top_k": 5, "temperature": 0.7, "num_ctx": 4096}


# prompts.md: "Escape literal braces by doubling them: ``{{`` and ``}}``" (its prompts, and
# the quickstarts', hold JSON examples written so). The doubled braces reached the model
# as they were written.
ESCAPED_BRACES = '''
    from flink_agents_py.compat import (
        Agent, AgentsExecutionEnvironment, ChatMessage, ChatRequestEvent, ChatResponseEvent,
        Event, InputEvent, MessageRole, OutputEvent, Prompt, ResourceDescriptor,
        ResourceName, RunnerContext, action, chat_model_connection, chat_model_setup, prompt)


    def answer(request):
        return " | ".join(m.content.strip() for m in request.messages)


    class ReviewAnalysisAgent(Agent):
        @prompt
        @staticmethod
        def review_analysis_prompt() -> Prompt:
            return Prompt.from_messages(messages=[
                ChatMessage(role=MessageRole.SYSTEM,
                            content='Answer as {{"id": "12345", "score": 1}}.'),
                ChatMessage(role=MessageRole.USER, content='"input": {input}'),
            ])

        @chat_model_connection
        @staticmethod
        def offline() -> ResourceDescriptor:
            return ResourceDescriptor(clazz=ResourceName.ChatModel.SCRIPTED_CONNECTION,
                                      function=f"{__name__}:answer")

        @chat_model_setup
        @staticmethod
        def review_analysis_model() -> ResourceDescriptor:
            return ResourceDescriptor(clazz=ResourceName.ChatModel.OLLAMA_SETUP,
                                      connection="offline", model="qwen3:8b",
                                      prompt="review_analysis_prompt")

        @action(InputEvent.EVENT_TYPE)
        @staticmethod
        def process_input(event: Event, ctx: RunnerContext) -> None:
            msg = ChatMessage(role=MessageRole.USER,
                              extra_args={"input": InputEvent.from_event(event).input})
            ctx.send_event(ChatRequestEvent(model="review_analysis_model", messages=[msg]))

        @action(ChatResponseEvent.EVENT_TYPE)
        @staticmethod
        def process_chat_response(event: Event, ctx: RunnerContext) -> None:
            ctx.send_event(OutputEvent(output=ChatResponseEvent.from_event(event)
                                       .response.content))


    text = Prompt.from_text('Input format:\\n{{\\n  "id": "1"\\n}}\\ninput:\\n{input}')
    print("TEXT", repr(text.format_string(input="x")))
    env = AgentsExecutionEnvironment.get_execution_environment()
    out = env.from_list([{"key": "k", "value": "nice"}]).apply(ReviewAnalysisAgent()).to_list()
    env.execute()
    print("OUT", out)
'''


def test_doubled_braces_in_a_prompt_are_literal_braces(tmp_path):
    proc = _run(tmp_path, ESCAPED_BRACES)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert """TEXT 'Input format:\\n{\\n  "id": "1"\\n}\\ninput:\\nx'""" in proc.stdout
    assert """OUT [{'k': 'Answer as {"id": "12345", "score": 1}. | "input": nice'}]""" \
        in proc.stdout, proc.stderr[-3000:]


def test_a_prompt_with_raw_json_braces_keeps_them():
    from flink_agents_py.api import Prompt

    raw = Prompt.from_text('Answer as {"a": {"b": {n}}} and {{ stays')
    assert raw.format_string(n=1) == 'Answer as {"a": {"b": 1}} and {{ stays'
    styled = Prompt.from_text("{{name}} is {name}; {missing} stays")
    assert styled.format_string(name="x") == "{name} is x; {missing} stays"


def test_a_react_agent_made_for_a_subagent(tmp_path):
    # react_agent.md, "Use ReActAgent as a subagent", and Flink Agents' react_subagent_test.py
    # (fixtures/compat_react_subagent.py): ReActAgent.for_subagent(chat_model=,
    # description=, instructions=, output_schema=), a child taking {"prompt": text} whose
    # instructions are literal text, called from an async action or by the parent's model.
    # It was an AttributeError.
    program = (ROOT / "tests" / "fixtures" / "compat_react_subagent.py").read_text()
    proc = _run(tmp_path, program)
    assert proc.returncode == 0, proc.stderr[-3000:]
    cases = [line for line in proc.stdout.splitlines() if line.startswith("CASE")]
    assert cases[:3] == ["CASE False False False [\"['child answer']\"]",
                         "CASE True False False ['parent answer']",
                         "CASE True True False ['parent_json answer']"], proc.stderr[-3000:]
    assert cases[3].startswith("CASE False False True [\"failed:")
    assert "only a string 'prompt'" in cases[3]


# sensory_and_short_term_memory.md, "Read & Write", "Nested Object" and "Memory Reference":
# a reference returned by ``ctx.sensory_memory.set`` sent in an event, read back with
# ``ctx.sensory_memory.get(ref)`` or ``ref.resolve(ctx)``. ``resolve`` read the short-term
# memory only, so it gave None for the page's sensory reference.
MEMORY_PAGE = """
    from typing import Any, List
    from pydantic import BaseModel
    from flink_agents_py.compat import (
        Agent, AgentsExecutionEnvironment, Event, InputEvent, MemoryObject, OutputEvent,
        Prompt, RunnerContext, action)


    class ProcessedData(BaseModel):
        text: str


    class MyEvent(Event):
        value: Any


    class MemoryAgent(Agent):
        @action(InputEvent.EVENT_TYPE)
        @staticmethod
        def first_action(event: Event, ctx: RunnerContext):
            memory: MemoryObject = ctx.sensory_memory
            memory.set("primitive", 123)
            memory.set("collection", [1, 2, 3])
            memory.set("object", Prompt.from_text("the test {content}"))
            obj1: MemoryObject = memory.new_object("obj1")
            obj1.set("field1", "foo")
            value3: Prompt = memory.get("object")
            value4: MemoryObject = memory.get("obj1")
            stm = ctx.short_term_memory
            user: MemoryObject = stm.new_object("user", overwrite=True)
            user.set("name", "john")
            stm.set("user.age", 13)
            stm.set("kept", "short-term")
            data_ref = memory.set("data.item", ProcessedData(
                text=f"{InputEvent.from_event(event).input} {value3.format_string(content='x')}"
                     f" {value4.get('field1')} {memory.get('collection')}"))
            ctx.send_event(MyEvent(value=data_ref))
            ctx.send_event(MyEvent(value=stm.set("user.name", "jhon")))

        @action(MyEvent)
        @staticmethod
        def second_action(event: Event, ctx: RunnerContext):
            my_event = MyEvent.from_event(event)
            ctx.send_event(OutputEvent(output=[
                repr(ctx.sensory_memory.get(my_event.value)), repr(my_event.value.resolve(ctx)),
                ctx.short_term_memory.get("user.age")]))


    env = AgentsExecutionEnvironment.get_execution_environment()
    out = env.from_list([{"key": "k", "value": "hi"}]).apply(MemoryAgent()).to_list()
    env.execute()
    for record in out:
        print("OUT", record["k"])
"""


def test_a_sensory_memory_reference_resolves(tmp_path):
    proc = _run(tmp_path, MEMORY_PAGE)
    assert proc.returncode == 0, proc.stderr[-3000:]
    outs = sorted(line for line in proc.stdout.splitlines() if line.startswith("OUT"))
    assert outs == [
        "OUT [\"ProcessedData(text='hi the test x foo [1, 2, 3]')\", "
        "\"ProcessedData(text='hi the test x foo [1, 2, 3]')\", 13]",
        "OUT ['None', \"'jhon'\", 13]"], proc.stdout  # short-term: not in the sensory memory


# workflow_agent.md, "Unified Event", "Custom Event Subclasses", "Durable Execution" and
# "Async Execution" in one agent: a type of the program's own sent as Event(type=...)
# ("order_paid") beside a subclass of type "order_paid_v2". The plan refused it, taking the
# first for a misspelling of the second ("names no known event type but is close to").
WORKFLOW_PAGE = """
    import time
    from typing import ClassVar
    from typing_extensions import override
    from flink_agents_py.compat import (
        Agent, AgentsExecutionEnvironment, Event, InputEvent, OutputEvent, RunnerContext,
        action)


    class MyEvent(Event):
        EVENT_TYPE: ClassVar[str] = "order_paid_v2"

        def __init__(self, value: str) -> None:
            super().__init__(type=MyEvent.EVENT_TYPE, attributes={"value": value})

        @classmethod
        @override
        def from_event(cls, event: Event) -> "MyEvent":
            assert "value" in event.attributes
            return MyEvent(value=event.attributes["value"])

        @property
        def value(self) -> str:
            return self.get_attr("value")


    class WorkflowAgent(Agent):
        @action(InputEvent.EVENT_TYPE)
        @staticmethod
        def process_input(event: Event, ctx: RunnerContext) -> None:
            input_event = InputEvent.from_event(event)
            ctx.send_event(Event(type="order_paid", attributes={"field1": "test", "field2": 42}))

            def submit_payment(order_id: str) -> str:
                return f"paid {order_id}"

            def payment_reconciler() -> str:
                return "reconciled"

            result = ctx.durable_execute(submit_payment, input_event.input,
                                         reconciler=payment_reconciler)
            ctx.send_event(MyEvent(value=result))

        @action("order_paid")
        @staticmethod
        def handle_my_event(event: Event, ctx: RunnerContext) -> None:
            ctx.send_event(OutputEvent(output=f"{event.get_attr('field1')}/"
                                              f"{event.get_attr('field2')}"))

        @action(MyEvent.EVENT_TYPE)
        @staticmethod
        async def process_with_async(event: Event, ctx: RunnerContext) -> None:
            def slow_external_call(data: str) -> str:
                time.sleep(0.01)
                return f"Processed: {data}"

            result = await ctx.durable_execute_async(slow_external_call,
                                                     MyEvent.from_event(event).value)
            ctx.send_event(OutputEvent(output=result))


    env = AgentsExecutionEnvironment.get_execution_environment()
    out = env.from_list([{"key": "k", "value": "o-1"}]).apply(WorkflowAgent()).to_list()
    env.execute()
    print("OUT", sorted(o["k"] for o in out))
"""


def test_a_type_of_ones_own_near_a_declared_one_runs(tmp_path):
    proc = _run(tmp_path, WORKFLOW_PAGE)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "OUT ['Processed: paid o-1', 'test/42']" in proc.stdout.splitlines()
    assert ("TriggerNameWarning: action 'handle_my_event' is triggered by 'order_paid', which "
            "names no event class but is close to 'order_paid_v2'") in proc.stderr
