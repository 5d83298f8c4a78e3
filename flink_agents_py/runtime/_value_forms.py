"""Stored forms of standard-library values that have no JSON form of their own.

A durable call's arguments are digested in their JSON form and its result is stored in it;
``ctx.durable_execute(datetime.now, timezone.utc)`` failed (a ``timezone`` had none), and so
did a function returning a ``timedelta`` or a ``Path``. These values are stored tagged as
the key types are (``{"$model": "$timedelta", "data": ...}``: ``_serde``), so a replay
rebuilds the same type with the same value:

====================================  ==================================================
``datetime.time``                     ``"$time"``: ``isoformat()`` (a fixed UTC offset)
``datetime.timedelta``                ``"$timedelta"``: ``[days, seconds, microseconds]``
``datetime.timezone``                 ``"$timezone"``: ``[its offset as above, name]``
``zoneinfo.ZoneInfo``                 ``"$zoneinfo"``: its key (``"Europe/Paris"``)
``pathlib`` paths                     ``"$path"``: ``[class name, text]``
``fractions.Fraction``                ``"$fraction"``: its text (``"1/3"``)
``complex``                           ``"$complex"``: ``[real, imaginary]``
``ipaddress`` addresses, networks     ``"$ip"``: ``[class name, text]``
and interfaces
``range``                             ``"$range"``: ``[start, stop, step]``
``set``, ``frozenset``                ``"$set"``, ``"$frozenset"``: the members' forms,
                                      sorted by their JSON text (the same whatever the
                                      hash seed); a member's lists rebuild as tuples
====================================  ==================================================

Only a durable call's arguments (for its identity) and its result take these forms
(``_serde.to_json_value(..., tag_values=True)``); an event's fields and a memory value are
refused them as before, and what a callable binds keeps the form records were digested with
(``_identity.stable_form``: a type and ``repr``). Only the exact types (a subclass keeps having
no JSON form, not rebuilt as its base). Values the stored form already took in another way keep
it (an ``Enum`` member is its value, an aware ``datetime`` its UTC offset: records written
before keep their digests).

``row_form`` (a PyFlink ``Row`` as plain data) lives here too.
"""

from __future__ import annotations

import datetime
import fractions
import ipaddress
import math
import pathlib
import zoneinfo
from collections.abc import Callable
from typing import Any

from ..api import SerializationError
from ..api.internal import cut_masked
from ._json_codec import dumps

__all__ = ["VALUE_FORMS", "VALUE_TAGS", "row_form", "value_form", "value_of"]

_PATHS = {
    cls.__name__: cls
    for cls in (
        pathlib.PurePath,
        pathlib.PurePosixPath,
        pathlib.PureWindowsPath,
        pathlib.Path,
        pathlib.PosixPath,
        pathlib.WindowsPath,
    )
}
_IPS = {
    cls.__name__: cls
    for cls in (
        ipaddress.IPv4Address,
        ipaddress.IPv6Address,
        ipaddress.IPv4Network,
        ipaddress.IPv6Network,
        ipaddress.IPv4Interface,
        ipaddress.IPv6Interface,
    )
}


def _delta(value: datetime.timedelta) -> list[int]:
    return [value.days, value.seconds, value.microseconds]


def _zone_key(value: zoneinfo.ZoneInfo) -> str:
    if not value.key:
        raise SerializationError("a ZoneInfo made from a file (no key) has no stored form")
    return str(value.key)


def _timezone(value: datetime.timezone) -> list[Any]:
    offset = value.utcoffset(None)
    named = repr(value) != repr(datetime.timezone(offset))  # (``timezone(offset, name)``)
    return [_delta(offset), value.tzname(None) if named else None]


def _complex(value: complex) -> list[float]:
    if not (math.isfinite(value.real) and math.isfinite(value.imag)):
        raise SerializationError(f"{value!r} has no JSON form")
    return [value.real, value.imag]


