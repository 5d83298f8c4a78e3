"""Records read from text (files, Kafka): JSON decoded with integers kept exact."""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

from ._serde import to_json_value

__all__ = ["loads_record"]

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
        SerializationError: for an integer beyond 64 bits, naming its path.
    """
    value = orjson.loads(data)
    long_digits = _LONG_DIGITS_TEXT if isinstance(data, str) else _LONG_DIGITS
    if long_digits.search(data) is not None:  # type: ignore[arg-type]
        to_json_value(json.loads(data), where)  # raises at an integer beyond 64 bits
    return value
