"""Flink Agents program idioms beyond the quickstarts, run on the local runner.

Each test writes an agent the way Apache Flink Agents' e2e tests and docs write one (custom
events with their own ``__init__``, memory references and nested memory objects, custom chat
model classes, tools fetched as resources...) with only ``flink_agents_py.compat`` imports,
and checks its outputs.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel

from flink_agents_py.compat import (
    Agent,
    AgentsExecutionEnvironment,
    Event,
    EventType,
    InputEvent,
    OutputEvent,
    RunnerContext,
    action,
)


def _run(agent: Agent, records: list[dict[str, Any]]) -> list[dict[Any, Any]]:
    env = AgentsExecutionEnvironment.get_execution_environment()
    out = env.from_list(records).apply(agent).to_list()
    env.execute()
    return out


class ValueEvent(Event):
    """Flink Agents' custom event: its own ``__init__`` and a property over an attribute."""

    EVENT_TYPE: ClassVar[str] = "_value_event"

    def __init__(self, value: Any) -> None:
        super().__init__(type=ValueEvent.EVENT_TYPE, attributes={"value": value})

    @classmethod
    def from_event(cls, event: Event) -> ValueEvent:
        return cls(value=event.attributes["value"])

    @property
    def value(self) -> Any:
        return self.attributes["value"]


class Review(BaseModel):
    id: int
    review: str


class CustomEventAgent(Agent):
    @action(EventType.InputEvent)
    @staticmethod
    def first(event: Event, ctx: RunnerContext) -> None:
        review = Review.model_validate(InputEvent.from_event(event).input)
        ctx.send_event(ValueEvent(value={"id": review.id, "review": review.review + " first"}))

    @action(ValueEvent.EVENT_TYPE)
    @staticmethod
    def second(event: Event, ctx: RunnerContext) -> None:
        got = ValueEvent.from_event(event)
        assert isinstance(event, ValueEvent)  # rebuilt as its class, from its JSON form
        ctx.send_event(OutputEvent(output=got.value["review"] + " second"))


def test_a_custom_event_with_its_own_init_is_rebuilt_from_its_json_form():
    # the class's __init__ takes ``value`` only: rebuilding a sent event from its fields
    # (id, type, attributes) called it with those and failed every run with a TypeError
    out = _run(CustomEventAgent(), [{"key": 1, "value": {"id": 1, "review": "good"}},
                                    {"key": 2, "value": Review(id=2, review="bad")}])
    assert out == [{1: "good first second"}, {2: "bad first second"}]
    assert ValueEvent.model_validate(ValueEvent(value=3).to_json()).value == 3
