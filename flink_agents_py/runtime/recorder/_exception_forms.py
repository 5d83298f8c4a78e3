"""What a durable call's record keeps of a failure, and the exception a replay rebuilds.

A failure is recorded as its type, message, ``args`` and JSON-form attributes, with its
chain: the exception it was raised from (``__cause__``), the one it was raised while
handling (``__context__``), whether that one is suppressed (``raise ... from None``), and
its notes (``add_note``). A replay rebuilds each, so the action sees the chain the live run
had; the recorded traceback is not part of it (``_failures.with_recorded``).
"""

from __future__ import annotations

import ast
from typing import Any

from ...api import DurableExecutionError
from ...api.internal import group_types, import_qualified, mask_secrets, mask_value
from .._failures import OWN_NOTE, error_text
from .._serde import from_json_value, to_json_value
from ._state import CallRecord

__all__ = [
    "CAUSE",
    "CAUSE_DEPTH",
    "exception_form",
    "exception_state",
    "rebuild_exception",
    "rebuilt_exception",
]


def _json_or_none(value: Any) -> Any:
    """``value``'s JSON form, its standard-library values tagged, or ``None`` when it has none.

    Tagged as a durable call's result is (``tag_values``): a ``set`` or ``frozenset``, a
    ``Decimal`` or a ``timedelta`` among an exception's ``args`` or attributes is rebuilt as
    itself. Before, a ``set`` had no JSON form, so ``MissingKeys("missing", {"a"})`` was
    rebuilt from its message alone: one text argument where the live path had two, and
    ``msg, keys = e.args`` failed on a replay only.

    Returns:
        The form, or ``None``.
    """
    try:
        return to_json_value(value, "an exception's arguments", tag_values=True)
    except Exception:  # noqa: BLE001 - not kept: the message still is
        return None


_GROUP = "$exceptions"
"""Marks an exception group's sub-exceptions in its recorded ``args`` (their forms)."""


_SLOTS_OUTSIDE_ARGS: tuple[tuple[type[BaseException], tuple[str, ...]], ...] = (
    (OSError, ("filename", "filename2")),
    (ImportError, ("name", "path")),
)
"""Attributes of built-in exceptions kept outside ``args`` and ``__dict__`` (recorded too).

``OSError(2, "No such file", "/x")`` keeps ``(2, "No such file")`` as its ``args`` and the
file name in a slot: rebuilt from its ``args`` alone, its message lost the name, and so it
was rebuilt from the message, its ``errno`` gone (``None``). ``ImportError(msg, name=...)``
likewise. Records of other exceptions are unchanged."""


CAUSE = "__cause__"
"""The key of an explicit cause's form (``raise ... from e``) among a recorded failure's
attributes (a version before causes were kept skips it: ``__cause__`` takes no dict)."""
CAUSE_DEPTH = 4
CONTEXT = "__context__"
"""The key of the form of the exception a failure was raised while handling (``True``: its
cause, as ``raise ... from e`` inside ``except ... as e`` has it)."""
SUPPRESSED = "__suppress_context__"
"""The key marking a failure raised ``from None`` (its context not shown)."""
NOTES = "__notes__"
"""The key of a failure's notes (``add_note``), the runtime's own left out (``OWN_NOTE``)."""


def exception_state(exc: BaseException) -> list[tuple[str, Any]]:
    """An exception's own state: its instance attributes, private ones and slots too.

    A replay rebuilds the exception from its ``args`` and sets these back, so what a
    constructor keeps in ``self._retry`` (read through a property) or in a ``__slots__``
    entry is what the live path had; before, only public ``__dict__`` entries were kept, and
    a replayed exception had the constructor's default there, or no attribute at all.
    Dunder names (``__notes__``, a cause) are not part of it, nor the runtime's own marks
    (``_agents_failure_text``: ``_failures.failure_text``'s cache).

    Returns:
        ``(name, value)`` pairs, ``__dict__`` entries first.
    """
    found = {
        k: v
        for k, v in getattr(exc, "__dict__", {}).items()
        if not _is_dunder(k) and not k.startswith(_OWN_MARKS)
    }
    for cls in type(exc).__mro__:
        slots = cls.__dict__.get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if name in found or _is_dunder(name) or not isinstance(name, str):
                continue
            try:
                found[name] = getattr(exc, name)
            except AttributeError:  # a slot never set
                continue
    return list(found.items())


