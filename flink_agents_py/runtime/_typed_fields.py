"""Pydantic models in an event's untyped fields keep their class through the stored JSON form.

An event is stored as JSON between the action that sends it and the actions it triggers, and
rebuilt by validating its class against that form. A field its class types (``messages:
list[ChatMessage]``) validates back to its type; a field typed ``Any`` (``value: Any`` in an
event class of a program's own, ``OutputEvent.output``, a value in ``attributes``) cannot
say what a model in it was, and the triggered action got a dict (``'dict' object has no
attribute 'info'``) where the sender sent a model, as Apache Flink Agents' programs written
with event classes of their own expect (it pickled its events).

Such a field's value is stored with its models tagged (``_serde``'s ``$model`` form) and the
event's JSON form lists it under ``TYPED_KEY``; ``rebuilt_fields`` rebuilds those models
before the event is validated. An event holding no model in such a field has the JSON form
it always had.
"""

from __future__ import annotations

import types
from collections.abc import Mapping, MutableSet, Sequence
from collections.abc import Set as AbstractSet
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel

__all__ = ["TYPED_KEY", "holds_model", "set_fields", "typed_fields"]

TYPED_KEY = "$typed"
"""The key of an event's JSON form listing its untyped fields stored with models tagged."""

_LOOSE: dict[type[BaseModel], tuple[str, ...]] = {}
"""Per event class: its fields typed ``Any`` (or containers of ``Any``), without an alias."""

_CONTAINERS = (dict, list, tuple, set, frozenset, Mapping, Sequence)
_SCALARS = frozenset({str, int, float, bool, type(None)})
_EMPTIABLE = frozenset({dict, list, tuple})


def _is_loose(annotation: Any) -> bool:
    """Whether a field of this annotation may hold a model that validation would not rebuild."""
    if annotation is Any or annotation is object:
        return True
    origin = get_origin(annotation)
    if origin is Union or origin is types.UnionType:
        return any(_is_loose(a) for a in get_args(annotation) if a is not type(None))
    if origin in _CONTAINERS or annotation in _CONTAINERS:
        args = get_args(annotation)
        return not args or any(_is_loose(a) for a in args if a is not Ellipsis)
    return False


def _loose_fields(cls: type[BaseModel]) -> tuple[str, ...]:
    found = _LOOSE.get(cls)
    if found is None:
        found = _LOOSE[cls] = tuple(
            name for name, f in cls.model_fields.items()
            if f.alias is None and _is_loose(f.annotation))
    return found


def holds_model(value: Any) -> bool:
    """Whether ``value`` is a pydantic model or holds one in its dicts, lists and tuples.

    Returns:
        Whether it does.

    Raises:
        RecursionError: for a value nested too deeply (or a cycle).
    """
    if type(value) in _SCALARS:
        return False
    if isinstance(value, BaseModel):
        return True
    if isinstance(value, dict):
        value = value.values()
    elif not isinstance(value, (list, tuple)):
        return False
    for v in value:  # (a loop, not ``any``: this runs for each event an action sends)
        if type(v) not in _SCALARS and holds_model(v):
            return True
    return False


def typed_fields(event: BaseModel) -> list[str]:
    """The untyped fields of ``event`` whose value holds a pydantic model.

    Returns:
        Their names (none for most events).
    """
    values = event.__dict__
    found = []
    names = _LOOSE.get(type(event))  # (the class's, once known: no call for it)
    for name in names if names is not None else _loose_fields(type(event)):
        value = values.get(name)
        if type(value) in _SCALARS or (type(value) in _EMPTIABLE and not value):
            continue
        try:
            if holds_model(value):
                found.append(name)
        except RecursionError:  # nested too deeply: the JSON form's walk says where
            pass
    return found


_SETS: dict[type[BaseModel], frozenset[str]] = {}
"""Per model class: the JSON keys (alias or name) of its fields typed as sets."""
_SET_TYPES = (set, frozenset, AbstractSet, MutableSet)


def set_fields(cls: type[BaseModel]) -> frozenset[str]:
    """The JSON keys of ``cls``'s fields typed ``set[...]``, ``frozenset[...]`` (or optional).

    Such a field's value is stored as a list: its type validates the list back into a set.
    A set in a field typed otherwise (``Any``, a ``dict`` of ``Any``) has no JSON form.

    Returns:
        The keys (alias or name), kept per class.
    """
    found = _SETS.get(cls)
    if found is None:
        found = _SETS[cls] = frozenset(f.alias or name for name, f in cls.model_fields.items()
                                       if _set_like(f.annotation))
    return found


def _set_like(annotation: Any) -> bool:
    if annotation in _SET_TYPES or get_origin(annotation) in _SET_TYPES:
        return True
    return get_origin(annotation) in (Union, types.UnionType) \
        and any(_set_like(a) for a in get_args(annotation))
