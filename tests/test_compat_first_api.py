"""Programs written for Apache Flink Agents' first API (0.1) run, with only their imports changed.

Its examples (``examples/agent_example.py``, ``e2e_tests/my_agent.py``) read memory with
``ctx.get_short_term_memory()``, declare event classes with fields (``class MyEvent(Event):
value: Any``) that carry pydantic models from one action to the next, and write an action
as a generator that does ``result = yield from ctx.execute_async(fn, *args)``. Before this
port found them: ``get_short_term_memory`` was an ``AttributeError``; a model in such a
field reached the next action as a dict (``'dict' object has no attribute 'info'``: events
are stored as JSON between actions, and a field typed ``Any`` cannot say what it held); a
generator action was discarded with a warning, its body never run.
"""

# Adapted from apache/flink-agents python/flink_agents/examples/agent_example.py and
# python/flink_agents/e2e_tests/my_agent.py (Apache-2.0): imports changed, tool dropped.

from __future__ import annotations

import copy
from typing import Any

import pytest
from pydantic import BaseModel

from flink_agents_py.compat import (
    Agent,
    AgentsExecutionEnvironment,
    Event,
    InputEvent,
    OutputEvent,
    RunnerContext,
    action,
)
from flink_agents_py.testing import CallCounter, check_replay_safety

pytestmark = pytest.mark.timeout(300)

LOGGED = CallCounter()


class ItemData(BaseModel):
    id: int
    info: str
    memory_info: dict | None = None


class MyEvent(Event):  # noqa: D101
    value: Any


class CounterAgent(Agent):
    """``examples/agent_example.py``: memory through ``get_short_term_memory()``."""

    @action(InputEvent)
    @staticmethod
    def first_action(event: Event, ctx: RunnerContext):  # noqa: ANN205, D102
        memory = ctx.get_short_term_memory()
        ctx.get_sensory_memory().set("seen", event.input)  # 0.1's other memory getters
        assert ctx.sensory_memory.get("seen") == event.input
        assert type(ctx.get_long_term_memory()) is type(ctx.long_term_memory)
        new_count = (memory.get("counter") or 0) + 1
        memory.set("counter", new_count)
        content = event.input + " -> first_action"
        ctx.send_event(MyEvent(value=content))
        ctx.send_event(OutputEvent(output={f"(seen {new_count} times)": content}))

    @action(MyEvent)
    @staticmethod
    def second_action(event: Event, ctx: RunnerContext):  # noqa: ANN205, D102
        memory = ctx.get_short_term_memory()
        new_count = memory.get("counter") + 1
        memory.set("counter", new_count)
        content = event.value.split("->")[0].strip() + " -> second_action"
        ctx.send_event(OutputEvent(output={f"(seen {new_count} times)": content}))


def log_item(item: ItemData, total: int) -> bool:
    """The durable call of ``first_action`` (counted)."""
    LOGGED.count("log_item")
    return isinstance(item, ItemData) and total > 0


class ModelEventsAgent(Agent):
    """``e2e_tests/my_agent.py``'s DataStreamAgent: a generator action, models in events."""

    @action(InputEvent)
    @staticmethod
    def first_action(event: Event, ctx: RunnerContext):  # noqa: ANN205, D102
        input_data = event.input
        stm = ctx.short_term_memory
        total = (stm.get("status.total_infos") or 0) + 1
        stm.set("status.total_infos", total)

        log_success = yield from ctx.execute_async(log_item, input_data, total)

        content = copy.deepcopy(input_data)
        content.info += " first action, log success=" + str(log_success) + ","
        content.memory_info = {"total_infos": total}
        data_ref = stm.set(f"processed_items.item_{content.id}", content)
        ctx.send_event(MyEvent(value=data_ref))
        ctx.send_event(MyEvent(value=[content, {"copy": content}]))

    @action(MyEvent)
    @staticmethod
    def second_action(event: Event, ctx: RunnerContext):  # noqa: ANN205, D102
        value = event.value
        if isinstance(value, list):  # models inside containers keep their class too
            first, nested = value
            ctx.send_event(OutputEvent(output=(type(first).__name__,
                                               type(nested["copy"]).__name__)))
            return
        content = copy.deepcopy(ctx.short_term_memory.get(value))
        content.info += " second action"
        ctx.send_event(OutputEvent(output=content))


