"""Waiting for a condition in the cluster, Kafka and MiniCluster tests, on a busy machine.

A fixed sleep is either too short on a loaded 2-core box (a random failure that costs a CI
round) or too long everywhere else. ``wait_until`` polls a check until it holds, treats a
slow or refused answer (a REST call timing out while the JobManager is busy, a broker's
metadata request timing out) as "not yet", stops early when ``abort`` says the awaited thing
can no longer happen (a job that failed, a process that exited), and fails with what it
waited for, for how long, and the last transient error.

Limits: ``SLOW_S`` (cluster and broker start-up, a job reaching a state, a savepoint) and
``QUICK_S`` (a metadata change, a REST answer) are sized for 2 shared cores at a load of 3
and more; ``FLINK_AGENTS_PY_TEST_SLACK`` (a factor, default 1) stretches every limit.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

SLACK = float(os.environ.get("FLINK_AGENTS_PY_TEST_SLACK", "1") or "1")
"""Every limit of this module is multiplied by it (``FLINK_AGENTS_PY_TEST_SLACK``)."""

SLOW_S = 300.0 * SLACK
"""Start-up of a cluster or a broker, a job reaching a state, a job's work being seen."""

QUICK_S = 60.0 * SLACK
"""One request's answer, a topic's leaders, a consumer's position."""

REQUEST_S = 30.0 * SLACK
"""The timeout of one HTTP request to a busy JobManager, TaskManager or reporter."""

TRANSIENT: tuple[type[BaseException], ...] = (OSError, TimeoutError)
"""Errors that mean "not yet" (``urllib``'s ``URLError`` and socket timeouts are OSErrors)."""


class WaitTimeout(AssertionError):
    """The condition did not hold within the limit (the message says what and why)."""


def wait_until(what: str, check: Callable[[], T], timeout_s: float = SLOW_S, *,
               interval_s: float = 0.3, transient: tuple[type[BaseException], ...] = TRANSIENT,
               abort: Callable[[], str | None] | None = None,
               details: Callable[[], str] | None = None) -> T:
    """Call ``check`` until it returns something truthy; return that.

    Args:
        what: what is awaited, for the failure message ("the job RUNNING").
        check: the condition; raising one of ``transient`` counts as not yet.
        timeout_s: the limit, in seconds.
        interval_s: the pause between two checks, in seconds.
        transient: exceptions that mean "not yet".
        abort: called after each failed check; a text stops the wait at once (the awaited
            thing cannot happen any more: a failed job, an exited process), as the reason.
        details: called on failure, its text appended (logs, a job's exceptions).

    Returns:
        The first truthy result of ``check``.

    Raises:
        WaitTimeout: when time runs out or ``abort`` gave a reason.
    """
    t0 = time.monotonic()
    deadline = t0 + timeout_s
    last_error: BaseException | None = None
    reason = ""
    while True:
        try:
            found = check()
        except transient as e:
            last_error, found = e, None
        if found:
            return found
        if abort is not None:
            try:
                reason = abort() or ""
            except transient as e:
                last_error = e
            if reason:
                break
        if time.monotonic() >= deadline:
            reason = f"not within {timeout_s:.0f} s"
            break
        time.sleep(interval_s)
    message = f"{what}: {reason} (waited {time.monotonic() - t0:.1f} s)"
    if last_error is not None:
        message += f"; last transient error: {type(last_error).__name__}: {last_error}"
    if details is not None:
        message += "\n" + details()
    raise WaitTimeout(message)


def retry(what: str, call: Callable[[], T], timeout_s: float = QUICK_S, *,
          transient: tuple[type[BaseException], ...] = TRANSIENT) -> T:
    """``call()``, called again while it raises a transient error (a busy server).

    Returns:
        What ``call`` returned (anything, ``None`` included).

    Raises:
        WaitTimeout: when it still fails after ``timeout_s`` seconds.
    """
    box: list[Any] = []

    def once() -> bool:
        box.append(call())
        return True

    wait_until(what, once, timeout_s, interval_s=0.5, transient=transient)
    result: T = box[-1]
    return result
