"""Flink Agents' names and idioms (``flink_agents_py.compat``) and the defects the port found."""

from __future__ import annotations

import json
import time

import pytest
from pydantic import BaseModel

from flink_agents_py.api import PlanError
from flink_agents_py.compat import (
    CALLABLE_NAME_PREFIX,
    STRUCTURED_OUTPUT,
    Agent,
    AgentExecutionOptions,
    AgentsExecutionEnvironment,
    AsyncSubagentSetup,
    BaseAsyncSubagentSetup,
    ChatMessage,
    ChatRequestEvent,
    ChatResponseEvent,
    Event,
    EventType,
    InputEvent,
    InternalSubagent,
    InternalSubagentResourceDescriptorBuilder,
    MessageRole,
    OutputEvent,
    OutputSchema,
    PreparedTriple,
    Prompt,
    ResourceDescriptor,
    ResourceName,
    ResourceType,
    RunnerContext,
    RunStatus,
    Tool,
    action,
    chat_model_setup,
    prompt,
)
from flink_agents_py.plan import AgentPlan
from flink_agents_py.testing import ScriptedChatModel, ScriptedRequest, check_replay_safety

ASPECTS = ("taste", "service")
FANOUT = "SentimentInputEvent"


class Aspect(BaseModel):
    aspect: str
    result: str


class Summary(BaseModel):
    summary: str


def sentiment_script(request: ScriptedRequest) -> object:
    """Answers an aspect question with an ``Aspect`` and the summary request with a ``Summary``."""
    text = request.last_user_text
    if text.startswith("Judge"):
        aspect = text.split('"')[1]
        return {"aspect": aspect, "result": "positive" if aspect == "taste" else "negative"}
    return {"summary": text.split("Judgments: ")[1]}


def _aspect_request(text: str, aspect: str) -> ChatRequestEvent:
    return ChatRequestEvent(model="sentiment_model", messages=[
        ChatMessage(role=MessageRole.USER, content=f'Judge the "{aspect}" dimension: {text}')],
        output_schema=OutputSchema(output_schema=Aspect))


class FanOutAgent(Agent):
    """The parallel-chat example's shape: string event types, ids kept before sending."""

    @chat_model_setup
    @staticmethod
    def sentiment_model() -> ResourceDescriptor:
        return ResourceDescriptor(clazz=ResourceName.ChatModel.OLLAMA_SETUP,
                                  connection="ollama_server", model="qwen3:1.7b",
                                  extract_reasoning=True)

    @action(InputEvent.EVENT_TYPE)
    @staticmethod
    def start(event: Event, ctx: RunnerContext) -> None:
        payload = InputEvent.from_event(event).input
        ctx.sensory_memory.set("text", payload["text"])
        ctx.send_event(Event(type=FANOUT, attributes={"text": payload["text"]}))

    @action(FANOUT)
    @staticmethod
    def taste(event: Event, ctx: RunnerContext) -> None:
        req = _aspect_request(event.get_attr("text"), "taste")
        ctx.sensory_memory.set(f"aspect_map.{req.id}", "taste")
        ctx.send_event(req)

    @action(FANOUT)
    @staticmethod
    def service(event: Event, ctx: RunnerContext) -> None:
        req = _aspect_request(event.get_attr("text"), "service")
        ctx.sensory_memory.set(f"aspect_map.{req.id}", "service")
        ctx.send_event(req)

    @action(EventType.ChatResponseEvent)
    @staticmethod
    def on_response(event: Event, ctx: RunnerContext) -> None:
        response = ChatResponseEvent.from_event(event)
        parsed = response.response.extra_args[STRUCTURED_OUTPUT]
        if "summary" in parsed:
            ctx.send_event(OutputEvent(output={"text": ctx.sensory_memory.get("text"),
                                               "summary": parsed["summary"]}))
            return
        aspect = ctx.sensory_memory.get(f"aspect_map.{response.request_id}")
        ctx.sensory_memory.set(f"sentiments.{aspect}", parsed["result"])
        if all(f"sentiments.{a}" in ctx.sensory_memory for a in ASPECTS):
            body = "Judgments: " + " ".join(
                f"{a}:{ctx.sensory_memory.get(f'sentiments.{a}')}" for a in ASPECTS)
            ctx.send_event(ChatRequestEvent(model="sentiment_model", messages=[
                ChatMessage(role=MessageRole.USER, content=body)], output_schema=Summary))


def _local_env():
    env = AgentsExecutionEnvironment.get_execution_environment()
    env.add_resource("ollama_server", ResourceType.CHAT_MODEL_CONNECTION,
                     ResourceDescriptor(ScriptedChatModel, function=f"{__name__}:sentiment_script"))
    return env


