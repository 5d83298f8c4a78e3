"""Programs written the way Apache Flink Agents' demos write theirs (its stock trading,
stateful operations and job operations demos), with only the imports changed and a
scripted model in place of their provider's connection; each runs from a directory outside
the repository, as a user runs it."""

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

pytestmark = pytest.mark.timeout(120)


def _run(tmp_path: Path, files: dict[str, str], main: str) -> list[object]:
    """Write ``files`` (dedented) into ``tmp_path``, run ``main`` there; its ``RESULT`` lines."""
    for name, text in files.items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    done = subprocess.run([str(PYTHON), main], cwd=tmp_path, capture_output=True, text=True,
                          timeout=100, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line.split(" ", 1)[1]) for line in done.stdout.splitlines()
            if line.startswith("RESULT ")]


# The stateful operations demo's agent: a decision asked for with
# ``OutputSchema(output_schema=Decision)``, read back from ``extra_args[STRUCTURED_OUTPUT]``
# after checking ``response.is_success`` (an AttributeError failing every decision before),
# a dynamic ``Event(type="apply_config", attributes=...)`` whose async action calls its side
# effect with ``durable_execute_async(fn, *args, reconciler=partial(...), durable_id=...)``,
# and ``ctx.config.get_str`` / ``get_int(key, default)`` of keys set on the environment.
OPS_AGENT = """
    import functools, json
    from typing import Literal
    from pydantic import BaseModel
    from flink_agents_py.compat import STRUCTURED_OUTPUT, Agent
    from flink_agents_py.compat import OutputSchema
    from flink_agents_py.compat import ChatMessage, MessageRole
    from flink_agents_py.compat import action, chat_model_connection, chat_model_setup
    from flink_agents_py.compat import ChatRequestEvent, ChatResponseEvent
    from flink_agents_py.compat import Event, InputEvent, OutputEvent
    from flink_agents_py.compat import ResourceDescriptor, ResourceName
    from flink_agents_py.compat import RunnerContext

    RUNBOOK_PATH = "ops.runbook-path"
    COOLDOWN_SECONDS = "ops.cooldown-seconds"
    APPLIED = []


    class Decision(BaseModel):
        runbook_step: str
        action: Literal["APPLY", "KEEP"]


    def redeploy(job, request_id, mode):
        APPLIED.append(request_id)
        return {"request_id": request_id, "mode": mode}


    def reconcile_redeploy(job, request_id, mode):
        return {"request_id": request_id, "reconciled": True}


    def answer(request):
        assert request.output_schema is not None
        text = request.messages[-1].content
        return {"runbook_step": "step 2 of " + request.messages[0].content,
                "action": "APPLY" if "skew 3" in text else "KEEP"}


    class OpsAgent(Agent):
        @chat_model_connection
        @staticmethod
        def ollama() -> ResourceDescriptor:
            return ResourceDescriptor(clazz="flink_agents_py.testing.ScriptedChatModel",
                                      function="ops_agent:answer")

        @chat_model_setup
        @staticmethod
        def runbook_llm() -> ResourceDescriptor:
            return ResourceDescriptor(
                clazz=ResourceName.ChatModel.OLLAMA_SETUP, connection="ollama",
                model="qwen3:8b", temperature=0.0, num_ctx=8192, think=False,
                keep_alive="60m")

        @action(InputEvent.EVENT_TYPE)
        @staticmethod
        def observe(event: Event, ctx: RunnerContext) -> None:
            window = InputEvent.from_event(event).input
            ctx.sensory_memory.set("window", window)
            ctx.send_event(ChatRequestEvent(
                model="runbook_llm",
                messages=[ChatMessage.of(MessageRole.SYSTEM, ctx.config.get_str(RUNBOOK_PATH)),
                          ChatMessage.of(MessageRole.USER, f"skew {window['skew']}")],
                output_schema=OutputSchema(output_schema=Decision)))

        @action(ChatResponseEvent.EVENT_TYPE)
        @staticmethod
        def decide(event: Event, ctx: RunnerContext) -> None:
            response = ChatResponseEvent.from_event(event)
            window = ctx.sensory_memory.get("window")
            if not response.is_success:
                raise RuntimeError(response.error)
            parsed = response.response.extra_args.get(STRUCTURED_OUTPUT)
            decision = parsed if isinstance(parsed, Decision) else Decision.model_validate(parsed)
            if decision.action == "APPLY":
                ctx.send_event(Event(type="apply_config", attributes={
                    "job": window["job"], "request_id": window["job"] + "#1", "mode": "TASKS"}))
            ctx.send_event(OutputEvent(output=json.dumps(
                {"job": window["job"], "decision": decision.model_dump()})))

        @action("apply_config")
        @staticmethod
        async def apply(event: Event, ctx: RunnerContext) -> None:
            args = [event.get_attr(k) for k in ("job", "request_id", "mode")]
            receipt = await ctx.durable_execute_async(
                redeploy, *args, reconciler=functools.partial(reconcile_redeploy, *args),
                durable_id=f"redeploy:{args[1]}")
            ctx.send_event(OutputEvent(output=json.dumps(
                {"job": args[0], "receipt": receipt, "applied": APPLIED,
                 "cooldown": ctx.config.get_int(COOLDOWN_SECONDS, 30)})))
"""

