"""Checks of an action's function made when a plan is built that warn rather than refuse."""

from __future__ import annotations

import inspect
import re
import typing
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from ..api import RunnerContext
from ..api.internal import Event, warn_at_user

__all__ = ["ActionReturnWarning", "TriggerNameWarning", "condition_expression_problem",
           "function_place", "signature_problem", "warn_if_declares_a_result",
           "warn_if_returned"]

_RETURNED: set[Any] = set()
"""The action functions already warned about for a value they returned (once each)."""

_CONDITION = re.compile(r"\s|[=<>!&|()\[\]\"'+*/%?,]")
"""What no event type name holds and a condition expression does (an operator, a space)."""

_NOTHING = {"None", "NoReturn", "Never", "typing.NoReturn", "typing.Never", "NoneType"}
"""Return annotations (as written, or as a type's name) saying the action returns nothing."""


class ActionReturnWarning(UserWarning):
    """An action declares a return type: what an action returns is discarded."""


class TriggerNameWarning(UserWarning):
    """An action's trigger names no event class but one of a program's own, nearly.

    It may be a type of the program's own sent as ``Event(type=...)`` (``"my_event"`` beside
    a class of type ``"my_event2"``; Flink Agents takes it), or a misspelling, whose action
    never runs. A name near a built-in event type is refused instead.
    """


def _says_nothing(annotation: Any) -> bool:
    if annotation is inspect.Signature.empty or annotation is None or annotation is type(None):
        return True
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
    return str(text).strip().strip("'\"") in _NOTHING or repr(annotation) in _NOTHING


def function_place(fn: Any) -> str:
    """Where a function is defined, for a problem about it: ``Shop.on_input, my_agent.py:14``.

    Args:
        fn: the function (a decorated one is unwrapped).

    Returns:
        Its qualified name and ``file:line``, or the qualified name alone when its code has
        no file.
    """
    inner = inspect.unwrap(fn) if callable(fn) else fn
    name = getattr(inner, "__qualname__", None) or repr(inner)
    code = getattr(inner, "__code__", None)
    if code is None:
        return name
    return f"{name}, {code.co_filename}:{code.co_firstlineno}"


def _bare(sig: inspect.Signature) -> str:
    """``sig`` without annotations and return type: ``(event, ctx, extra=1)``."""
    return str(sig.replace(return_annotation=inspect.Signature.empty, parameters=[
        p.replace(annotation=inspect.Parameter.empty) for p in sig.parameters.values()]))


_CONTEXT_NAMES = {"ctx", "context", "runner_context"}
"""Parameter names that say a parameter is the ``RunnerContext``."""


def _is_context(fn: Any, param: inspect.Parameter) -> bool:
    """Whether ``param`` of ``fn`` is annotated (or, unannotated, named) as the context."""
    annotation = param.annotation
    if isinstance(annotation, str):
        text = annotation
        try:
            annotation = typing.get_type_hints(fn).get(param.name, text)
        except Exception:  # noqa: BLE001 - a hint naming nothing: judged by its text
            return text.rsplit(".", 1)[-1] == "RunnerContext"
    if annotation is inspect.Parameter.empty:
        return param.name in _CONTEXT_NAMES
    return isinstance(annotation, type) and issubclass(annotation, RunnerContext)


