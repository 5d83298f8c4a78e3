"""The local runner's default key selector (also the Flink builder's)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from ..api import UnkeyedRecordError

__all__ = ["default_key_selector"]

_FIELDS_SHOWN = 8
"""How many of a record's field names an ``UnkeyedRecordError`` names."""


def default_key_selector(record: Any) -> Any:
    """The record's ``"key"`` field; ``None`` (one key) for a record without fields.

    The key selector of ``from_list``, ``from_datastream`` and ``from_table`` when none is
    given. A record with fields is a dict (its ``"key"`` item), a pydantic model or a
    dataclass (its ``key`` attribute). One of those with no ``key`` is not run under a
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
        return None
    shown = ", ".join(names[:_FIELDS_SHOWN])
    more = f", ... ({len(names)} fields)" if len(names) > _FIELDS_SHOWN else ""
    fields = f"its fields: {shown}{more}" if names else "it has no fields"
    raise UnkeyedRecordError(
        f'the {type(record).__name__} record has no "key" field ({fields}) and no '
        f"key_selector was given: add a \"key\" field, or pass key_selector= to "
        f"from_list/from_datastream/from_table (e.g. key_selector=lambda r: {example}; "
        "key_selector=lambda r: None runs every record under one key, one after another)")
