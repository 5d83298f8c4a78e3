"""An input record that is a pydantic model reaches its action as that model, on every path.

Flink Agents' programs type their inputs (``input: ProductReview = event.input`` then
``input.review``); a record keeps its class through keyed state (its stored form is tagged
with the class), so the action sees the model live, after a restore, and inside a dict.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel
from support.harness import KEY, new_core, resume, snapshot_of
from support.probes import gate

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import InMemoryKeyState
from flink_agents_py.runtime.core._results import event_of, input_event

pytestmark = pytest.mark.timeout(60)


class ProductReview(BaseModel):
    id: str
    review: str
    stars: int = 3


def wait_for_gate(tag: str) -> str:
    assert gate().wait(10), "gate never opened"
    return tag


class Reviewer(Agent):
    """Reads the input as Flink Agents' examples do: attributes of the model."""

    @action(InputEvent)
    @staticmethod
    async def review(event: InputEvent, ctx: RunnerContext) -> None:
        value = event.input
        review = value if isinstance(value, ProductReview) else value["review"]
        await ctx.durable_execute_async(wait_for_gate, "g")
        ctx.send_event(OutputEvent(output={
            "type": type(review).__name__, "id": review.id, "text": review.review.upper(),
            "nested": type(value).__name__,
        }))


def test_a_model_record_is_the_model_in_the_action_on_the_local_runner():
    gate().set()
    records = [ProductReview(id="p1", review="late"),
               {"key": "p2", "review": ProductReview(id="p2", review="fine")}]
    env = AgentsExecutionEnvironment.local()
    out = env.from_list(records, key_selector=lambda r: getattr(r, "id", None) or r["key"]) \
        .apply(Reviewer()).collect()
    assert sorted(out, key=lambda o: o["id"]) == [
        {"type": "ProductReview", "id": "p1", "text": "LATE", "nested": "ProductReview"},
        {"type": "ProductReview", "id": "p2", "text": "FINE", "nested": "dict"},
    ]


def test_a_model_record_is_the_model_again_after_a_restore_from_json_state():
    """Checkpointed mid-run as Flink keeps state (JSON text), resumed by a new core: the
    re-entered action gets a ``ProductReview`` again, not its fields."""
    plan = AgentPlan.from_agent(Reviewer())
    core = new_core(plan)
    try:
        state = InMemoryKeyState()
        res = core.on_input(KEY, ProductReview(id="p9", review="slow"), state)
        assert res.errors == [] and res.outputs == []
        snap = snapshot_of(state, "json")
    finally:
        gate().set()
        core.close()
    outputs, errors, _ = resume(plan, snap)
    assert errors == []
    assert outputs == [{"type": "ProductReview", "id": "p9", "text": "SLOW",
                        "nested": "ProductReview"}]


def test_the_stored_form_keeps_the_class_and_the_event_gets_its_own_copy():
    stored = {"$model": f"{ProductReview.__module__}:ProductReview",
              "data": {"id": "p1", "review": "x", "stars": 3}}
    event, data = input_event("r0", stored)
    assert event.input == ProductReview(id="p1", review="x")
    assert data["input"] == stored  # what keyed state holds: the tagged form
    again = event_of(data)  # as a restore rebuilds it
    assert again.input == ProductReview(id="p1", review="x") and again.input is not event.input
    plain, plain_data = input_event("r1", {"a": [1, {"b": 2}]})
    plain.input["a"].append(3)  # an action changing its input changes no stored form
    assert plain_data["input"] == {"a": [1, {"b": 2}]}


def test_a_model_class_that_cannot_be_imported_reaches_the_action_as_its_fields(caplog):
    stored = {"$model": "no_such_module_here:Gone", "data": {"id": "p1", "review": "x"}}
    with caplog.at_level("WARNING", logger="flink_agents_py.runtime"):
        event, _ = input_event("r0", stored)
        event_of({"id": "r0", "type": "InputEvent", "attributes": {}, "input": stored})
    assert event.input == {"id": "p1", "review": "x"}
    warned = [r.getMessage() for r in caplog.records if "no_such_module_here:Gone" in
              r.getMessage()]
    assert len(warned) == 1 and "define it in a module the workers can import" in warned[0]


def test_a_model_defined_in_a_function_rebuilds_in_the_process_that_tagged_it():
    """A class the workers could not import (defined in a function, or in ``__main__`` of
    another process) still rebuilds where it was tagged: the tag remembers the class."""

    class Local(BaseModel):
        n: int

    out = AgentsExecutionEnvironment.local().from_list(
        [Local(n=1)], key_selector=lambda r: "k").apply(_TypeOf()).collect()
    assert out == [{"type": "Local", "n": 1}]


class _TypeOf(Agent):
    @action(InputEvent)
    @staticmethod
    def show(event: InputEvent, ctx: RunnerContext) -> None:
        value: Any = event.input
        ctx.send_event(OutputEvent(output={"type": type(value).__name__, "n": value.n}))
