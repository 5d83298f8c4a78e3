"""Log lines the framework writes about failures carry hostile text safely.

An action failing with a message made of a record's or a model's text (``ValueError(f"bad
answer: {answer}")``) is logged by the framework: a newline in it must not start a line that
reads as another log record, and a terminal escape (ESC, BEL, CR, a bidi override) must not
reach the terminal raw. The error record keeps the message as it was.
"""

from __future__ import annotations

import logging

import pytest

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent, InputEvent, action

FORGED = "hi\nCRITICAL root: forged line\x1b]0;pwned\x07\r\u202eevil"
UNSAFE = ("\x1b", "\x07", "\r", "\u202e")


class Failing(Agent):
    """Fails with the record's text in its message."""

    @action(InputEvent)
    @staticmethod
    def go(event: InputEvent, ctx: object) -> None:
        """Fail quoting the record."""
        raise ValueError("model said: " + event.input["text"])


def _lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [line for r in caplog.records for line in r.getMessage().split("\n")]


def test_an_action_failing_with_hostile_text_logs_it_escaped_and_indented(caplog):
    caplog.set_level(logging.DEBUG, logger="flink_agents_py")
    records = [{"key": k, "text": FORGED} for k in "ab"]  # the 2nd: the one-line form
    res = AgentsExecutionEnvironment.local().from_list(records).apply(Failing()).run()
    assert [e.message for e in res.errors] == ["model said: " + FORGED] * 2  # kept as it was
    lines = _lines(caplog)
    assert any("forged line" in line for line in lines)
    assert not [line for line in lines if line.startswith("CRITICAL")]
    assert not [line for line in lines if any(c in line for c in UNSAFE)]
    assert any("\\x1b]0;pwned\\x07\\x0d\\u202eevil" in line for line in lines)


def test_a_key_selector_failing_on_hostile_text_logs_it_escaped_and_indented(caplog):
    caplog.set_level(logging.WARNING, logger="flink_agents_py")

    def select(record: dict) -> str:
        raise ValueError("no key in: " + record["text"])

    env = AgentsExecutionEnvironment.local()
    res = env.from_list([{"text": FORGED}], key_selector=select).apply(Failing()).run()
    assert len(res.errors) == 1
    lines = _lines(caplog)
    assert any("forged line" in line for line in lines)
    assert not [line for line in lines if line.startswith("CRITICAL")]
    assert not [line for line in lines if any(c in line for c in UNSAFE)]


class Loud(Agent):
    """Fails with a message a megabyte long."""

    @action(InputEvent)
    @staticmethod
    def go(event: InputEvent, ctx: object) -> None:
        """Fail loudly."""
        raise ValueError("E" * 1_000_000 + "THE-END")


def test_an_action_failing_with_a_huge_message_logs_it_bounded_and_records_it_whole(caplog):
    caplog.set_level(logging.DEBUG, logger="flink_agents_py")
    records = [{"key": k} for k in "ab"]
    res = AgentsExecutionEnvironment.local().from_list(records).apply(Loud()).run()
    assert [len(e.message) for e in res.errors] == [1_000_007] * 2  # the error record: whole
    logged = [r.getMessage() for r in caplog.records if "failed for key" in r.getMessage()]
    assert len(logged) == 2
    assert all(len(m) < 20_000 and "characters cut" in m for m in logged), \
        [len(m) for m in logged]