OPS_LOCAL = """
    from flink_agents_py.compat import AgentsExecutionEnvironment
    from ops_agent import COOLDOWN_SECONDS, RUNBOOK_PATH, OpsAgent

    env = AgentsExecutionEnvironment.get_execution_environment()
    env.get_config().set_str(RUNBOOK_PATH, "balanced-task-scheduling")
    env.get_config().set_int(COOLDOWN_SECONDS, 12)
    out = env.from_list([{"key": "j1", "value": {"job": "j1", "skew": 3}},
                         {"key": "j2", "value": {"job": "j2", "skew": 0}}]
                        ).apply(OpsAgent()).to_list()
    env.execute()
    for row in out:
        for key, value in row.items():
            print("RESULT", value)
"""


def test_the_ops_demo_reads_a_structured_decision_after_is_success(tmp_path):
    got = _run(tmp_path, {"ops_agent.py": OPS_AGENT, "ops_local.py": OPS_LOCAL}, "ops_local.py")
    decisions = {r["job"]: r["decision"] for r in got if "decision" in r}
    assert decisions == {
        "j1": {"runbook_step": "step 2 of balanced-task-scheduling", "action": "APPLY"},
        "j2": {"runbook_step": "step 2 of balanced-task-scheduling", "action": "KEEP"}}
    assert [r for r in got if "receipt" in r] == [
        {"job": "j1", "receipt": {"request_id": "j1#1", "mode": "TASKS"},
         "applied": ["j1#1"], "cooldown": 12}]


def test_a_failed_chat_is_not_a_success():
    from flink_agents_py.compat import ChatResponseEvent

    assert ChatResponseEvent(request_id="r1", error="ConnectionError: refused").is_success is False


