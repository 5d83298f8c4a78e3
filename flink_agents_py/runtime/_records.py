"""Records read from text (files, Kafka): JSON decoded with integers kept exact."""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

from ..api import SerializationError
from ._serde import to_json_value

__all__ = ["MAX_JSON_DEPTH", "loads_record"]

MAX_JSON_DEPTH = 200
"""The deepest nesting of arrays and objects a record read from text may have.

JSON readers take more (orjson 1,024 levels), but such a record breaks the job later, at
every restart: a Flink stream pickles records between operators (which fails at about 490
levels, fewer on a deep stack) and orjson writes no more than 255 levels (an output to
Kafka); the margin leaves room for an output that wraps its input."""

_LONG_DIGITS = re.compile(rb"[0-9]{19,}")
"""A run of digits long enough to be an integer orjson reads as a float (beyond 64 bits)."""
_LONG_DIGITS_TEXT = re.compile(r"[0-9]{19,}")
"""The same, for text (so a decoded line is not encoded again to be searched)."""


def loads_record(data: bytes | str, where: str = "record") -> Any:
    """Decode one record's JSON text, refusing integers that would not be read exactly.

    orjson reads an integer beyond 64 bits as a float, silently losing digits; a text with
    a long run of digits is read again by the standard library (exact integers) and checked
    like a stored value (``to_json_value``).

    Args:
        data: the JSON text or UTF-8 bytes.
        where: what the text is, for the error.

    Returns:
        The value.

    Raises:
        orjson.JSONDecodeError: when the text is not JSON (a ``ValueError``).
        SerializationError: for an integer beyond 64 bits, naming its path, or for a value
            nested deeper than ``MAX_JSON_DEPTH``.
    """
    value = orjson.loads(data)
    opened = (data.count(b"[") + data.count(b"{") if isinstance(data, bytes)
              else data.count("[") + data.count("{"))
    if opened > MAX_JSON_DEPTH:  # (else it cannot nest that deep: no walk)
        _check_depth(value, where)
    long_digits = _LONG_DIGITS_TEXT if isinstance(data, str) else _LONG_DIGITS
    if long_digits.search(data) is not None:  # type: ignore[arg-type]
        to_json_value(json.loads(data), where)  # raises at an integer beyond 64 bits
    return value


def _check_depth(value: Any, where: str) -> None:
    """Refuse ``value`` when its arrays and objects nest deeper than ``MAX_JSON_DEPTH``.

    Raises:
        SerializationError: naming the depth and the limit.
    """
    level: list[Any] = [value]
    depth = 0
    while level:
        below: list[Any] = []
        for item in level:
            if type(item) is dict:
                below.extend(v for v in item.values() if type(v) in (dict, list))
            elif type(item) is list:
                below.extend(v for v in item if type(v) in (dict, list))
        if below:
            depth += 1
        if depth >= MAX_JSON_DEPTH:
            raise SerializationError(
                f"{where}: nested more than {MAX_JSON_DEPTH} levels deep (arrays and objects "
                f"within each other): over the limit of {MAX_JSON_DEPTH} levels, as a record "
                f"this deep could not be carried between Flink operators or written as JSON")
        level = below