def test_agent_example_reads_memory_with_get_short_term_memory():
    env = AgentsExecutionEnvironment.get_execution_environment()
    records: list[dict[str, Any]] = []
    outputs = env.from_list(records).apply(CounterAgent()).to_list()
    records += [{"key": "bob", "value": "The message from bob"},
                {"k": "john", "v": "The message from john"},
                {"key": "bob", "value": "Second message from bob"}]
    env.execute()
    assert outputs == [
        {"bob": {"(seen 1 times)": "The message from bob -> first_action"}},
        {"bob": {"(seen 2 times)": "The message from bob -> second_action"}},
        {"john": {"(seen 1 times)": "The message from john -> first_action"}},
        {"john": {"(seen 2 times)": "The message from john -> second_action"}},
        {"bob": {"(seen 3 times)": "Second message from bob -> first_action"}},
        {"bob": {"(seen 4 times)": "Second message from bob -> second_action"}},
    ]


def test_a_generator_action_runs_and_models_in_event_fields_keep_their_class():
    env = AgentsExecutionEnvironment.get_execution_environment()
    outputs = env.from_list([
        {"key": 1, "value": ItemData(id=1, info="good")},
        {"key": 1, "value": ItemData(id=1, info="better")},
    ]).apply(ModelEventsAgent()).to_list()
    env.execute()
    results = [o[1] for o in outputs]
    assert results.count(("ItemData", "ItemData")) == 2
    items = [r for r in results if isinstance(r, ItemData)]
    assert [(i.info, i.memory_info) for i in items] == [
        ("good first action, log success=True, second action", {"total_infos": 1}),
        ("better first action, log success=True, second action", {"total_infos": 2}),
    ]


def test_a_generator_action_and_models_in_events_are_replay_safe():
    records = [ItemData(id=n, info=f"item {n}") for n in range(3)]
    report = check_replay_safety(ModelEventsAgent(), records, key_selector=lambda r: r.id % 2,
                                 reset=LOGGED.reset, other_process=False)
    report.assert_ok()


def test_a_cycle_in_an_untyped_field_is_still_a_serialization_error():
    from flink_agents_py.api import SerializationError
    from flink_agents_py.runtime._serde import event_json

    cycle: list[Any] = [ItemData(id=1, info="x")]
    cycle.append(cycle)
    with pytest.raises(SerializationError):
        event_json(MyEvent(value=cycle), "test")


