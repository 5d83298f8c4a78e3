"""JSON forms of values the runtime stores: events, memory, durable call arguments and results.

Stored values must survive a checkpoint, so each one needs a JSON form. Pydantic models are
stored with their class (``{"$model": "pkg.mod:Class", "data": {...}}``) so a replay returns
the same type; tuples become lists; the types a key may have are tagged too, so they come
back in their type (``{"$model": "$bytes", "data": <base64>}``, ``"$uuid"``, ``"$date"``,
``"$datetime"``, ``"$decimal"`` with the value's text: ``ctx.key`` can be stored); everything
else must already be JSON (``str``, ``int``, finite ``float``, ``bool``, ``None``, ``list``,
``dict`` with string keys).

A plain dict of exactly the keys ``$model`` and ``data`` (a record's, a tool's, a model's: data
from anyone) is stored escaped, as ``{"$model": null, "data": <the dict>}``, so that only a
tag the runtime wrote names a class: a record never makes a replay import a module or call
what it names. ``from_json_value`` rebuilds only pydantic model classes.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import enum
import math
from typing import Any

import orjson
from pydantic import BaseModel
from pydantic_core import to_jsonable_python

from ..api import ChatRequestEvent, ChatResponseEvent, SerializationError
from ..api.internal import (
    EVENT_CLASS_KEY,
    KEY_TAGS,
    BuiltinEventType,
    Event,
    MemoryObject,
    event_class_tag,
    import_qualified,
    untag,
)
from ._chat_request import answer_json, request_json
from ._json_codec import digest, dumps, json_text, loads, unshared
from ._typed_fields import TYPED_KEY, set_fields, typed_fields
from ._value_forms import VALUE_FORMS, VALUE_TAGS, row_form, value_form, value_of

__all__ = ["to_json_value", "to_plain_json", "event_json", "event_is_plain", "from_json_value",
           "digest", "dumps", "is_tagged_model", "MODEL_TAG", "json_text", "loads",
           "unshared"]

MODEL_TAG = "$model"
"""The key of a stored pydantic model's class (``{"$model": "module:Class", "data": ...}``)."""
_MODEL_TAG = MODEL_TAG
_REQUEST, _ANSWER = ChatRequestEvent, ChatResponseEvent  # (``request_json``, ``answer_json``)
_PLAIN = frozenset({str, int, bool, type(None), BuiltinEventType})  # their own JSON form
"""The exact types that are their own JSON form (a built-in event's ``type``: text)."""


def to_json_value(value: Any, where: str, *, tag_values: bool = False) -> Any:
    """Return the stored JSON form of ``value``.

    Pydantic models are tagged with their class so a replay returns the same type; their
    field values (and any other value) follow the rules of ``to_plain_json``, except that
    leaf values a pydantic field holds (``datetime``, ``UUID``, ``bytes``...) take pydantic's
    JSON form, which the model validates back on replay.

    Args:
        value: what to store.
        where: a description of the value's place, used in the error (e.g.
            ``"result of durable call r3/score/c0"``).
        tag_values: store the values of ``_value_forms`` too (a ``timedelta``, a ``set``...:
            a durable call's arguments and result); else they have no JSON form.

    Raises:
        SerializationError: naming ``where``, the path inside the value and the reason.
    """
    return _convert(value, where, tag_models=_WITH_VALUES if tag_values else True)


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


