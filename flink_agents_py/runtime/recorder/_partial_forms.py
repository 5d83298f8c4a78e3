"""A durable call in the form its record was written in: a partial's arguments given otherwise.

A plain call's arguments are compared by the parameters they bind to (``f("apple")`` and
``f(item="apple")`` are one call: ``_outcomes.argument_shape``), but a partial's own
arguments are part of what the callable binds (``_identity.bound_state``), kept as given:
``partial(price, "apple")`` recorded and ``partial(price, item="apple")`` replayed had
other digests, a false ``arguments changed`` (a divergence in strict mode); so did
``price("apple", 2)`` made ``partial(price, "apple")(2)``. And a call whose digest is no
record's cannot be told from a changed one: ``[price("apple"), price("pear")]`` recorded and
``[price(item="pear"), price(item="apple")]`` replayed handed pear apple's price.

The digest a record keeps is not changed (records written before and after match as they
did); instead, when a replayed function call's digest is not its record's, ``recorded_form``
writes the same call in each other form that binds the same values to the same parameters
of the function inside: the partial binding the parameters it binds now, none (a plain
call), or the first positional ones (with the keyword-only ones or without), each given by
position or by keyword, the call's own arguments likewise, nested partials flattened. A form
whose digest is a record's of the execution (the one at the call's identity first) is the
call as it was recorded: the call takes that digest and argument shape, and replays as a
call made in its recorded form does (quietly, or, when the digest is another record's, as a
call made out of order: a divergence).
"""

from __future__ import annotations

import functools
import inspect
import itertools
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ...api import SerializationError
from ._binding import signature_of
from ._identity import bound_state
from ._outcomes import argument_shape, call_digest
from ._state import CallRecord

__all__ = ["as_recorded", "recorded_form"]

_MAX_FORMS = 128
"""The most forms tried for one call (a partial of many positional parameters: the first)."""

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)

Form = tuple[Any, tuple[Any, ...], dict[str, Any]]


def _flattened(fn: functools.partial[Any]) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    """The function inside nested partials, with all their arguments, as calling them does."""
    layers: list[functools.partial[Any]] = []
    inner: Any = fn
    while isinstance(inner, functools.partial):
        layers.append(inner)
        inner = inner.func
    args: tuple[Any, ...] = ()
    keywords: dict[str, Any] = {}
    for layer in reversed(layers):  # the innermost's arguments come first
        args += layer.args
        keywords.update(layer.keywords)
    return inner, args, keywords


def _split(
    names: list[str],
    kinds: Mapping[str, Any],
    first: int,
    given: set[str],
    values: Mapping[str, Any],
) -> Iterator[tuple[tuple[Any, ...], dict[str, Any], int]]:
    """Ways to pass the positional parameters of ``given`` from position ``first``.

    Yields:
        ``(positional values, keyword values, the next position)``: the first ``n`` of the
        run of ``given`` parameters at ``first`` by position (every ``n``), the rest by
        keyword (none positional-only).
    """
    run = 0
    while first + run < len(names) and names[first + run] in given:
        run += 1
    for n in range(run + 1):
        by_position = names[first : first + n]
        rest = [p for p in names if p in given and p not in by_position]
        if any(kinds[p] is inspect.Parameter.POSITIONAL_ONLY for p in rest):
            continue
        yield tuple(values[p] for p in by_position), {p: values[p] for p in rest}, first + n


