"""What changed in a replayed function call that its digest does not say: defaults, callees.

Defaults (``defaults_taken``, ``effective``, ``changed_defaults``):

``price("apple")`` of ``def price(item, currency="USD")`` is a call with ``currency="USD"``;
redeployed with ``currency="EUR"`` as the default, the same ``price("apple")`` asks for
another price, yet its passed arguments, and so its digest, are those recorded. Before,
such a replay handed over the recorded USD price without a word. The record keeps, per
parameter the call left to its default, a short digest of that default
(``argument_shape``'s sixth part, ``name=digest`` entries); a replay whose function's
default for one of those parameters changed is a changed call: the ``arguments changed``
warning, a divergence in strict mode (``_versioning.changed_arguments``).

A parameter added or removed with its default is not compared (the function changed, as
its body may: what it was recorded doing is its outcome). A default that is a mutable
value or an object (a ``cache={}`` the function fills, a client) counts by its type only:
its state changes as calls use it, and a replayed call does not run. The values a call ran
with, defaults included (``effective``, ``argument_shape``'s seventh part), tell a default
now passed as it was (``price("apple", currency="USD")``), or the reverse, from a change:
the same call, replayed without a warning.

Callees (``changed_callees``): a lambda, a nested function or a wrapper has one name
whatever it calls; a replay whose callable now calls other functions diverges.
"""

from __future__ import annotations

import datetime
import decimal
import enum
import inspect
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NoReturn

from ...api import ReplayDivergenceError
from .._serde import digest
from ._identity import stable_form

if TYPE_CHECKING:
    from ..context._calls import DurableCall
    from ._execution import ActionExecution
    from ._state import CallRecord

__all__ = ["defaults_taken", "effective", "changed_defaults", "default_text", "changed_callees"]

_VALUES = (
    str,
    int,
    float,
    bytes,
    type(None),
    enum.Enum,
    tuple,
    frozenset,
    decimal.Decimal,
    datetime.date,
    datetime.time,
    datetime.timedelta,
)
"""Defaults that cannot change as calls use them: counted by their value."""
_SKIPPED = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)


def _form(value: Any) -> Any:
    if isinstance(value, _VALUES):
        return stable_form(value)
    kind = type(value)
    return {"$type": f"{kind.__module__}:{kind.__qualname__}"}


def defaults_taken(sig: inspect.Signature, bound: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """The parameters a call left to their defaults, each with its default's digest.

    Args:
        sig: the function's signature.
        bound: the arguments the call passed, by parameter name.

    Returns:
        ``name=digest`` entries joined by ``,`` (8 hex digits each), in the signature's
        order (``""`` when the call passed every parameter that has a default), and the
        defaults' forms by name (for ``effective``).
    """
    taken, forms = [], {}
    for name, param in sig.parameters.items():
        if name in bound or param.default is param.empty or param.kind in _SKIPPED:
            continue
        forms[name] = _form(param.default)
        taken.append(f"{name}={digest(forms[name])[:8]}")
    return ",".join(taken), forms


def effective(
    sig: inspect.Signature, named: Mapping[str, Any], forms: Mapping[str, Any]
) -> dict[str, Any]:
    """The values a call runs with, by parameter: those passed, and the defaults it took.

    ``price("apple")`` and ``price("apple", currency="USD")`` of ``def price(item,
    currency="USD")`` have one: a replay of one recorded as the other is the same call.

    Args:
        sig: the function's signature.
        named: the passed arguments' JSON forms, by parameter name.
        forms: the defaults' forms (``defaults_taken``).

    Returns:
        The values, in the signature's order.
    """
    return {
        n: named[n] if n in named else forms[n] for n in sig.parameters if n in named or n in forms
    }


def _entries(part: str) -> dict[str, str]:
    return dict(e.partition("=")[::2] for e in part.split(",")) if part else {}


def changed_defaults(was: str, now: str) -> list[str]:
    """The parameters both calls left to their default, whose default changed.

    Args:
        was: the recorded call's ``defaults_taken`` (``""`` for a record written before it
            was kept: nothing is compared).
        now: the replayed call's.

    Returns:
        Their names, in the replayed function's order.
    """
    if not was or not now or was == now:
        return []
    old = _entries(was)
    return [n for n, d in _entries(now).items() if n in old and old[n] != d]


def default_text(names: list[str]) -> str:
    """What a call whose defaults changed is made with, for the warning or divergence.

    Returns:
        The text, naming the parameters.
    """
    listed, many = ", ".join(repr(n) for n in names), len(names) > 1
    return (
        f"the arguments recorded, but the default value of its parameter{'s' * many} "
        f"{listed} changed (the call leaves {'them' if many else 'it'} to the default)"
    )


def changed_callees(ctx: ActionExecution, call: DurableCall, rec: CallRecord) -> NoReturn:
    """A call whose callable now calls other functions than recorded: a divergence.

    The callable of a lambda, a nested function, a decorator's wrapper or a wrapper object
    has one name whatever it calls, so its record keeps the functions it calls
    (``CallRecord.callees``); when they changed, the call runs another function than the
    recorded one, as a plain ``fetch_weather`` turned ``fetch_stock`` does, and the recorded
    outcome (or started attempt) is not its own.

    Raises:
        ReplayDivergenceError: always, naming the call, its callable and both sets of
            functions.
    """
    kind, target = rec.kind.value if rec.kind else call.kind.value, rec.target or call.target
    was, now = _listed(rec.callees), _listed(call.callees)
    ctx._diverge(
        ReplayDivergenceError(
            call.call_id,
            ctx._record.action,
            (kind, target),
            (call.kind.value, call.target),
            detail=f"the {kind} call {target!r} now calls {now} where the recorded one called "
            f"{was}: another function than the recorded call's (its name cannot say so: "
            "a lambda, a nested function or a wrapper has one name whatever it calls)",
        )
    )


def _listed(names: list[str] | None) -> str:
    return ", ".join(repr(n) for n in names) if names else "no function of its own"
