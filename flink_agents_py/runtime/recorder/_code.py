"""What a function's code holds, names and does: part of what a function made at run time binds."""

from __future__ import annotations

import dis
import math
import types
from typing import Any

from .._serde import dumps

__all__ = ["code_constants", "code_names", "code_steps"]


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


_SKIPPED = frozenset({"NOP", "CACHE", "EXTENDED_ARG", "RESUME", "COPY_FREE_VARS", "MAKE_CELL"})
"""Instructions that say nothing of what code does (line events, interpreter set-up)."""
_JUMPS = frozenset(dis.hasjrel) | frozenset(dis.hasjabs)


def code_steps(code: types.CodeType, depth: int = 0) -> list[Any]:
    """What ``code`` does, in order: each instruction with the name or value it works on.

    ``code_names`` and ``code_constants`` say what code refers to, not in which order nor
    what it does with it: ``lambda: convert(src, dst)`` and ``lambda: convert(dst, src)``,
    or ``lambda: price(a + b)`` and ``lambda: price(a - b)``, name the same. Their steps
    differ. Steps hold no line numbers or jump offsets (moving or re-wrapping code changes
    nothing), and constants in their JSON form (a ``frozenset`` sorted: the same in every
    process whatever its hash seed); nested code (a comprehension, an inner lambda) is its
    own steps. Bytecode is the interpreter's: compare steps made by one Python version only.

    Args:
        code: the code.
        depth: how deep ``code`` is nested (past 8 levels, nested code is its name).

    Returns:
        ``[opname, operand]`` pairs (``[opname]`` for a jump or an instruction with none).
    """
    steps: list[Any] = []
    for ins in dis.get_instructions(code):
        if ins.opname in _SKIPPED:
            continue
        value = ins.argval
        if ins.opcode in _JUMPS or ins.arg is None:
            steps.append([ins.opname])
        elif isinstance(value, types.CodeType):
            inner = code_steps(value, depth + 1) if depth < 8 else []
            steps.append([ins.opname, {"$code": value.co_name, "steps": inner}])
        elif ins.opcode in dis.hasconst:
            steps.append([ins.opname, _literal(value) if isinstance(
                value, (str, int, bytes, tuple, frozenset, float)) else repr(value)])
        elif isinstance(value, (str, int)):
            steps.append([ins.opname, value])
        else:
            steps.append([ins.opname, ins.argrepr])
    return steps
