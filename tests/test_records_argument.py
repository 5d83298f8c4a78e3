"""What a newcomer passes where a list of records is expected (issue 32's kind).

A dict, a string or one record given to ``from_list`` used to be iterated silently (a dict's
keys, a string's characters, a model's fields each ran as a record); now it is a
``UsageError`` naming the fix, on every environment that takes records. The compat local
runner keys and values records as Flink Agents' does.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import uuid

import pytest
from pydantic import BaseModel

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    ExternalEvent,
    InputEvent,
    OutputEvent,
    RunnerContext,
    UnreadErrorsError,
    UsageError,
    action,
)
from flink_agents_py.compat import AgentsExecutionEnvironment as CompatEnvironment

pytestmark = pytest.mark.timeout(120)


class Echo(Agent):
    @action(InputEvent)
    @staticmethod
    def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output={"key": ctx.key, "in": event.input}))


class Review(BaseModel):
    key: str
    text: str


@dataclasses.dataclass
class Order:
    key: str
    total: float


ONE_VALUE = [
    ({"key": "a", "value": 1}, "got a dict (iterating it gives its keys: 'key', 'value'",
     "from_list([record])"),
    ("great food", "got a str (iterating it gives its characters", "from_list([text])"),
    (b"bytes", "got a bytes (iterating it gives its characters", "from_list([text])"),
    (Review(key="r", text="ok"), "got one Review record", "from_list([record])"),
    (Order(key="o", total=1.0), "got one Order record", "from_list([record])"),
    (42, "got an int, which is not a list", "from_list([value])"),
]


@pytest.mark.parametrize(("records", "got", "fix"), ONE_VALUE,
                         ids=["dict", "str", "bytes", "model", "dataclass", "int"])
def test_local_from_list_of_one_value_names_the_fix(records, got, fix):
    with pytest.raises(UsageError) as e:
        AgentsExecutionEnvironment.local().from_list(records)
    assert str(e.value).startswith("from_list takes a list of records, " + got)
    assert f"pass {fix}" in str(e.value)
    assert isinstance(e.value, TypeError)  # as Python's own "not iterable" would be


def test_what_is_iterable_still_runs():
    records = ({"key": k, "n": i} for i, k in enumerate("ab"))  # a generator, a tuple...
    res = AgentsExecutionEnvironment.local().from_list(records).apply(Echo()).run()
    assert sorted(o["key"] for o in res.outputs) == ["a", "b"]
    assert AgentsExecutionEnvironment.local().from_list(()).apply(Echo()).collect() == []


def test_connect_of_one_event_names_the_fix():
    job = AgentsExecutionEnvironment.local().from_list([{"key": "a"}])
    with pytest.raises(UsageError, match=r"connect takes a list of records, got one "
                                         r"ExternalEvent record: pass connect\(\[record\]\)"):
        job.connect(ExternalEvent(key="a", correlation_id="c", payload=1))


@pytest.mark.parametrize(("records", "got"), [(r, g) for r, g, _ in ONE_VALUE[:2]],
                         ids=["dict", "str"])
def test_compat_local_from_list_of_one_value_names_the_fix(records, got):
    env = CompatEnvironment.get_execution_environment()
    with pytest.raises(UsageError, match=re.escape("from_list takes a list of records, " + got)):
        env.from_list(records)


def test_compat_records_are_keyed_and_valued_as_flink_agents_does(caplog):
    """``"k"``/``"v"`` stand for ``"key"``/``"value"``; a record without a key runs under a
    key of its own (a UUID, as Flink Agents' local runner gives it), not all under ``None``;
    one without a value, or not a dict, is an error row naming its position, and ``execute``
    raises at its end (Flink Agents stops at such a record), the other records' outputs
    delivered."""
    env = CompatEnvironment.get_execution_environment()
    records = [{"key": "a", "value": 1}, {"k": "b", "v": 2}, {"value": 3}, {"value": 4},
               {"key": "c", "valeu": 5}, "plain text"]
    out = env.from_list(records).apply(Echo()).to_list()
    with caplog.at_level(logging.WARNING), pytest.raises(UnreadErrorsError) as raised:
        env.execute()
    assert raised.value.count == 2 and "record 4 (<key_selector>): UsageError" in str(
        raised.value)
    by_input = {next(iter(o.values()))["in"]: next(iter(o)) for o in out}
    assert sorted(by_input) == [1, 2, 3, 4]
    assert (by_input[1], by_input[2]) == ("a", "b")
    unkeyed = {by_input[3], by_input[4]}
    assert len(unkeyed) == 2 and all(uuid.UUID(k) for k in unkeyed)  # one key each
    assert 'record 4 rejected before it ran: UsageError: the record has no "value" field ' \
           "(its fields: key, valeu)" in caplog.text
    assert "record 5 rejected before it ran: UsageError: the record is a str, not a dict: " \
           'from_list takes {"key": k, "value": v} dicts' in caplog.text


def test_compat_input_of_the_other_runner_names_the_fix():
    local = CompatEnvironment.get_execution_environment()
    for call in (local.from_datastream, local.from_table):
        with pytest.raises(UsageError, match="needs Flink: get_execution_environment\\(env"):
            call([{"key": "a", "value": 1}])


def test_flink_input_that_is_not_a_stream_names_the_fix():
    """Without a cluster: the check comes before anything touches the environment."""
    pytest.importorskip("pyflink")
    agents = AgentsExecutionEnvironment.flink(object())  # a stand-in: nothing is configured
    with pytest.raises(UsageError, match=re.escape(
            "from_datastream takes a PyFlink DataStream, got a list: pass "
            "env.from_collection(records)")):
        agents.from_datastream([{"key": "a"}])
    with pytest.raises(UsageError, match="from_table takes a PyFlink Table, got a list"):
        agents.from_table([{"key": "a"}])
    compat = CompatEnvironment.get_execution_environment(object())
    with pytest.raises(UsageError, match=re.escape(
            "from_list is the local runner's (get_execution_environment() without env); on "
            "Flink make the list a DataStream: from_datastream(input=env.from_collection(")):
        compat.from_list([{"key": "a", "value": 1}])


def test_the_replay_checkers_take_a_list_of_records_too():
    """``check_replay_safety(agent, {...})`` used to check the dict's keys as two records."""
    from flink_agents_py.testing import check_replay_safety, check_upgrade_safety

    with pytest.raises(UsageError, match=re.escape(
            "check_replay_safety takes a list of records, got a dict (iterating it gives its "
            "keys: 'key', 'n', each would run as a record): pass "
            "check_replay_safety(agent, [record])")):
        check_replay_safety(Echo(), {"key": "k", "n": 1})
    with pytest.raises(UsageError, match=re.escape(
            "pass check_upgrade_safety(old_agent, new_agent, [text])")):
        check_upgrade_safety(Echo(), Echo(), "hello")


def test_other_lists_given_one_value_name_the_fix(tmp_path):
    """The same kind elsewhere: one message, one folder, one tool where a list is expected."""
    from flink_agents_py.agents import ReActAgent
    from flink_agents_py.api import ChatMessage, Prompt, ResourceDescriptor
    from flink_agents_py.skills import load_skills
    from flink_agents_py.testing import ScriptedChatModel

    with pytest.raises(UsageError, match=re.escape(
            "Prompt.from_messages takes a list of messages, got one message: pass "
            "from_messages([message])")):
        Prompt.from_messages(ChatMessage.user("hi"))  # was 5 errors about tuples
    with pytest.raises(UsageError, match=re.escape("or Prompt.from_text(text)")):
        Prompt.from_messages("You are terse.")
    with pytest.raises(UsageError, match=re.escape(
            f"load_skills takes a list of folders, got one str: pass "
            f"load_skills([{str(tmp_path)!r}])")):
        load_skills(str(tmp_path))  # was "skill folder /tmp has no SKILL.md" (its first 'c')

    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    with pytest.raises(UsageError, match=re.escape(
            "ReActAgent(tools=...) takes a list of functions or TOOL resources, got one "
            "function: pass tools=[...]")):
        ReActAgent(chat_model=ResourceDescriptor(ScriptedChatModel), tools=add)
