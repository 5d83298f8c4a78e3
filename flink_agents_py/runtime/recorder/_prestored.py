"""A durable call's result made ready to record where the call ran (off the operator thread).

``store_outcome`` turns a call's result into its stored JSON form and hands the caller that
form rebuilt (what a replay would hand over). For a chat's model call that is a copy and a
validation of the answer on the thread that runs the agent's actions, for every chat. The
chat's model call makes both on the I/O executor instead (``prestore``), where the answer
came in, and the operator thread only keeps them (``store_outcome`` takes a ``Prestored``).

Made there only when the result is exactly what ``store_outcome`` would make of it: a
framework model class that rebuilds as stored (``REBUILD_AS_STORED``), no known secret to
mask (with secrets registered the operator thread checks the stored form, as for any call;
one registered after the form was made, before the operator thread keeps it, as well:
``Prestored.added``); anything else (a failure to convert included) goes on as it was,
and ``store_outcome`` says what and where.
"""

from __future__ import annotations

from typing import Any, TypeVar

from ...api.internal import SECRETS, registered_secret_count
from .._serde import from_json_value, to_json_value
from ._round_trip import REBUILD_AS_STORED

__all__ = ["Prestored", "prestore"]

_T = TypeVar("_T")


class Prestored:
    """A result's stored JSON form and the value rebuilt from it (``store_outcome`` keeps them).

    Attributes:
        stored: the stored form (``to_json_value`` of the result).
        rebuilt: ``from_json_value(stored)``, what the caller gets.
        added: the secrets' registrations (``SECRETS.added``) when none was known, before
            the form was made: ``store_outcome`` keeps the form only while it is the same
            (a secret registered since is looked for as in any other result).
    """

    __slots__ = ("added", "rebuilt", "stored")

    def __init__(self, stored: Any, rebuilt: Any, added: int) -> None:
        self.stored, self.rebuilt, self.added = stored, rebuilt, added


def prestore(value: _T) -> _T | Prestored:
    """``value`` with its stored form and rebuilt value made now, when ``store_outcome``'s are.

    Args:
        value: what the durable call returns.

    Returns:
        A ``Prestored``, or ``value`` itself when ``store_outcome`` must decide (a class not
        known to rebuild as stored, a known secret to look for, no JSON form).
    """
    added = SECRETS.added  # (read first: a registration from now on is seen when recorded)
    if type(value) not in REBUILD_AS_STORED or registered_secret_count():
        return value
    try:
        stored = to_json_value(value, "a durable call's result")
        rebuilt = from_json_value(stored)
    except Exception:  # noqa: BLE001 - the operator thread's ``store_outcome`` says why
        return value
    if type(rebuilt) not in REBUILD_AS_STORED:
        return value
    return Prestored(stored, rebuilt, added)
