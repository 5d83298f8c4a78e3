"""Name the field a misspelt argument of a pydantic model most likely meant.

Used where a model refuses an unknown argument: ``Budget(max_token=...)`` and the plan's
check of a chat model setup's values (``plan._setup_values``), so both say "did you mean
'max_tokens'?" instead of pydantic's bare "Extra inputs are not permitted". Also the words
for a field set on a built event (``frozen_event_error``), instead of "Instance is frozen".
"""

from __future__ import annotations

import difflib
import inspect
import types
import typing
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

__all__ = ["NamesNearestField", "field_names", "frozen_event_error", "model_at", "nearest_field",
           "refuse_reserved_event_fields", "unknown_key_message"]


def field_names(cls: type[BaseModel]) -> list[str]:
    """The argument names ``cls`` takes: its fields' names and aliases, sorted."""
    names = set(cls.model_fields)
    names.update(f.alias for f in cls.model_fields.values() if isinstance(f.alias, str))
    return sorted(names)


def nearest_field(cls: type[BaseModel], key: str) -> str | None:
    """The argument of ``cls`` closest to ``key`` (a misspelling of it), or ``None``.

    Args:
        cls: the model that refused ``key``.
        key: the unknown argument's name.

    Returns:
        The closest field name or alias, when one is close enough to be meant.
    """
    near = difflib.get_close_matches(key, field_names(cls), n=1, cutoff=0.6)
    return near[0] if near else None


