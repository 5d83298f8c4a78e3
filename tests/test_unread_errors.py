"""Records in an error output nobody reads are not lost quietly (the local runner).

A record goes to the error output when its action raises, its key selector fails or its
key has no encoding, its input has no JSON form... A program that never reads that output
(``collect()``, which returns the outputs only; a ``compat`` program, whose Flink Agents API
has no error output) gets one WARNING line per such record on ``flink_agents_py.errors``
(its key, its position, its error; bounded), and ``compat``'s ``execute()`` raises at the
end, after every other record ran, as Flink Agents fails at such a record.
"""

from __future__ import annotations

import logging
import uuid

import pytest

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    InputEvent,
    OutputEvent,
    RunnerContext,
    UnreadErrorsError,
    action,
)
from flink_agents_py.compat import AgentsExecutionEnvironment as Compat
from flink_agents_py.runtime.internal import UnreadErrors, error_line

U = uuid.UUID("0f8fad5b-d9cb-469f-a165-70867728950e")


class FailsOnBad(Agent):
    @action(InputEvent)
    @staticmethod
    def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        value = event.input["v"] if isinstance(event.input, dict) else event.input
        if str(value).startswith("bad"):
            raise ValueError(f"cannot handle {value}")
        ctx.send_event(OutputEvent(output=value))


def _unread(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "flink_agents_py.errors" and r.levelno == logging.WARNING]


def test_collect_logs_each_error_record_it_does_not_return(caplog):
    records = [{"key": "a", "v": 1}, {"key": U, "v": "bad " + "x" * 5000},
               {"key": 3j, "v": 2}, {"key": "a", "v": 3}]
    job = AgentsExecutionEnvironment.local().from_list(records).apply(FailsOnBad())
    with caplog.at_level(logging.WARNING):
        assert job.collect() == [1, 3]
    failed, rejected = _unread(caplog)
    assert failed.startswith("unread error record (read them with job.result.errors, or run() "
                             f"instead of collect()): key {U!r}, input 0, r0/on_input: "
                             "ValueError: cannot handle bad xxx")
    assert "characters cut" in failed and len(failed) < 800  # bounded: 5,000 x in the message
    assert rejected.startswith("unread error record (read them with job.result.errors, or "
                               "run() instead of collect()): key None, record 2 "
                               "(<key_selector>): KeyEncodingError: the key is 3j of type "
                               "complex")
    assert len(job.result.errors) == 2


def test_run_returns_the_error_records_and_logs_no_unread_line(caplog):
    records = [{"key": "a", "v": "bad"}]
    with caplog.at_level(logging.WARNING):
        result = AgentsExecutionEnvironment.local().from_list(records).apply(FailsOnBad()).run()
    assert len(result.errors) == 1 and not _unread(caplog)


def test_compat_execute_raises_at_the_end_after_the_other_records_ran(caplog):
    env = Compat.get_execution_environment()
    out = env.from_list([{"key": "a", "value": "ok"}, {"key": U, "value": "bad one"},
                         {"key": "c", "value": "fine"}]).apply(FailsOnBad()).to_list()
    with caplog.at_level(logging.WARNING), pytest.raises(UnreadErrorsError) as raised:
        env.execute()
    assert out == [{"a": "ok"}, {"c": "fine"}]  # delivered before the error
    error = raised.value
    assert error.count == 1 and error.errors[0].key == U
    assert str(error).startswith("1 record(s) went to the agent's error output, which this "
                                 "program does not read: Flink Agents would have failed the "
                                 "job at the first one")
    assert f"key {U!r}, input 0, r0/on_input: ValueError: cannot handle bad one" in str(error)
    [line] = _unread(caplog)
    assert "AgentsExecutionEnvironment.local()...run().errors" in line


def test_compat_execute_without_errors_returns_quietly(caplog):
    env = Compat.get_execution_environment()
    out = env.from_list([{"key": U, "value": "ok"}]).apply(FailsOnBad()).to_list()
    with caplog.at_level(logging.WARNING):
        env.execute()
    assert out == [{U: "ok"}] and not _unread(caplog)


def test_the_error_summary_names_the_first_few_and_how_many_more():
    unread = UnreadErrors("errors_datastream()")
    for n in range(8):
        unread.add({"key": {"uuid": str(U)}, "seq": n, "action": "act",
                    "execution_id": f"r{n}/act", "error_type": "ValueError",
                    "message": f"no {n}"})
    with pytest.raises(UnreadErrorsError) as raised:
        unread.raise_if_any()
    text = str(raised.value)
    assert raised.value.count == 8 and len(raised.value.errors) == 5
    assert f"key {U!r}, input 4, r4/act: ValueError: no 4" in text  # the row's JSON key read
    assert "r5/act" not in text and "... and 3 more" in text
    assert error_line({"key": ["t", 1], "seq": -1, "action": "<key_selector>",
                       "execution_id": "record", "error_type": "KeyError",
                       "message": "a\nb\x1b[31m"}) == (
        "key ('t', 1), record (<key_selector>): KeyError: a\n  b\\x1b[31m")


def test_the_runtime_logs_an_input_with_no_json_form_where_it_is_made(caplog):
    """As it logs a failed action or a rejected key: on Flink, the TaskManager's log then
    holds every error record, whoever reads the error output."""
    records = [{"key": "a", "v": {1, 2}}, {"key": "a", "v": 1}]
    with caplog.at_level(logging.WARNING):
        result = AgentsExecutionEnvironment.local().from_list(records).apply(FailsOnBad()).run()
    assert result.outputs == [1] and not _unread(caplog)
    [line] = [r.getMessage() for r in caplog.records if r.name == "flink_agents_py.runtime"]
    assert line.startswith("to the error output: key 'a', record 0 (<input>): "
                           "SerializationError: input record of key 'a': a set at $.v")


def test_a_readers_bad_input_row_is_logged_by_its_place_and_not_counted(caplog):
    # the rows read_lines_file and read_json_topic make for input they could not read: read
    # back on a MiniCluster when the program never takes them (before: dropped by Flink)
    unread = UnreadErrors("errors_datastream()")
    with caplog.at_level(logging.WARNING, logger="flink_agents_py.errors"):
        unread.add({"kind": "error", "topic": "wq", "partition": 0, "offset": 2, "key": "z",
                    "error": "not JSON (invalid literal)", "value": "not json\x1b[31m"})
        unread.add({"kind": "error", "line": 4, "error": "line 4: not JSON (...)",
                    "value": "{"})
    lines = [r.getMessage() for r in caplog.records if r.name == "flink_agents_py.errors"]
    assert lines == [
        "unread bad input (take the error stream read_json_topic/from_kafka returns): topic wq "
        "partition 0 offset 2: not JSON (invalid literal) (value 'not json\\x1b[31m')",
        "unread bad input (take the error stream read_lines_file returns): line 4: not JSON "
        "(...) (value '{')"]
    assert unread.count == 0  # no record reached an agent: compat's execute does not raise
    unread.raise_if_any()
