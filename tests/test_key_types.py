"""Keys of common Python types: ``UUID``, ``date``, ``datetime``, ``Decimal``, ``bytes``.

The default key encoding (``"json"``) gives each of them a tagged JSON form (``{"uuid":
"..."}``), so its Flink key is fixed text: the same bytes on every Python, PyFlink version and
execution mode (the key group, and where a restore finds the key's state). The exact texts
are pinned here. Everywhere a key is written as JSON or text (error rows, the event log, the
journal, a local snapshot, long-term memory scopes, outside events) it takes that form, and
``ctx.key`` is the key in its own type; the same values kept in memory, events and durable
results come back in their type too (``ctx.key`` in an output).
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import uuid
import zoneinfo

import pytest

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent, ExternalEvent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents_py.runtime import (
    JSON_KEYS,
    PICKLE_KEYS,
    ErrorRecord,
    KeyEncodingError,
    SqliteJournal,
    decode_key,
    encode_key,
    key_from_json,
    key_json,
)
from flink_agents_py.runtime._serde import to_json_value

U = uuid.UUID("0f8fad5b-d9cb-469f-a165-70867728950e")
PARIS = zoneinfo.ZoneInfo("Europe/Paris")

PINNED = [
    (U, '\x1f{"uuid":"0f8fad5b-d9cb-469f-a165-70867728950e"}'),
    (dt.date(2024, 5, 1), '\x1f{"date":"2024-05-01"}'),
    (dt.date(1, 1, 1), '\x1f{"date":"0001-01-01"}'),
    (dt.datetime(2024, 5, 1, 12, 30), '\x1f{"datetime":"2024-05-01T12:30:00"}'),
    (dt.datetime(2024, 5, 1, 12, 30, 0, 5), '\x1f{"datetime":"2024-05-01T12:30:00.000005"}'),
    (dt.datetime(2024, 5, 1, 12, 30, tzinfo=dt.timezone.utc),
     '\x1f{"datetime":"2024-05-01T12:30:00+00:00"}'),
    (dt.datetime(2024, 5, 1, 14, 30, tzinfo=dt.timezone(dt.timedelta(hours=2))),
     '\x1f{"datetime":"2024-05-01T14:30:00+02:00"}'),
    (dt.datetime(2024, 1, 1, tzinfo=dt.timezone(-dt.timedelta(hours=5, seconds=30))),
     '\x1f{"datetime":"2024-01-01T00:00:00-05:00:30"}'),
    (decimal.Decimal("1.50"), '\x1f{"decimal":"1.50"}'),
    (decimal.Decimal("-0"), '\x1f{"decimal":"-0"}'),
    (decimal.Decimal("1E+2"), '\x1f{"decimal":"1E+2"}'),
    (b"\x00\x01\xff", '\x1f{"bytes":"AAH/"}'),
    (b"", '\x1f{"bytes":""}'),
    (("order", U, (dt.date(2024, 5, 1), b"x")),
     '\x1f["order",{"uuid":"0f8fad5b-d9cb-469f-a165-70867728950e"},'
     '[{"date":"2024-05-01"},{"bytes":"eA=="}]]'),
]


def _types(value):
    return [_types(v) for v in value] if isinstance(value, tuple) else type(value)


@pytest.mark.parametrize(("key", "encoded"), PINNED, ids=[repr(k)[:40] for k, _ in PINNED])
def test_each_key_type_has_one_fixed_encoding_and_comes_back_in_its_own_type(key, encoded):
    assert encode_key(key) == encoded
    back = decode_key(encoded)
    assert back == key and _types(back) == _types(key)
    if isinstance(key, dt.datetime):
        assert back.utcoffset() == key.utcoffset()
    assert decode_key(JSON_KEYS.flink_key(lambda r: r, key)) == key
    # its JSON form is the encoding's text, and reads back to the key
    assert "\x1f" + json.dumps(key_json(key), separators=(",", ":")) == encoded
    assert key_from_json(json.loads(json.dumps(key_json(key)))) == key


def test_an_aware_datetime_keeps_its_offset_not_its_zone_name():
    summer = dt.datetime(2024, 7, 1, 12, 0, tzinfo=PARIS)
    assert encode_key(summer) == '\x1f{"datetime":"2024-07-01T12:00:00+02:00"}'
    back = decode_key(encode_key(summer))
    assert back == summer and back.tzinfo == dt.timezone(dt.timedelta(hours=2))


def test_keys_python_takes_for_one_are_apart_as_their_pickles_and_java_have_them():
    noon_utc = dt.datetime(2024, 5, 1, 12, 0, tzinfo=dt.timezone.utc)
    two_pm_paris = noon_utc.astimezone(PARIS)
    assert noon_utc == two_pm_paris  # one instant: equal in Python...
    keys = [U, str(U), U.bytes, dt.date(2024, 5, 1), dt.datetime(2024, 5, 1),
            "2024-05-01", noon_utc, two_pm_paris, noon_utc.replace(tzinfo=None),
            decimal.Decimal("1"), decimal.Decimal("1.0"), decimal.Decimal("1.00"), 1, 1.0,
            True, "1", b"1", (U,), [str(U)][0] + " "]
    assert len({encode_key(k) for k in keys}) == len(keys)  # ...two keys here


class Stamp(dt.datetime):
    """A ``datetime`` subclass, as ``pandas.Timestamp`` is one."""


class Id(uuid.UUID):
    pass


class BadZone(dt.tzinfo):
    def utcoffset(self, when):
        raise RuntimeError("no tz database here")


@pytest.mark.parametrize(("key", "says"), [
    (decimal.Decimal("NaN"), "finite"),
    (decimal.Decimal("-Infinity"), "finite"),
    (Stamp(2024, 5, 1), "of type Stamp"),
    (Id(int=1), "of type Id"),
    (("t", Stamp(2024, 5, 1)), "the key[1] is"),
    (dt.datetime(2024, 5, 1, tzinfo=BadZone()), "its tzinfo gives no UTC offset"),
    (dt.time(12, 0), "of type time"),
], ids=["nan", "-inf", "datetime-subclass", "uuid-subclass", "in-a-tuple", "tzinfo-raises",
        "time"])
def test_a_key_without_a_tag_or_text_is_refused_naming_the_accepted_types(key, says):
    with pytest.raises(KeyEncodingError) as e:
        encode_key(key)
    assert says in str(e.value)
    if "of type" in says:
        assert ("str, int, float, bool, None, uuid.UUID, datetime.date, datetime.datetime, "
                "decimal.Decimal, bytes or a tuple of those (the exact types") in str(e.value)
    identity = JSON_KEYS.flink_key(lambda r: r, key)  # the record goes to the error output
    assert JSON_KEYS.rejected(identity) is not None  # (hashing the tzinfo one fails first)


def test_a_json_form_that_is_no_key_is_refused():
    for data in ({"uuid": "nope"}, {"when": "2024-05-01"}, {"date": "20240501"},
                 {"decimal": "x"}, {"bytes": "not base64!"}, {"uuid": str(U), "date": "x"},
                 {"date": 20240501}):
        with pytest.raises(ValueError, match="key"):
            key_from_json(data)


def test_the_json_forms_of_the_keys_every_release_took_are_unchanged():
    """The journal names a key by this text and long-term memory scopes digest this form:
    for these keys, what they were before the tags."""
    from flink_agents_py.runtime.internal import dumps, key_text

    for key in ["alpha", 1, -2.5, True, None, ("t", 1, ("u", None)), ()]:
        assert key_json(key) == to_json_value(key, "key")
        assert key_text(key) == dumps(key).decode()
    assert key_text(("t", U)) == '["t",{"uuid":"0f8fad5b-d9cb-469f-a165-70867728950e"}]'
    assert key_text(str(U)) == '"0f8fad5b-d9cb-469f-a165-70867728950e"'  # another key
    # a key of the "pickle" encoding with no JSON form is left as it is
    assert key_json(frozenset({1})) == frozenset({1})
    assert PICKLE_KEYS.flink_key(lambda r: r, U) is U  # pickled by PyFlink, as before


def test_an_error_rows_json_form_holds_the_keys_json_form():
    row = ErrorRecord(key=("t", U, b"\xff"), seq=0, action="a", execution_id="r0/a",
                      error_type="E", message="m").model_dump(mode="json")
    assert row["key"] == ["t", {"uuid": str(U)}, {"bytes": "/w=="}]  # non-UTF-8 bytes too
    assert key_from_json(row["key"]) == ("t", U, b"\xff")


def test_an_outside_event_read_from_json_names_a_tagged_key():
    event = ExternalEvent(key=("t", U), correlation_id="c")
    data = json.loads(event.model_dump_json())
    assert data["key"] == ["t", {"uuid": str(U)}]
    assert ExternalEvent.key_of(data) == ("t", U)
    assert ExternalEvent.key_of({"key": {"not": "a key"}}) == {"not": "a key"}  # refused later


KEYS = [U, dt.date(2024, 5, 1), dt.datetime(2024, 5, 1, 12, 0, tzinfo=dt.timezone.utc),
        dt.datetime(2024, 5, 1, 14, 0, tzinfo=dt.timezone(dt.timedelta(hours=2))),
        decimal.Decimal("1.50"), b"\xff\x00", ("order", U), str(U)]
"""One key of each type; two datetimes of one instant, and a UUID's text (four keys)."""


