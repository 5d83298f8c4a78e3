"""The ``seq`` of a damaged stored run, when it can still be read (``RunState.from_stored``)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["_salvaged_seq"]

_SEQ_AT_START = re.compile(rb'\A\s*\{\s*"seq"\s*:\s*(\d{1,18})[\s,}]')


def _salvaged_seq(stored: Any) -> int | None:
    """The ``seq`` of damaged stored run state, when it can still be read (else ``None``)."""
    if isinstance(stored, Mapping):
        seq = stored.get("seq")
        return seq if isinstance(seq, int) and not isinstance(seq, bool) and seq >= 0 else None
    if isinstance(stored, str):
        stored = stored.encode("utf-8", "surrogatepass")
    found = _SEQ_AT_START.match(bytes(stored)) if isinstance(stored, (bytes, bytearray)) else None
    return int(found.group(1)) if found else None
