"""What the error row of a record its key selector raised on says.

A key selector written for other records (``lambda r: r["customer"]`` on a record without
``customer``, ``r.customer`` on a dict) raised, and the row said only ``KeyError:
'customer'`` or ``AttributeError: 'dict' object has no attribute 'customer'``: nothing said
it was the key selector or what the record held. The message now says so: ``the key selector
raised on the dict record (its fields: name, n): 'customer'``; the line that raised is in the
row's traceback, and the console line of an unread row on Flink ends with it (``(at
my_job.py:11, in <lambda>)``), as for an action's error. The framework's own refusals (a
record without ``"key"`` and no selector, a key with no encoding) already say what to do and
are kept as they are.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from ...api import AgentsError

__all__ = ["selector_failure"]

_FIELDS_SHOWN = 8


def selector_failure(error: BaseException, record: Any) -> str | None:
    """What to put before the message of ``error``, raised by the key selector on ``record``.

    Args:
        error: what the key selector raised.
        record: the record it raised on.

    Returns:
        E.g. ``the key selector raised on the dict record (its fields: name, n)``; ``None``
        for the framework's own refusals (already explicit).
    """
    if isinstance(error, AgentsError):
        return None
    return f"the key selector raised on the {type(record).__name__} record{_fields(record)}"


def _fields(record: Any) -> str:
    """`` (its fields: a, b)`` for a record that has named fields, else ``""``."""
    if isinstance(record, Mapping):
        names = [str(k) for k in record]
    elif isinstance(record, BaseModel):
        names = list(type(record).model_fields)
    elif dataclasses.is_dataclass(record) and not isinstance(record, type):
        names = [f.name for f in dataclasses.fields(record)]
    else:
        return ""
    if not names:
        return " (it has no fields)"
    more = f", ... ({len(names)} fields)" if len(names) > _FIELDS_SHOWN else ""
    return f" (its fields: {', '.join(names[:_FIELDS_SHOWN])}{more})"