_OWN_MARKS = "_agents_"
"""The prefix of the attributes the runtime sets on an exception it handles."""


def _is_dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


def exception_form(exc: BaseException, depth: int = 0) -> dict[str, Any]:
    """What a record keeps of an exception: its type, message, args and attributes, masked.

    An exception group's ``args`` are its message and ``{"$exceptions": [...]}``, the
    forms of its sub-exceptions (groups nested in it too), so a replay rebuilds the group
    an ``except*`` clause matches as it did (before, a replayed group was a
    ``DurableExecutionError``).

    An explicit cause (``raise ValueError(...) from KeyError(...)``) is kept as its own form
    under ``attrs["__cause__"]`` (to 4 levels), so a replay rebuilds ``e.__cause__`` with
    its type and message as the live path has it; so is the exception it was raised while
    handling (``attrs["__context__"]``), with ``attrs["__suppress_context__"]`` for one
    raised ``from None``, and its notes (``attrs["__notes__"]``). A version before these
    were kept sets none of them (a ``__context__`` takes no dict).

    Returns:
        ``type`` (``module:qualname``), ``message``, ``args`` (``None``: no JSON form) and
        ``attrs`` (``None``: none).
    """
    cls = type(exc)
    if isinstance(exc, group_types()):
        group: Any = exc  # (typed by Python 3.11+ only)
        args: Any = [
            mask_secrets(group.message),
            {_GROUP: [exception_form(e) for e in group.exceptions]},
        ]
    else:
        args = mask_value(_json_or_none(list(exc.args)))
    attrs = dict(exception_state(exc))
    for base, names in _SLOTS_OUTSIDE_ARGS:
        if isinstance(exc, base):
            attrs.update((n, v) for n in names if (v := getattr(exc, n, None)) is not None)
    kept = {k: j for k, v in attrs.items() if (j := _json_or_none(v)) is not None or v is None}
    if isinstance(exc.__cause__, Exception) and depth < CAUSE_DEPTH:  # ``except`` reads it
        kept[CAUSE] = exception_form(exc.__cause__, depth + 1)
    context = exc.__context__
    if isinstance(context, Exception) and depth < CAUSE_DEPTH:  # the chain, as it was
        kept[CONTEXT] = True if context is exc.__cause__ else exception_form(context, depth + 1)
    if exc.__suppress_context__ and exc.__cause__ is None:  # ``raise ... from None``
        kept[SUPPRESSED] = True
    notes = [
        n
        for n in getattr(exc, "__notes__", None) or ()
        if isinstance(n, str) and not n.startswith(OWN_NOTE)
    ]
    if notes:
        kept[NOTES] = notes
    return {
        "type": f"{cls.__module__}:{cls.__qualname__}",
        "message": mask_secrets(error_text(exc)),
        "args": args,
        "attrs": mask_value(kept) or None,
    }


_LITERAL_TEXT = 10_000
"""The longest message ``_args_as_raised`` reads back as a Python literal."""


def _args_as_raised(args: list[Any], message: str | None) -> list[Any] | None:
    """The ``args`` an exception was raised with, tuples in them kept, read from its text.

    A tuple's JSON form is a list: a failure whose ``args`` hold one (``KeyError(("apple",
    "eu"))``, a dict's tuple key not found; ``ValueError("bad", (1, 2))``; a dict's value,
    ``ValueError({"k": (1, 2)})``) was rebuilt with a list there, so its text was not what
    the live path raised. Such an exception's text is
    the ``repr`` of its one argument, or of its ``args``: read back as a literal
    (``ast.literal_eval``, literals only), it gives them as raised, when their JSON form is
    the one recorded.

    Returns:
        The arguments, or ``None`` when the text does not give them.
    """
    if not message or len(message) > _LITERAL_TEXT or not message.startswith(("(", "[", "{")):
        return None
    try:
        found = ast.literal_eval(message)
    except Exception:  # noqa: BLE001 - not a literal: a message of its own
        return None
    made = [found] if len(args) == 1 else list(found) if isinstance(found, tuple) else None
    try:
        same = made is not None and to_json_value(made, "args", tag_values=True) \
            == to_json_value(args, "args", tag_values=True)
    except Exception:  # noqa: BLE001 - no JSON form: not the recorded values
        return None
    return made if same else None


