"""What the crash-injecting test modules share: call logs, the crash marker, the failpoint base.

Imported by ``durability_agents``, ``subgraph_agents`` and ``kafka_agents``, and with them by
Flink workers (thread mode imports by reference): ``tests/`` is on ``sys.path`` (pytest's
``pythonpath`` option), so workers import it as ``support.crash``.

A test's directory ``d`` holds its logs (one line a request or record, appended, attempts cut
short by the crash included), its checkpoints under ``checkpoints/`` and, once the job was
crashed, the marker file ``crashed``: before it exists, the job is on its first attempt.
"""

from __future__ import annotations

import glob
import os
import time
from typing import Any, NoReturn


class InjectedCrash(BaseException):
    """Not an Exception: the runtime lets it through, so the task fails and Flink restarts."""


def append_line(d: str, log: str, line: str) -> None:
    """Append ``line`` to ``<d>/<log>``."""
    with open(os.path.join(d, log), "a") as f:
        f.write(f"{line}\n")


def log_lines(d: str, log: str) -> list[list[str]]:
    """The lines of ``<d>/<log>``, each split on white space (none when there is no log)."""
    path = os.path.join(d, log)
    if not os.path.exists(path):
        return []
    return [line.split() for line in open(path).read().splitlines()]


def count_call(d: str, who: str, key: str) -> None:
    """Log one request ``who`` received for ``key`` in ``<d>/calls.log``."""
    append_line(d, "calls.log", f"{who} {key}")


def read_counts(d: str) -> dict[tuple[str, str], int]:
    """``{(who, key): requests received}`` from ``<dir>/calls.log``."""
    counts: dict[tuple[str, str], int] = {}
    for who, key in log_lines(d, "calls.log"):
        counts[(who, key)] = counts.get((who, key), 0) + 1
    return counts


def first_attempt(d: str) -> bool:
    """Whether the job was not crashed yet (no ``crashed`` marker)."""
    return not os.path.exists(os.path.join(d, "crashed"))


def completed_checkpoint(d: str) -> int:
    """The highest completed checkpoint id under ``<d>/checkpoints`` (0 when none)."""
    done = glob.glob(os.path.join(d, "checkpoints", "*", "chk-*", "_metadata"))
    return max((int(p.split("chk-")[1].split(os.sep)[0]) for p in done), default=0)


def hold(d: str) -> str:
    """A durable call's function: on the first attempt, wait for the crash (at most 60 s),
    so the call is in flight when it comes; after the restore, return at once."""
    deadline = time.monotonic() + 60
    while first_attempt(d) and time.monotonic() < deadline:
        time.sleep(0.02)
    return "held"


def crash_environment(d: Any, interval_ms: int = 300, restart_attempts: int = 2,
                      **options: Any) -> Any:
    """A Flink environment checkpointing into ``<d>/checkpoints`` every ``interval_ms``,
    restarted up to ``restart_attempts`` times 0.5 s apart (``options``: more arguments of
    ``create_stream_environment``, e.g. ``execution_mode``)."""
    from flink_agents_py.flink import create_stream_environment

    os.makedirs(os.path.join(d, "checkpoints"))
    return create_stream_environment(
        checkpoint_interval_ms=interval_ms, restart_attempts=restart_attempts,
        restart_delay_s=0.5, **options,
        extra_config={"execution.checkpointing.dir": f"file://{d}/checkpoints",
                      "execution.checkpointing.storage": "filesystem"})


def pace(n: int) -> int:
    """Slow the source down so input stays open while the scenario plays out."""
    time.sleep(0.05)
    return n


class CrashOnceBase:
    """Base of the failpoints that crash the job once, after checkpoints cover what they saw.

    A subclass is called as ``failpoint(point, key, info)``; it notes what was recorded with
    the last completed checkpoint at the time (``note``) and crashes (``crash``) when enough
    is covered.

    Args:
        d: the test's directory (marker file ``crashed``; checkpoints under ``checkpoints/``).
    """

    def __init__(self, d: str) -> None:
        self.d = d
        self.seen: dict[str, int] = {}  # what was recorded -> last completed checkpoint then

    def first_attempt(self) -> bool:
        return first_attempt(self.d)

    def completed_checkpoint(self) -> int:
        return completed_checkpoint(self.d)

    def note(self, what: str) -> None:
        """Remember that ``what`` was recorded (first time only), with the checkpoint then."""
        self.seen.setdefault(what, self.completed_checkpoint())

    def checkpointed_since(self, seen_at: int) -> bool:
        """Whether a completed checkpoint holds what was recorded when ``seen_at`` was last.

        When the record was made, checkpoint ``seen_at + 1`` may already have been triggered;
        ``seen_at + 2`` is triggered only after it completes (one checkpoint at a time), so it
        holds the record.
        """
        return self.completed_checkpoint() >= seen_at + 2

    def crash(self, marker: str, message: str) -> NoReturn:
        """Write ``marker`` into the ``crashed`` file, then raise ``InjectedCrash(message)``."""
        with open(os.path.join(self.d, "crashed"), "w") as f:
            f.write(marker)
        raise InjectedCrash(message)