# Flink Agents' chat_tongyi_example (before 0.1's names): resources declared with
# @chat_model_server / @chat_model, each method returning (class, {"name": ..., ...}).
# Both names were an ImportError, and a (class, dict) value was refused by the plan.
TUPLE_FORM = """
    from typing import Any, Dict, Tuple, Type
    from flink_agents_py.compat import Agent, ChatMessage, MessageRole
    from flink_agents_py.compat import BaseChatModelConnection, BaseChatModelSetup
    from flink_agents_py.compat import action, chat_model, chat_model_server, tool
    from flink_agents_py.compat import ChatRequestEvent, ChatResponseEvent, InputEvent, OutputEvent
    from flink_agents_py.compat import AgentsExecutionEnvironment, RunnerContext
    from flink_agents_py.testing import ScriptedChatModel, tool_call, tool_calls


    def answer(request):
        if "add" in {t.name for t in request.tools} and not request.tool_results:
            return tool_calls(tool_call("add", "c1", a=1, b=2))
        if request.tool_results:
            return f"sum {request.tool_results[0].content}"
        return "joke: " + request.messages[-1].content


    class MyTongyiAgent(Agent):
        @chat_model_server
        @staticmethod
        def tongyi_server() -> Tuple[Type[BaseChatModelConnection], Dict[str, Any]]:
            return ScriptedChatModel, {"name": "tongyi_server", "function": "prog:answer"}

        @chat_model
        @staticmethod
        def math_chat_model() -> Tuple[Type[BaseChatModelSetup], Dict[str, Any]]:
            return BaseChatModelSetup, {"name": "math_chat_model", "connection": "tongyi_server",
                                        "tools": ["add"]}

        @chat_model
        @staticmethod
        def creative_chat_model() -> Tuple[Type[BaseChatModelSetup], Dict[str, Any]]:
            return BaseChatModelSetup, {"name": "creative_chat_model",
                                        "connection": "tongyi_server"}

        @tool
        @staticmethod
        def add(a: int, b: int) -> int:
            \"\"\"Calculate the sum of a and b.

            Parameters
            ----------
            a : int
                The first operand
            b : int
                The second operand
            \"\"\"
            return a + b

        @action(InputEvent)
        @staticmethod
        def process_input(event: InputEvent, ctx: RunnerContext) -> None:
            text = event.input.lower()
            model = "math_chat_model" if "sum" in text else "creative_chat_model"
            ctx.send_event(ChatRequestEvent(
                model=model, messages=[ChatMessage(role=MessageRole.USER, content=text)]))

        @action(ChatResponseEvent)
        @staticmethod
        def process_chat_response(event: ChatResponseEvent, ctx: RunnerContext) -> None:
            if event.response and event.response.content:
                ctx.send_event(OutputEvent(output=event.response.content))


    if __name__ == "__main__":
        env = AgentsExecutionEnvironment.get_execution_environment()
        input_list = []
        output_list = env.from_list(input_list).apply(MyTongyiAgent()).to_list()
        input_list.append({"key": "0001", "value": "calculate the sum of 1 and 2."})
        input_list.append({"key": "0002", "value": "Can you tell a joke."})
        env.execute()
        for output in output_list:
            for key, value in output.items():
                print(f"{key}: {value}")
"""


def test_resources_declared_as_class_and_arguments_tuples(tmp_path):
    import os
    import subprocess
    import sys
    import textwrap
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    (tmp_path / "prog.py").write_text(textwrap.dedent(TUPLE_FORM))
    proc = subprocess.run([sys.executable, "prog.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(root)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.splitlines() == ["0001: sum 3", "0002: joke: can you tell a joke."]


def test_new_object_on_an_object_keeps_its_fields():
    # its my_agent.py: status = stm.new_object("status", overwrite=True) on every record,
    # then a counter below it; Flink Agents' memory returns the existing object (fields
    # kept), so the count grows; here the object was emptied and the count stayed at 1
    class StatusAgent(Agent):
        @action(InputEvent)
        @staticmethod
        def first_action(event: Event, ctx: RunnerContext) -> None:
            stm = ctx.get_short_term_memory()
            status = stm.new_object("status", overwrite=True)
            total = status.get("total_reviews") if stm.is_exist("status.total_reviews") else 0
            status.set("total_reviews", total + 1)
            seen = stm.new_object("seen")
            seen.set(str(event.input), True)
            ctx.send_event(OutputEvent(output=[stm.get("status.total_reviews"),
                                               sorted(stm.get("seen").get_field_names())]))

    env = AgentsExecutionEnvironment.get_execution_environment()
    out = env.from_list([{"key": "k", "value": n} for n in range(3)]).apply(
        StatusAgent()).to_list()
    env.execute()
    assert out == [{"k": [1, ["0"]]}, {"k": [2, ["0", "1"]]}, {"k": [3, ["0", "1", "2"]]}]


def test_new_object_on_a_value_needs_overwrite():
    class ValueAgent(Agent):
        @action(InputEvent)
        @staticmethod
        def go(event: Event, ctx: RunnerContext) -> None:
            ctx.short_term_memory.set("v", 1)
            try:
                ctx.short_term_memory.new_object("v")
            except ValueError as e:
                refused = "not an object" in str(e)
            made = ctx.short_term_memory.new_object("v", overwrite=True)
            ctx.send_event(OutputEvent(output=[refused, made.get_field_names()]))

    env = AgentsExecutionEnvironment.get_execution_environment()
    out = env.from_list([{"key": "k", "value": 1}]).apply(ValueAgent()).to_list()
    env.execute()
    assert out == [{"k": [True, []]}]
