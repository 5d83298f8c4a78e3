"""What the local runner (and the other hosts) take as records: the default key, the list check."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable, Mapping, Sized
from typing import Any

from pydantic import BaseModel

from ..api import UnkeyedRecordError, UsageError

__all__ = ["check_records", "check_snapshot", "default_key_selector"]

_FIELDS_SHOWN = 8
"""How many of a record's field names an ``UnkeyedRecordError`` names."""


def default_key_selector(record: Any) -> Any:
    """The record's ``"key"`` field; ``None`` (one key) for a record without fields.

    The key selector of ``from_list``, ``from_datastream`` and ``from_table`` when none is
    given. A record with fields is a dict (its ``"key"`` item), a pydantic model or a
    dataclass (its ``key`` attribute), or a PyFlink ``Row`` with field names (its ``key``
    field). One of those with no ``key`` is not run under a
    made-up key: its runner sends it to the error output (see ``UnkeyedRecordError``) and
    goes on. A record without fields (a string, a number, a list) runs under ``None``.

    Args:
        record: an input record.

    Returns:
        Its key.

    Raises:
        UnkeyedRecordError: for a record with fields but no ``key``, naming its fields and
            the ways to key it.
    """
    if isinstance(record, Mapping):
        if "key" in record:
            return record["key"]
        names = [str(k) for k in record]
        example = f'r["{names[0]}"]' if names else 'r["id"]'
    elif isinstance(record, BaseModel):
        names = list(type(record).model_fields)
        if "key" in names:
            return record.key  # type: ignore[attr-defined]
        example = f"r.{names[0]}" if names else "r.id"
    elif dataclasses.is_dataclass(record) and not isinstance(record, type):
        names = [f.name for f in dataclasses.fields(record)]
        if "key" in names:
            return record.key  # type: ignore[attr-defined]
        example = f"r.{names[0]}" if names else "r.id"
    else:
        row_names = _row_names(record)
        if row_names is None:
            return None
        if "key" in row_names:
            return record[row_names.index("key")]
        names = row_names
        example = f'r["{names[0]}"]'
    shown = ", ".join(names[:_FIELDS_SHOWN])
    more = f", ... ({len(names)} fields)" if len(names) > _FIELDS_SHOWN else ""
    fields = f"its fields: {shown}{more}" if names else "it has no fields"
    raise UnkeyedRecordError(
        f'the {type(record).__name__} record has no "key" field ({fields}) and no '
        f"key_selector was given: add a \"key\" field, or pass key_selector= to "
        f"from_list/from_datastream/from_table (e.g. key_selector=lambda r: {example}; "
        "key_selector=lambda r: None runs every record under one key, one after another)")


def _row_names(record: Any) -> list[str] | None:
    """The field names of a PyFlink ``Row`` that has them (``Row(key=..., text=...)``).

    Such a row reaches the actions as a dict by field name, so it is keyed like one. Told
    by its class, as the runtime's serde tells it (this module does not import PyFlink).

    Returns:
        The names, or ``None`` for anything else (a row without names is a list of values).
    """
    cls = type(record)
    if cls.__name__ != "Row" or not cls.__module__.startswith("pyflink"):
        return None
    names = getattr(record, "_fields", None)
    return [str(n) for n in names] if names else None


def check_records(records: Any, call: str, shape: str | None = None) -> None:
    """Raise when ``records`` is one value, not a collection of records.

    Iterating a dict gives its keys, a string its characters and a pydantic model its
    ``(field, value)`` pairs: each would silently run as a record of its own.

    Args:
        records: what was passed as the records.
        call: the call that took them (``"from_list"``...), for the message.
        shape: how the fix is written, ``{}`` standing for the list (default:
            ``call({})``).

    Raises:
        UsageError: for a dict, a ``str``, ``bytes``, one record (a pydantic model or a
            dataclass) or a value that is not iterable, naming the fix.
    """
    kind = type(records).__name__
    shape = shape or f"{call}({{}})"
    a = "an" if kind[:1].lower() in "aeiou" else "a"
    if isinstance(records, Mapping):
        names = ", ".join(repr(k) for k in itertools.islice(iter(records), 3))
        got = (f"{a} {kind} (iterating it gives its keys{': ' + names if names else ''}, "
               f"each would run as a record)")
        fix = f"{shape.format('[record]')} to run it as one record"
    elif isinstance(records, (str, bytes, bytearray)):
        got = f"{a} {kind} (iterating it gives its characters, each would run as a record)"
        fix = f"{shape.format('[text]')} to run it as one record"
    elif isinstance(records, BaseModel) or (dataclasses.is_dataclass(records)
                                            and not isinstance(records, type)):
        got = f"one {kind} record"
        fix = shape.format("[record]")
    elif not isinstance(records, Iterable):
        got = f"{a} {kind}, which is not a list"
        fix = f"{shape.format('[value]')} to run it as one record"
    else:
        return
    raise UsageError(f"{call} takes a list of records, got {got}: pass {fix}")


def check_snapshot(snapshot: Any, expected_format: str, records: Any) -> None:
    """Raise when ``snapshot`` is no local runner snapshot, or not one of a job of ``records``.

    Args:
        snapshot: what ``LocalAgentJob.restore`` was given.
        expected_format: the local runner's snapshot format.
        records: the restoring job's records (checked against the snapshot's position
            when they have a length).

    Raises:
        ValueError: naming what is wrong: the format, a key entry's missing fields, or a
            position past the records (the records are not those the snapshot was taken
            with: the missing ones would neither run nor be reported).
    """
    if not isinstance(snapshot, dict) or snapshot.get("format") != expected_format:
        found = snapshot.get("format") if isinstance(snapshot, dict) else type(snapshot)
        raise ValueError(f"not a local runner snapshot: format {found!r}, expected "
                         f"{expected_format!r}")
    for i, entry in enumerate(snapshot.get("keys", [])):
        missing = {"key", "run", "memory", "queue", "next_seq"} - set(entry)
        if missing:
            raise ValueError(f"snapshot keys[{i}] lacks {sorted(missing)}")
    position = snapshot.get("position", 0)
    if isinstance(records, Sized) and isinstance(position, int) and position > len(records):
        raise ValueError(
            f"the snapshot was taken after the source delivered {position} records, and this "
            f"job has {len(records)}: restore with the records of the job the snapshot was "
            "taken from (its source skips the ones delivered before the snapshot)")
