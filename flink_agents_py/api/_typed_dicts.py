"""``typing.TypedDict`` parameter types made readable by pydantic on Python 3.10 and 3.11.

Pydantic refuses a ``typing.TypedDict`` before Python 3.12 ("Please use
``typing_extensions.TypedDict``"), so a tool whose parameter is one (as Flink Agents' tool
examples write them) could not be declared. ``pydantic_ready`` gives the same type with each
such class rebuilt as a ``typing_extensions.TypedDict`` of the same name, keys, required keys
and docstring, inside ``list[...]``, ``Optional[...]``, ``dict[str, ...]``, ``Annotated`` and
unions too. On Python 3.12 and later the type is returned as it is.
"""

from __future__ import annotations

import sys
import typing
from typing import Annotated, Any, Union, get_args, get_origin, get_type_hints

import typing_extensions

__all__ = ["pydantic_ready"]

_CONVERTED: dict[Any, Any] = {}
"""Each ``typing.TypedDict`` class met, and what it became (its rebuild, once made)."""


def pydantic_ready(annotation: Any) -> Any:
    """``annotation`` with every ``typing.TypedDict`` in it rebuilt for pydantic.

    Args:
        annotation: a parameter's type hint.

    Returns:
        The same hint, or an equal one whose ``typing.TypedDict`` classes are
        ``typing_extensions.TypedDict`` classes (Python < 3.12 only).
    """
    if sys.version_info >= (3, 12):
        return annotation
    return _ready(annotation, 0)


def _ready(annotation: Any, depth: int) -> Any:
    if depth > 16:  # a deeper (or self-referring) type is left to pydantic to judge
        return annotation
    if isinstance(annotation, type) and typing.is_typeddict(annotation):
        return _typed_dict(annotation, depth)
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is None or not args:
        return annotation
    if origin is Annotated:
        inner = _ready(args[0], depth + 1)
        params = (inner, *annotation.__metadata__)
        return annotation if inner is args[0] else Annotated[params]
    if origin is typing.Literal:
        return annotation
    ready = tuple(_ready(a, depth + 1) for a in args)
    if all(r is a for r, a in zip(ready, args, strict=True)):
        return annotation
    if origin is Union or type(annotation).__name__ == "UnionType":
        return Union[ready]  # noqa: UP007 - built from a tuple
    if origin in (typing_extensions.Required, typing_extensions.NotRequired):
        return origin[ready[0]]
    try:
        return origin[ready if len(ready) > 1 else ready[0]]
    except TypeError:  # an alias its origin cannot rebuild (a collections.abc one)
        return annotation


def _typed_dict(cls: type, depth: int) -> Any:
    if cls in _CONVERTED:
        return _CONVERTED[cls] or cls
    _CONVERTED[cls] = None  # (a class that names itself keeps its own form there)
    hints = get_type_hints(cls, include_extras=True)
    required = getattr(cls, "__required_keys__", frozenset(hints))
    fields = {}
    for name, hint in hints.items():
        ready = _ready(hint, depth + 1)
        if get_origin(ready) not in (typing_extensions.Required, typing_extensions.NotRequired):
            wrap = typing_extensions.Required if name in required else \
                typing_extensions.NotRequired
            ready = wrap[ready]
        fields[name] = ready
    make: Any = typing_extensions.TypedDict  # (its functional form, from a name not a literal)
    rebuilt: Any = make(cls.__name__, fields)
    rebuilt.__module__, rebuilt.__qualname__ = cls.__module__, cls.__qualname__
    rebuilt.__doc__ = cls.__doc__
    _CONVERTED[cls] = rebuilt
    return rebuilt
