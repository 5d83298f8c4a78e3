"""JSON forms of values the runtime stores: events, memory, durable call arguments and results.

Stored values must survive a checkpoint, so each one needs a JSON form. Pydantic models are
stored with their class (``{"$model": "pkg.mod:Class", "data": {...}}``) so a replay returns
the same type; tuples become lists; everything else must already be JSON (``str``, ``int``,
finite ``float``, ``bool``, ``None``, ``list``, ``dict`` with string keys).
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import enum
import hashlib
import math
from typing import Any

import orjson
from pydantic import BaseModel

from ..api import SerializationError, import_qualified

__all__ = ["to_json_value", "to_plain_json", "from_json_value", "digest", "dumps", "loads"]

_MODEL_TAG = "$model"


def to_json_value(value: Any, where: str) -> Any:
    """Return the JSON form of ``value``.

    Args:
        value: what to store.
        where: a description of the value's place, used in the error (e.g.
            ``"result of durable call r3/score/c0"``).

    Raises:
        SerializationError: naming ``where``, the path inside the value and the offending type,
            for a value with no JSON form (a set, an object, a non-finite float, a non-string
            map key, a cycle).
    """
    return _walk(value, where, "$", set(), tag_models=True)


def to_plain_json(value: Any, where: str) -> Any:
    """Return the plain JSON form of a tool's or sub-agent's result, for a chat model.

    Treatments: pydantic models become their JSON dump (``model_dump(mode="json")``),
    dataclasses their fields, enums their values, ``bytes`` a base64 string, tuples lists,
    ``datetime``/``date``/``time`` ISO 8601 text. Refused, with the path where found
    (``$.a[2].b``): non-finite floats (NaN, inf), non-string map keys, sets and other
    objects with no JSON form, and cycles. Cycles are found by tracking the containers on the
    current path, so one object reached twice (a diamond) is fine. There is no depth cap; a
    value nested too deep for the interpreter's stack is refused too.

    Raises:
        SerializationError: naming ``where``, the path and the reason.
    """
    try:
        return _walk(value, where, "$", set(), tag_models=False)
    except RecursionError:
        raise SerializationError(f"{where}: nested too deeply to turn into JSON") from None


def _walk(value: Any, where: str, path: str, active: set[int], tag_models: bool) -> Any:
    if isinstance(value, enum.Enum):
        return _walk(value.value, where, path, active, tag_models)
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise SerializationError(f"{where}: {value!r} at {path} has no JSON form")
        return value
    if isinstance(value, BaseModel):
        data = value.model_dump(mode="json")
        if not tag_models:
            return _walk(data, where, path, active, tag_models)
        cls = type(value)
        return {_MODEL_TAG: f"{cls.__module__}:{cls.__qualname__}",
                "data": _walk(data, where, path, active, tag_models)}
    if not tag_models:
        if isinstance(value, (bytes, bytearray)):
            return base64.b64encode(bytes(value)).decode("ascii")
        if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
            return value.isoformat()
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            ident = id(value)
            if ident in active:
                raise SerializationError(f"{where}: a cycle at {path} has no JSON form")
            active.add(ident)
            try:
                return {f.name: _walk(getattr(value, f.name), where, f"{path}.{f.name}", active,
                                      tag_models) for f in dataclasses.fields(value)}
            finally:
                active.discard(ident)
    if isinstance(value, (list, tuple, dict)):
        ident = id(value)
        if ident in active:
            raise SerializationError(f"{where}: a cycle at {path} has no JSON form")
        active.add(ident)
        try:
            if isinstance(value, dict):
                out: dict[str, Any] = {}
                for k, v in value.items():
                    if not isinstance(k, str):
                        raise SerializationError(
                            f"{where}: map key {k!r} ({type(k).__name__}) at {path} is not a string"
                        )
                    out[k] = _walk(v, where, f"{path}.{k}", active, tag_models)
                return out
            return [_walk(v, where, f"{path}[{i}]", active, tag_models)
                    for i, v in enumerate(value)]
        finally:
            active.discard(ident)
    raise SerializationError(f"{where}: {type(value).__name__} at {path} has no JSON form")


def from_json_value(data: Any) -> Any:
    """Invert ``to_json_value``: rebuild pydantic models from their tagged form."""
    if isinstance(data, dict):
        if _MODEL_TAG in data and set(data) == {_MODEL_TAG, "data"}:
            cls = import_qualified(data[_MODEL_TAG])
            return cls.model_validate(data["data"])
        return {k: from_json_value(v) for k, v in data.items()}
    if isinstance(data, list):
        return [from_json_value(v) for v in data]
    return data


def dumps(data: Any) -> bytes:
    """Encode JSON-form data (as returned by ``to_json_value``) to bytes, keys sorted."""
    return orjson.dumps(data, option=orjson.OPT_SORT_KEYS)


def loads(data: bytes | str) -> Any:
    """Decode bytes written by ``dumps``."""
    return orjson.loads(data)


def digest(value: Any) -> str:
    """A short, stable digest of a JSON-form value (16 hex digits of BLAKE2b)."""
    return hashlib.blake2b(dumps(value), digest_size=8).hexdigest()