def test_fan_out_by_event_type_strings_matches_responses_by_ids_kept_from_construction():
    env = _local_env()
    out = env.from_list([{"key": 1, "value": {"text": "great food, slow service"}},
                         {"value": {"text": "ok"}}]).apply(FanOutAgent()).to_list()
    env.execute()
    [(unkeyed, second)] = out[1].items()  # a record without a key: a key of its own (a UUID)
    assert out[0] == {1: {"text": "great food, slow service",
                          "summary": "taste:positive service:negative"}}
    assert second == {"text": "ok", "summary": "taste:positive service:negative"}
    assert isinstance(unkeyed, str) and len(unkeyed) == 36


def test_ids_given_at_construction_are_replay_safe():
    agent = FanOutAgent().add_resource(
        "ollama_server", ResourceType.CHAT_MODEL_CONNECTION,
        ResourceDescriptor(ScriptedChatModel, function=f"{__name__}:sentiment_script"))
    report = check_replay_safety(agent, [{"key": "a", "text": "fine"}, {"key": "b", "text": "x"}])
    report.assert_ok()
    assert report.reexecutions >= 0 and len(report.points) > 3


def test_membership_of_a_missing_path_is_false():
    seen = {}

    class Probe(Agent):
        @action(InputEvent)
        @staticmethod
        def probe(event: Event, ctx: RunnerContext) -> None:
            ctx.sensory_memory.set("a.b", 0)
            seen["missing"] = "a.c" in ctx.sensory_memory
            seen["present"] = "a.b" in ctx.sensory_memory
            seen["is_exist"] = ctx.sensory_memory.is_exist("a.b")
            seen["default"] = ctx.short_term_memory.get("nope", "dflt")

    AgentsExecutionEnvironment.get_execution_environment().local.from_list(
        [{"key": "k"}]).apply(Probe()).collect()
    assert seen == {"missing": False, "present": True, "is_exist": True, "default": "dflt"}


def review_script(request: ScriptedRequest) -> object:
    """Echoes the roles it was sent, after a reasoning block."""
    roles = [m.role for m in request.messages]
    return ChatMessage(role=MessageRole.ASSISTANT,
                       content="<think>weighing it</think>" + json.dumps({"roles": roles}))


class ReviewAgent(Agent):
    """The quickstart review agent's shape: prompt with {input}, an empty user message."""

    @prompt
    @staticmethod
    def review_prompt() -> Prompt:
        return Prompt.from_messages(messages=[
            ChatMessage(role=MessageRole.SYSTEM, content="Rate it."),
            ChatMessage(role=MessageRole.USER, content="input: {input}")])

    @chat_model_setup
    @staticmethod
    def review_model() -> ResourceDescriptor:
        return ResourceDescriptor(clazz=ResourceName.ChatModel.OLLAMA_SETUP,
                                  connection="ollama_server", model="qwen3:8b",
                                  prompt="review_prompt", extract_reasoning=True)

    @action(InputEvent.EVENT_TYPE)
    @staticmethod
    def process_input(event: Event, ctx: RunnerContext) -> None:
        ctx.send_event(ChatRequestEvent(model="review_model",
                                        messages=[ChatMessage(role=MessageRole.USER)],
                                        prompt_args={"input": event.input}))

    @action(ChatResponseEvent.EVENT_TYPE)
    @staticmethod
    def process_chat_response(event: Event, ctx: RunnerContext) -> None:
        response = ChatResponseEvent.from_event(event).response
        ctx.send_event(OutputEvent(output={**json.loads(response.content),
                                           "reasoning": response.extra_args["reasoning"]}))


def test_empty_user_message_after_the_prompt_is_dropped_and_reasoning_extracted():
    env = AgentsExecutionEnvironment.get_execution_environment()
    env.add_resource("ollama_server", ResourceDescriptor(
        ScriptedChatModel, function=f"{__name__}:review_script"))  # type taken from the class
    out = env.from_list([{"key": "r", "value": "meh"}]).apply(ReviewAgent()).to_list()
    env.execute()
    assert out == [{"r": {"roles": ["system", "user"], "reasoning": "weighing it"}}]


def sent_texts_script(request: ScriptedRequest) -> object:
    """Answers with the texts it was sent, one per message."""
    return json.dumps([m.content for m in request.messages])


