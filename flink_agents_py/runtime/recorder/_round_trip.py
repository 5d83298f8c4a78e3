"""Whether a stored value rebuilds to what was stored: models whose validators change it.

A durable call's result is stored as its JSON form and handed over as rebuilt from it (the
first run and a replay alike). Rebuilding a pydantic model runs its validators on the stored
fields, which that model's validators already ran on once: a validator that is not
idempotent (``return v * 2``, a ``mode="before"`` one that wraps its input) rebuilds another
value than the function returned, on both paths, and nobody sees it. ``changed_by_rebuild``
finds such a model, so the call can fail when it is made, as one whose stored form does not
rebuild at all does.
"""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import BaseModel

from ...api import SerializationError
from ...api.internal import cut_masked
from .._serde import from_json_value, to_json_value

__all__ = ["REBUILD_AS_STORED", "changed_by_rebuild", "check_round_trip", "holds_models",
           "settle_attributes"]

_OWN = "flink_agents_py."
"""Models of the framework itself (chat responses, messages): tested to rebuild as stored."""

REBUILD_AS_STORED: set[type] = set()
"""The framework's model classes met as a whole result: a caller skips the check for them
(``type(rebuilt) in REBUILD_AS_STORED``, no call: a chat's answer costs nothing here)."""


def holds_models(stored: Any) -> bool:
    """Whether a stored JSON form may hold a tagged model (cheap: one encoding, no walk).

    Returns:
        ``False`` for plain data (no model to compare), else ``True``.
    """
    if type(stored) is not dict and type(stored) is not list:
        return False
    if type(stored) is dict and type(stored.get("$model")) is str:  # a model (or a value type)
        return True
    try:
        return _TAG in orjson.dumps(stored)
    except orjson.JSONEncodeError:  # nested past orjson's depth: the walk decides
        return True


_TAG = b'"$model":"'
"""How a tag naming a class (or a value type) starts in a stored form's JSON text."""


def changed_by_rebuild(stored: Any, rebuilt: Any, path: str = "$") -> str | None:
    """Where a model rebuilt from ``stored`` no longer has the JSON form it was stored as.

    Walks ``stored`` (a ``to_json_value`` form) beside ``rebuilt`` (its ``from_json_value``)
    through dicts and lists, and compares each rebuilt model's JSON form with its stored one.

    Args:
        stored: the stored JSON form.
        rebuilt: what was rebuilt from it.
        path: where ``stored`` is, for the answer (``$``, ``$.a[2]``).

    Returns:
        ``"<path> (<Class>: stored <fields>, rebuilt <fields>)"`` for the first model that
        changed, or ``None``.
    """
    if type(stored) is dict:
        if isinstance(rebuilt, BaseModel):
            cls = type(rebuilt)
            if cls.__module__.startswith(_OWN):
                if path == "$":
                    REBUILD_AS_STORED.add(cls)
                return None
            again = to_json_value(rebuilt, "a rebuilt result")
            if again == stored:
                return None
            return (f"{path} ({cls.__qualname__}: stored {_short(stored.get('data'))}, "
                    f"rebuilt {_short(again.get('data') if type(again) is dict else again)})")
        if type(rebuilt) is not dict:
            return None  # bytes, a UUID, a date... (rebuilt by their type, not validated)
        inner = stored.get("data") if stored.get("$model", 0) is None else stored
        if type(inner) is not dict:
            return None
        for k, v in inner.items():
            if type(v) in (dict, list):
                found = changed_by_rebuild(v, rebuilt.get(k), f"{path}.{k}")
                if found:
                    return found
    elif type(stored) is list and type(rebuilt) is list:
        for i, (v, r) in enumerate(zip(stored, rebuilt, strict=False)):
            if type(v) in (dict, list):
                found = changed_by_rebuild(v, r, f"{path}[{i}]")
                if found:
                    return found
    return None


def settle_attributes(exc: BaseException, attrs: dict[str, Any] | None, depth: int = 0) -> None:
    """Give a live exception its recorded attributes as a replay rebuilds them.

    A failure's attributes are recorded as their JSON form, and a replay sets them back
    rebuilt from it: a tuple comes back a list (``e.where == ("eu", 1)`` held in the first run
    and not after a restore). The first run's exception gets each such attribute as rebuilt
    (in place, as its secrets are masked), so both paths read the same; so does its explicit
    cause (``attrs["__cause__"]``), to 4 levels. An attribute that will not be set (a
    read-only property) is left as it is.

    Args:
        exc: the exception the caller is handed.
        attrs: its recorded attributes (``None``: none).
        depth: how deep in the cause chain ``exc`` is.
    """
    for name, stored in (attrs or {}).items():
        if name == "__cause__":
            if isinstance(exc.__cause__, BaseException) and isinstance(stored, dict) \
                    and depth < 4:
                settle_attributes(exc.__cause__, stored.get("attrs"), depth + 1)
            continue
        try:
            again = from_json_value(stored)
            if not _same(getattr(exc, name), again):
                setattr(exc, name, again)
        except Exception:  # noqa: BLE001, S112 - not settable: left as raised
            continue


def _same(live: Any, again: Any) -> bool:
    """Whether two values are equal with the same type at every level."""
    if type(live) is not type(again):
        return False
    if type(live) in (list, tuple):
        return len(live) == len(again) and all(map(_same, live, again))
    if type(live) is dict:
        return live.keys() == again.keys() and all(_same(v, again[k]) for k, v in live.items())
    try:
        return bool(live == again)
    except Exception:  # noqa: BLE001 - an __eq__ that fails: not the same
        return False


def check_round_trip(stored: Any, where: str) -> None:
    """Refuse a stored form whose models rebuild to another value (a memory write's).

    Args:
        stored: the value's stored JSON form.
        where: what is stored, for the error (``short_term_memory value at 'order'``).

    Raises:
        SerializationError: naming ``where``, the path, the model and both forms.
    """
    if holds_models(stored):
        try:
            changed = changed_by_rebuild(stored, from_json_value(stored))
        except Exception:  # noqa: BLE001 - one that does not rebuild at all: read's to say
            return
        if changed:
            raise SerializationError(
                f"{where}: its stored form rebuilds to another value at {changed}: a "
                "validator of the model changes what it is given (one that is not "
                "idempotent), so a read would not give back the value written")


def _short(value: Any, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else cut_masked(text, limit) + "..."
