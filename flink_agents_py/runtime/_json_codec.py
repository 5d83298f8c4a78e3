"""Plain JSON text of JSON-form data: encoding, decoding, digests.

orjson, and the standard library past orjson's depth limit; ``_serde`` re-exports them.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import orjson

__all__ = ["dumps", "json_text", "loads", "digest", "unshared"]


def dumps(data: Any, *, sort_keys: bool = True) -> bytes:
    """Encode JSON-form data (as returned by ``to_json_value``) to bytes.

    orjson, except for values nested deeper than its limit (255 levels), which the standard
    library encodes (it goes as deep as the interpreter's stack).

    Args:
        data: JSON-form data.
        sort_keys: sort object keys (a stable form).

    Returns:
        The JSON text, UTF-8.
    """
    try:
        return orjson.dumps(data, option=orjson.OPT_SORT_KEYS if sort_keys else 0)
    except orjson.JSONEncodeError:
        return json.dumps(
            data, sort_keys=sort_keys, ensure_ascii=False, separators=(",", ":")
        ).encode()


def json_text(data: Any) -> str:
    """``dumps`` as text, keys in their order (for messages to a model)."""
    return dumps(data, sort_keys=False).decode()


def loads(data: bytes | str) -> Any:
    """Decode JSON text or bytes (orjson, or the standard library past orjson's depth limit)."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


def digest(value: Any) -> str:
    """A short, stable digest of a JSON-form value (16 hex digits of BLAKE2b)."""
    return hashlib.blake2b(dumps(value), digest_size=8).hexdigest()


def unshared(data: Any) -> Any:
    """A copy of JSON-form data sharing none of its lists and dicts (a deep copy, fast).

    What an action is handed is rebuilt from a stored form (a durable call's recorded result,
    an event's form kept in the run's state), and pydantic keeps a field typed ``Any`` (or
    ``dict[str, Any]``'s values) as it is given: rebuilt from the stored form itself, the
    action would hold the stored lists and dicts, so a change it makes in place (an
    ``append``, a ``sort``) would change what a restore replays to it.

    Returns:
        The copy.
    """
    try:
        return orjson.loads(orjson.dumps(data))
    except orjson.JSONEncodeError:  # nested deeper than orjson's limit
        return json.loads(json.dumps(data))
