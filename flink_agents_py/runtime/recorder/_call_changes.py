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

A parameter added with a default (the call now runs with it, the recorded one did not) or
removed while the recorded call left it to its default is a changed call too: so is it for
every kind of recorded call with parameters, not only functions (``tool_shape``: a tool's
Python function, or an MCP tool's schema; ``subagent_shape``: a sub-agent's input schema).
A call that left no parameter to its default keeps ``NO_DEFAULTS`` (records written before
it was kept have nothing there, and are not compared). A default that is a mutable
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

from ...api import FunctionTool, InternalSubagent, ReplayDivergenceError
from ...api.internal import declared_input_schema
from .._serde import digest
from ._binding import signature_of
from ._identity import stable_form

if TYPE_CHECKING:
    from ..context._calls import DurableCall
    from ._execution import ActionExecution
    from ._state import CallRecord

__all__ = [
    "NO_DEFAULTS",
    "defaults_taken",
    "effective",
    "changed_defaults",
    "default_text",
    "changed_callees",
    "tool_shape",
    "subagent_shape",
]

NO_DEFAULTS = "."
"""``defaults_taken`` of a call that left no parameter to its default (``""``: not kept)."""

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
        order (``NO_DEFAULTS`` when the call passed every parameter that has a default), and
        the defaults' forms by name (for ``effective``).
    """
    taken, forms = [], {}
    for name, param in sig.parameters.items():
        if name in bound or param.default is param.empty or param.kind in _SKIPPED:
            continue
        forms[name] = _form(param.default)
        taken.append(f"{name}={digest(forms[name])[:8]}")
    return ",".join(taken) or NO_DEFAULTS, forms


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
    if not part or part == NO_DEFAULTS:
        return {}
    return dict(e.partition("=")[::2] for e in part.split(","))


def changed_defaults(was: str, now: str) -> list[tuple[str, str]]:
    """The parameters whose default the replayed call runs with otherwise than recorded.

    Args:
        was: the recorded call's ``defaults_taken`` (``""`` for a record written before it
            was kept: nothing is compared).
        now: the replayed call's (``""``: not known, nothing is compared).

    Returns:
        ``(name, how)`` for each: ``"changed"`` (both calls left it to its default, which
        changed), ``"added"`` (the new code's call leaves it to a default, the recorded one
        had no such parameter), ``"removed"`` (the recorded call left it to its default, the
        new code's call has no such parameter), ``"configured"`` (an entry that is no
        parameter, ``$``-named: the configuration of the resource the call asks changed,
        ``_setup_shapes``); in the replayed function's order, then the removed ones in the
        recorded order.
    """
    if not was or not now or was == now:
        return []
    old, new = _entries(was), _entries(now)
    found = [
        (n, "" if old[n] == d else "configured" if n.startswith("$") else "changed")
        if n in old
        else (n, "" if n.startswith("$") else "added")  # ($: a record written before it)
        for n, d in new.items()
    ]
    return [f for f in found if f[1]] + [
        (n, "configured" if n.startswith("$") else "removed") for n in old if n not in new
    ]


def default_text(changes: list[tuple[str, str]]) -> str:
    """What changed in the defaults a call runs with, for the warning or divergence.

    Args:
        changes: ``changed_defaults``' findings.

    Returns:
        The text, naming the parameters and what changed for each.
    """
    parts = []
    if any(h == "configured" and n != "$agent" for n, h in changes):
        parts.append(
            "the configuration of the chat model setup it asks changed since the call was "
            "recorded (its model, prompt, tools, options, or its connection's or prompt's, "
            "or the tools and sub-agents it offers, or its fallbacks')"
        )
    if ("$agent", "configured") in changes:
        parts.append(
            "the configuration of the sub-agent setup it calls changed since the call was "
            "recorded (its class or fields, e.g. an endpoint)"
        )
    for how, what in (
        (
            "changed",
            "the default value of its parameter{s} {names} changed (the call leaves "
            "{them} to the default)",
        ),
        (
            "added",
            "its parameter{s} {names} added with a default, which the call now runs "
            "with (the recorded call had no such parameter)",
        ),
        (
            "removed",
            "its parameter{s} {names}, which the recorded call left to {its} default, removed",
        ),
    ):
        names = [n for n, h in changes if h == how]
        if names:
            many = len(names) > 1
            parts.append(
                what.format(
                    s="s" * many,
                    names=", ".join(repr(n) for n in names),
                    them="them" if many else "it",
                    its="their" if many else "its",
                )
            )
    return "; ".join(parts)


def _shape_of(taken: str) -> str | None:
    """A shape that keeps only ``taken``, its sixth part (``None`` for ``""``).

    For a call whose digest binds its arguments by name already (a tool's, a sub-agent's: a
    JSON object).

    Returns:
        The shape.
    """
    return "/" * 5 + taken if taken else None


def _schema_taken(schema: Any, arguments: Any) -> str:
    """``defaults_taken`` of a call given the properties of a JSON Schema object.

    Returns:
        The entries, ``NO_DEFAULTS``, or ``""`` when there is nothing to compare (no object
        schema, or arguments that are not an object).
    """
    props = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(props, dict) or not isinstance(arguments, Mapping):
        return ""
    taken = [
        f"{n}={digest(stable_form(p['default']))[:8]}"
        for n, p in props.items()
        if isinstance(p, dict) and "default" in p and n not in arguments
    ]
    return ",".join(taken) or NO_DEFAULTS


def tool_shape(tool: Any, call: Any) -> str | None:
    """The shape of a tool call: the defaults it leaves the tool's parameters to.

    A tool backed by a Python function (``FunctionTool``) is read from its signature, as a
    durable function's call is; another tool (an MCP tool) from the JSON Schema of its
    parameters (``metadata.parameters``: its properties' ``default`` values).

    Args:
        tool: the tool resource.
        call: the ``ToolCall``: its ``arguments`` are those the model gave (and those the
            runtime injects).

    Returns:
        The shape (``CallRecord.shape``), or ``None`` when there is nothing to compare.
    """
    arguments = getattr(call, "arguments", None)
    try:
        if isinstance(tool, FunctionTool):
            if not isinstance(arguments, Mapping):
                return None
            return _shape_of(defaults_taken(signature_of(tool.function), arguments)[0])
        return _shape_of(_schema_taken(tool.metadata.parameters, arguments))
    except Exception:  # noqa: BLE001 - no signature or schema: nothing to compare
        return None


def subagent_shape(name: str, setup: Any, value: Any) -> str | None:
    """The shape of a sub-agent call: the defaults its input leaves to the input schema's.

    Args:
        name: the sub-agent's name.
        setup: its setup (``SubagentSetup``), or ``None`` (refused).
        value: the input it is given.

    Returns:
        The shape (``CallRecord.shape``), or ``None`` when there is nothing to compare (no
        declared or derived input schema, an input that is not an object).
    """
    if setup is None:
        return None
    taken = ""
    if isinstance(value, Mapping):
        try:
            taken = _schema_taken(declared_input_schema(name, setup), value)
        except Exception:  # noqa: BLE001 - a schema that cannot be read: nothing to compare
            taken = ""
    agent = _agent_entry(setup)
    if agent:
        taken = agent if taken in ("", NO_DEFAULTS) else f"{taken},{agent}"
    return _shape_of(taken)


_NOT_CALLING = frozenset(
    {"description", "input_schema", "input_type", "timeout_s", "status_poll_interval_millis"}
)
"""Fields of an external sub-agent's setup that do not change what its call asks for."""


def _agent_entry(setup: Any) -> str:
    """``$agent=<digest>`` of an external sub-agent's setup: its class and fields.

    A deferred or async sub-agent's call runs what its setup's fields say (an endpoint, a
    queue, a model): a recorded outcome replayed after a deploy that changed them was
    another service's answer, handed over without a word. So the record keeps their digest
    (an entry ``changed_defaults`` skips for a record written before it was kept), and a
    change is the ``arguments changed`` warning, a divergence in strict mode. An internal
    sub-agent's actions replay their own calls: nothing here.

    Returns:
        The entry, or ``""`` (an internal sub-agent, or fields with no JSON form).
    """
    if isinstance(setup, InternalSubagent):
        return ""
    try:
        fields = {k: v for k, v in setup.model_dump(mode="json").items() if k not in _NOT_CALLING}
        return f"$agent={digest(stable_form([type(setup).__qualname__, fields]))[:8]}"
    except Exception:  # noqa: BLE001 - a field with no JSON form: nothing to compare
        return ""


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
