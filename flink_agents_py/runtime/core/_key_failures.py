"""What the error row of a record its key selector raised on says.

A key selector written for other records (``lambda r: r["customer"]`` on a record without
``customer``, ``r.customer`` on a dict) raised, and the row said only ``KeyError:
'customer'`` or ``AttributeError: 'dict' object has no attribute 'customer'``: nothing said
it was the key selector, where it is, or what the record held. The message now says so:
``the key selector raised on the dict record (its fields: name, n), at my_job.py:11 in
<lambda>: 'customer'``. The framework's own refusals (a record without ``"key"`` and no
selector, a key with no encoding) already say what to do and are kept as they are.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from ...api import AgentsError

__all__ = ["selector_failure"]

_FIELDS_SHOWN = 8
_PACKAGE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def selector_failure(error: BaseException, record: Any) -> str | None:
    """What to put before the message of ``error``, raised by the key selector on ``record``.

    Args:
        error: what the key selector raised.
        record: the record it raised on.

    Returns:
        E.g. ``the key selector raised on the dict record (its fields: name, n), at
        my_job.py:11 in <lambda>``; ``None`` for the framework's own refusals (already
        explicit).
    """
    if isinstance(error, AgentsError):
        return None
    prefix = f"the key selector raised on the {type(record).__name__} record{_fields(record)}"
    place = _user_frame(error)
    return f"{prefix}, at {place}" if place else prefix


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


def _user_frame(error: BaseException) -> str:
    """``file:line in function`` of the innermost frame outside this package, or ``""``."""
    place = ""
    tb = error.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if not os.path.abspath(code.co_filename).startswith(_PACKAGE + os.sep):
            place = f"{code.co_filename}:{tb.tb_lineno} in {code.co_name}"
        tb = tb.tb_next
    return place
