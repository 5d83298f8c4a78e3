"""How an event's keywords become its fields: the one-field fast path, extra keywords.

``OutputEvent(output=...)`` is what nearly every action builds, once per record: its one
field is typed ``Any``, so pydantic's validation has nothing to check (the value is kept as
it is, the ``type`` filled, the rest defaults). ``bare_fields`` finds such classes once, at
import, and ``Event.__init__`` builds their events as pydantic would, without the validator's
round trip (``tests/test_event_fast_path.py`` compares both, object for object).
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

__all__ = [
    "SLOT_SETTERS",
    "bare_fields",
    "extra_as_attributes",
    "hinted_event_error",
    "not_an_event_message",
]


def _slot_setters() -> tuple[Callable[[Any, Any], None], ...] | None:
    """Setters of the instance attributes pydantic's validation sets (``None``: not found)."""
    try:
        return tuple(
            BaseModel.__dict__[name].__set__
            for name in (
                "__dict__",
                "__pydantic_fields_set__",
                "__pydantic_extra__",
                "__pydantic_private__",
            )
        )
    except (KeyError, AttributeError):
        return None


SLOT_SETTERS = _slot_setters()
"""The setters of ``__dict__``, ``__pydantic_fields_set__``, ``__pydantic_extra__`` and
``__pydantic_private__`` on a ``BaseModel`` instance (``None`` if pydantic lays them out
otherwise: then no class is built on the fast path)."""


def _validators(cls: type[BaseModel]) -> frozenset[str]:
    """The names of the validators and serializers pydantic runs for ``cls``."""
    found = cls.__pydantic_decorators__
    return frozenset(
        name
        for group in (
            found.validators,
            found.field_validators,
            found.root_validators,
            found.field_serializers,
            found.model_serializers,
            found.model_validators,
            found.computed_fields,
        )
        for name in group
    )


def bare_fields(
    base: type[BaseModel], own: frozenset[str], *classes: type[BaseModel]
) -> dict[type[BaseModel], str]:
    """The classes among ``classes`` whose events can skip pydantic's validation, by field.

    Such a class adds to ``base``'s fields (``own``) exactly one field, typed ``Any`` with
    the default ``None`` and no alias, runs only ``base``'s validators, has a type
    (``EVENT_TYPE``), no private attributes, no ``model_post_init`` and no extra fields. An
    event of it built with that one field only is what validation would make: the value as
    given, ``type`` filled, ``attributes`` and ``attachments`` empty, ``id`` from
    ``new_event_id``.

    Args:
        base: the class whose validators every event runs (``Event``).
        own: ``base``'s fields.
        classes: the candidate classes.

    Returns:
        ``{class: its one field}`` for the classes that qualify.
    """
    if SLOT_SETTERS is None:
        return {}
    checks = _validators(base)
    found: dict[type[BaseModel], str] = {}
    for cls in classes:
        extra = [name for name in cls.model_fields if name not in own]
        if len(extra) != 1 or set(cls.model_fields) != own | set(extra):
            continue
        field = cls.model_fields[extra[0]]
        if (
            field.annotation is not Any
            or field.default is not None
            or field.alias
            or field.default_factory is not None
            or field.validation_alias
            or not getattr(cls, "EVENT_TYPE", None)
            or _validators(cls) != checks
            or cls.__private_attributes__
            or cls.__pydantic_post_init__
            or cls.model_config.get("extra") != "forbid"
        ):
            continue
        found[cls] = extra[0]
    return found


def extra_as_attributes(data: dict[str, Any], known: frozenset[str], kind: str) -> dict[str, Any]:
    """``data`` with its keywords that are not fields (``known``) moved into ``attributes``.

    Args:
        data: the keywords an event class was called with.
        known: its fields.
        kind: its name, for the error.

    Returns:
        A new dict: the fields, and ``attributes`` holding the others too.

    Raises:
        TypeError: when such a keyword names an entry ``attributes`` gives too.
    """
    attributes = dict(data.get("attributes") or {})
    out = {k: v for k, v in data.items() if k in known}
    for k, v in data.items():
        if k in known:
            continue
        if k in attributes:
            raise TypeError(f"{kind}() got {k!r} as a keyword and in attributes: give it once")
        attributes[k] = v
    out["attributes"] = attributes
    return out


def hinted_event_error(cls: type[BaseModel], error: ValidationError, given: Any) -> ValidationError:
    """``error`` (building a ``cls`` event) with the field a misspelt keyword likely meant.

    A built-in event refuses a keyword it has no field for (``OutputEvent(outptu=1)``: "Extra
    inputs are not permitted"); a program's own event keeps such a keyword as an attribute,
    so a misspelt required field shows only as "Field required". Either now says "did you
    mean": the refused keyword names the field closest to it, a missing field the keyword
    given that is closest to it.

    Args:
        cls: the event class.
        error: pydantic's error.
        given: the keywords the class was called with.

    Returns:
        A ``ValidationError`` with the same errors (types, locations, inputs), each hinted
        where a near name exists, or ``error`` itself when none has one.
    """
    fields = sorted(cls.model_fields)
    unknown = [k for k in given if isinstance(k, str) and k not in cls.model_fields]
    details: list[InitErrorDetails] = []
    hinted = False
    for e in error.errors():
        message, loc = e["msg"], e["loc"]
        name = loc[0] if len(loc) == 1 and isinstance(loc[0], str) else None
        near: list[str] = []
        if name is not None and e["type"] == "extra_forbidden":
            near = difflib.get_close_matches(name, fields, n=1, cutoff=0.6)
            message += (
                f"; did you mean {near[0]!r}?"
                if near
                else f" ({cls.__name__} takes: {', '.join(f for f in fields if f != 'id')})"
            )
            hinted = True
        elif name is not None and e["type"] == "missing":
            near = difflib.get_close_matches(name, unknown, n=1, cutoff=0.6)
            if near:
                message += f" (given {near[0]!r}, kept as an attribute: did you mean {name!r}?)"
                hinted = True
        details.append(
            {"type": PydanticCustomError(e["type"], message), "loc": loc, "input": e["input"]}
        )
    return ValidationError.from_exception_data(error.title, details) if hinted else error


def not_an_event_message(value: Any) -> str:
    """Why ``send_event(value)`` is refused, and what to send instead.

    Args:
        value: what was given to ``send_event`` (not an ``Event``).

    Returns:
        ``send_event takes an Event, got <type>`` and, for the usual mistakes (a dict, a
        pydantic model, an event class, an unawaited coroutine), the fix.
    """
    what = type(value).__name__
    said = f"send_event takes an Event, got {what}"
    if isinstance(value, type):
        name = value.__name__
        from ._events import Event

        if issubclass(value, Event):
            return f"{said} (the class {name} itself): send an instance, {name}(...)"
        return f"{said} (the class {name}): send an Event instance"
    if inspect.isawaitable(value):
        return (
            f"{said}: await it first, ctx.send_event(await ...), in an async action, "
            f"and send the Event it gives"
        )
    if isinstance(value, BaseModel):
        return (
            f"{said}, a pydantic model that is no Event: for the agent's output send "
            f"OutputEvent(output=value); to trigger an action, declare the class as "
            f"class {what}(Event) and listen with @action({what})"
        )
    if isinstance(value, dict):
        return (
            f"{said}: for the agent's output send OutputEvent(output=...) with it; to "
            f"trigger an action, send an Event subclass built from it, or "
            f"Event(type='name', attributes=...) heard by @action('name')"
        )
    return f"{said}: for the agent's output send OutputEvent(output=...) with it"
