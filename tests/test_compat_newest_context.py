"""Apache Flink Agents' newest runner context: dynamic events and batches of durable calls.

``ctx.send_event(identifier="Scored", score=3)`` builds a ``DynamicEvent`` (Flink Agents'
class, missing here before: an ``ImportError``), which ``@action("Scored")`` receives as one;
``await ctx.durable_execute_all_async([DurableCall(func=..., args=...), ...])`` gives one
``Outcome`` per call, each call durable and run concurrently (missing before: an
``AttributeError`` failing the action). Both are checked for replay at every crash point, and
run as a user's own module from a directory outside the repository.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.compat import (
    Agent,
    DurableCall,
    DynamicEvent,
    InputEvent,
    Outcome,
    OutputEvent,
    RunnerContext,
    action,
)
from flink_agents_py.testing import check_replay_safety

ROOT = Path(__file__).resolve().parents[1]
VENV_PY = ROOT / ".venv" / "bin" / "python"
PYTHON = VENV_PY if VENV_PY.exists() else Path(sys.executable)

pytestmark = pytest.mark.timeout(240)


def _run(agent: Agent, records: list[dict[str, Any]]) -> Any:
    return AgentsExecutionEnvironment.local().from_list(records).apply(agent).run()


# -- dynamic events ---------------------------------------------------------------------------
class Scoring(Agent):
    """Sends a dynamic event both ways; the listener echoes what it received."""

    @action(InputEvent)
    @staticmethod
    def start(event: InputEvent, ctx: RunnerContext) -> None:
        text = event.input["text"]
        ctx.send_event(identifier="Scored", text=text, score=len(text), via="keywords")
        ctx.send_event(
            DynamicEvent(identifier="Scored", text=text, score=-len(text), via="instance")
        )

    @action("Scored")
    @staticmethod
    def scored(event: Any, ctx: RunnerContext) -> None:
        ctx.send_event(
            OutputEvent(
                output={
                    "class": type(event).__name__,
                    "dynamic": isinstance(event, DynamicEvent),
                    "identifier": event.identifier,
                    "type": event.type,
                    "score": event.score,
                    "text": event.get_attr("text"),
                    "via": event.attributes["via"],
                }
            )
        )


def test_a_dynamic_event_reaches_the_action_listening_to_its_identifier():
    result = _run(Scoring(), [{"key": "a", "text": "hello"}])
    assert not result.errors
    by_via = {o["via"]: o for o in result.outputs}
    assert by_via == {
        "keywords": {
            "class": "DynamicEvent",
            "dynamic": True,
            "identifier": "Scored",
            "type": "Scored",
            "score": 5,
            "text": "hello",
            "via": "keywords",
        },
        "instance": {
            "class": "DynamicEvent",
            "dynamic": True,
            "identifier": "Scored",
            "type": "Scored",
            "score": -5,
            "text": "hello",
            "via": "instance",
        },
    }


def test_a_dynamic_event_agent_replays_at_every_crash_point():
    report = check_replay_safety(
        Scoring(), [{"key": "a", "text": "hi"}, {"key": "b", "text": "there"}], other_process=False
    )
    report.assert_ok()
    assert report.outputs == 4


def test_a_dynamic_event_round_trips_through_its_json_form():
    event = DynamicEvent(identifier="Scored", score=3, tags=["x"])
    again = DynamicEvent.model_validate_json(event.model_dump_json())
    assert (again.identifier, again.score, again.tags) == ("Scored", 3, ["x"])


@pytest.mark.parametrize("bad", [None, "", 3])
def test_a_dynamic_event_needs_a_string_identifier(bad):
    with pytest.raises(TypeError, match="DynamicEvent needs identifier="):
        DynamicEvent(identifier=bad, score=1)


@pytest.mark.parametrize("builtin", ["OutputEvent", "_output_event", "_input_event"])
def test_a_dynamic_event_refuses_a_built_in_type_naming_what_to_build(builtin):
    with pytest.raises(TypeError, match="names a built-in event type"):
        DynamicEvent(identifier=builtin, output=1)


class ToOutput(Agent):
    """Sends Flink Agents' output type by identifier: it leaves the agent as an output."""

    @action(InputEvent)
    @staticmethod
    def start(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(identifier=OutputEvent.EVENT_TYPE, output=event.input["text"])


def test_an_identifier_naming_the_output_type_still_makes_an_output():
    result = _run(ToOutput(), [{"key": "a", "text": "out"}])
    assert not result.errors
    assert result.outputs == ["out"]


class Misuse(Agent):
    """Calls ``send_event`` with both an event and an identifier, or neither."""

    @action(InputEvent)
    @staticmethod
    def start(event: InputEvent, ctx: RunnerContext) -> None:
        try:
            if event.input["both"]:
                ctx.send_event(OutputEvent(output=1), identifier="Scored")
            else:
                ctx.send_event()
        except ValueError as e:  # Flink Agents raises ValueError for both
            ctx.send_event(OutputEvent(output=str(e)))


def test_send_event_with_both_or_neither_is_a_value_error_saying_so():
    result = _run(Misuse(), [{"key": "a", "both": True}, {"key": "b", "both": False}])
    assert not result.errors
    both, neither = sorted(result.outputs, key=lambda o: "needs" in o)
    assert "not both" in both and "identifier='Scored'" in both
    assert "needs an event or identifier=" in neither


# -- durable_execute_all_async ------------------------------------------------------------------
CALLS: list[str] = []  # what ran, in this process


def double(x: int) -> int:
    CALLS.append(f"double {x}")
    return 2 * x


def refuse(x: int) -> int:
    CALLS.append(f"refuse {x}")
    raise ValueError(f"no {x}")


def reserved_names(*, fn: str, strict: int) -> str:
    """Keywords named as the runtime's own are still this function's."""
    return f"{fn}:{strict}"


class Batch(Agent):
    """Three calls in one batch: one returns, one raises, one takes reserved keywords."""

    @action(InputEvent)
    @staticmethod
    async def start(event: InputEvent, ctx: RunnerContext) -> None:
        n = event.input["n"]
        outcomes = await ctx.durable_execute_all_async(
            [
                DurableCall(id="double", func=double, args=(n,)),
                DurableCall(id="refuse", func=refuse, kwargs={"x": n}),
                DurableCall(func=reserved_names, kwargs={"fn": "f", "strict": n}),
            ]
        )
        ctx.send_event(
            OutputEvent(
                output=[
                    [o.is_success(), o.value, None if o.error is None else repr(o.error)]
                    for o in outcomes
                ]
            )
        )


def test_a_batch_gives_one_outcome_per_call_in_order():
    CALLS.clear()
    result = _run(Batch(), [{"key": "a", "n": 3}])
    assert not result.errors
    assert result.outputs == [
        [[True, 6, None], [False, None, "ValueError('no 3')"], [True, "f:3", None]]
    ]
    assert sorted(CALLS) == ["double 3", "refuse 3"]


def test_a_batch_replays_at_every_crash_point_without_calling_again():
    report = check_replay_safety(
        Batch(), [{"key": "a", "n": 1}, {"key": "b", "n": 2}], other_process=False
    )
    report.assert_ok()
    assert report.calls == 6


class Together(Agent):
    """Three calls that finish only when all three run at once."""

    barrier: threading.Barrier | None = None

    @action(InputEvent)
    @staticmethod
    async def start(event: InputEvent, ctx: RunnerContext) -> None:
        outcomes = await ctx.durable_execute_all_async(
            [DurableCall(func=meet, args=(i,)) for i in range(3)]
        )
        ctx.send_event(OutputEvent(output=[o.get() for o in outcomes]))


def meet(i: int) -> int:
    assert Together.barrier is not None
    Together.barrier.wait()  # BrokenBarrierError after 20 s unless all three run together
    return i


def test_the_calls_of_a_batch_run_concurrently():
    Together.barrier = threading.Barrier(3, timeout=20)
    result = _run(Together(), [{"key": "a"}])
    assert not result.errors, result.errors
    assert result.outputs == [[0, 1, 2]]


class Unserializable:
    """An argument with no JSON form."""


class NoJsonForm(Agent):
    @action(InputEvent)
    @staticmethod
    async def start(event: InputEvent, ctx: RunnerContext) -> None:
        await ctx.durable_execute_all_async(
            [
                DurableCall(func=double, args=(1,)),
                DurableCall(func=double, args=(Unserializable(),)),
            ]
        )


def test_a_batch_call_whose_argument_has_no_json_form_fails_the_action_naming_it():
    result = _run(NoJsonForm(), [{"key": "a"}])
    assert len(result.errors) == 1
    message = result.errors[0].message
    assert "arguments of durable call" in message and "double" in message
    assert "Unserializable at $[0] has no JSON form" in message


class NotCalls(Agent):
    @action(InputEvent)
    @staticmethod
    async def start(event: InputEvent, ctx: RunnerContext) -> None:
        await ctx.durable_execute_all_async([DurableCall(func=double, args=(1,)), len])


def test_a_batch_naming_something_that_is_not_a_call_fails_naming_its_place():
    result = _run(NotCalls(), [{"key": "a"}])
    assert len(result.errors) == 1
    assert "callables[1]" in result.errors[0].message
    assert "not a call" in result.errors[0].message


def test_outcome_reads_as_flink_agents_outcome():
    ok, bad = Outcome.success(2), Outcome.failure(KeyError("k"))
    assert (ok.value, ok.error, ok.is_success(), bad.is_failure()) == (2, None, True, True)
    assert ok.get() == 2
    with pytest.raises(KeyError):
        bad.get()
    with pytest.raises(TypeError):
        DurableCall(double, (1,))  # type: ignore[misc]  # by keyword only, as they write it


# -- a user's program, in Flink Agents' style -----------------------------------------------------
PROGRAM = """
    # Flink Agents: from flink_agents.api.agents.agent import Agent ... (imports changed only)
    from flink_agents_py.compat import (Agent, AgentsExecutionEnvironment, DurableCall,
                                        DynamicEvent, InputEvent, OutputEvent, RunnerContext,
                                        action)


    def lookup(order_id: str) -> dict:
        return {"order": order_id, "total": len(order_id) * 10}


    def audit(order_id: str) -> str:
        raise RuntimeError(f"audit service down for {order_id}")


    class OrderAgent(Agent):
        @action(InputEvent)
        @staticmethod
        async def fan_out(event: InputEvent, ctx: RunnerContext):
            order_ids = event.input["orders"]
            calls = [DurableCall(id=f"lookup-{o}", func=lookup, args=(o,)) for o in order_ids]
            calls.append(DurableCall(id="audit", func=audit, kwargs={"order_id": "all"}))
            outcomes = await ctx.durable_execute_all_async(calls)
            totals = [o.value["total"] for o in outcomes if not o.is_failure()]
            failures = [str(o.error) for o in outcomes if o.error is not None]
            ctx.send_event(identifier="OrdersPriced", totals=totals, failures=failures)

        @action("OrdersPriced")
        @staticmethod
        def report(event: DynamicEvent, ctx: RunnerContext):
            ctx.send_event(OutputEvent(output={"sum": sum(event.totals),
                                               "failures": event.failures,
                                               "event": event.identifier}))
            ctx.close()


    env = AgentsExecutionEnvironment.get_execution_environment()
    out = env.from_list([{"key": "u1", "value": {"orders": ["a1", "b22"]}}]) \\
        .apply(OrderAgent()).to_list()
    env.execute()
    print(out)
"""


def test_a_ported_program_runs_as_a_users_module_outside_the_repository(tmp_path):
    (tmp_path / "orders.py").write_text(textwrap.dedent(PROGRAM))
    environ = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [str(PYTHON), "orders.py"],
        cwd=tmp_path,
        env=environ,
        capture_output=True,
        text=True,
        timeout=200,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (
        "[{'u1': {'sum': 50, 'failures': ['audit service down for all'], 'event': 'OrdersPriced'}}]"
    ) in done.stdout


class Stepped(Agent):
    """A generator action (Flink Agents 0.1's style) yields from the batch."""

    @action(InputEvent)
    @staticmethod
    def start(event: InputEvent, ctx: RunnerContext) -> Any:
        outcomes = yield from ctx.durable_execute_all_async(
            [DurableCall(func=double, args=(event.input["n"],))]
        )
        ctx.send_event(OutputEvent(output=[o.value for o in outcomes]))


def test_a_generator_action_yields_from_a_batch():
    result = _run(Stepped(), [{"key": "a", "n": 5}])
    assert not result.errors, result.errors
    assert result.outputs == [[10]]


def test_a_batch_call_hands_its_reconciler_to_its_durable_call():
    import asyncio

    seen: list[Any] = []

    class Recording:
        """Stands in for the runtime's context: records what each durable call is given."""

        def durable_execute_async(
            self, fn: Any, *args: Any, reconciler: Any = None, **kwargs: Any
        ) -> Any:
            seen.append((fn, args, reconciler, kwargs))

            async def run() -> Any:
                return fn(*args, **kwargs)

            return run()

    def reconcile() -> int:
        return 0

    batch = RunnerContext.durable_execute_all_async(
        Recording(),  # type: ignore[arg-type]
        [
            DurableCall(func=double, args=(2,), reconciler=reconcile),
            DurableCall(func=double, args=(3,)),
        ],
    )

    async def main() -> Any:
        return await batch

    outcomes = asyncio.run(main())
    assert [o.value for o in outcomes] == [4, 6]
    assert [(s[1], s[2]) for s in seen] == [((2,), reconcile), ((3,), None)]


class Getters(Agent):
    """Reads the context through Flink Agents' getters."""

    @action(InputEvent)
    @staticmethod
    def start(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.get_agent_metric_group().get_counter("seen").inc()
        ctx.get_action_metric_group().get_counter("runs").inc()
        ctx.send_event(
            OutputEvent(
                output={
                    "config": ctx.get_config().get("pricing.currency"),
                    "action_config": ctx.get_action_config(),
                    "same": ctx.get_action_config() == ctx.action_config,
                    "value": ctx.get_action_config_value("limit"),
                }
            )
        )


def test_flink_agents_getters_of_the_context_read_what_its_properties_read():
    agent = Getters()
    agent.set_config(**{"pricing.currency": "EUR"})
    agent.add_action("limited", [InputEvent], Getters.start, limit=3)
    result = _run(agent, [{"key": "a"}])
    assert not result.errors, result.errors
    assert {"config": "EUR", "action_config": {"limit": 3}, "same": True, "value": 3} in (
        result.outputs
    )