class ExtraArgsReviewAgent(Agent):
    """A Flink Agents 0.1/0.2 port: the prompt's variables ride on the message's extra_args."""

    @prompt
    @staticmethod
    def review_prompt() -> Prompt:
        return Prompt.from_messages(messages=[
            ChatMessage(role=MessageRole.SYSTEM, content="Analyse the review; answer JSON."),
            ChatMessage(role=MessageRole.USER, content="id={id} review: {review}")])

    @chat_model_setup
    @staticmethod
    def review_model() -> ResourceDescriptor:
        return ResourceDescriptor(clazz=ResourceName.ChatModel.OLLAMA_SETUP,
                                  connection="ollama_server", model="qwen3:8b",
                                  prompt="review_prompt")

    @action(InputEvent)
    @staticmethod
    def process_input(event: InputEvent, ctx: RunnerContext) -> None:
        review = event.input
        extra = {"id": review["id"], "review": review["review"]}
        if review.get("override"):  # prompt_args win over extra_args
            ctx.send_event(ChatRequestEvent(
                model="review_model", messages=[ChatMessage(role=MessageRole.USER,
                                                            extra_args=extra)],
                prompt_args={"review": review["override"]}))
        else:
            ctx.send_event(ChatRequestEvent(
                model="review_model",
                messages=[ChatMessage(role=MessageRole.USER, extra_args=extra)]))

    @action(ChatResponseEvent)
    @staticmethod
    def process_chat_response(event: ChatResponseEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output=json.loads(event.response.content)))


def test_a_messages_extra_args_fill_the_prompt_as_in_flink_agents():
    env = AgentsExecutionEnvironment.get_execution_environment()
    env.add_resource("ollama_server", ResourceDescriptor(
        ScriptedChatModel, function=f"{__name__}:sent_texts_script"))
    out = env.from_list([
        {"key": "p1", "value": {"id": "p1", "review": "great!"}},
        {"key": "p2", "value": {"id": "p2", "review": "bad", "override": "broken box"}},
    ]).apply(ExtraArgsReviewAgent()).to_list()
    env.execute()
    assert out == [
        {"p1": ["Analyse the review; answer JSON.", "id=p1 review: great!"]},
        {"p2": ["Analyse the review; answer JSON.", "id=p2 review: broken box"]}]


def test_extra_args_are_left_out_of_a_messages_json_when_empty():
    assert "extra_args" not in ChatMessage(content="hi").model_dump(mode="json")
    given = ChatMessage(content="hi", extra_args={"id": "p1"})
    assert ChatMessage.model_validate(given.model_dump(mode="json")).extra_args == {"id": "p1"}


def test_num_async_threads_sets_max_in_flight():
    env = AgentsExecutionEnvironment.get_execution_environment()
    env.get_config().set(AgentExecutionOptions.NUM_ASYNC_THREADS, 2)
    assert env.local.max_in_flight == 2
    assert env.get_config().get(AgentExecutionOptions.NUM_ASYNC_THREADS) == 2


def test_unknown_argument_is_rejected_when_the_plan_is_built():
    class Bad(Agent):
        @chat_model_setup
        @staticmethod
        def m() -> ResourceDescriptor:
            return ResourceDescriptor(clazz=ResourceName.ChatModel.OLLAMA_SETUP,
                                      connection="c", extract_reasoninng=True)

    with pytest.raises(PlanError) as err:
        AgentPlan.from_agent(Bad())
    assert "extract_reasoninng" in str(err.value) and "chat_model resource 'm'" in str(err.value)


def test_flink_argument_names_map_to_ours():
    from flink_agents_py.api._resources import import_qualified

    conn = ResourceDescriptor(clazz=ResourceName.ChatModel.OLLAMA_CONNECTION,
                              request_timeout=240.0, base_url="http://h:1").build()
    assert (conn.timeout_s, conn.host) == (240.0, "http://h:1")
    setup = import_qualified(ResourceName.ChatModel.OLLAMA_SETUP)(
        connection="c", temperature=0.2, extract_reasoning=True)
    assert setup.options == {"temperature": 0.2} and setup.extract_reasoning


def test_numpy_docstring_parameters_describe_the_tool():
    def notify(id: str, review: str) -> None:
        """Notify the shipping manager.

        Parameters
        ----------
        id : str
            The id of the product
            that was damaged.
        review: str
            The negative review content
        """

    meta = Tool.from_callable(notify).metadata
    assert meta.description == "Notify the shipping manager."
    assert meta.parameters["properties"]["id"]["description"] == \
        "The id of the product that was damaged."
    assert meta.parameters["properties"]["review"]["description"] == "The negative review content"