# The job operations demo's agent: a pydantic input record, three actions each listening to
# ChatResponseEvent beside another event and telling them apart with ``isinstance`` and
# sensory memory, a context retrieval request, a user message of ``extra_args`` (a pydantic
# model among them) filling the setup's prompt, and a custom event whose ``from_event``
# builds a typed copy and gives it the id of what it copies (``result.id = event.id``: a
# ValidationError, events being frozen, failed the record before).
JOB_OPS_AGENT = """
    import json
    from typing import ClassVar
    from pydantic import BaseModel
    from flink_agents_py.compat import Agent
    from flink_agents_py.compat import ChatMessage, MessageRole
    from flink_agents_py.compat import action, chat_model_connection, chat_model_setup, prompt
    from flink_agents_py.compat import ChatRequestEvent, ChatResponseEvent
    from flink_agents_py.compat import Event, InputEvent, OutputEvent
    from flink_agents_py.compat import Prompt
    from flink_agents_py.compat import ResourceDescriptor, ResourceName
    from flink_agents_py.compat import RunnerContext


    class JobInfo(BaseModel):
        base_url: str
        job_id: str


    class RemedyRequestEvent(Event):
        EVENT_TYPE: ClassVar[str] = "problem_remedy_request_event"

        def __init__(self, diagnoses_result: str) -> None:
            super().__init__(type=RemedyRequestEvent.EVENT_TYPE,
                             attributes={"diagnoses_result": diagnoses_result})

        @classmethod
        def from_event(cls, event: Event) -> "RemedyRequestEvent":
            result = RemedyRequestEvent(diagnoses_result=event.attributes["diagnoses_result"])
            result.id = event.id
            return result

        @property
        def diagnoses_result(self) -> str:
            return self.get_attr("diagnoses_result")


    def answer(request):
        system, user = request.messages[0].content, request.messages[-1].content
        if system == "identify":
            return json.dumps({"has_issue": True, "job": user})
        return "scale " + user


    class OpsAgent(Agent):
        @prompt
        @staticmethod
        def identify_prompt() -> Prompt:
            return Prompt.from_messages([
                ChatMessage(role=MessageRole.SYSTEM, content="identify"),
                ChatMessage(role=MessageRole.USER, content="Job Info: {job_info}")])

        @prompt
        @staticmethod
        def remedy_prompt() -> Prompt:
            return Prompt.from_messages([
                ChatMessage(role=MessageRole.SYSTEM, content="remedy"),
                ChatMessage(role=MessageRole.USER, content="{job_id}: {diagnosis}")])

        @chat_model_connection
        @staticmethod
        def tongyi_connection() -> ResourceDescriptor:
            return ResourceDescriptor(clazz="flink_agents_py.testing.ScriptedChatModel",
                                      function="job_ops_agent:answer")

        @chat_model_setup
        @staticmethod
        def identify_model() -> ResourceDescriptor:
            return ResourceDescriptor(clazz=ResourceName.ChatModel.TONGYI_SETUP,
                                      connection="tongyi_connection", model="qwen-flash",
                                      prompt="identify_prompt", extract_reasoning=True)

        @chat_model_setup
        @staticmethod
        def remedy_model() -> ResourceDescriptor:
            return ResourceDescriptor(clazz=ResourceName.ChatModel.TONGYI_SETUP,
                                      connection="tongyi_connection", model="qwen-flash",
                                      prompt="remedy_prompt")

        @action(InputEvent, ChatResponseEvent)
        @staticmethod
        def identify(event: Event, ctx: RunnerContext) -> None:
            if isinstance(event, InputEvent):
                job_info: JobInfo = event.input
                ctx.sensory_memory.set("job", job_info)
                msg = ChatMessage(role=MessageRole.USER,
                                  extra_args={"job_info": job_info.model_dump_json()})
                ctx.send_event(ChatRequestEvent(model="identify_model", messages=[msg]))
            elif ctx.sensory_memory.get("diagnosis") is None:
                found = json.loads(event.response.content)
                ctx.send_event(RemedyRequestEvent(diagnoses_result="backpressure in " +
                                                  json.loads(found["job"][10:])["job_id"]))

        @action(RemedyRequestEvent, ChatResponseEvent)
        @staticmethod
        def remedy(event: Event, ctx: RunnerContext) -> None:
            if isinstance(event, RemedyRequestEvent):
                typed = RemedyRequestEvent.from_event(event)
                assert typed.id == event.id and typed.diagnoses_result == event.diagnoses_result
                ctx.sensory_memory.set("diagnosis", typed.diagnoses_result)
                job = ctx.sensory_memory.get("job")
                msg = ChatMessage(role=MessageRole.USER, extra_args={
                    "job_id": job.job_id, "diagnosis": typed.diagnoses_result})
                ctx.send_event(ChatRequestEvent(model="remedy_model", messages=[msg]))
            elif ctx.sensory_memory.get("diagnosis") is not None:
                ctx.send_event(OutputEvent(output={"remedy": event.response.content,
                                                   "job": ctx.sensory_memory.get("job").job_id}))
"""