def signature_problem(fn: Callable[..., Any]) -> str | None:
    """Why ``fn`` cannot run as an action, which is called as ``fn(event, ctx)``.

    Before, every such function got ``must take (event, ctx); is it missing
    @staticmethod?``, also a static method taking ``(event)`` or ``(event, ctx, extra)``,
    and one taking ``(ctx, event)`` compiled, then failed each record with ``'InputEvent'
    object has no attribute 'send_event'``.

    Args:
        fn: the action's function.

    Returns:
        What is wrong, to follow ``must take (event, ctx)`` (``but takes (self, event,
        ctx): is it missing @staticmethod?``), or ``None`` when it takes them.
    """
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return "but its signature cannot be read"
    params = list(sig.parameters.values())
    try:
        sig.bind(object(), object())
    except TypeError:
        said = f"but takes {_bare(sig)}"
        if params and params[0].name in ("self", "cls"):
            return f"{said}: is it missing @staticmethod?"
        positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY,
                                                      p.POSITIONAL_OR_KEYWORD)]
        if len(positional) < 2 and not any(p.kind is p.VAR_POSITIONAL for p in params):
            return f"{said}: add the parameter it lacks (the event comes first, then ctx)"
        extra = [p.name for p in params[2:] if p.default is p.empty
                 and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        if extra:
            return f"{said}: give {', '.join(extra)} a default, or remove it"
        return said
    first, second = (params + [None, None])[:2]
    if isinstance(first, inspect.Parameter) and first.kind is not first.VAR_POSITIONAL \
            and _is_context(fn, first) and not (
                isinstance(second, inspect.Parameter) and _is_context(fn, second)):
        return f"but takes {_bare(sig)}, the context first: swap them"
    return None


def warn_if_declares_a_result(name: str, fn: Callable[..., Any]) -> None:
    """Warn when action ``name``'s function declares a return type other than ``None``.

    The runtime discards what an action returns (actions speak by sending events), so
    ``def act(event, ctx) -> str: return answer`` loses the answer without a word; Apache
    Flink Agents warns the same way (its issue 834). The action still runs. A generator
    function (``result = yield from ctx.execute_async(...)``) is not warned of: its
    annotation (``-> Generator[Any, Any, None]``) types the generator it returns.

    Args:
        name: the action's name, for the message.
        fn: its function.
    """
    if inspect.isgeneratorfunction(fn):  # its annotation types the generator (yield from)
        return
    try:
        annotation = inspect.signature(fn).return_annotation
    except (TypeError, ValueError):
        return
    if _says_nothing(annotation):
        return
    shown = annotation if isinstance(annotation, str) else getattr(
        annotation, "__name__", repr(annotation))
    warn_at_user(ActionReturnWarning(
        f"action {name!r} ({getattr(fn, '__qualname__', fn)}) declares it returns {shown}, but "
        f"what an action returns is discarded: send its result as an event, e.g. "
        f"ctx.send_event(OutputEvent(output=...)), and declare -> None"))


def warn_if_returned(action: Any, value: Any, sent: Sequence[tuple[Any, Any]] = ()) -> None:
    """Warn, once per action function, when the action returned ``value`` (not ``None``).

    An action without a return annotation (or one declaring ``-> None``) escapes the
    plan-build check (``warn_if_declares_a_result``): ``return
    OutputEvent(output=answer)`` lost the output without a word (no output, no error
    record). The warning is attributed to the action's definition; the action's outcome
    is unchanged.

    Args:
        action: the action's ``ActionPlan`` (its ``name`` and ``function``).
        value: what it returned.
        sent: the events the action sent, with their JSON forms (``emitted``): an event it
            returned that is one of them is what ``send_event`` gave back
            (``lambda event, ctx: ctx.send_event(...)``), sent, not lost.
    """
    if value is None or any(value is event for event, _ in sent):
        return
    fn = action.function.resolve()
    if fn in _RETURNED:
        return
    _RETURNED.add(fn)
    try:
        if not _says_nothing(inspect.signature(fn).return_annotation):
            return  # warned about when the plan was built
    except (TypeError, ValueError):
        pass
    code = getattr(fn, "__code__", None)
    what = type(value).__name__
    article = "an" if what[:1] in "AEIOUaeiou" else "a"
    fix = (f"send it instead: ctx.send_event({what}(...))" if isinstance(value, Event) else
           "send the result as an event instead, e.g. ctx.send_event(OutputEvent(output=...))")
    warnings.warn_explicit(
        ActionReturnWarning(f"action {action.name!r} ({getattr(fn, '__qualname__', fn)}) "
                            f"returned {article} {what}, which is discarded: {fix}"),
        ActionReturnWarning, getattr(code, "co_filename", "<action>"),
        getattr(code, "co_firstlineno", 0))


def condition_expression_problem(where: str, trigger: Any) -> str | None:
    """The problem to report when ``trigger`` is a condition expression, not an event type.

    Apache Flink Agents' main branch (0.4, unreleased) takes a CEL expression as a trigger
    (``@action(EventType.InputEvent, "attributes.ready == true")``); this runtime does not
    evaluate conditions, and such a string taken as an event type would name none, so its
    action would never run without a word.

    Args:
        where: the action, for the message (``action 'x'``).
        trigger: one of its triggers.

    Returns:
        The problem's text, or ``None`` for an event type name.
    """
    if not isinstance(trigger, str) or not _CONDITION.search(trigger.strip()):
        return None
    return (f"{where} is triggered by {trigger!r}, a condition expression (Apache Flink "
            f"Agents' CEL trigger conditions, newer than 0.3), which this runtime does not "
            f"evaluate: trigger the action by the event type alone and test the condition "
            f"in the action (e.g. if event.get_attr('ready'): ...)")
