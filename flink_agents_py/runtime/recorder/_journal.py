"""Write-ahead journals of durable call outcomes.

Keyed state keeps what a checkpoint captured; a call that completed after the last completed
checkpoint is lost with a failure and would run again after the restore. A journal closes
that window: each outcome is appended before the action continues, and recovery consults it
for calls the restored state does not hold. Entries are keyed by ``(key, call_id)``; call ids
are replay-stable (see ``AgentCore``), so the same call finds its entry after a restore.

Pruning: PyFlink gives Python functions no checkpoint-completed notification, so an entry is
pruned once its run completed more than ``retention_s`` ago; choose a retention longer than
the checkpoint interval plus the longest checkpoint and restart time (default 600 s).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from typing import Any

from .._keys import key_text
from ._journaled import JournaledCall
from ._ledger import Journal
from ._state import CallRecord

__all__ = ["SqliteJournal"]


def _write_ahead(db: sqlite3.Connection, timeout_s: float = 30.0) -> None:
    """Put the database in WAL mode (kept in the file: a later connection finds it so).

    Switching needs the database to itself, and SQLite answers ``database is locked`` at
    once, without waiting, while another process (a restore, a second TaskManager) has it
    open: the mode is read first (no lock), and the switch is retried until ``timeout_s``.

    Raises:
        sqlite3.OperationalError: when it is still locked after ``timeout_s`` seconds.
    """
    deadline = time.monotonic() + timeout_s
    delay = 0.005
    while True:
        try:
            mode = db.execute("PRAGMA journal_mode").fetchone()[0]
            if str(mode).lower() != "wal":
                db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() + delay > deadline:
                raise
        time.sleep(delay)  # another connection holds the lock: wait for it to let go
        delay = min(delay * 2, 0.25)


class SqliteJournal(Journal):
    """A journal in a local SQLite file, for single-machine jobs and tests.

    Safe for several operator instances (threads or processes) on one machine: WAL mode and a
    busy timeout serialize writers.

    Args:
        path: the database file (created if missing).
        retention_s: how long entries of completed runs are kept, in seconds.
    """

    def __init__(self, path: str, retention_s: float = 600.0) -> None:
        self.path = path
        self.retention_s = retention_s
        self._local = threading.local()

    def _db(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            _write_ahead(db)
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute(
                "CREATE TABLE IF NOT EXISTS outcomes (key TEXT NOT NULL, call_id TEXT NOT NULL, "
                "run TEXT NOT NULL, record TEXT NOT NULL, completed_at REAL, "
                "PRIMARY KEY (key, call_id))"
            )
            self._local.db = db
        return db

    def append(self, key: Any, call_id: str, record: CallRecord) -> None:
        """Store the outcome (committed before this returns)."""
        run = call_id.split("/", 1)[0]
        self._db().execute(
            "INSERT OR REPLACE INTO outcomes (key, call_id, run, record) VALUES (?, ?, ?, ?)",
            (key_text(key), call_id, run, record.to_json()),
        )

    def lookup(self, key: Any, call_id: str) -> CallRecord | None:
        """The stored outcome of ``(key, call_id)``, or ``None``."""
        row = self._db().execute(
            "SELECT record FROM outcomes WHERE key = ? AND call_id = ?", (key_text(key), call_id)
        ).fetchone()
        return JournaledCall.read(row[0]) if row else None

    def run_completed(self, key: Any, run: str, now_s: float | None = None) -> None:
        """Mark run ``run`` (``r<seq>``) of ``key`` completed, and prune expired entries."""
        now_s = time.time() if now_s is None else now_s
        db = self._db()
        db.execute("UPDATE outcomes SET completed_at = ? WHERE key = ? AND run = ?",
                   (now_s, key_text(key), run))
        db.execute("DELETE FROM outcomes WHERE completed_at IS NOT NULL AND completed_at < ?",
                   (now_s - self.retention_s,))

    def count(self) -> int:
        """How many entries are stored (for tests and benchmarks)."""
        return int(self._db().execute("SELECT COUNT(*) FROM outcomes").fetchone()[0])

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path, "retention_s": self.retention_s}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["path"], state["retention_s"])  # type: ignore[misc]
