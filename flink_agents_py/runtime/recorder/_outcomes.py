"""Durable call outcomes: naming calls, digesting arguments, storing and rebuilding outcomes.

What a caller gets live is exactly what a replay gets after a restore: a result is handed
over as it is rebuilt from its stored JSON form, and a recorded failure is rebuilt as the
same exception type with the same ``args`` and JSON-form attributes.
"""

from __future__ import annotations

import ast
import functools
import inspect
import sys
import types
from collections.abc import Callable
from typing import Any, NoReturn

from ...api import DurableExecutionError, SerializationError, mask_secrets
from ...api.internal import (
    group_types,
    has_known_secret,
    import_qualified,
    mask_value,
    registered_secret_count,
    scrub_exception,
)
from .._failures import error_text, failure_text
from .._serde import digest, dumps, from_json_value, to_json_value
from ._binding import bound_arguments
from ._call_changes import defaults_taken, effective
from ._code import code_steps
from ._hidden_state import made_in_function
from ._identity import bound_and_nested, bound_state, made_at_run_time, run_time_functions
from ._round_trip import REBUILD_AS_STORED, changed_by_rebuild, holds_models, settle_attributes
from ._state import CallRecord
from ._value_classes import library_code, value_classes

__all__ = ["fn_name", "call_digest", "argument_shape", "code_of", "store_outcome",
           "rebuild_exception", "CODE_VERSION"]

CODE_VERSION = f"py{sys.version_info[0]}.{sys.version_info[1]}"
"""The interpreter version a call's code digest is for (``code_of``: bytecode differs)."""

_GENERATORS = (types.GeneratorType, types.AsyncGeneratorType)


def fn_name(fn: Callable[..., Any]) -> str:
    """``module:qualname`` of a callable, the same in every process (no object addresses).

    A ``functools.partial`` is named after the function it wraps, a callable object after its
    class.

    Returns:
        The name.
    """
    while isinstance(fn, functools.partial):
        fn = fn.func
    qual = getattr(fn, "__qualname__", None)
    module = getattr(fn, "__module__", None)
    if not isinstance(qual, str):
        cls = type(fn)
        module, qual = cls.__module__, cls.__qualname__
    return f"{module or '?'}:{qual}"


def call_digest(fn: Callable[..., Any] | str, args: tuple[Any, ...], kwargs: dict[str, Any],
                call_id: str, bound: list[Any] | None = None) -> str:
    """Digest of a call's function name and arguments, and of what the function binds.

    What a ``functools.partial``, a lambda or closure, a bound method or a callable object
    binds counts as arguments too (``_identity.bound_state``), so two calls that differ only
    there have different digests; a module-level function binds nothing, and a ``str`` name
    (a framework call's) neither. The classes of enum members in the arguments count too
    (``_identity.value_classes``: their JSON form is their value alone); arguments without
    any keep the digest they had before. ``bound``: for ``fn`` given as its name, what the
    function binds (``bound_state``) when the caller found it already.

    Returns:
        16 hex digits.

    Raises:
        SerializationError: when an argument has no JSON form.
    """
    name = fn if isinstance(fn, str) else fn_name(fn)
    where = f"arguments of durable call {call_id} ({name})"
    # (no arguments: their JSON form and enum classes are empty, known without a walk)
    parts = [name, to_json_value(list(args), where) if args else [],
             to_json_value(kwargs, where) if kwargs else {}]
    if not isinstance(fn, str):
        bound = bound_state(fn)
    if bound is not None:
        parts.append(bound)
    enums = (value_classes(args) if args else []) + (value_classes(kwargs) if kwargs else [])
    if enums:
        parts.append({"$enums": enums})
    return digest(parts)


