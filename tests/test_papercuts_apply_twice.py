"""A second ``apply`` on one input is refused at the call, naming both agents and the fix.

``env.from_list(records).apply(A()).apply(B())`` ran ``B`` alone: the local job kept the last
agent and dropped the first without a word. On Flink the builder added a second operator
beside the first and handed out the second's outputs. Apache Flink Agents refuses a second
agent on one input (a ``RuntimeError``); so does this runtime now, on both hosts.
"""

from __future__ import annotations

import pytest

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    AgentAlreadyAppliedError,
    InputEvent,
    OutputEvent,
    RunnerContext,
    UsageError,
    action,
)

pytestmark = pytest.mark.timeout(120)


class First(Agent):
    """Outputs ``"first"``."""

    @action(InputEvent)
    @staticmethod
    def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output="first"))


class Second(Agent):
    """Outputs ``"second"``."""

    @action(InputEvent)
    @staticmethod
    def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output="second"))


def test_a_second_apply_on_a_local_job_is_refused_and_the_first_agent_still_runs():
    job = AgentsExecutionEnvironment.local().from_list([{"key": "a"}]).apply(First())
    with pytest.raises(AgentAlreadyAppliedError) as refused:
        job.apply(Second())
    message = str(refused.value)
    assert message.startswith("apply(Second): this input already has the agent First applied")
    assert "own from_list(...).apply(...)" in message
    # a UsageError of ours, and a RuntimeError as Flink Agents raises
    assert isinstance(refused.value, UsageError) and isinstance(refused.value, RuntimeError)
    assert job.collect() == ["first"]  # nothing was replaced


def test_the_same_agent_applied_twice_is_refused_too():
    job = AgentsExecutionEnvironment.local().from_list([{"key": "a"}])
    agent = First()
    job.apply(agent)
    with pytest.raises(AgentAlreadyAppliedError, match=r"^apply\(First\): this input"):
        job.apply(agent)


def test_each_input_takes_its_own_agent():
    env = AgentsExecutionEnvironment.local()
    first = env.from_list([{"key": "a"}]).apply(First()).collect()
    second = env.from_list([{"key": "a"}]).apply(Second()).collect()
    assert (first, second) == (["first"], ["second"])


def test_compat_local_builder_refuses_with_the_same_error():
    from flink_agents_py.compat import AgentsExecutionEnvironment as Theirs

    env = Theirs.get_execution_environment()
    builder = env.from_list([{"key": "a", "value": 1}]).apply(First())
    with pytest.raises(AgentAlreadyAppliedError):
        builder.apply(Second())


@pytest.mark.flink
@pytest.mark.timeout(300)
def test_a_second_apply_on_a_flink_builder_is_refused_before_any_operator_is_added():
    pytest.importorskip("pyflink")
    from pyflink.common import Types

    from flink_agents_py.flink import create_stream_environment
    from flink_agents_py.flink._graph import transformations_of

    env = create_stream_environment(execution_mode="thread", restart_attempts=0)
    agents = AgentsExecutionEnvironment.flink(env, metrics=False)
    records = env.from_collection([{"key": "a"}], type_info=Types.PICKLED_BYTE_ARRAY())
    builder = agents.from_datastream(records).apply(First())
    transformations = transformations_of(env)
    before = transformations.size() if transformations is not None else None
    with pytest.raises(AgentAlreadyAppliedError) as refused:
        builder.apply(Second(), name="second")
    assert str(refused.value).startswith(
        "apply(Second): this input already has the agent First applied"
    )
    assert "from_datastream(<its to_datastream()>).apply(Second)" in str(refused.value)
    after = transformations.size() if transformations is not None else None
    assert after == before  # no second operator in the job