def test_chat_request_takes_a_pydantic_class_or_output_schema():
    a = ChatRequestEvent(model="m", output_schema=Aspect)
    b = ChatRequestEvent(model="m", output_schema=OutputSchema(output_schema=Aspect))
    assert a.output_schema == b.output_schema == Aspect.model_json_schema()


def test_event_attributes_and_from_event():
    e = Event(type="Custom", attributes={"x": 1})
    e.set_attr("y", 2)
    assert (e.get_attr("x"), e.get_attr("y"), e.get_attr("type"), e.get_attr("nope", 0)) == \
        (1, 2, "Custom", 0)
    assert InputEvent.from_event(InputEvent(input=5)).input == 5
    assert e.id == ""  # built outside an action: the id comes when it is sent


def _echo(x: int, *, durable_id: str | None = None) -> int:  # pragma: no cover - guard
    raise AssertionError("durable_id must not reach the function")


def plus_one(x: int) -> int:
    return x + 1


def test_durable_id_is_not_passed_to_the_function():
    class Durable(Agent):
        @action(InputEvent)
        @staticmethod
        async def run(event: Event, ctx: RunnerContext) -> None:
            a = ctx.durable_execute(plus_one, 1, durable_id="one")
            b = await ctx.durable_execute_async(plus_one, a, durable_id="two")
            ctx.send_event(OutputEvent(output=b))

    env = AgentsExecutionEnvironment.get_execution_environment()
    out = env.from_list([{"key": "k", "value": 0}]).apply(Durable()).to_list()
    env.execute()
    assert out == [{"k": 3}]


def test_subagent_names():
    assert BaseAsyncSubagentSetup is AsyncSubagentSetup
    assert CALLABLE_NAME_PREFIX == "_subagent_"
    assert PreparedTriple.__origin__ is tuple
    assert RunStatus(state=RunStatus.State.COMPLETED) == RunStatus.completed()
    d = InternalSubagentResourceDescriptorBuilder(ReviewAgent()).description("rates").input_schema(
        '{"type": "object"}').build()
    assert d.clazz.endswith("InternalSubagent") and d.arguments["description"] == "rates"
    assert isinstance(d.build(), InternalSubagent)


def test_subagent_handle_done_and_session_id():
    seen = {}

    class Child(Agent):
        @action(InputEvent)
        @staticmethod
        def run(event: Event, ctx: RunnerContext) -> None:
            ctx.send_event(OutputEvent(output=event.input))

    class Parent(Agent):
        @action(InputEvent)
        @staticmethod
        async def run(event: Event, ctx: RunnerContext) -> None:
            handle = await ctx.submit_subagent("child", {"v": 1})
            seen["before"] = handle.done()
            result = await handle
            seen["after"] = handle.done()
            seen["session"] = handle.session_id
            ctx.send_event(OutputEvent(output=result.result))

    parent = Parent().add_resource("child", ResourceType.AGENT, ResourceDescriptor(
        InternalSubagent, agent=Child(), input_schema='{"type": "object"}'))
    env = AgentsExecutionEnvironment.get_execution_environment()
    out = env.from_list([{"key": "k", "value": 1}]).apply(parent).to_list()
    env.execute()
    assert out == [{"k": [{"v": 1}]}]
    assert seen["before"] is False and seen["after"] is True and isinstance(seen["session"], str)


def test_add_action_takes_flink_agents_keywords():
    def run(event: Event, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output=ctx.get_action_config_value("bonus") + event.input))

    agent = Agent().add_action(name="run", trigger_conditions=[InputEvent.EVENT_TYPE],
                               func=run, bonus=10)
    env = AgentsExecutionEnvironment.get_execution_environment()
    out = env.from_list([{"key": "k", "value": 1}]).apply(agent).to_list()
    env.execute()
    assert out == [{"k": 11}]