def _forms(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Iterator[Form]:
    """The call ``fn(*args, **kwargs)`` written otherwise: the same values, same parameters.

    The parameters a partial binds are those ``fn`` binds first, then none (a plain call of
    the function inside), then the first positional ones (``partial(price, "apple")``), with
    the keyword-only ones or without.

    Yields:
        ``(callable, args, kwargs)`` of each form (none for a call that binds ``*args`` or
        ``**kwargs``, or whose keywords override the partial's).
    """
    inner, p_args, p_keywords = _flattened(fn)
    if set(p_keywords) & set(kwargs):  # a call's keyword overriding the partial's: as given
        return
    try:
        sig = signature_of(inner)
        held = sig.bind_partial(*p_args, **p_keywords).arguments
        every = sig.bind(*p_args, *args, **{**p_keywords, **kwargs}).arguments
    except (TypeError, ValueError):
        return
    params = sig.parameters
    kinds = {name: p.kind for name, p in params.items()}
    if any(kinds[name] not in (*_POSITIONAL, inspect.Parameter.KEYWORD_ONLY) for name in every):
        return  # ``*args`` or ``**kwargs`` took some: their split is as given
    names = [name for name, p in params.items() if p.kind in _POSITIONAL]
    keyword_only = {n for n in every if kinds[n] is inspect.Parameter.KEYWORD_ONLY}
    run = 0
    while run < len(names) and names[run] in every:
        run += 1
    sets = [set(held)] + [
        set(names[:k]) | extra for extra in (set(), keyword_only) for k in range(run + 1)
    ]
    seen: list[set[str]] = []
    for n, mine in enumerate(sets):
        if n and mine in seen:
            continue
        seen.append(mine)
        as_partial = isinstance(fn, functools.partial) if n == 0 else bool(mine)
        theirs = set(every) - mine
        for p_pos, p_kw, at in _split(names, kinds, 0, mine - keyword_only, every):
            p_kw.update({k: every[k] for k in mine & keyword_only})
            made = functools.partial(inner, *p_pos, **p_kw) if as_partial else inner
            for c_pos, c_kw, _ in _split(names, kinds, at, theirs - keyword_only, every):
                c_kw.update({k: every[k] for k in theirs & keyword_only})
                yield made, c_pos, c_kw


def recorded_form(
    fn: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    rec: CallRecord,
    calls: Mapping[str, CallRecord],
    digest_of: Callable[[Form], str],
    shape_of: Callable[[Form], str | None],
) -> tuple[str, str | None] | None:
    """The digest and argument shape of the call in the form a record of it was written in.

    Args:
        fn: the call's function (a ``functools.partial`` or not).
        args: the call's positional arguments.
        kwargs: its keyword arguments.
        rec: the record at the call's identity (another digest than the call's).
        calls: the execution's records, by ordinal.
        digest_of: a form's call digest (``_outcomes.call_digest``).
        shape_of: a form's argument shape (``_outcomes.argument_shape``).

    Returns:
        ``(digest, shape)`` of the form whose digest is ``rec``'s, or else another record's
        of the same kind and target; ``None`` when no form's is.
    """
    wanted = {
        other.digest
        for other in calls.values()
        if other.kind is rec.kind and other.target == rec.target and other.digest
    }
    found: tuple[str, Form] | None = None
    for form in itertools.islice(_forms(fn, args, kwargs), _MAX_FORMS):
        try:
            dig = digest_of(form)
        except SerializationError:  # a value the partial binds has no JSON form as an argument
            continue
        if dig == rec.digest:
            return dig, shape_of(form)
        if dig in wanted and found is None:
            found = dig, form
    return (found[0], shape_of(found[1])) if found is not None else None


def as_recorded(
    call: Any,
    name: str,
    fn: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    rec: CallRecord,
    calls: Mapping[str, CallRecord],
) -> None:
    """Give ``call`` the digest and shape of its recorded form, if one is.

    Args:
        call: the ``DurableCall`` (its ``digest`` is not ``rec``'s).
        name: the function's ``module:qualname`` its digest names.
        fn: the call's function.
        args: the call's positional arguments.
        kwargs: its keyword arguments.
        rec: the record at its identity.
        calls: the execution's records, by ordinal.
    """
    found = recorded_form(
        fn,
        args,
        kwargs,
        rec,
        calls,
        lambda f: call_digest(name, f[1], f[2], call.call_id, bound_state(f[0])),
        lambda f: argument_shape(f[0], f[1], f[2]),
    )
    if found is not None:
        call.digest, call.shape = found
