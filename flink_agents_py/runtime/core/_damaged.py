"""A key's stored run that cannot be read: reported for that key alone, and dropped.

Stored state that is damaged (truncated, corrupted, a field of another type) must not fail
the job, nor every key's callbacks after a restart: the key's run is given up with one error
record naming the key and what is wrong, and the key's later inputs run. State written by a
later format version is not damaged but newer than this code: that still fails the restore
(dropping runs key by key would lose them all).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, MutableMapping
from typing import Any

from ...api.internal import shown_key
from .._failures import redact_text
from ..recorder._state import KeyState, RunState, StateFormatError
from ._results import ErrorRecord

__all__ = ["read_run", "stored_run", "unreadable_record"]

log = logging.getLogger("flink_agents_py.runtime")


def unreadable_record(shown: Any, error: StateFormatError,
                      counters: MutableMapping[str, int]) -> ErrorRecord:
    """The error record of a key's stored run that cannot be read and is dropped.

    Logged at ERROR and counted (``runs_unreadable``).

    Args:
        shown: the key's value.
        error: why its run cannot be read (``RunState.from_stored``).
        counters: the core's counters.

    Returns:
        The record (action ``"<restore>"``, the run's position when it could be read).
    """
    seq = error.seq if error.seq is not None else -1
    message = (f"the stored run of key {shown_key(shown)}"
               + (f" (input {seq})" if seq >= 0 else "")
               + f" cannot be read and is dropped (its key's later inputs run): {error}")
    counters["runs_unreadable"] += 1
    log.error("%s", message)
    return ErrorRecord(key=shown, seq=seq, action="<restore>",
                       execution_id=f"r{seq}" if seq >= 0 else "<run state>",
                       error_type=type(error).__name__, message=redact_text(message))


def read_run(state: KeyState, report: Callable[[StateFormatError], ErrorRecord],
             error: StateFormatError | None = None) -> ErrorRecord | None:
    """Read a key's run from ``state`` (a host reads keyed state at the first access).

    Args:
        state: the key's state.
        report: makes the error record of a damaged run.
        error: what reading the run raised already, if the caller read it (the core does).

    Returns:
        The error record of a damaged run (then dropped from ``state``), or ``None``.

    Raises:
        StateFormatError: when the run is of a later format version.
    """
    if error is None:
        try:
            state.run  # noqa: B018 - read here, so that a damaged run fails nothing else
        except StateFormatError as e:
            error = e
        else:
            return None
    if error.written_later:
        raise error
    state.run = None
    return report(error)


def stored_run(text: Any, report: Callable[[StateFormatError], Any]) -> RunState | None:
    """A run from its stored text (``None``: no run); a damaged one reported and ``None``.

    Args:
        text: the stored text, or ``None``.
        report: called with the error of a damaged run.

    Returns:
        The run, or ``None``.

    Raises:
        StateFormatError: when the run is of a later format version.
    """
    if text is None:
        return None
    try:
        return RunState.from_stored(text)
    except StateFormatError as e:
        if e.written_later:
            raise
        report(e)
        return None
