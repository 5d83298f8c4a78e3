"""What the crash-everywhere checker found: per crash point, per agent, and as a table."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

__all__ = ["PointResult", "ReplaySafetyReport", "summary_table", "shape"]

_SHOW = 10  # problems shown per report


def shape(value: Any) -> Any:
    """A value's type tree: its value with the type of every node, for comparing results.

    A pydantic model and a dict of the same fields have different shapes, as do a tuple and
    a list, or ``1`` and ``1.0``.

    Args:
        value: any value.

    Returns:
        The type tree.
    """
    if isinstance(value, BaseModel):
        cls = type(value)
        return (f"{cls.__module__}:{cls.__qualname__}",
                tuple((k, shape(getattr(value, k))) for k in cls.model_fields))
    if isinstance(value, enum.Enum):
        return (type(value).__qualname__, value.value)
    if isinstance(value, dict):
        return ("dict", tuple(sorted(((repr(k), shape(v)) for k, v in value.items()))))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(shape(v) for v in value))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (type(value).__qualname__,
                tuple((f.name, shape(getattr(value, f.name))) for f in dataclasses.fields(value)))
    return (type(value).__name__, value)


def short(value: Any, limit: int = 160) -> str:
    """``repr(value)``, cut to ``limit`` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass
class PointResult:
    """One crash point: the recovery from the state after ``point`` host callbacks.

    Attributes:
        point: host callbacks the fault-free run had made when the state was taken (0: a
            crash before any record was processed).
        executed: durable calls executed by the recovery.
        replayed: durable calls the recovery answered from their records.
        reexecuted: of the executed calls, those the fault-free run had started before the
            point but not recorded (allowed without a journal: at most once more).
        outputs_compared: outputs compared with the fault-free run's.
        unexpected: unexpected re-executions (a call executed again after its outcome was
            recorded or journaled, or more than once after the restore).
        divergences: actions that failed with ``ReplayDivergenceError``.
        problems: other findings (outputs or error records that differ, calls skipped or
            new, a recovery that failed).
    """

    point: int
    executed: int = 0
    replayed: int = 0
    reexecuted: int = 0
    outputs_compared: int = 0
    unexpected: list[str] = field(default_factory=list)
    divergences: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether every check passed at this point."""
        return not (self.unexpected or self.divergences or self.problems)


@dataclass
class ReplaySafetyReport:
    """What ``check_replay_safety`` found for one agent.

    Attributes:
        agent: the agent's name.
        inputs: input records.
        keys: keys with outputs or error records.
        journal: whether recoveries had a journal.
        points_total: crash points of the fault-free run (host callbacks + 1).
        calls: durable calls the fault-free run executed.
        outputs: outputs of the fault-free run.
        errors: error records of the fault-free run.
        points: the crash points tried, with what each recovery did.
        seconds: how long the check took (fault-free run and every recovery), in seconds.
    """

    agent: str
    inputs: int
    keys: int
    journal: bool
    points_total: int
    calls: int
    outputs: int
    errors: int
    points: list[PointResult] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """Whether every point passed."""
        return all(p.ok for p in self.points)

    @property
    def reexecutions(self) -> int:
        """Calls executed again (in flight at their point) over all points."""
        return sum(p.reexecuted for p in self.points)

    @property
    def unexpected(self) -> int:
        """Unexpected re-executions over all points."""
        return sum(len(p.unexpected) for p in self.points)

    @property
    def divergences(self) -> int:
        """``ReplayDivergenceError`` failures over all points."""
        return sum(len(p.divergences) for p in self.points)

    @property
    def mismatches(self) -> int:
        """Points with other problems (outputs, error records, skipped or new calls)."""
        return sum(1 for p in self.points if p.problems)

    @property
    def outputs_compared(self) -> int:
        """Outputs compared over all points."""
        return sum(p.outputs_compared for p in self.points)

    def row(self) -> dict[str, Any]:
        """The report as one row of ``summary_table``."""
        return {
            "agent": self.agent, "journal": "yes" if self.journal else "no",
            "inputs": self.inputs, "points": f"{len(self.points)}/{self.points_total}",
            "calls": self.calls, "re-executed": self.reexecutions,
            "unexpected": self.unexpected, "divergences": self.divergences,
            "mismatches": self.mismatches, "outputs compared": self.outputs_compared,
            "result": "ok" if self.ok else "FAILED",
        }

    def findings(self) -> list[str]:
        """Every finding, each prefixed with its crash point."""
        out: list[str] = []
        for p in self.points:
            for kind, items in (("unexpected re-execution", p.unexpected),
                                ("divergence", p.divergences), ("", p.problems)):
                out.extend(f"point {p.point}: {kind + ': ' if kind else ''}{m}" for m in items)
        return out

    def table(self) -> str:
        """The report as text: what was tried, and the first findings."""
        lines = [
            f"replay safety of {self.agent}: {self.inputs} input records, {self.keys} keys, "
            f"journal: {'yes' if self.journal else 'no'}, {self.seconds:.2f} s",
            f"  crash points tried          {len(self.points)} of {self.points_total}",
            f"  durable calls (fault-free)  {self.calls} executed",
            f"  executed after restores     {sum(p.executed for p in self.points)} "
            f"(re-executions of calls in flight at the point: {self.reexecutions})",
            f"  replayed after restores     {sum(p.replayed for p in self.points)}",
            f"  unexpected re-executions    {self.unexpected}",
            f"  divergences                 {self.divergences}",
            f"  outputs compared            {self.outputs_compared} "
            f"(fault-free: {self.outputs} outputs, {self.errors} error records)",
            f"  points with mismatches      {self.mismatches}",
            f"  result                      {'ok' if self.ok else 'FAILED'}",
        ]
        found = self.findings()
        if found:
            lines.append(f"  findings ({len(found)}):")
            lines.extend(f"    {f}" for f in found[:_SHOW])
            if len(found) > _SHOW:
                lines.append(f"    ... and {len(found) - _SHOW} more (report.findings())")
        return "\n".join(lines)

    def assert_ok(self) -> None:
        """Raise ``AssertionError`` with the table when any check failed.

        Raises:
            AssertionError: naming every failed check (the first ones in full).
        """
        if not self.ok:
            raise AssertionError("the agent is not replay-safe:\n" + self.table())

    def __str__(self) -> str:
        return self.table()


def summary_table(reports: Iterable[ReplaySafetyReport]) -> str:
    """Several reports as one text table, a row per agent.

    Args:
        reports: the reports (``check_replay_safety``'s results).

    Returns:
        The table (rows as ``ReplaySafetyReport.row``), or ``"(no reports)"``.
    """
    rows = [r.row() for r in reports]
    if not rows:
        return "(no reports)"
    cols = list(rows[0])
    widths = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in cols}
    head = " | ".join(c.ljust(widths[c]) for c in cols)
    rule = "-+-".join("-" * widths[c] for c in cols)
    body = [" | ".join(str(r[c]).ljust(widths[c]) for c in cols) for r in rows]
    totals = {c: sum(r[c] for r in rows) if isinstance(rows[0][c], int) else "" for c in cols}
    totals["agent"] = f"total ({len(rows)})"
    totals["points"] = sum(int(str(r["points"]).split("/")[0]) for r in rows)
    totals["result"] = "ok" if all(r["result"] == "ok" for r in rows) else "FAILED"
    foot = " | ".join(str(totals[c]).ljust(widths[c]) for c in cols)
    return "\n".join([head, rule, *body, rule, foot])
