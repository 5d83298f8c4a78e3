"""An output let through as it is reaches the probe in one hook: the same counts as two.

The core reports an ``OutputEvent`` at the agent's level with no declared output type to
check it against through ``Probe.output_dispatched`` (issue 31, part 4: one hook fewer per
echo record). The metrics must count what ``event_dispatched`` and ``output_emitted`` count;
any other probe or observer must get both hooks, in that order; an output checked against a
declared type keeps the two hooks (a refused one is an event, not an output).
"""

from __future__ import annotations

from typing import Any

import pytest
from support.metric_counts import metric_counts

from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents_py.observability import AgentMetrics
from flink_agents_py.observability._metrics_probe import MetricsProbe
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import AgentCore, CompositeObserver, InMemoryKeyState, Observer

pytestmark = pytest.mark.timeout(60)


class Twice(Agent):
    """Two outputs per record, and an event nothing handles."""

    @action(InputEvent)
    @staticmethod
    async def both(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output={"n": event.input["n"]}))
        ctx.send_event(OutputEvent(output={"n": -event.input["n"]}))


class Seen(Observer):
    """Every hook of interest, in order."""

    def __init__(self) -> None:
        self.hooks: list[tuple[str, Any]] = []

    def event_dispatched(self, key: Any, event: Any, parent: str | None) -> None:
        self.hooks.append(("event", event.type))

    def output_emitted(self, key: Any, output: Any, parent: str) -> None:
        self.hooks.append(("output", output["n"]))


def _run(observer: Observer, check: Any = None, n: int = 4) -> list[Any]:
    core = AgentCore(AgentPlan.from_agent(Twice()), observer=observer, output_check=check)
    core.open()
    outputs: list[Any] = []
    try:
        for i in range(n):
            state = InMemoryKeyState()
            res = core.on_input(f"k{i}", {"n": i + 1}, state)
            outputs.extend(res.outputs)
    finally:
        core.close()
    return outputs


def _refuse_negative(output: Any) -> None:
    if output["n"] < 0:
        raise ValueError("n must not be negative")


@pytest.mark.parametrize("check", [None, _refuse_negative], ids=["unchecked", "checked"])
def test_the_metrics_count_an_output_hook_as_its_event_and_its_output(check):
    alone, beside, seen = AgentMetrics(), AgentMetrics(), Seen()
    assert isinstance(alone.probe, MetricsProbe)
    outputs = _run(alone, check)
    assert _run(CompositeObserver(beside, seen), check) == outputs
    got, want = metric_counts(alone), metric_counts(beside)
    assert got == want  # through the probe as through every hook
    assert got["outputs_emitted"] == len(outputs) == (4 if check else 8)
    assert got["events_processed"] == 12
    assert got["events_processed_by_type"] == {"InputEvent": 4, "OutputEvent": 8}
    # another observer gets both hooks of each output, the event first
    record = [
        ("event", "InputEvent"),
        ("event", "OutputEvent"),
        ("output", 1),
        ("event", "OutputEvent"),
    ]
    if check is None:
        record.append(("output", -1))
    assert seen.hooks[: len(record) + 1] == record + [("event", "InputEvent")]


def test_an_output_event_of_a_chat_type_keeps_the_chat_bookkeeping(monkeypatch):
    """An ``OutputEvent`` subclass typed as a chat event (odd, allowed) is counted as one."""
    from flink_agents_py.api import _events

    registry = _events._REGISTRY  # the class below takes the type over: given back after
    monkeypatch.setitem(registry, "ChatRequestEvent", registry["ChatRequestEvent"])

    class Odd(OutputEvent):
        EVENT_TYPE = "ChatRequestEvent"

    metrics = AgentMetrics()
    probe = metrics.probe
    assert isinstance(probe, MetricsProbe)
    event = Odd(output={"n": 1}, id="r0/a/e0")
    probe.output_dispatched("k", event)
    other = AgentMetrics()
    other.probe.event_dispatched("k", event)  # type: ignore[union-attr]
    other.probe.output_emitted("k", {"n": 1}, event.id)  # type: ignore[union-attr]
    got, want = metric_counts(metrics), metric_counts(other)
    assert got["chats"] == want["chats"] == {"?": 1}  # (counted as a chat request)
    assert got == want