def _has_unordered(value: Any) -> bool:
    """Whether ``value`` holds a ``set`` or ``frozenset`` (in lists, tuples and dicts too)."""
    if isinstance(value, (set, frozenset)):
        return True
    if isinstance(value, (list, tuple)):
        return any(_has_unordered(v) for v in value)
    if isinstance(value, dict):
        return any(_has_unordered(v) for v in value.values())
    return False


def rebuild_exception(rec: CallRecord) -> BaseException:
    """The exception a failed record holds, rebuilt for a replay.

    The recorded type with its recorded ``args`` (so ``str(e)`` is what it was) and
    attributes; from the message alone for records without ``args``; a
    ``DurableExecutionError`` naming the type when that cannot be imported or built.

    Returns:
        The exception.
    """
    return rebuilt_exception(rec.error_type, rec.error_message, rec.error_args, rec.error_attrs)


def rebuilt_exception(
    type_path: str | None,
    message: str | None,
    recorded_args: list[Any] | None,
    recorded_attrs: dict[str, Any] | None,
) -> BaseException:
    """``rebuild_exception`` of one recorded exception form (a group's members too)."""
    try:
        cls = import_qualified(type_path or "")
    except Exception:  # noqa: BLE001 - fall back to a generic, still-typed error
        cls = None
    group = (
        recorded_args[1].get(_GROUP)
        if isinstance(recorded_args, list)
        and len(recorded_args) == 2
        and isinstance(recorded_args[1], dict)
        else None
    )
    groups = group_types()
    if (
        isinstance(cls, type)
        and groups
        and issubclass(cls, groups)
        and isinstance(group, list)
        and recorded_args is not None
    ):
        members = [
            rebuilt_exception(f.get("type"), f.get("message"), f.get("args"), f.get("attrs"))
            for f in group
            if isinstance(f, dict)
        ]
        made: Any = cls  # (typed by Python 3.11+ only)
        try:
            rebuilt: BaseException = made(str(recorded_args[0]), members)
        except Exception:  # noqa: BLE001 - e.g. a member that is no Exception any more
            made = groups[0]
            rebuilt = made(str(recorded_args[0]), members)
        return rebuilt
    if isinstance(cls, type) and issubclass(cls, Exception):
        args = (
            [from_json_value(a) for a in recorded_args] if recorded_args is not None else [message]
        )
        exc: BaseException | None
        try:
            exc = cls(*args)
        except Exception:  # noqa: BLE001 - a constructor taking other arguments
            try:
                exc = cls.__new__(cls)
                BaseException.__init__(exc, *args)
            except Exception:  # noqa: BLE001
                exc = None
        if exc is not None:
            for k, v in (recorded_attrs or {}).items():
                try:
                    if k in (CAUSE, CONTEXT) and isinstance(v, dict):
                        setattr(
                            exc,
                            k,
                            rebuilt_exception(
                                v.get("type"), v.get("message"), v.get("args"), v.get("attrs")
                            ),
                        )
                        continue
                    if k == CONTEXT:  # (``True``: the cause, set when all is)
                        continue
                    setattr(exc, k, from_json_value(v))
                except Exception:  # noqa: BLE001 - a read-only attribute: skipped
                    pass
            if (recorded_attrs or {}).get(CONTEXT) is True:
                exc.__context__ = exc.__cause__
            if recorded_args is None or error_text(exc) == message:
                return exc
            if type(exc).__str__ is BaseException.__str__ and _has_unordered(args):
                return exc  # its text differs by a set's order only: the hash seed's, per process
            for candidate in (args, _args_as_raised(args, message)):
                if candidate is None:
                    continue
                try:
                    exc.args = tuple(candidate)
                except Exception:  # noqa: BLE001 - args it will not take: its message decides
                    break
                if error_text(exc) == message:
                    return exc
            try:  # a __str__ that is not built from args: keep the recorded message
                return cls(message)
            except Exception:  # noqa: BLE001
                return exc
    return DurableExecutionError(f"recorded failure {type_path}: {message}")
