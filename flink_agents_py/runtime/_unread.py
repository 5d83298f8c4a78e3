"""Error records nobody reads: each one logged at WARNING, and a summary to raise.

A record that goes to the agent's error output (an action that raised, a key the key
selector failed on or that has no encoding, an input with no JSON form, an outside event
for no waiter...) is lost quietly when the program never reads that output: the job ends
with neither its output nor an error. A host that knows nobody reads it (the local runner's
``collect()``, the compat environments' ``execute()``, the Flink host's ``execute()`` when
``errors_datastream()`` was never taken) hands each such record to ``UnreadErrors``, which
logs one bounded WARNING line for it (its key, its position, its error), on the logger
``flink_agents_py.errors``, and keeps the first few for ``raise_if_any``.

Where the runtime makes an error record it logs it too, whoever reads the error output (a
Flink job's TaskManager log holds them all): a failed action (``_failures``), a rejected
key, a run given up, a damaged one where they are made; an input with no JSON form and an
outside event for no waiter through ``logged``.
"""

from __future__ import annotations

import logging
import os
import re
from typing import Any, TypeVar

from ..api import UnreadErrorsError
from ..api.internal import clip, key_from_json, shown_key
from ._terminal import log_text

__all__ = ["UnreadErrors", "error_line", "input_row_line", "logged"]

log = logging.getLogger("flink_agents_py.errors")
runtime_log = logging.getLogger("flink_agents_py.runtime")
_Error = TypeVar("_Error")

KEPT = 5
"""How many unread error records ``UnreadErrors`` keeps (and its error quotes)."""
MESSAGE_CHARS = 400
"""The most characters of an error's message a line quotes (its start and end)."""
KEY_CHARS = 200
"""The most characters of a key's ``repr`` a line quotes."""


def _field(error: Any, name: str) -> Any:
    return error.get(name) if isinstance(error, dict) else getattr(error, name, None)


def error_line(error: Any) -> str:
    """One line for an error record: its key, its position and its error, bounded.

    Args:
        error: an ``ErrorRecord``, or its JSON form (a row of Flink's error output).

    Returns:
        E.g. ``key UUID('0f8f...'), input 0, r0/process_input: ValueError: no price``;
        ``key None, record 3: KeyEncodingError: ...`` for a record rejected before it ran;
        a record read by ``from_kafka`` names its place too (``..., topic t partition 0
        offset 7: ...``).
    """
    key = _field(error, "key")
    if isinstance(error, dict):
        try:
            key = key_from_json(key)  # the row holds the key's JSON form
        except Exception:  # noqa: BLE001 - shown as the row has it
            pass
    seq, where = _field(error, "seq"), _field(error, "execution_id")
    action = _field(error, "action")
    place = f"input {seq}, {where}" if isinstance(seq, int) and seq >= 0 else f"{where}"
    if action and str(action) not in str(where):
        place = f"{place} ({action})"
    source = _field(error, "source")
    if source and str(source) not in str(where):  # a record of from_kafka: where it was read
        place = f"{place}, {source}"
    message = log_text(clip(str(_field(error, "message")), MESSAGE_CHARS))
    return (f"key {shown_key(key, KEY_CHARS)}, {log_text(clip(place, 200))}: "
            f"{_field(error, 'error_type')}: {message}{_raised_at(_field(error, 'traceback'))}")


def input_row_line(row: Any) -> str | None:
    """One bounded line for a reader's bad-input row; ``None`` for an agent's error record.

    Args:
        row: a row of an error stream.

    Returns:
        E.g. ``line 1: not JSON (...) (value 'not json')``, ``topic t partition 0 offset 7:
        not JSON (...)``; ``None`` when ``row`` is no such row.
    """
    if not (isinstance(row, dict) and row.get("kind") == "error" and "execution_id" not in row):
        return None
    place = (f"topic {row.get('topic')} partition {row.get('partition')} offset "
             f"{row.get('offset')}: " if "topic" in row else "")
    value = row.get("value")
    shown = f" (value {clip(repr(value), 200)})" if value is not None else ""
    return log_text(f"{place}{clip(str(row.get('error')), MESSAGE_CHARS)}{shown}")


