"""What a function's code holds and names: part of what a function made at run time binds."""

from __future__ import annotations

import math
import types
from typing import Any

from .._serde import dumps

__all__ = ["code_constants", "code_names"]


def code_constants(code: types.CodeType) -> list[Any]:
    """The literal constants of ``code`` and of the code nested in it, in order.

    Returns:
        The constants' JSON forms; ``None`` is left out (interpreters add it or not), nested
        code is its name and its own constants.
    """
    out: list[Any] = []
    for const in code.co_consts:
        if const is None:
            continue
        if isinstance(const, types.CodeType):
            out.append({"$code": const.co_name, "consts": code_constants(const)})
        elif isinstance(const, (str, int, bytes, tuple, frozenset)) or type(const) is float:
            out.append(_literal(const))
    return out


def code_names(code: types.CodeType) -> list[str]:
    """The global and attribute names ``code`` and the code nested in it use, sorted.

    One sorted list for all the nested code, so an interpreter that inlines a comprehension
    (3.12) gives what one that nests it gives.

    Returns:
        The names (``co_names``), each once.
    """
    found: set[str] = set()
    stack = [code]
    while stack:
        current = stack.pop()
        found.update(current.co_names)
        stack.extend(c for c in current.co_consts if isinstance(c, types.CodeType))
    return sorted(found)


def _literal(const: Any) -> Any:
    if isinstance(const, bytes):
        return {"$bytes": const.hex()}
    if isinstance(const, (tuple, frozenset)):
        items = [_literal(c) for c in const]
        return items if isinstance(const, tuple) else {"$set": sorted(items, key=dumps)}
    if type(const) is float and not math.isfinite(const):
        return {"$float": repr(const)}
    return const
