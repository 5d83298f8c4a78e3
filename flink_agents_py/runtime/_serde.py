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
import json
import math
from typing import Any

import orjson
from pydantic import BaseModel
from pydantic_core import to_jsonable_python

from ..api import SerializationError
from ..api._resources import import_qualified

__all__ = ["to_json_value", "to_plain_json", "event_json", "from_json_value", "digest", "dumps",
           "is_tagged_model",
           "json_text", "loads"]

_MODEL_TAG = "$model"
_PLAIN = frozenset({str, int, bool, type(None)})  # exact types that are their own JSON form


def to_json_value(value: Any, where: str) -> Any:
    """Return the stored JSON form of ``value``.

    Pydantic models are tagged with their class so a replay returns the same type; their
    field values (and any other value) follow the rules of ``to_plain_json``, except that
    leaf values a pydantic field holds (``datetime``, ``UUID``, ``bytes``...) take pydantic's
    JSON form, which the model validates back on replay.

    Args:
        value: what to store.
        where: a description of the value's place, used in the error (e.g.
            ``"result of durable call r3/score/c0"``).

    Raises:
        SerializationError: naming ``where``, the path inside the value and the reason.
    """
    return _convert(value, where, tag_models=True)


def to_plain_json(value: Any, where: str) -> Any:
    """Return the plain JSON form of a tool's or sub-agent's result, for a chat model.

    Treatments: pydantic models become their fields (by alias), dataclasses their fields,
    enums their values, ``bytes`` a base64 string, tuples lists, ``datetime``/``date``/``time``
    ISO 8601 text. Refused, with the path where found (``$.a[2].b``): non-finite floats (NaN,
    inf), non-string map keys, sets and other objects with no JSON form, and cycles. Cycles
    are found by tracking the containers on the current path, so one object reached twice (a
    diamond) is fine. There is no depth cap; a value nested too deep for the interpreter's
    stack is refused too.

    Raises:
        SerializationError: naming ``where``, the path and the reason.
    """
    return _convert(value, where, tag_models=False)


def event_json(event: BaseModel, where: str) -> dict[str, Any]:
    """The stored JSON form of an event (its fields; no depth cap; strict like the rest).

    Args:
        event: the event.
        where: what is being stored, for errors.

    Returns:
        The JSON form.

    Raises:
        SerializationError: naming ``where`` and the path, for a field with no JSON form.
    """
    converted: dict[str, Any] = _convert(event, where, tag_models=False)
    return converted


class _TooDeep(Exception):
    """The walk ran out of stack at ``path`` (raised in place of a ``RecursionError``)."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.path = path


class _NotPlain(Exception):
    """Raised by ``_plain_copy`` at a value that is not plain JSON data."""


def _plain_copy(value: Any) -> Any:
    """A copy of plain JSON data (exact ``dict``/``list``/``tuple``/scalar types), fast.

    Returns:
        The copy (tuples become lists).

    Raises:
        _NotPlain: at anything else (the full walk then says what and where).
    """
    kind = type(value)
    if kind is dict:
        out: dict[str, Any] = {}
        for k, v in value.items():
            if type(k) is not str:
                raise _NotPlain
            out[k] = v if type(v) in _PLAIN else _plain_copy(v)
        return out
    if kind is list or kind is tuple:
        return [v if type(v) in _PLAIN else _plain_copy(v) for v in value]
    if kind in _PLAIN or (kind is float and math.isfinite(value)):
        return value
    raise _NotPlain


def _convert(value: Any, where: str, tag_models: bool) -> Any:
    try:  # the common case first: plain data, or an event whose fields are plain data
        if not isinstance(value, BaseModel):
            return _plain_copy(value)
        if not tag_models:
            return {k: v if type(v) in _PLAIN else _plain_copy(v)
                    for k, v in _model_fields(value).items()}
    except (_NotPlain, RecursionError):
        pass
    try:
        return _walk(value, where, "$", set(), tag_models, in_model=False)
    except _TooDeep as e:
        raise SerializationError(
            f"{where}: nested too deeply to turn into JSON: the walk stopped at {e.path} "
            "(deeper than the interpreter's stack)") from None
    except RecursionError:
        raise SerializationError(f"{where}: nested too deeply to turn into JSON") from None


def _model_fields(value: BaseModel) -> dict[str, Any]:
    fields = {(f.alias or name): getattr(value, name)
              for name, f in type(value).model_fields.items()}
    fields.update(value.__pydantic_extra__ or {})
    return fields


def _walk(value: Any, where: str, path: str, active: set[int], tag_models: bool,
          in_model: bool) -> Any:
    if isinstance(value, enum.Enum):
        return _walk(value.value, where, path, active, tag_models, in_model)
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise SerializationError(f"{where}: {value!r} at {path} has no JSON form")
        return value
    if isinstance(value, (list, tuple, dict, BaseModel)) or (
            dataclasses.is_dataclass(value) and not isinstance(value, type)):
        ident = id(value)
        if ident in active:
            raise SerializationError(f"{where}: a cycle at {path} has no JSON form")
        active.add(ident)
        try:
            if isinstance(value, BaseModel):
                data = {k: v if type(v) in _PLAIN else
                        _walk(v, where, f"{path}.{k}", active, tag_models, True)
                        for k, v in _model_fields(value).items()}
                if not tag_models or in_model:  # the outer model validates its fields back
                    return data
                cls = type(value)
                return {_MODEL_TAG: f"{cls.__module__}:{cls.__qualname__}", "data": data}
            if isinstance(value, dict):
                out: dict[str, Any] = {}
                for k, v in value.items():
                    if not isinstance(k, str):
                        raise SerializationError(
                            f"{where}: map key {k!r} ({type(k).__name__}) at {path} is not a string"
                        )
                    out[k] = v if type(v) in _PLAIN else _walk(
                        v, where, f"{path}.{k}", active, tag_models, in_model)
                return out
            if isinstance(value, (list, tuple)):
                return [v if type(v) in _PLAIN else
                        _walk(v, where, f"{path}[{i}]", active, tag_models, in_model)
                        for i, v in enumerate(value)]
            if tag_models and not in_model:
                raise SerializationError(f"{where}: {type(value).__name__} at {path} has no "
                                         "JSON form (use a pydantic model)")
            return {f.name: _walk(getattr(value, f.name), where, f"{path}.{f.name}", active,
                                  tag_models, in_model) for f in dataclasses.fields(value)}
        except RecursionError:  # the deepest frame that can still name its path does
            raise _TooDeep(path) from None
        finally:
            active.discard(ident)
    if isinstance(value, (set, frozenset)):
        raise SerializationError(f"{where}: a {type(value).__name__} at {path} has no JSON "
                                 "form (use a list)")
    if in_model:
        try:  # a pydantic field's leaf value: pydantic's JSON form, validated back on replay
            return to_jsonable_python(value)
        except Exception:  # noqa: BLE001 - falls through to the refusal below
            pass
    elif not tag_models:
        if isinstance(value, (bytes, bytearray)):
            return base64.b64encode(bytes(value)).decode("ascii")
        if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
            return value.isoformat()
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


def is_tagged_model(data: Any) -> bool:
    """Whether ``data`` is a pydantic model in its ``to_json_value`` form."""
    return isinstance(data, dict) and set(data) == {_MODEL_TAG, "data"}


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
        return json.dumps(data, sort_keys=sort_keys, ensure_ascii=False,
                          separators=(",", ":")).encode()


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