def test_compat_agents_and_skills_import_without_pyflink():
    import subprocess
    import sys

    code = ("import sys; sys.modules['pyflink'] = None\n"
            "import flink_agents_py.compat, flink_agents_py.agents, flink_agents_py.skills\n"
            "print(sorted(m for m in sys.modules if m.startswith('pyflink') and sys.modules[m]))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def yaml_echo(event: Event, ctx: RunnerContext) -> None:
    """An action for the YAML test: echoes the input."""
    ctx.send_event(OutputEvent(output={"echo": event.input}))


def test_load_yaml_then_apply_by_name(tmp_path):
    doc = tmp_path / "agents.yaml"
    doc.write_text(
        "agents:\n"
        "  - name: echo_agent\n"
        "    actions:\n"
        f"      - {{name: run, function: '{__name__}:yaml_echo', on: [InputEvent]}}\n")
    env = AgentsExecutionEnvironment.get_execution_environment()
    env.load_yaml(doc)
    out = env.from_list([{"key": "k", "value": 7}]).apply("echo_agent").to_list()
    env.execute()
    assert out == [{"k": {"echo": 7}}]
    with pytest.raises(KeyError, match="no agent named 'nope'"):
        env.from_list([]).apply("nope")


def _build_event() -> str:
    return Event(type="Built").id


def test_events_built_in_durable_calls_take_no_id_of_the_action():
    class Ids(Agent):
        @action(InputEvent)
        @staticmethod
        async def run(event: Event, ctx: RunnerContext) -> None:
            inside_sync = ctx.durable_execute(_build_event)
            inside_async = await ctx.durable_execute_async(_build_event)
            mine = Event(type="Mine")
            ctx.send_event(OutputEvent(output=[inside_sync, inside_async, mine.id]))

    env = AgentsExecutionEnvironment.get_execution_environment()
    out = env.from_list([{"key": "k", "value": 0}]).apply(Ids()).to_list()
    env.execute()
    # the action's own event is its first: durable calls (not run on replay) took no id
    assert out == [{"k": ["", "", "r0/run/e0"]}]


# ------------------------------------------------------------------------- the names page
NAMES_PAGE = (__import__("pathlib").Path(__file__).resolve().parent.parent / "docs" / "reference"
              / "flink-agents-names.md")


def flink_agents_names(page: str) -> set[str]:
    """The Python names of Flink Agents' API that the names page lists.

    From the first column of each table before the ported programs: each backticked token
    outside parentheses, unless the row says it is not offered; ``a.b.Name`` is ``Name``,
    ``Name.attr`` (a class's attribute or method) is ``Name``; ``.method(...)`` and
    ``ctx.attr`` are not names, nor a bare ``UPPER_CASE`` attribute continuing a list.
    """
    import re

    names: set[str] = set()
    for line in page.split("## The ported quickstart programs")[0].splitlines():
        if not line.startswith("| ") or line.startswith(("|---", "| Flink Agents ")):
            continue
        first, here = [c.strip() for c in line.strip().strip("|").split("|")][:2]
        if here.startswith("not offered"):
            continue
        depth, outside = 0, ""
        for ch in first:  # drop what is in parentheses (methods, arguments, notes)
            depth += ch == "("
            outside += ch if depth == 0 else ""
            depth -= ch == ")" and depth > 0
        for token in re.findall(r"`([^`]+)`", outside):
            if token.startswith((".", "ctx.")) or "=" in token or "*" in token:
                continue
            parts = token.split(".")
            caps = [p for p in parts if p[:1].isupper() and not p.isupper()]
            name = caps[0] if caps else parts[-1]
            if len(parts) == 1 and name.isupper():
                continue
            assert name.isidentifier(), (token, line)
            names.add(name)
    return names


def test_every_flink_agents_name_the_names_page_lists_imports_from_compat():
    import flink_agents_py.compat as compat

    names = flink_agents_names(NAMES_PAGE.read_text())
    assert {"ContextRetrievalRequestEvent", "ContextRetrievalResponseEvent", "Agent",
            "ResourceName", "MemorySet", "BaseVectorStore", "vector_store"} <= names
    assert len(names) > 60
    missing = sorted(n for n in names if not hasattr(compat, n))
    assert missing == []
    assert not (names - set(compat.__all__)), "imported, but not in compat.__all__"


def _pause(seconds: float, value: object) -> object:
    time.sleep(seconds)
    return value


class SlowFirstAgent(Agent):
    """Its first record's durable call takes longest, so overlapping runs would end last-first."""

    @action(InputEvent)
    @staticmethod
    async def answer(event: Event, ctx: RunnerContext) -> None:
        record = InputEvent.from_event(event).input
        done = await ctx.durable_execute_async(_pause, record["pause"], record["n"])
        ctx.send_event(OutputEvent(output=done))


def test_the_local_runner_gives_outputs_in_input_order_as_flink_agents_does():
    # Flink Agents' local runner runs one record at a time: a ported program that reads
    # to_list() by position (its RAG example prints each answer under its query) keeps working
    env = AgentsExecutionEnvironment.get_execution_environment()
    records = [{"key": f"k{n}", "value": {"n": n, "pause": 0.3 if n == 0 else 0.0}}
               for n in range(4)]
    out = env.from_list(records).apply(SlowFirstAgent()).to_list()
    env.execute()
    assert out == [{f"k{n}": n} for n in range(4)]
