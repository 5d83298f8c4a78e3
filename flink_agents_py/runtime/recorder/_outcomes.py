"""Durable call outcomes: naming calls, digesting arguments, storing and rebuilding outcomes.

What a caller gets live is exactly what a replay gets after a restore: a result is handed
over as it is rebuilt from its stored JSON form, and a recorded failure is rebuilt as the
same exception type with the same ``args`` and JSON-form attributes.
"""

from __future__ import annotations

import functools
import inspect
import sys
import types
from collections.abc import Callable
from typing import Any, NoReturn

from ...api import DurableExecutionError, SerializationError
from ...api.internal import (
    SECRETS,
    has_known_secret,
    mask_value,
    registered_secret_count,
    scrub_exception,
)
from .._failures import failure_text
from .._serde import digest, dumps, from_json_value, to_json_value
from ._binding import bound_arguments
from ._bound_kinds import bound_kinds, compact_kinds
from ._call_changes import NO_DEFAULTS, defaults_taken, effective
from ._callees import run_time_functions
from ._code import code_steps
from ._exception_forms import (
    CAUSE,
    CAUSE_DEPTH,
    exception_form,
    exception_state,
    rebuild_exception,
    rebuilt_exception,
)
from ._hidden_state import made_in_function
from ._identity import bound_and_nested, bound_state, made_at_run_time
from ._prestored import Prestored
from ._round_trip import REBUILD_AS_STORED, changed_by_rebuild, holds_models, settle_attributes
from ._state import CallRecord
from ._value_classes import library_code, value_classes

__all__ = ["fn_name", "legacy_name", "call_digest", "argument_shape", "code_of", "store_outcome",
           "rebuild_exception", "CODE_VERSION"]

CODE_VERSION = f"py{sys.version_info[0]}.{sys.version_info[1]}"
"""The interpreter version a call's code digest is for (``code_of``: bytecode differs)."""

_GENERATORS = (types.GeneratorType, types.AsyncGeneratorType)