def argument_shape(fn: Callable[..., Any], args: tuple[Any, ...],
                   kwargs: dict[str, Any]) -> str | None:
    """How a function call's argument values bind to its parameters, as two digests.

    ``<binding>/<values>``: the digest of the values by parameter name (``f(1, b=2)`` and
    ``f(1, 2)`` bind alike, and so do ``f(a, b)`` and, once the parameters were swapped in
    ``f``'s definition, ``f(b, a)``), and the digest of the values alone, sorted (a
    ``f("USD", "EUR")`` made ``f("EUR", "USD")`` has the same values, bound otherwise). Both
    include what ``fn`` binds (``_identity.bound_state``). The classes of enum members count
    in the first by parameter, in the order of dict keys: keywords or a dict's entries given
    in another order are the same binding. A replay uses them where the call digest differs
    from the recorded one (``_versioning.check_arguments``). When ``fn`` holds code made at
    run time (a lambda, a nested function), a third part is ``code_of(fn)``: what that code
    does, which the call digest does not say. The sixth is the defaults the call left its
    parameters to (``_call_changes.defaults_taken``: the digest leaves them out), the
    seventh the first's digest of the values it runs with, defaults taken included
    (``_call_changes.effective``; the first when it took none).

    Returns:
        The two digests (and the code's), or ``None`` when ``fn`` has no signature the
        arguments bind to.
    """
    try:
        binding, sig, simple = bound_arguments(fn, args, kwargs)
        named = to_json_value(binding, "arguments")  # (a fresh dict: not changed)
        values: list[Any] = []
        if simple:  # each argument bound to a positional parameter of its own
            values += named.values()
        else:
            for name, value in named.items():
                kind = sig.parameters[name].kind
                if kind is inspect.Parameter.VAR_POSITIONAL:
                    values += value
                elif kind is inspect.Parameter.VAR_KEYWORD:
                    values += value.values()
                else:
                    values.append(value)
        if type(fn) is types.FunctionType and not made_at_run_time(fn):
            bound = nested = code = None  # a module-level function: binds nothing, no code
        else:  # (what ``bound_and_nested`` and ``code_of`` find for one, without the walk)
            bound, nested = bound_and_nested(fn)
            code = code_of(fn)
        classes = value_classes(binding, sort_dicts=True)  # not the keywords' order
        if type(fn) is types.FunctionType and not (fn.__defaults__ or fn.__kwdefaults__
                                                    or fn.__dict__):
            taken, forms = "", dict[str, Any]()  # no defaults to take (nor a wrapped one)
        else:
            taken, forms = defaults_taken(sig, binding)
        parts = [digest([named, bound, classes]),
                 digest([sorted(dumps(v).decode() for v in values), bound]), code or "",
                 nested or "", digest([named, classes]) if bound is not None else "", taken,
                 digest([effective(sig, named, forms), bound, classes]) if forms else ""]
        while not parts[-1]:
            parts.pop()
        return "/".join(parts)
    except Exception:  # noqa: BLE001 - no signature, or one the arguments do not fit
        return None