JOB_OPS_LOCAL = """
    import json
    from flink_agents_py.compat import AgentsExecutionEnvironment
    from job_ops_agent import JobInfo, OpsAgent

    env = AgentsExecutionEnvironment.get_execution_environment()
    out = env.from_list([{"key": 1, "value": JobInfo(base_url="http://jm:8081", job_id="a1")},
                         {"key": 2, "value": JobInfo(base_url="http://jm:8081", job_id="b2")}]
                        ).apply(OpsAgent()).to_list()
    env.execute()
    for row in out:
        for key, value in row.items():
            print("RESULT", json.dumps(value))
"""


def test_the_job_operations_demo_copies_its_custom_event_with_the_same_id(tmp_path):
    got = _run(tmp_path, {"job_ops_agent.py": JOB_OPS_AGENT, "job_ops_local.py": JOB_OPS_LOCAL},
               "job_ops_local.py")
    assert got == [{"remedy": "scale a1: backpressure in a1", "job": "a1"},
                   {"remedy": "scale b2: backpressure in b2", "job": "b2"}]


def test_only_an_events_id_can_be_assigned():
    import pydantic

    from flink_agents_py.compat import Event

    event = Event(type="problem_remedy_request_event", attributes={"x": 1})
    event.id = "copied"
    assert event.id == "copied"
    with pytest.raises(pydantic.ValidationError, match="immutable"):
        event.type = "other"  # type: ignore[misc]


def test_newer_flink_agents_options_are_taken_and_tool_call_parallel_is_the_dispatch():
    # Flink Agents' newer options (its memory event switches, the Fluss action store, tool
    # call parallelism...) were AttributeErrors stopping the program that set them
    import threading

    from flink_agents_py.compat import (
        Agent,
        AgentConfigOptions,
        AgentExecutionOptions,
        AgentsExecutionEnvironment,
        ChatRequestEvent,
        ChatResponseEvent,
        ConditionEvaluationFailureStrategy,
        InputEvent,
        MemoryEventOptions,
        OutputEvent,
        ResourceDescriptor,
        ResourceName,
        ResourceType,
        Tool,
        action,
    )
    from flink_agents_py.testing import model_from_function, tool_call, tool_calls

    def run(parallel: bool) -> list[dict[str, str]]:
        other_started = threading.Event()

        def first(n: int) -> str:
            """Wait for the second call to start (it can, when calls run at once)."""
            return "together" if other_started.wait(timeout=2) else "alone"

        def second(n: int) -> str:
            """Start."""
            other_started.set()
            return "second"

        def script(request):
            if request.tool_results:
                return " ".join(str(r.content) for r in request.tool_results)
            return tool_calls(tool_call("first", "c1", n=1), tool_call("second", "c2", n=2))

        class Parallel(Agent):
            @action(InputEvent)
            @staticmethod
            def ask(event, ctx):
                ctx.send_event(ChatRequestEvent(model="m", messages=[]))

            @action(ChatResponseEvent)
            @staticmethod
            def answer(event, ctx):
                ctx.send_event(OutputEvent(output=event.response.content))

        env = AgentsExecutionEnvironment.get_execution_environment()
        config = env.get_config()
        config.set(AgentExecutionOptions.TOOL_CALL_PARALLEL, parallel)
        config.set(AgentExecutionOptions.TOOL_CALL_NUM_ASYNC_THREADS, 4)
        config.set(AgentExecutionOptions.AGENT_RUN_BEGIN_EVENT, True)
        config.set(MemoryEventOptions.SHORT_TERM_READ, True)
        config.set(AgentConfigOptions.FLUSS_ACTION_STATE_TABLE, "state")
        config.set(AgentConfigOptions.CONDITION_EVALUATION_FAILURE_STRATEGY,
                   ConditionEvaluationFailureStrategy.FAIL)
        env.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, model_from_function(script))
        env.add_resource("first", ResourceType.TOOL, Tool.from_callable(first))
        env.add_resource("second", ResourceType.TOOL, Tool.from_callable(second))
        agent = Parallel().add_resource("m", ResourceType.CHAT_MODEL, ResourceDescriptor(
            clazz=ResourceName.ChatModel.OLLAMA_SETUP, connection="conn", model="q",
            tools=["first", "second"]))
        out = env.from_list([{"key": "k", "value": 1}]).apply(agent).to_list()
        env.execute()
        return out

    assert run(parallel=True) == [{"k": "together second"}]
    assert run(parallel=False) == [{"k": "alone second"}]


