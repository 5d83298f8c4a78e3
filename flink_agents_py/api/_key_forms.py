"""The JSON form of a key: what a key is wherever it is written as JSON.

A key of ``str``, ``int``, ``float``, ``bool`` or ``None`` is itself, a tuple is a JSON
array of its items' forms (as every release wrote them). A key of a type with a *tag* is a
JSON object of one member, the tag and the value's canonical text:

=====================  ==============================================================
``uuid.UUID``          ``{"uuid": "0f8fad5b-d9cb-469f-a165-70867728950e"}`` (``str``)
``datetime.date``      ``{"date": "2024-05-01"}`` (``isoformat()``)
``datetime.datetime``  ``{"datetime": "2024-05-01T12:30:00+02:00"}`` (``isoformat()``:
                       microseconds when not 0; an aware one's UTC offset, not its
                       zone's name, so it comes back with a fixed-offset ``timezone``)
``decimal.Decimal``    ``{"decimal": "1.50"}`` (``str``: its digits and exponent as given)
``bytes``              ``{"bytes": "AAE="}`` (standard base64)
=====================  ==============================================================

No other key is a JSON object (a ``dict`` cannot be a key), so a tagged object is never
taken for another key. The default key encoding (``runtime.encode_key``) is ``U+001F``
and the canonical JSON text of this form; the event log, Flink's error rows, the journals,
a local snapshot, the long-term memory scopes and an outside event read from JSON use it
too, so a ``UUID`` key and the string of its text stay two keys everywhere.

Only the exact types: a subclass (``pandas.Timestamp``, an ``IntEnum``) has no tag.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import decimal
import uuid
from collections.abc import Callable
from typing import Any

from ._secrets import cut_masked

__all__ = ["ACCEPTED", "TAGS", "key_json", "key_from_json", "tagged_json", "untag"]

ACCEPTED = ("a str, int, float, bool, None, uuid.UUID, datetime.date, datetime.datetime, "
            "decimal.Decimal, bytes or a tuple of those")
"""The key types of the default key encoding, as messages name them."""

_Date = datetime.date
_DateTime = datetime.datetime


def _bytes_text(value: bytes) -> str:
    return base64.b64encode(value).decode("ascii")


def _bytes_of(text: str) -> bytes:
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as e:
        raise ValueError(f"not base64 text: {cut_masked(text, 40)!r}") from e


def _date_of(text: str) -> datetime.date:
    if len(text) != 10:  # ``fromisoformat`` takes other forms too (3.11): only ours
        raise ValueError(f"not a date's isoformat text: {cut_masked(text, 40)!r}")
    return _Date.fromisoformat(text)


TAGS: dict[type, tuple[str, Callable[[Any], str]]] = {
    uuid.UUID: ("uuid", str),
    _Date: ("date", _Date.isoformat),
    _DateTime: ("datetime", _DateTime.isoformat),
    decimal.Decimal: ("decimal", str),
    bytes: ("bytes", _bytes_text),
}
"""The tag of each key type that has one, and its value's canonical text."""

_READERS: dict[str, Callable[[str], Any]] = {
    "uuid": uuid.UUID,
    "date": _date_of,
    "datetime": _DateTime.fromisoformat,
    "decimal": decimal.Decimal,
    "bytes": _bytes_of,
}
"""Each tag's value from its text."""


def tagged_json(value: Any) -> dict[str, str]:
    """The tagged JSON form of a value of a tagged type (a ``json`` encoder's ``default``).

    Returns:
        ``{tag: text}``.

    Raises:
        TypeError: for a value of another type (as ``json`` expects of ``default``).
    """
    found = TAGS.get(type(value))
    if found is None:
        raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")
    tag, text = found
    return {tag: text(value)}


def key_json(key: Any) -> Any:
    """The JSON form of ``key`` (see the module docstring).

    Args:
        key: a key's value.

    Returns:
        The key itself for ``str``, ``int``, ``float``, ``bool`` and ``None``, a list for a
        tuple, ``{tag: text}`` for a tagged type; any other value as it is (a key of the
        ``"pickle"`` encoding: the caller writes it as it did before), also when its text
        cannot be made (an aware ``datetime`` whose ``tzinfo`` raises).
    """
    kind = type(key)
    if kind is tuple:
        return [key_json(item) for item in key]
    found = TAGS.get(kind)
    if found is None:
        return key
    tag, text = found
    try:
        return {tag: text(key)}
    except Exception:  # noqa: BLE001 - a tzinfo of the user's: the value, as before
        return key


def key_from_json(data: Any) -> Any:
    """The key whose JSON form (``key_json``) is ``data``: arrays as tuples, tags as values.

    Args:
        data: a key's JSON form, as read from JSON text.

    Returns:
        The key, in its own type.

    Raises:
        ValueError: for an object that is not one tag and its text (no key's form).
    """
    kind = type(data)
    if kind is list:
        return tuple(key_from_json(item) for item in data)
    if kind is dict:
        return untag(data)
    return data


def untag(data: dict[str, Any]) -> Any:
    """The value a tagged object (``{tag: text}``) stands for (a ``json`` ``object_hook``).

    Returns:
        The value.

    Raises:
        ValueError: for an object that is not one known tag and its text.
    """
    if len(data) == 1:
        (tag, text), = data.items()
        reader = _READERS.get(tag)
        if reader is not None and type(text) is str:
            try:
                return reader(text)
            except (ValueError, ArithmeticError) as e:  # Decimal's InvalidOperation too
                raise ValueError(f"{tag} {cut_masked(text, 80)!r} is not a {tag} key's text: "
                                 f"{type(e).__name__}: {e}") from None
    raise ValueError(f"{cut_masked(str(data), 80)} is not a key's JSON form: an object there "
                     f"is one of the tags {sorted(_READERS)} and its text")