def fn_name(fn: Callable[..., Any]) -> str:
    """``module:qualname`` of a callable, the same in every process (no object addresses).

    A ``functools.partial`` is named after the function it wraps, a callable object after its
    class. A builtin method, which has no module of its own (``datetime.now``, ``"a".upper``,
    ``str.upper``), is named in its class's module (``datetime:datetime.now``); records of
    such calls written before, named ``?:datetime.now``, replay (``legacy_name``).

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
    elif module is None:  # a builtin method: its class's module
        owner = getattr(fn, "__self__", getattr(fn, "__objclass__", None))
        if owner is not None and not isinstance(owner, types.ModuleType):
            module = getattr(owner if isinstance(owner, type) else type(owner), "__module__", None)
    return f"{module or '?'}:{qual}"


def legacy_name(target: str, recorded: str | None) -> bool:
    """Whether ``recorded`` is ``target`` as ``fn_name`` named it before (``?:`` module).

    A builtin method was ``?:datetime.now`` before ``fn_name`` named its class's module.

    Returns:
        Whether it is (the call is the recorded one, named otherwise).
    """
    return recorded is not None and recorded.startswith("?:") and recorded != target \
        and target.partition(":")[2] == recorded[2:]


def call_digest(fn: Callable[..., Any] | str, args: tuple[Any, ...], kwargs: dict[str, Any],
                call_id: str, bound: list[Any] | None = None,
                args_json: list[Any] | None = None) -> str:
    """Digest of a call's function name and arguments, and of what the function binds.

    What a ``functools.partial``, a lambda or closure, a bound method or a callable object
    binds counts as arguments too (``_identity.bound_state``), so two calls that differ only
    there have different digests; a module-level function binds nothing, and a ``str`` name
    (a framework call's) neither. The classes of enum members in the arguments count too
    (``_identity.value_classes``: their JSON form is their value alone); arguments without
    any keep the digest they had before. ``bound``: for ``fn`` given as its name, what the
    function binds (``bound_state``) when the caller found it already. ``args_json``: the
    arguments' JSON form (``to_json_value(list(args))``) when the caller made it already,
    holding no enum member or namedtuple (``_chat_steps.model_call_json``).

    Returns:
        16 hex digits.

    Raises:
        SerializationError: when an argument has no JSON form.
    """
    name = fn if isinstance(fn, str) else fn_name(fn)
    where = f"arguments of durable call {call_id} ({name})"
    # (no arguments: their JSON form and enum classes are empty, known without a walk)
    parts = [name, args_json if args_json is not None else to_json_value(
        list(args), where, tag_values=True) if args else [],
        to_json_value(kwargs, where, tag_values=True) if kwargs else {}]
    if not isinstance(fn, str):
        bound = bound_state(fn)
    if bound is not None:
        parts.append(bound)
    enums = (value_classes(args) if args and args_json is None else []) \
        + (value_classes(kwargs) if kwargs else [])
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
    (``_call_changes.effective``; the first when it took none). The eighth says which of the
    arguments' lists were tuples, then (after a ``|``) which of those ``fn`` binds were
    (``_binding.sequence_kinds``, ``_bound_kinds.bound_kinds``): their JSON forms, and so
    the digest, are alike.

    Returns:
        The two digests (and the code's), or ``None`` when ``fn`` has no signature the
        arguments bind to.
    """
    try:
        binding, sig, simple = bound_arguments(fn, args, kwargs)
        named = to_json_value(binding, "arguments", tag_values=True)  # (a fresh dict)
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
            bound = nested = code = held = None  # a module-level function: binds nothing
        else:  # (what ``bound_and_nested`` and ``code_of`` find for one, without the walk)
            bound, nested = bound_and_nested(fn)
            code, held = code_of(fn), bound_kinds(fn)
        kinds: list[str] = []  # (a tuple's JSON form is a list: which were which)
        classes = value_classes(binding, sort_dicts=True, kinds=kinds)  # not keywords' order
        if type(fn) is types.FunctionType and not (fn.__defaults__ or fn.__kwdefaults__
                                                    or fn.__dict__):
            taken, forms = NO_DEFAULTS, dict[str, Any]()  # none to take (nor a wrapped one)
        else:
            taken, forms = defaults_taken(sig, binding)
        parts = [digest([named, bound, classes]),
                 digest([sorted(dumps(v).decode() for v in values), bound]), code or "",
                 nested or "", digest([named, classes]) if bound is not None else "", taken,
                 digest([effective(sig, named, forms), bound, classes]) if forms else ""]
        if kinds or held:  # (none: no eighth part, nor a call for it)
            parts.append(compact_kinds("".join(kinds)) + (f"|{held}" if held else ""))
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
    if ok and type(value) is Prestored:  # made where the call ran, as below (``_prestored``)
        if value.added == SECRETS.added:  # no secret registered since: nothing to mask
            rec.done, rec.ok, rec.value = True, True, value.stored
            return True, value.rebuilt
        value = value.rebuilt  # (stored as it is rebuilt): looked at as any result below
    if ok:
        where = f"result of durable call {call_id}"
        try:
            if isinstance(value, _GENERATORS):  # (``inspect.isgenerator``/``isasyncgen``)
                _refuse_generator(value, where, rec.target)
            try:
                stored = to_json_value(value, f"{where} ({rec.target or 'the function'})",
                                       tag_values=True)
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
        form = exception_form(exc)  # keyed state and journals leave the process: masked
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
    again = rebuilt_exception(form["type"], form["message"], form["args"], form["attrs"])
    unkept: list[str] = []
    level: Any = form
    where: BaseException | None = exc
    depth = 0
    while isinstance(where, Exception) and isinstance(level, dict) and depth <= CAUSE_DEPTH:
        kept = level.get("attrs") or {}
        unkept += sorted("__cause__." * depth + k for k, v in exception_state(where)
                         if v is not None and k not in kept)
        level, where, depth = kept.get(CAUSE), where.__cause__, depth + 1
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
               "datetime, Decimal, UUID, a standard-library value (time, timedelta, timezone, "
               "ZoneInfo, Path, Fraction, a set...: docs/concepts/durability.md) or a pydantic "
               "model defined at module level (convert other objects, e.g. to a dict of their "
               "fields)")
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