def _class_code(fn: Any) -> list[types.FunctionType]:
    """The methods of the classes made in a function that ``fn`` (or its object) is of."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    owner = fn.__self__ if isinstance(fn, types.MethodType) else fn
    if isinstance(owner, (type, types.FunctionType, types.BuiltinFunctionType)):
        return []
    found: list[types.FunctionType] = []
    for cls in type(owner).__mro__:
        if cls is object or not made_in_function(cls):
            continue
        for _, attr in sorted(vars(cls).items()):
            inner = attr.__func__ if isinstance(attr, (staticmethod, classmethod)) else attr
            if isinstance(inner, types.FunctionType):
                found.append(inner)
    return found


@functools.lru_cache(maxsize=1024)
def _steps_digest(code: types.CodeType) -> str:
    """The digest of ``code``'s steps (``_code.code_steps``), kept per code object.

    A lambda's code is made once, with its enclosing function, so its bytecode is walked
    once, not at every call.

    Returns:
        The digest.
    """
    return digest(code_steps(code))


def code_of(fn: Callable[..., Any]) -> str | None:
    """What the code made at run time in ``fn`` does, as ``<interpreter>:<digest>``.

    The call digest has a lambda's or nested function's name, what it binds and the names
    and constants its code uses (``_identity.bound_state``), not what the code does with
    them: ``lambda: convert(src, dst)`` and ``lambda: convert(dst, src)`` of one action have
    one digest, and so do ``lambda: price(a + b)`` and ``lambda: price(a - b)``. This is the
    digest of their code's steps (``_code.code_steps``), in ``fn`` and in the functions made
    at run time it binds (a closure in a decorator's wrapper, a partial of a lambda), and
    the methods of the classes made in a function that a callable object or a bound
    method's object is an instance of (its ``__call__``, what ``self.other()`` runs); the
    code of the standard library and installed packages is left out (it changes with
    their releases, not with the user's code).
    Bytecode is the interpreter's, so the version is named (``py3.11:...``) and steps of
    two versions are never compared.

    Args:
        fn: the callable a durable call runs.

    Returns:
        The version and digest, or ``None`` when ``fn`` holds no code made at run time (a
        module-level function, a builtin, a class) or cannot be walked.
    """
    try:
        found = [f for f in run_time_functions(fn, 0, set(), held=True) + _class_code(fn)
                 if not library_code(f)]
        if not found:
            return None
        return f"{CODE_VERSION}:{digest([_steps_digest(f.__code__) for f in found])}"
    except (Exception, RecursionError):  # noqa: BLE001 - identity never fails the call
        return None


def _json_or_none(value: Any) -> Any:
    try:
        return to_json_value(value, "an exception's arguments")
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


_CAUSE = "__cause__"
"""The key of an explicit cause's form (``raise ... from e``) among a recorded failure's
attributes (a version before causes were kept skips it: ``__cause__`` takes no dict)."""
_CAUSE_DEPTH = 4


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
    found = {k: v for k, v in getattr(exc, "__dict__", {}).items()
             if not _is_dunder(k) and not k.startswith(_OWN_MARKS)}
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


def _exception_form(exc: BaseException, depth: int = 0) -> dict[str, Any]:
    """What a record keeps of an exception: its type, message, args and attributes, masked.

    An exception group's ``args`` are its message and ``{"$exceptions": [...]}``, the
    forms of its sub-exceptions (groups nested in it too), so a replay rebuilds the group
    an ``except*`` clause matches as it did (before, a replayed group was a
    ``DurableExecutionError``).

    An explicit cause (``raise ValueError(...) from KeyError(...)``) is kept as its own form
    under ``attrs["__cause__"]`` (to 4 levels), so a replay rebuilds ``e.__cause__`` with
    its type and message as the live path has it.

    Returns:
        ``type`` (``module:qualname``), ``message``, ``args`` (``None``: no JSON form) and
        ``attrs`` (``None``: none).
    """
    cls = type(exc)
    if isinstance(exc, group_types()):
        group: Any = exc  # (typed by Python 3.11+ only)
        args: Any = [mask_secrets(group.message),
                     {_GROUP: [_exception_form(e) for e in group.exceptions]}]
    else:
        args = mask_value(_json_or_none(list(exc.args)))
    attrs = dict(exception_state(exc))
    for base, names in _SLOTS_OUTSIDE_ARGS:
        if isinstance(exc, base):
            attrs.update((n, v) for n in names if (v := getattr(exc, n, None)) is not None)
    kept = {k: j for k, v in attrs.items() if (j := _json_or_none(v)) is not None or v is None}
    if isinstance(exc.__cause__, Exception) and depth < _CAUSE_DEPTH:  # ``except`` reads it
        kept[_CAUSE] = _exception_form(exc.__cause__, depth + 1)
    return {"type": f"{cls.__module__}:{cls.__qualname__}",
            "message": mask_secrets(error_text(exc)), "args": args,
            "attrs": mask_value(kept) or None}


def store_outcome(rec: CallRecord, call_id: str, ok: bool, value: Any) -> tuple[bool, Any]:
    """Write an outcome into ``rec``.

    A result is handed to the caller as it is rebuilt from its stored form, exactly what a
    replay after a restore hands over: the same types on both paths (a pydantic model field
    typed ``Any`` holds what its JSON form holds, a tuple is a list). A result with no JSON
    form, or one whose stored form does not rebuild, turns into a failure with a
    ``SerializationError`` (raised and caught here: the failure is the outcome).

    A failure's message, ``args`` and attributes are stored with known secrets masked
    (``api.mask_secrets``): a replay rebuilds the exception from the masked values, and the
    first run hands over the exception masked in place (``scrub_exception``: or a masked copy
    of it when it cannot be changed), so catching it and quoting it shows the same on both.
    A result holding a known secret (a provider echoing its key in an answer, a tool quoting a
    token) is stored with it masked, and the caller gets it so too: the key enters neither
    keyed state, the journal, nor the agent's data (its memory, outputs).

    Returns:
        The outcome as the caller will see it: ``(ok, value or exception)``.
    """  # noqa: DOC501
    if ok:
        where = f"result of durable call {call_id}"
        try:
            if isinstance(value, _GENERATORS):  # (``inspect.isgenerator``/``isasyncgen``)
                _refuse_generator(value, where, rec.target)
            try:
                stored = to_json_value(value, f"{where} ({rec.target or 'the function'})")
            except SerializationError as e:  # name what to return instead
                raise SerializationError(f"{e}; a durable call's result is recorded as JSON: "
                                         f"{_RETURNABLE}") from None
            if registered_secret_count() and has_known_secret(dumps(stored).decode()):
                stored = mask_value(stored)
            try:
                rebuilt = from_json_value(stored)
            except Exception as e:  # noqa: BLE001 - e.g. a model whose validators reject it
                hint = ("; define the model class at module level, where a replay can import "
                        "it" if "<locals>" in str(e) else "")
                raise SerializationError(
                    f"{where}: its stored form does not rebuild ({type(e).__name__}: {e}), so "
                    f"a replay could not return it{hint}") from e
            changed = None if type(rebuilt) in REBUILD_AS_STORED or not holds_models(stored) \
                else changed_by_rebuild(stored, rebuilt)
            if changed:
                raise SerializationError(
                    f"{where}: its stored form rebuilds to another value at {changed}: a "
                    "validator of the model changes what it is given (one that is not "
                    "idempotent), so the value returned could not be handed over")
        except Exception as e:  # noqa: BLE001
            ok, value = False, e
        else:
            rec.done, rec.ok, rec.value = True, True, stored
            value = rebuilt
    if not ok:
        exc = value if isinstance(value, BaseException) else DurableExecutionError(str(value))
        # the caller gets it masked (everything it holds: its args, attributes, notes,
        # sub-exceptions and cause chain), and it is recorded so: the first run hands over
        # no more than a replay rebuilds from the record
        exc = scrub_exception(exc)
        rec.done, rec.ok = True, False
        form = _exception_form(exc)  # keyed state and journals leave the process: masked
        settle_attributes(exc, form["attrs"])  # (a tuple attribute a list, as replayed)
        rec.error_type, rec.error_message = form["type"], form["message"]
        rec.error_args, rec.error_attrs = form["args"], form["attrs"]
        rec.traceback = failure_text(exc)
        value = _as_replayed(exc, form) if isinstance(exc, Exception) \
            else _not_an_exception(exc, form)
    return ok, value


def _as_replayed(exc: Exception, form: dict[str, Any]) -> BaseException:
    """``exc``, or what a replay rebuilds from its record when that is of another type.

    An exception whose class a replay cannot import (one defined in a function, its
    qualified name holding ``<locals>``) or build is rebuilt as a ``DurableExecutionError``:
    the live path hands that over too (``exc`` its ``__cause__``), so an action's ``except``
    clauses match the same on both paths, rather than only until a restore.

    An exception with public attributes that have no JSON form (an HTTP error's
    ``response``), itself or a cause it was raised from, is recorded without them, so a
    replay rebuilds it without them: the live path hands over that rebuilt exception too
    (a note naming them, the raised ``exc`` at the end of its cause chain, where a replay
    has the recorded traceback), so ``e.response`` fails in the first run, not only after
    a restore.

    Returns:
        The exception the caller gets.
    """
    again = _rebuilt(form["type"], form["message"], form["args"], form["attrs"])
    unkept: list[str] = []
    level: Any = form
    where: BaseException | None = exc
    depth = 0
    while isinstance(where, Exception) and isinstance(level, dict) and depth <= _CAUSE_DEPTH:
        kept = level.get("attrs") or {}
        unkept += sorted("__cause__." * depth + k for k, v in exception_state(where)
                         if v is not None and k not in kept)
        level, where, depth = kept.get(_CAUSE), where.__cause__, depth + 1
    if type(again) is type(exc) and unkept:
        notes = [*getattr(exc, "__notes__", ()), (
            f"flink-agents-py: attributes with no JSON form left out ({', '.join(unkept)}): "
            "a durable call's failure is recorded without them, so a replay could not "
            "restore them; read what you need inside the durable call (the exception as "
            "raised ends the __cause__ chain)")]
        try:
            setattr(again, "__notes__", notes)  # noqa: B010 - (``add_note``: Python 3.11+)
        except Exception:  # noqa: BLE001, S110 - an exception that takes no attributes
            pass
    elif type(again) is type(exc) or not isinstance(again, DurableExecutionError):
        return exc
    last: BaseException = again
    depth = 0
    while last.__cause__ is not None and depth < 8:  # (a rebuilt cause stays the cause)
        last, depth = last.__cause__, depth + 1
    last.__cause__ = exc
    return again


def _not_an_exception(exc: BaseException, form: dict[str, Any]) -> DurableExecutionError:
    """What the caller gets for a recorded failure that is no ``Exception``.

    An ``asyncio.CancelledError`` (an HTTP client's inner task cancelled), a ``SystemExit``
    or a ``KeyboardInterrupt`` raised by a function on the I/O executor is its call's
    outcome; thrown into the action as it was, it went past the action's ``except
    Exception`` and stopped the whole job, while a replay, which rebuilds only exceptions,
    handed over this error. Both paths hand it over now: the action fails alone, or catches it.

    Returns:
        The ``DurableExecutionError`` a replay rebuilds (``rebuild_exception``), caused by
        ``exc``.
    """
    error = DurableExecutionError(f"recorded failure {form['type']}: {form['message']}")
    error.__cause__ = exc
    return error


_RETURNABLE = ("return JSON data (dicts, lists, text, numbers, bools, None), bytes, date, "
               "datetime, Decimal, UUID or a pydantic model defined at module level (convert other "
               "objects, e.g. to a dict of their fields)")
"""What a durable call may return, for the message refusing a result with no JSON form."""


def _refuse_generator(value: Any, where: str, target: str | None) -> NoReturn:
    """Refuse a generator given back by a durable call (its function is a generator function).

    A generator's body runs only as it is iterated, and a durable call records one result: a
    replay could not give the generator back. Nothing of the body has run (a sync generator
    is closed here).

    Raises:
        SerializationError: always, naming the function and what to write instead.
    """
    kind = "an async generator" if inspect.isasyncgen(value) else "a generator"
    if inspect.isgenerator(value):
        value.close()
    name = target or "the function"
    raise SerializationError(
        f"{where} ({name}) is {kind}: {name} is a generator function, whose body runs only "
        "as the generator is iterated, and a durable call records one result; make the "
        "function return a list (e.g. 'return list(...)', or "
        "'[x async for x in ...]' in an async function)")


_LITERAL_TEXT = 10_000
"""The longest message ``_args_as_raised`` reads back as a Python literal."""


def _args_as_raised(args: list[Any], message: str | None) -> list[Any] | None:
    """The ``args`` an exception was raised with, tuples in them kept, read from its text.

    A tuple's JSON form is a list: a failure whose ``args`` hold one (``KeyError(("apple",
    "eu"))``, a dict's tuple key not found; ``ValueError("bad", (1, 2))``) was rebuilt with a
    list there, so its text was not what the live path raised. Such an exception's text is
    the ``repr`` of its one argument, or of its ``args``: read back as a literal
    (``ast.literal_eval``, literals only), it gives them as raised, when their JSON form is
    the one recorded.

    Returns:
        The arguments, or ``None`` when the text does not give them.
    """
    if not message or len(message) > _LITERAL_TEXT or not message.startswith(("(", "[")):
        return None
    try:
        found = ast.literal_eval(message)
    except Exception:  # noqa: BLE001 - not a literal: a message of its own
        return None
    made = [found] if len(args) == 1 else list(found) if isinstance(found, tuple) else None
    try:
        same = made is not None and to_json_value(made, "args") == to_json_value(args, "args")
    except Exception:  # noqa: BLE001 - no JSON form: not the recorded values
        return None
    return made if same else None


def rebuild_exception(rec: CallRecord) -> BaseException:
    """The exception a failed record holds, rebuilt for a replay.

    The recorded type with its recorded ``args`` (so ``str(e)`` is what it was) and
    attributes; from the message alone for records without ``args``; a
    ``DurableExecutionError`` naming the type when that cannot be imported or built.

    Returns:
        The exception.
    """
    return _rebuilt(rec.error_type, rec.error_message, rec.error_args, rec.error_attrs)


def _rebuilt(type_path: str | None, message: str | None, recorded_args: list[Any] | None,
             recorded_attrs: dict[str, Any] | None) -> BaseException:
    """``rebuild_exception`` of one recorded exception form (a group's members too)."""
    try:
        cls = import_qualified(type_path or "")
    except Exception:  # noqa: BLE001 - fall back to a generic, still-typed error
        cls = None
    group = recorded_args[1].get(_GROUP) if isinstance(recorded_args, list) \
        and len(recorded_args) == 2 and isinstance(recorded_args[1], dict) else None
    groups = group_types()
    if isinstance(cls, type) and groups and issubclass(cls, groups) \
            and isinstance(group, list) and recorded_args is not None:
        members = [_rebuilt(f.get("type"), f.get("message"), f.get("args"), f.get("attrs"))
                   for f in group if isinstance(f, dict)]
        made: Any = cls  # (typed by Python 3.11+ only)
        try:
            rebuilt: BaseException = made(str(recorded_args[0]), members)
        except Exception:  # noqa: BLE001 - e.g. a member that is no Exception any more
            made = groups[0]
            rebuilt = made(str(recorded_args[0]), members)
        return rebuilt
    if isinstance(cls, type) and issubclass(cls, Exception):
        args = [from_json_value(a) for a in recorded_args] if recorded_args is not None \
            else [message]
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
                    if k == _CAUSE and isinstance(v, dict):
                        exc.__cause__ = _rebuilt(v.get("type"), v.get("message"),
                                                 v.get("args"), v.get("attrs"))
                        continue
                    setattr(exc, k, from_json_value(v))
                except Exception:  # noqa: BLE001 - a read-only attribute: skipped
                    pass
            if recorded_args is None or error_text(exc) == message:
                return exc
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