_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+), in (.+)$', re.MULTILINE)
_OWN = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the package's folder
_LIBRARY = re.compile(r"[/\\](?:site-packages|dist-packages)[/\\]"
                      r"|[/\\]lib(?:64)?[/\\]python\d+(?:\.\d+)?[/\\]|^<frozen ")
"""A frame of an installed library or of Python's own (``json/decoder.py``, pydantic,
``<frozen ...>``), on whichever machine the traceback was made: not the user's line (a
notebook cell's ``<ipython-input-...>`` or ``<string>`` is)."""


def _raised_at(traceback: Any) -> str:
    """`` (at FILE:LINE, in FUNCTION)``: the user's last frame in ``traceback``.

    A Flink job's console line said what was raised but not where (the traceback is in the
    record, which the program did not read): the user's own line is the one to open. That
    is the last frame outside this package, Python's standard library and installed
    libraries (before, ``json.loads`` failing in an action pointed at
    ``json/decoder.py``, and an event of the user's own refused by pydantic at
    ``pydantic/main.py``); the last frame outside this package when none is the user's.

    Args:
        traceback: an error record's traceback text (``None``: none kept).

    Returns:
        The text to append (``""``: no frame outside the package).
    """
    if not isinstance(traceback, str):
        return ""
    frames = [m for m in _FRAME.finditer(traceback)  # (a cluster's shipped copy: by name)
              if not os.path.abspath(m.group(1)).startswith(_OWN + os.sep)
              and f"{os.sep}flink_agents_py{os.sep}" not in m.group(1)]
    if not frames:
        return ""
    own = [m for m in frames if not _LIBRARY.search(m.group(1))]
    path, line, fn = (own or frames)[-1].groups()
    return f" (at {log_text(clip(path, 200))}:{line}, in {log_text(clip(fn, 100))})"


def logged(error: _Error) -> _Error:
    """``error`` (an ``ErrorRecord``), logged at WARNING on ``flink_agents_py.runtime``.

    Returns:
        ``error``.
    """
    runtime_log.warning("to the error output: %s", error_line(error))
    return error


class UnreadErrors:
    """Counts the error records nobody reads, logging each; keeps the first few.

    Args:
        reader: how the program could have read them (named in every line and the error),
            e.g. ``"errors_datastream()"``.
    """

    def __init__(self, reader: str) -> None:
        self.reader = reader
        self.count = 0
        self.kept: list[Any] = []

    def add(self, error: Any) -> None:
        """Log ``error`` (an ``ErrorRecord`` or its JSON form) at WARNING and count it.

        A reader's bad-input row (``{"kind": "error", "line" or "topic", ...}``: a line of
        ``read_lines_file``, a Kafka record ``read_json_topic`` could not parse) is logged
        naming the stream to take instead, and not counted: it never reached an agent.
        """
        line = input_row_line(error)
        if line is not None:
            log.warning("unread bad input (take the error stream %s returns): %s",
                        "read_lines_file" if "topic" not in error else "read_json_topic/from_kafka",
                        line)
            return
        self.count += 1
        if len(self.kept) < KEPT:
            self.kept.append(error)
        log.warning("unread error record (read them with %s): %s", self.reader,
                    error_line(error))

    def raise_if_any(self) -> None:
        """Raise ``UnreadErrorsError`` when any record went unread.

        Raises:
            UnreadErrorsError: naming how many, the first few (one line each) and how to read
                them.
        """
        if not self.count:
            return
        lines = "\n".join(f"  {error_line(e)}" for e in self.kept)
        more = (f"\n  ... and {self.count - len(self.kept)} more (each logged at WARNING on "
                f"{log.name})" if self.count > len(self.kept) else "")
        raise UnreadErrorsError(
            f"{self.count} record(s) went to the agent's error output, which this program "
            f"does not read: Flink Agents would have failed the job at the first one; here "
            f"the other records ran and their outputs were delivered. Read the error output "
            f"({self.reader}) to handle them yourself, or fix their cause:\n{lines}{more}",
            count=self.count, errors=self.kept)