class Remember(Agent):
    """Counts its key's records in short-term memory and keeps the key there; one durable
    call of the key; a record with ``fail`` raises."""

    @action(InputEvent)
    @staticmethod
    async def remember(event: InputEvent, ctx: RunnerContext) -> None:
        stm = ctx.short_term_memory
        stm.set("seen", stm.get("seen", 0) + 1)
        stm.set("key", ctx.key)
        echoed = await ctx.durable_execute_async(lambda k: k, ctx.key)
        if event.input.get("fail"):
            raise ValueError(f"record {event.input['n']} fails")
        ctx.send_event(OutputEvent(output={"n": event.input["n"], "key": ctx.key,
                                           "kept": stm.get("key"), "echoed": echoed,
                                           "seen": stm.get("seen")}))


def _records(fail: int | None = None) -> list[dict]:
    return [{"i": n % len(KEYS), "n": n, "fail": n == fail} for n in range(2 * len(KEYS))]


def _key_of(record: dict):
    return KEYS[record["i"]]


def _json_key(key):
    return list(key) if isinstance(key, tuple) else key


def test_a_local_job_keyed_by_each_type_runs_memory_calls_and_outputs_in_the_keys_type(
        tmp_path):
    log = tmp_path / "events.jsonl"
    journal = SqliteJournal(str(tmp_path / "journal.db"))
    fail = len(KEYS)  # the second record of the UUID key
    job = (AgentsExecutionEnvironment.local(event_log=str(log), journal=journal)
           .from_list(_records(fail), key_selector=_key_of).apply(Remember()))
    result = job.run()
    assert len(result.outputs) == 2 * len(KEYS) - 1
    for key, out in result.keyed_outputs:
        expected = KEYS[out["n"] % len(KEYS)]
        assert key == expected and _types(key) == _types(expected)
        assert out["key"] == expected and type(out["key"]) is type(expected)
        assert out["echoed"] == _json_key(expected) and out["kept"] == _json_key(expected)
        assert out["seen"] == 1 + out["n"] // len(KEYS)  # each key its own memory
    [error] = result.errors
    assert error.key == U and type(error.key) is uuid.UUID and error.seq == 1
    assert error.model_dump(mode="json")["key"] == {"uuid": str(U)}
    # the event log names each key by its JSON form
    from flink_agents_py.observability import build_traces, read_event_log, select_traces

    records = read_event_log([log])
    logged = {json.dumps(r["key"], sort_keys=True) for r in records if "key" in r}
    assert logged == {json.dumps(key_json(k), sort_keys=True) for k in KEYS}
    traces = build_traces(records)
    assert len(select_traces(traces, key=f'{{"uuid":"{U}"}}')) == 2  # the UUID's runs
    assert len(select_traces(traces, key=str(U))) == 4  # its text: the string key's too
    # the journal names each key by the text of its JSON form
    import sqlite3

    named = {row[0] for row in sqlite3.connect(tmp_path / "journal.db").execute(
        "SELECT DISTINCT key FROM outcomes")}
    assert named == {json.dumps(key_json(k), separators=(",", ":")) for k in KEYS}


def test_a_local_snapshot_keeps_each_key_in_its_type_across_a_restore():
    records = _records()
    job = AgentsExecutionEnvironment.local().from_list(records, key_selector=_key_of).apply(
        Remember())
    cut = job.run(max_steps=len(KEYS) + 3)  # runs of several keys in flight
    snapshot = json.loads(json.dumps(job.snapshot()))  # as a file holds it
    assert {json.dumps(k["key"], sort_keys=True) for k in snapshot["keys"]} <= {
        json.dumps(key_json(k), sort_keys=True) for k in KEYS}
    restored = (AgentsExecutionEnvironment.local().from_list(records, key_selector=_key_of)
                .apply(Remember()).restore(snapshot).run())
    done = sorted((o["n"], o["seen"]) for o in cut.outputs + restored.outputs)
    assert done == [(n, 1 + n // len(KEYS)) for n in range(2 * len(KEYS))]
    assert all(type(k) is type(KEYS[o["n"] % len(KEYS)]) for k, o in restored.keyed_outputs)
