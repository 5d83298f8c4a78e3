"""The agent and failpoint of ``test_bad_records_kafka`` (imported by the Flink workers).

``Echo`` answers each record with ``{"key", "n"}``; a record with ``"boom"`` makes its action
raise, one with ``"deep_out": N`` makes it output a value nested ``N`` levels deep (the agent
keeps it; a JSON writer may not). ``key_of`` keys a record by its ``"id"`` field (raising on a
record that has none). ``CrashOnceAtTheCrashRecord`` fails the job once, on the first attempt,
at the record of key ``"crash"``, holding each record a moment before it so that a checkpoint
usually completes first (then the restart restores it; else the job starts again from the
topic's beginning). Either way the job restarts once: whether a checkpoint had completed
depends on how busy the machine is (a bounded source may hand every record over before the
first barrier), so the crash does not wait for one.
"""

from __future__ import annotations

import time
from typing import Any

from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from support.crash import CrashOnceBase


def deep(levels: int) -> dict[str, Any]:
    """A dict nested ``levels`` levels deep."""
    value: dict[str, Any] = {"leaf": 1}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


def key_of(record: Any) -> Any:
    """A record's ``"id"`` field (``TypeError``/``KeyError`` for records that have none)."""
    return record["id"]


class Echo(Agent):
    """Answers each record with its key and ``n``; ``boom`` raises, ``deep_out`` nests."""

    @action(InputEvent)
    @staticmethod
    def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        """Answer the record."""
        record = event.input
        if record.get("boom"):
            raise RuntimeError(f"the action failed on purpose for {ctx.key!r}")
        if record.get("deep_out"):
            ctx.send_event(OutputEvent(output={"key": ctx.key, "d": deep(record["deep_out"])}))
            return
        ctx.send_event(OutputEvent(output={"key": ctx.key, "n": record.get("n")}))


class CrashOnceAtTheCrashRecord(CrashOnceBase):
    """Crash the job once, at the ``"crash"`` record (the marker file names the checkpoint)."""

    def __call__(self, point: str, key: Any, info: dict[str, Any]) -> None:
        if point != "element" or not self.first_attempt():
            return
        if key == "crash":
            self.crash(str(self.completed_checkpoint()), "injected crash at a 'crash' record")
        time.sleep(0.1)  # (first attempt only) checkpoints complete while records are read