def test_an_action_reads_every_option_the_program_set():
    # ctx.config is the whole configuration in Flink Agents; here the options that set the
    # host (NUM_ASYNC_THREADS) or the chat defaults (MAX_RETRIES...) were left out of it,
    # reading their defaults, and an enum option read back as its text
    from flink_agents_py.compat import (
        Agent,
        AgentExecutionOptions,
        AgentsExecutionEnvironment,
        ErrorHandlingStrategy,
        InputEvent,
        OutputEvent,
        action,
    )

    class Reader(Agent):
        @action(InputEvent)
        @staticmethod
        def go(event, ctx):
            ctx.send_event(OutputEvent(output=[
                ctx.config.get(AgentExecutionOptions.MAX_RETRIES),
                ctx.config.get_int(AgentExecutionOptions.NUM_ASYNC_THREADS.get_key()),
                ctx.config.get(AgentExecutionOptions.ERROR_HANDLING_STRATEGY),
                ctx.config.get(AgentExecutionOptions.TOOL_CALL_PARALLEL)]))

    env = AgentsExecutionEnvironment.get_execution_environment()
    config = env.get_config()
    config.set(AgentExecutionOptions.MAX_RETRIES, 5)
    config.set(AgentExecutionOptions.NUM_ASYNC_THREADS, 7)
    config.set(AgentExecutionOptions.ERROR_HANDLING_STRATEGY, ErrorHandlingStrategy.RETRY)
    out = env.from_list([{"key": "k", "value": 1}]).apply(Reader()).to_list()
    env.execute()
    assert out == [{"k": [5, 7, ErrorHandlingStrategy.RETRY, True]}]
    assert config.get(AgentExecutionOptions.ERROR_HANDLING_STRATEGY) is ErrorHandlingStrategy.RETRY


def test_an_output_schema_of_a_row_type_info_gives_the_answer_by_field_name():
    # Flink Agents' OutputSchema takes a PyFlink RowTypeInfo; here it was a ValidationError
    from pyflink.common.typeinfo import BasicTypeInfo, RowTypeInfo

    from flink_agents_py.compat import (
        STRUCTURED_OUTPUT,
        Agent,
        AgentsExecutionEnvironment,
        ChatMessage,
        ChatRequestEvent,
        ChatResponseEvent,
        InputEvent,
        MessageRole,
        OutputEvent,
        OutputSchema,
        ResourceDescriptor,
        ResourceName,
        ResourceType,
        action,
    )
    from flink_agents_py.testing import model_from_function

    row = RowTypeInfo([BasicTypeInfo.INT_TYPE_INFO(), BasicTypeInfo.STRING_TYPE_INFO()],
                      ["result", "why"])

    class RowAgent(Agent):
        @action(InputEvent)
        @staticmethod
        def ask(event, ctx):
            ctx.send_event(ChatRequestEvent(
                model="m", messages=[ChatMessage(role=MessageRole.USER, content="1+2")],
                output_schema=OutputSchema(output_schema=row)))

        @action(ChatResponseEvent)
        @staticmethod
        def answer(event, ctx):
            structured = event.response.extra_args[STRUCTURED_OUTPUT]
            ctx.send_event(OutputEvent(output=dict(structured)))

    def script(request):
        assert request.output_schema["required"] == ["result", "why"]
        return {"result": 3, "why": "sum"}

    env = AgentsExecutionEnvironment.get_execution_environment()
    env.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, model_from_function(script))
    agent = RowAgent().add_resource("m", ResourceType.CHAT_MODEL, ResourceDescriptor(
        clazz=ResourceName.ChatModel.OLLAMA_SETUP, connection="conn", model="q"))
    out = env.from_list([{"key": "k", "value": 1}]).apply(agent).to_list()
    env.execute()
    assert out == [{"k": {"result": 3, "why": "sum"}}]