def event_json(event: BaseModel, where: str, known: dict[str, Any] | None = None
               ) -> dict[str, Any]:
    """The stored JSON form of an event (its fields; no depth cap; strict like the rest).

    Args:
        event: the event.
        where: what is being stored, for errors.
        known: the JSON forms of some of its fields (by JSON key; each one of its fields),
            made already and taken as they are: a durable call's stored result the event
            carries (a chat's answer), which ``to_json_value`` made of the value it holds.

    Returns:
        The JSON form.

    Raises:
        SerializationError: naming ``where`` and the path, for a field with no JSON form,
            and for a field named ``$class`` (an extra field of an event class that allows
            them, filled from a record): that name is the runtime's own, naming the class a
            restore rebuilds the event as, and a restore would import what it names.
    """
    kind = type(event)  # a chat's request and answer: their usual forms written directly
    if kind is _REQUEST and known is None:
        direct = request_json(event)  # type: ignore[arg-type]
        if direct is not None:
            return direct
    elif kind is _ANSWER and known is not None:
        direct = answer_json(event, known)  # type: ignore[arg-type]
        if direct is not None:
            return direct
    converted: dict[str, Any] = _convert(event, where, tag_models=False) if known is None \
        else _with_known(event, where, known)
    for reserved in (EVENT_CLASS_KEY, TYPED_KEY):
        if reserved in converted:
            raise SerializationError(
                f"{where}: the event has a field named {reserved!r}, a name the runtime "
                "keeps for itself; rename the field")
    typed = typed_fields(event)
    if typed:  # models in fields typed Any: kept with their class (see ``_typed_fields``)
        for name in typed:
            converted[name] = _convert(getattr(event, name), where, tag_models=True)
        converted[TYPED_KEY] = typed
    tag = event_class_tag(event) if isinstance(event, Event) else None
    if tag is not None:  # another class has its type name: name its own
        converted[EVENT_CLASS_KEY] = tag
    return converted


def _with_known(event: BaseModel, where: str, known: dict[str, Any]) -> dict[str, Any]:
    """``_convert(event)`` with the ``known`` fields' JSON forms taken as given (in order)."""
    fields = _model_fields(event)  # (a fresh dict: the known ones hold None while converted)
    for k, v in fields.items():  # the others all their own JSON form (a chat's answer): as is
        kind = type(v)
        if v is None or kind is BuiltinEventType or (kind is str and v.isascii()) \
                or k in known:
            continue
        if (kind is dict or kind is list) and not v:
            fields[k] = kind()  # (a value replaced while iterating: the keys stay)
            continue
        break
    else:
        fields.update(known)
        return fields
    fields.update(dict.fromkeys(known))
    converted: dict[str, Any] = _convert(fields, where, False)
    converted.update(known)
    return converted


