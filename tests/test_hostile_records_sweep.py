"""Every kind of hostile record on the local runner: one error row each, naming what and where.

A sweep of the neighbours of the bad-input rule ("a bad record goes to the error output with
its key and position, the job keeps running, good records are not lost"), on both local
input paths: a list of Python records (``from_list``) and a file (``read_json_lines``). Each
hostile record sits between good ones; each must give exactly one error row that names its
position (``record N`` / ``line N``), its key (``None`` when it has none) and what was
wrong, and every good record must give its output.
"""

from __future__ import annotations

import datetime
import enum
import threading
from decimal import Decimal
from typing import Any

import pytest

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents_py.io import read_json_lines


class Echo(Agent):
    """Answers each dict record with its ``n``."""

    @action(InputEvent)
    @staticmethod
    def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        """Answer the record."""
        record = event.input
        ctx.send_event(OutputEvent(output={"n": record.get("n")}))


class Level(enum.IntEnum):
    """A key type with no stable encoding (an ``int`` subclass)."""

    LOW = 1


def _deep(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": 1}
    for _ in range(levels):
        value = {"a": value}
    return value


# (record, its error row's action, error type, key, a word of its message)
HOSTILE: list[tuple[Any, str, str, Any, str]] = [
    ({"key": float("nan")}, "<key_selector>", "KeyEncodingError", None, "NaN is not equal"),
    ({"key": float("inf")}, "<key_selector>", "KeyEncodingError", None, "infinity"),
    ({"key": Decimal("sNaN")}, "<key_selector>", "TypeError", None, "signaling NaN"),
    ({"key": [1]}, "<key_selector>", "TypeError", None, "unhashable type: 'list'"),
    ({"key": {"a": 1}}, "<key_selector>", "TypeError", None, "unhashable type: 'dict'"),
    ({"key": (1, [2])}, "<key_selector>", "TypeError", None, "unhashable"),
    ({"key": {1, 2}}, "<key_selector>", "TypeError", None, "of type set"),
    ({"key": Level.LOW}, "<key_selector>", "KeyEncodingError", None, "of type Level"),
    ({"key": "\ud800"}, "<key_selector>", "KeyEncodingError", None, "lone surrogate"),
    ({"id": 1}, "<key_selector>", "UnkeyedRecordError", None, 'no "key" field'),
    ({"key": "x", "v": float("nan")}, "<input>", "SerializationError", "x", "no JSON form"),
    ({"key": "x", "v": float("-inf")}, "<input>", "SerializationError", "x", "no JSON form"),
    ({"key": "x", "v": "\udfff"}, "<input>", "SerializationError", "x", "lone surrogate"),
    ({"key": "x", "v": threading.Lock()}, "<input>", "SerializationError", "x", "no JSON form"),
    ({"key": "x", "v": 2**70}, "<input>", "SerializationError", "x", "beyond 64 bits"),
    ({"key": "x", "d": _deep(5000)}, "<input>", "SerializationError", "x", "nested too deeply"),
]


def _good(i: int) -> dict[str, Any]:
    return {"key": "good", "n": i}


def test_each_hostile_record_of_a_list_is_one_error_row_and_every_good_one_runs():
    records: list[Any] = []
    for i, (record, *_) in enumerate(HOSTILE):
        records += [_good(i), record]
    records.append({"key": datetime.date(2026, 1, 2), "n": "dated"})  # a key that encodes
    result = AgentsExecutionEnvironment.local().from_list(records).apply(Echo()).run()
    assert sorted(o["n"] for o in result.outputs if o["n"] != "dated") == list(range(len(HOSTILE)))
    assert [o for o in result.outputs if o["n"] == "dated"]  # (its key is a date)
    assert len(result.errors) == len(HOSTILE)
    by_place = {e.execution_id: e for e in result.errors}
    for i, (_, where, error_type, key, word) in enumerate(HOSTILE):
        row = by_place[f"record {2 * i + 1}"]  # its place among the records
        assert (row.action, row.error_type, row.key) == (where, error_type, key), (i, row)
        assert word in row.message, (i, row.message)


def test_each_hostile_line_of_a_file_is_one_error_row_naming_its_line(tmp_path):
    lines = [
        b'{"key": "k", "n": 0}',
        b'{"key": "k", "v": NaN}',  # 1: JSON has no NaN
        b'{"key": "k", "v": Infinity}',  # 2
        b'{"key": "k", "v": -Infinity}',  # 3
        b'{"key": "\\ud800"}',  # 4: an escaped lone surrogate (JSON text holds no such)
        b'{"key": "k", "d": ' + b"[" * 300 + b"]" * 300 + b"}",  # 5: nested 300 deep
        b'{"key": "k", "pad": "' + b"x" * 1200 + b'"}',  # 6: over max_record_bytes
        b'{"key": "caf\xc3"}',  # 7: a truncated UTF-8 sequence
        b'{"key": "k", "n": 8}',
        b'{"key": [1, 2]}',  # 9: an unhashable key
        b'{"key": {"a": 1}}',  # 10
        b'{"key": 12345678901234567890123}',  # 11: beyond 64 bits
        b'{"key": null, "n": 12}',  # the key None: runs
        b'{"key": 1.5, "n": 13}',  # a float key: runs
        b'{"key": "k", "n": 14}',
    ]
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    rows = read_json_lines(path, max_record_bytes=1000)
    result = AgentsExecutionEnvironment.local().from_list(rows).apply(Echo()).run()
    assert sorted((o["n"]) for o in result.outputs) == [0, 8, 12, 13, 14]
    got = {e.source: (e.action, e.error_type, e.key, e.message) for e in result.errors}
    assert sorted(got, key=lambda s: int(s.split()[1])) == [
        f"line {n}" for n in (1, 2, 3, 4, 5, 6, 7, 9, 10, 11)
    ]
    for n in (1, 2, 3, 4, 5, 6, 7, 11):  # the reader's: the line could not be read
        step, error_type, key, message = got[f"line {n}"]
        assert (step, error_type, key) == ("<input>", "BadRecordError", None)
        assert message.startswith(f"line {n}: ")
    assert "not JSON" in got["line 1"][3] and "not JSON" in got["line 2"][3]
    assert "no low surrogate" in got["line 4"][3]
    assert "nested more than 200 levels" in got["line 5"][3]
    assert "over the limit of 1,000 bytes" in got["line 6"][3]
    assert "invalid UTF-8 at byte 12" in got["line 7"][3]
    assert "beyond 64 bits" in got["line 11"][3]
    for n, word in ((9, "unhashable"), (10, "unhashable")):
        step, error_type, key, message = got[f"line {n}"]
        assert step == "<key_selector>" and key is None
        assert word in message, message


@pytest.mark.parametrize(
    ("key", "why"),
    [
        (float("nan"), "NaN is not equal to itself"),
        (Decimal("sNaN"), "NaN is not equal"),
        (float("-inf"), "an infinity has no JSON form"),
        (Decimal("Infinity"), "an infinity has no JSON form"),
    ],
)
def test_a_key_that_is_not_a_finite_number_is_refused_saying_why(key, why):
    # an infinity was refused with NaN's reason ("not equal to itself"), which it is not
    from flink_agents_py.runtime import KeyEncodingError, encode_key

    with pytest.raises(KeyEncodingError, match=why):
        encode_key(key)