def _models_in(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model class an annotation holds (``Budget | None``, ``dict[str, M]``)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    origin = typing.get_origin(annotation)
    if origin is None and not isinstance(annotation, types.UnionType):
        return None
    for arg in typing.get_args(annotation):
        found = _models_in(arg)
        if found is not None:
            return found
    return None


def model_at(cls: type[BaseModel], loc: tuple[int | str, ...]) -> type[BaseModel] | None:
    """The model class whose arguments the value at ``loc`` (from ``cls``) is validated as.

    Args:
        cls: the outer model.
        loc: a pydantic error's location, without its last part (the unknown key).

    Returns:
        The nested model at ``loc``, or ``None`` when it is not a model's arguments.
    """
    current: type[BaseModel] | None = cls
    for part in loc:
        if current is None:
            return None
        field = current.model_fields.get(part) if isinstance(part, str) else None
        if field is not None:
            current = _models_in(field.annotation)
        # else a dict key or a list index of the field's value: the same model inside
    return current


def _hint(cls: type[BaseModel] | None, key: Any) -> str:
    if cls is None or not isinstance(key, str):
        return ""
    near = nearest_field(cls, key)
    if near is not None:
        return f"; did you mean {near!r}?"
    return f" ({cls.__name__} takes: {', '.join(field_names(cls))})"


def unknown_key_message(cls: type[BaseModel], loc: tuple[int | str, ...]) -> str:
    """Pydantic's words for an unknown argument at ``loc``, with the field it likely meant.

    Args:
        cls: the outer model.
        loc: the unknown argument's location.

    Returns:
        ``Extra inputs are not permitted; did you mean 'max_tokens'?`` (or, with no close
        name, the names the model takes).
    """
    return "Extra inputs are not permitted" + _hint(model_at(cls, loc[:-1]), loc[-1] if loc
                                                    else None)



def _suggesting_errors(cls: type[BaseModel], error: ValidationError) -> ValidationError:
    """``error`` again, each unknown-argument error naming the field it likely meant.

    Args:
        cls: the model whose validation raised ``error``.
        error: its ``ValidationError``.

    Returns:
        A ``ValidationError`` with the same errors (types, locations, inputs), or ``error``
        itself when it has no unknown argument.
    """
    found = error.errors()
    if not any(e["type"] == "extra_forbidden" for e in found):
        return error
    details: list[InitErrorDetails] = []
    for e in found:
        message = unknown_key_message(cls, e["loc"]) if e["type"] == "extra_forbidden" \
            else e["msg"]
        details.append({"type": PydanticCustomError(e["type"], message), "loc": e["loc"],
                        "input": e["input"]})
    return ValidationError.from_exception_data(error.title, details)


class NamesNearestField(BaseModel):
    """A model whose refusal of an unknown argument names the field it likely meant.

    ``Budget(max_token=10)`` raises a ``ValidationError`` (a ``ValueError``) saying
    "Extra inputs are not permitted; did you mean 'max_tokens'?". Only a direct call pays
    for it, on its error path; a value validated as a field of another model is checked by
    the plan (``plan._setup_values``) and the YAML loader.
    """

    def __init__(self, /, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as e:
            raise _suggesting_errors(type(self), e) from None

    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]


def frozen_event_error(event: BaseModel, name: str, value: Any, *,
                       sent: bool = False) -> ValidationError:
    """The error for setting ``name`` on a built (frozen) event.

    Args:
        event: the event.
        name: the field it was asked to set.
        value: the value given.
        sent: the event is a program's own, whose fields may be set until it is sent; this
            one was sent or received.

    Returns:
        A ``ValidationError`` (``frozen_instance``) saying events are immutable once built,
        and how to get one with the value.
    """
    cls = type(event).__name__
    message = (f"{cls} is immutable once built (events are sent, recorded and replayed as "
               f"built): to change {name!r}, make a changed copy, "
               f"event.model_copy(update={{{name!r}: ...}}), or build it with the value, "
               f"{cls}(..., {name}=...)")
    if sent:
        field = name in type(event).model_fields
        update = (f"{{{name!r}: ...}}" if field
                  else f"{{'attributes': {{**event.attributes, {name!r}: ...}}}}")
        message = (f"{cls} was sent or received, and is kept as it was then (events are "
                   f"recorded and replayed as sent): its {'field' if field else 'attribute'} "
                   f"{name!r} can be set only before it is sent; to change it, send a "
                   f"changed copy, event.model_copy(update={update})")
    elif name not in type(event).model_fields:  # no field: a free attribute was meant
        message = (f"{cls} is immutable once built and has no field {name!r}: keep a free "
                   f"value in its attributes, event.set_attr({name!r}, ...) before it is "
                   f"sent, or build it with attributes={{{name!r}: ...}}")
    return ValidationError.from_exception_data(cls, [{
        "type": PydanticCustomError("frozen_instance", message),
        "loc": (name,), "input": value}])


_EVENT_OWN_FIELDS = ("id", "type", "attributes", "attachments")


def refuse_reserved_event_fields(cls: type[BaseModel]) -> None:
    """Refuse an ``Event`` subclass that declares a field every event has.

    A subclass declaring ``id``, ``type``, ``attributes`` or ``attachments`` replaces the
    field the runtime sets and reads (an event's id, its routing type): before, such a class
    failed only when an event was sent, deep inside the runtime (``id: int`` with "unable to
    parse string as an integer", ``attributes: list`` with "'list' object has no attribute
    'items'"), and ``type: str = "x"`` was silently not the routing type.

    Args:
        cls: the new ``Event`` subclass.

    Raises:
        UsageError: naming the field and what to write instead.
    """
    declared = [n for n in inspect.get_annotations(cls) if n in _EVENT_OWN_FIELDS]
    if not declared:
        return
    name = declared[0]
    instead = (f"to set its routing type, write EVENT_TYPE = 'x' (a class constant) "
               f"instead of a '{name}' field" if name == "type" else
               f"name yours otherwise (e.g. '{cls.__name__.lower()}_{name}')")
    from ._errors import UsageError

    raise UsageError(f"{cls.__qualname__} declares a field {name!r}, which every Event has "
                     f"and the runtime sets and reads ({', '.join(_EVENT_OWN_FIELDS)}): "
                     f"{instead}")