class _TooDeep(Exception):
    """The walk ran out of stack at ``path`` (raised in place of a ``RecursionError``)."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.path = path


class _NotPlain(Exception):
    """Raised by ``_fast_copy`` at a value it leaves to the full walk."""


def _fast_copy(value: Any, tag: int) -> Any:
    """The JSON form ``_walk`` makes of ``value``, for the common shapes only, fast.

    Plain JSON data (exact ``dict``/``list``/``tuple``/scalar types), enums, and pydantic
    models whose fields hold those (events, ``ChatMessage``, ``ChatResponse``...): the same
    result as ``_walk``, without its path strings and cycle bookkeeping.

    Args:
        value: what to copy.
        tag: a model met here gets its class tag (``to_json_value`` outside any model).

    Returns:
        The copy (tuples become lists).

    Raises:
        _NotPlain: at anything else (the full walk then says what and where, or handles it).
        RecursionError: at a cycle or very deep nesting (the full walk then says where).
    """
    kind = type(value)
    if kind is dict or kind is MemoryObject:  # (an object read from memory is a dict)
        out: dict[str, Any] = {}
        for k, v in value.items():
            if type(k) is not str:
                raise _NotPlain
            kv = type(v)  # a finite float inline (``v - v`` is NaN for inf and NaN)
            out[k] = v if kv in _PLAIN or (kv is float and v - v == 0.0) else kv() \
                if (kv is dict or kv is list) and not v else _fast_copy(v, tag)  # ({}: no call)
        return _escaped(out) if tag and len(out) == 2 else out
    if kind is list or kind is tuple:
        return [v if type(v) in _PLAIN else _fast_copy(v, tag) for v in value]
    if kind in _PLAIN or (kind is float and math.isfinite(value)):
        return value
    found = _FIELD_KEYS.get(kind)  # (a class found there is a model's: no isinstance)
    if found is not None or isinstance(value, BaseModel):
        values = value.__dict__
        omit: tuple[str, ...] = ()  # fields left out here while empty (``OMIT_EMPTY``)
        if found is None or found[1] is None or value.__pydantic_extra__ \
                or values.keys() != found[1]:  # else no alias, no extra: the fields as they are
            values = _model_fields(value)  # (which leaves the empty ``OMIT_EMPTY`` ones out)
        else:
            omit = found[2]
        data: dict[str, Any] = {}
        for k, v in values.items():
            if omit and k in omit and not v:
                continue
            kv = type(v)
            if kv in _PLAIN or (kv is float and v - v == 0.0):
                data[k] = v
            elif (kv is list or kv is dict) and not v:  # empty: no call for it
                data[k] = kv()
            elif isinstance(v, enum.Enum) and type(v._value_) in _PLAIN:  # (``ChatMessage.role``)
                data[k] = v._value_
            else:
                data[k] = _fast_copy(v, False)
        if not tag:  # inside a model: the outer model validates its fields back
            return data
        name = _TAGS.get(kind)
        if name is None:
            name = _tag_of(kind)
        return {_MODEL_TAG: name, "data": data}
    if isinstance(value, enum.Enum):
        inner = value._value_  # (``value.value`` without its descriptor's two calls)
        return inner if type(inner) in _PLAIN else _fast_copy(inner, tag)
    raise _NotPlain


_BYTES_TAG = "$bytes"
"""The ``$model`` tag of a ``bytes`` value (``{"$model": "$bytes", "data": <base64>}``)."""

_TAGS: dict[type, str] = {}
"""Per model class, its ``$model`` tag."""
_VALUE_TAGS = frozenset(f"${tag}" for tag, _ in KEY_TAGS.values()) - {_BYTES_TAG}
"""The ``$model`` tags of the other values of a key's types (``{"$model": "$uuid", "data":
<its text>}``: ``uuid.UUID``, ``datetime.date``, ``datetime.datetime``, ``decimal.Decimal``),
kept in their type as ``bytes`` are."""


def _escaped(out: dict[str, Any]) -> dict[str, Any]:
    """``out`` (a plain dict's stored form), escaped when it has the shape of a model tag.

    Returns:
        ``{"$model": None, "data": out}`` when ``out``'s keys are ``$model`` and ``data``;
        else ``out`` itself.
    """
    return {_MODEL_TAG: None, "data": out} if _MODEL_TAG in out and "data" in out else out


def _tag_of(cls: type[BaseModel]) -> str:
    """The ``$model`` tag of ``cls``, remembered both ways.

    A value tagged in this process rebuilds to the very class it came from (one defined in
    ``__main__`` or in a function too).

    Returns:
        ``module:qualname``.
    """
    name = _TAGS[cls] = f"{cls.__module__}:{cls.__qualname__}"
    _CLASSES[name] = cls
    return name


def _convert(value: Any, where: str, tag_models: int) -> Any:
    kind = type(value)  # a scalar (a memory value, mostly) whose JSON form is known at a look
    if (kind is float and value - value == 0.0) or kind is bool or value is None \
            or (kind is str and value.isascii()) or (kind is int and _INT_MIN <= value <= _INT_MAX):
        return value
    try:  # the common case first: plain data, events and models whose fields are plain data
        out = _fast_copy(value, tag_models)
    except (_NotPlain, RecursionError):
        pass
    else:
        try:  # keyed state must be able to hold it: UTF-8 strings, integers within 64 bits
            orjson.dumps(out)
            return out
        except orjson.JSONEncodeError:
            pass  # the walk says what and where (nesting past orjson's limit is fine)
    try:
        return _walk(value, where, "$", set(), tag_models, in_model=False)
    except _TooDeep as e:
        raise SerializationError(
            f"{where}: nested too deeply to turn into JSON: the walk stopped at {e.path} "
            "(deeper than the interpreter's stack)") from None
    except RecursionError:
        raise SerializationError(f"{where}: nested too deeply to turn into JSON") from None


_FIELD_KEYS: dict[type[BaseModel], tuple[tuple[tuple[str, str], ...], frozenset[str] | None,
                                          tuple[str, ...]]] = {}
"""Per model class: each field's name and JSON key (its alias, if any); the names when no
field has an alias (then an instance's ``__dict__``, holding exactly them, is copied); the
fields left out when empty (``OMIT_EMPTY``)."""

OMIT_EMPTY = "__json_omit_empty__"
"""A model class attribute naming fields its JSON form leaves out while they are empty.

A field added to a model that durable calls take as arguments (``ChatMessage.reasoning``)
would otherwise be in every such call's digest (``call_digest``), so a run restored from
state written before it existed would find its recorded calls "made with other arguments".
Left out while empty, the digest of a call that does not use it is the one recorded before;
a stored value validates back with the field's default."""


def _model_fields(value: BaseModel) -> dict[str, Any]:
    cls = type(value)
    found = _FIELD_KEYS.get(cls)
    if found is None:
        keys = tuple((name, f.alias or name) for name, f in cls.model_fields.items())
        omit = tuple(getattr(cls, OMIT_EMPTY, ()))
        plain = frozenset(n for n, _ in keys) if all(n == k for n, k in keys) else None
        found = _FIELD_KEYS[cls] = (keys, plain, omit)
    keys, names, omit = found
    values = value.__dict__
    if names is not None and values.keys() == names:
        fields = dict(values)  # in field order, as pydantic fills it
    else:
        fields = {key: getattr(value, name) for name, key in keys}
    for name in omit:
        if not fields.get(name, True):
            del fields[name]
    extra = value.__pydantic_extra__
    if extra:
        fields.update(extra)
    return fields


def event_is_plain(event: BaseModel) -> bool:
    """Whether ``event_json(event)`` succeeds, checked without building the JSON form.

    True when no field has an alias, there are no extra fields, and every field value is
    plain JSON data (exact ``dict`` with string keys, ``list``, ``tuple``, ``str``, ``int``,
    ``bool``, ``None``, finite ``float``). False means "not known": ``event_json`` says (it
    may still succeed, or raise naming what and where).

    Returns:
        Whether the event is plain.
    """
    cls = type(event)
    found = _FIELD_KEYS.get(cls)
    if found is None:
        _model_fields(event)  # fills the cache
        found = _FIELD_KEYS[cls]
    names = found[1]
    values = event.__dict__
    if names is None or found[2] or event.__pydantic_extra__ or values.keys() != names:
        return False
    try:
        for v in values.values():
            kind = type(v)
            if kind in _PLAIN or (kind is dict and not v):
                continue
            if kind is dict:  # (an output's dict: ``_is_plain`` of it inline, a call fewer)
                for k, w in v.items():
                    kw = type(w)
                    if type(k) is not str or (kw not in _PLAIN and not (
                            kw is float and w - w == 0.0) and not _is_plain(w)):
                        return False
            elif not _is_plain(v):
                return False
        orjson.dumps(values)  # strings UTF-8, integers within 64 bits (as ``event_json``)
    except (RecursionError, orjson.JSONEncodeError):
        return False
    return True


def _is_plain(value: Any) -> bool:
    """Whether ``value`` is plain JSON data (exact types), checked without copying."""
    kind = type(value)
    if kind is dict:
        for k, v in value.items():
            if type(k) is not str:
                return False
            kv = type(v)
            if kv not in _PLAIN and not (kv is float and v - v == 0.0) and not _is_plain(v):
                return False
        return True
    if kind is list or kind is tuple:
        for v in value:
            if type(v) not in _PLAIN and not _is_plain(v):
                return False
        return True
    return kind is float and math.isfinite(value)


_SET_FIELD = 2
_WITH_VALUES = 3
"""``tag_models`` of ``to_json_value(..., tag_values=True)``: ``_value_forms`` tagged too."""
"""``_walk``'s ``in_model`` in a model field typed as a set (``_typed_fields.set_fields``)."""


def _walk(value: Any, where: str, path: str, active: set[int], tag_models: int,
          in_model: int) -> Any:
    if isinstance(value, enum.Enum):
        return _walk(value.value, where, path, active, tag_models, in_model)
    if value is None or isinstance(value, bool):
        return value
    # a subclass of str, int or float is stored as its plain value, and a restore reads that
    # back: the first run must get the plain value too (``str.__str__`` etc. copy it exactly)
    if isinstance(value, str):
        _check_text(value, where, path)
        return value if type(value) is str else str.__str__(value)
    if isinstance(value, int):
        if not _INT_MIN <= value <= _INT_MAX:
            raise SerializationError(
                f"{where}: the integer {value} at {path} is beyond 64 bits: JSON readers "
                "(and a restore) would turn it into a float, so it has no exact JSON form "
                "here (pass it as a string)")
        return value if type(value) is int else int.__int__(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise SerializationError(f"{where}: {value!r} at {path} has no JSON form")
        return value if type(value) is float else float.__float__(value)
    plain = row_form(value)
    if plain is not value:
        return _walk(plain, where, path, active, tag_models, in_model)
    if isinstance(value, (list, tuple, dict, BaseModel)) or (
            dataclasses.is_dataclass(value) and not isinstance(value, type)):
        ident = id(value)
        if ident in active:
            raise SerializationError(f"{where}: a cycle at {path} has no JSON form")
        active.add(ident)
        try:
            if isinstance(value, BaseModel):
                sets = set_fields(type(value))  # (fields typed as sets: stored as lists)
                data = {k: v if type(v) in _UNCHECKED else
                        _walk(v, where, f"{path}.{k}", active, tag_models,
                              _SET_FIELD if k in sets else True)
                        for k, v in _model_fields(value).items()}
                if not tag_models or in_model:  # the outer model validates its fields back
                    return data
                cls = type(value)
                return {_MODEL_TAG: _TAGS.get(cls) or _tag_of(cls), "data": data}
            if isinstance(value, dict):
                out: dict[str, Any] = {}
                for k, v in value.items():
                    if not isinstance(k, str):
                        raise SerializationError(
                            f"{where}: map key {k!r} ({type(k).__name__}) at {path} is not a string"
                        )
                    _check_text(k, where, f"{path} (a map key)")
                    if type(k) is not str:  # (a str subclass's, a StrEnum member's: as a value)
                        k = str.__str__(k)
                    out[k] = v if type(v) in _UNCHECKED else _walk(
                        v, where, f"{path}.{k}", active, tag_models, in_model)
                return _escaped(out) if tag_models and not in_model and len(out) == 2 else out
            if isinstance(value, (list, tuple)):
                return [v if type(v) in _UNCHECKED else
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
    if tag_models == _WITH_VALUES and not in_model and (type(value) in VALUE_FORMS or type(
            value) in (set, frozenset)):  # a timedelta, a Path, a set...: ``_value_forms``
        return _tagged_value(value, where, path, active)
    if isinstance(value, (set, frozenset)) and in_model == _SET_FIELD:  # validated back a set
        return sorted((_walk(v, where, f"{path}[]", active, tag_models, in_model) for v in value),
                      key=dumps)  # (in an order that is the same whatever the hash seed)
    if isinstance(value, (set, frozenset)):
        raise SerializationError(f"{where}: a {type(value).__name__} at {path} has no JSON "
                                 "form (use a list)")
    if in_model:
        try:  # a pydantic field's leaf value: pydantic's JSON form, validated back on replay
            return to_jsonable_python(value)
        except Exception:  # noqa: BLE001 - falls through to the refusal below
            if isinstance(value, (bytes, bytearray)):  # not UTF-8 (a bytes key): base64
                return base64.b64encode(bytes(value)).decode("ascii")
    elif isinstance(value, (bytes, bytearray)):
        text = base64.b64encode(bytes(value)).decode("ascii")
        # kept as bytes (memory, durable results: Flink Agents' memory takes bytes); plain
        # JSON (a tool's result for the model) is the base64 text
        return {_MODEL_TAG: _BYTES_TAG, "data": text} if tag_models else text
    elif tag_models and type(value) in KEY_TAGS:  # a key's type: kept in it (``ctx.key``)
        tag, text_of = KEY_TAGS[type(value)]
        try:
            return {_MODEL_TAG: f"${tag}", "data": text_of(value)}
        except Exception as e:  # noqa: BLE001 - an aware datetime whose tzinfo fails
            raise SerializationError(f"{where}: the {type(value).__name__} at {path} has no "
                                     f"text ({type(e).__name__}: {e})") from None
    elif not tag_models:
        if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
            return value.isoformat()
    raise SerializationError(f"{where}: {type(value).__name__} at {path} has no JSON form"
                             f"{_unawaited(value)}")


def _tagged_value(value: Any, where: str, path: str, active: set[int]) -> Any:
    try:
        return value_form(value, lambda v: _walk(v, where, f"{path}[]", active, _WITH_VALUES, 0))
    except SerializationError as e:
        raise SerializationError(f"{where}: {type(value).__name__} at {path}: {e}") from None


def _unawaited(value: Any) -> str:
    """Say "await it" when ``value`` is an awaitable an action put where its result belongs."""
    if not hasattr(type(value), "__await__"):
        return ""
    from .context._calls import put_unawaited  # the error's path only

    return put_unawaited(value)


_UNCHECKED = frozenset({bool, type(None)})
"""Exact types the walk passes without a look (strings and integers are checked)."""
_INT_MIN, _INT_MAX = -(1 << 63), (1 << 64) - 1
"""The integers JSON readers here (orjson) read back exactly."""


def _check_text(text: str, where: str, path: str) -> None:
    r"""Refuse a string with no UTF-8 form (a lone surrogate, e.g. from ``"\ud800"`` in JSON).

    Raises:
        SerializationError: naming ``where`` and ``path``.
    """
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as e:
            raise SerializationError(
                f"{where}: the string at {path} holds a lone surrogate "
                f"({text[max(0, e.start - 10):e.end + 10]!r}) and is not valid Unicode text: "
                "it has no JSON form") from None


_CLASSES: dict[str, type[BaseModel]] = {}
"""Model classes by their ``$model`` tag, once imported."""


def from_json_value(data: Any) -> Any:
    """Invert ``to_json_value``: rebuild pydantic models from their tagged form.

    An escaped plain dict (``{"$model": null, "data": ...}``) becomes that dict again.

    Returns:
        The value, its models rebuilt.

    Raises:
        SerializationError: for a tag that is not text, or one naming anything but a
            pydantic model class (which is then never called).
        ResourceError: when the tag's module or class cannot be imported.
    """
    if isinstance(data, dict):
        if _MODEL_TAG in data and len(data) == 2 and "data" in data:
            tag = data[_MODEL_TAG]
            inner = data["data"]
            if tag is None and type(inner) is dict:  # an escaped plain dict (``_escaped``)
                return {k: from_json_value(v) for k, v in inner.items()}
            if tag == _BYTES_TAG and type(inner) is str:
                return base64.b64decode(inner)
            if tag in _VALUE_TAGS and type(inner) is str:  # a UUID, date, datetime, Decimal
                return untag({tag[1:]: inner})
            if tag in VALUE_TAGS:  # a timedelta, a Path, a set... (``_value_forms``)
                return value_of(tag, inner, from_json_value)
            if type(tag) is not str:
                raise SerializationError(f"a stored value's {_MODEL_TAG} tag is {tag!r}, not "
                                         "the 'module:Class' of a pydantic model")
            cls = _CLASSES.get(tag)
            if cls is None:
                found = import_qualified(tag)
                if not (isinstance(found, type) and issubclass(found, BaseModel)):
                    raise SerializationError(f"a stored value's {_MODEL_TAG} tag {tag!r} "
                                             "names something that is not a pydantic model "
                                             "class: it is not rebuilt (nor called)")
                cls = _CLASSES[tag] = found
            return cls.model_validate(unshared(inner))  # (none of the stored form's lists)
        return {k: from_json_value(v) for k, v in data.items()}
    if isinstance(data, list):
        return [from_json_value(v) for v in data]
    return data


def is_tagged_model(data: Any) -> bool:
    """Whether ``data`` is a pydantic model in its ``to_json_value`` form."""
    return type(data) is dict and len(data) == 2 and _MODEL_TAG in data and "data" in data