VALUE_FORMS: dict[type, tuple[str, Callable[[Any], Any]]] = {
    datetime.time: ("$time", datetime.time.isoformat),
    datetime.timedelta: ("$timedelta", _delta),
    datetime.timezone: ("$timezone", _timezone),
    zoneinfo.ZoneInfo: ("$zoneinfo", _zone_key),
    fractions.Fraction: ("$fraction", str),
    complex: ("$complex", _complex),
    range: ("$range", lambda r: [r.start, r.stop, r.step]),
    **{cls: ("$path", lambda p: [type(p).__name__, str(p)]) for cls in _PATHS.values()},
    **{cls: ("$ip", lambda a: [type(a).__name__, str(a)]) for cls in _IPS.values()},
}
"""Per exact type, its tag and its data (``set`` and ``frozenset``: ``value_form``)."""

VALUE_TAGS = frozenset({tag for tag, _ in VALUE_FORMS.values()} | {"$set", "$frozenset"})
"""The tags ``value_of`` rebuilds."""


def value_form(value: Any, member: Callable[[Any], Any]) -> dict[str, Any]:
    """The tagged stored form of ``value`` (of a type in ``VALUE_FORMS``, or a set).

    Args:
        value: the value.
        member: the stored form of a set's member (``_serde``'s walk).

    Returns:
        ``{"$model": tag, "data": data}``.

    Raises:
        SerializationError: for a value of such a type with no stored form (a ``ZoneInfo``
            with no key, a ``complex`` part that is not finite).
    """
    kind = type(value)
    if kind is set or kind is frozenset:
        members = sorted((member(v) for v in value), key=dumps)
        return {"$model": f"${kind.__name__}", "data": members}
    tag, data_of = VALUE_FORMS[kind]
    return {"$model": tag, "data": data_of(value)}


def _tuples(data: Any) -> Any:
    """A set member's rebuilt value, its lists as tuples (hashable, as the member was)."""
    return tuple(_tuples(v) for v in data) if type(data) is list else data


def value_of(tag: str, data: Any, rebuild: Callable[[Any], Any]) -> Any:
    """Rebuild a value stored by ``value_form``.

    Args:
        tag: its tag (one of ``VALUE_TAGS``).
        data: its stored data.
        rebuild: ``_serde.from_json_value`` (for a set's members).

    Returns:
        The value, in its type.

    Raises:
        SerializationError: when the data is not what the tag stores (a record edited or
            damaged), naming the tag.
    """
    try:
        if tag in ("$set", "$frozenset"):
            members = (_tuples(rebuild(v)) for v in data)
            return set(members) if tag == "$set" else frozenset(members)
        if tag == "$time":
            return datetime.time.fromisoformat(data)
        if tag == "$timedelta":
            return datetime.timedelta(*data)
        if tag == "$timezone":
            offset, name = data
            delta = datetime.timedelta(*offset)
            return datetime.timezone(delta) if name is None else datetime.timezone(delta, name)
        if tag == "$zoneinfo":
            return zoneinfo.ZoneInfo(data)
        if tag == "$fraction":
            return fractions.Fraction(data)
        if tag == "$complex":
            return complex(*data)
        if tag == "$range":
            return range(*data)
        kinds = _PATHS if tag == "$path" else _IPS
        name, text = data
        return kinds[name](text)
    except Exception as e:  # noqa: BLE001 - the record's data, not a value of its type
        raise SerializationError(
            f"a stored {tag[1:]} value could not be rebuilt from "
            f"{cut_masked(str(data), 80)!r} ({type(e).__name__}: {e})"
        ) from None


def row_form(value: Any) -> Any:
    """A PyFlink ``Row`` as plain data; anything else as it is.

    Flink Agents' programs emit rows (``OutputEvent(output=Row(**fields))`` for
    ``to_table``): a row with field names is a dict by name, one without the list of its
    values.

    Returns:
        The plain form, or ``value``.
    """
    cls = type(value)
    if cls.__name__ != "Row" or not cls.__module__.startswith("pyflink"):
        return value
    names = getattr(value, "_fields", None)
    values = list(value)
    return dict(zip(names, values, strict=True)) if names else values
