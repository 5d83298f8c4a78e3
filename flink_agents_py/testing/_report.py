"""What the crash-everywhere checker found: per crash point, per agent, and as a table."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

__all__ = ["Finding", "PointResult", "ReplaySafetyReport", "group_findings", "summary_table",
           "shape"]

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
        replayed: durable calls the recovery answered from their records (an action
            re-entered after the restore asked for them again).
        served: durable calls whose outcome the restore served instead of running them:
            recorded before the point (in the restored state) or journaled by the crashed
            attempt, and not executed again (by replay to a re-entered action, or not
            asked for again because the action that made them had moved on).
        reexecuted: of the executed calls, those the fault-free run had started before the
            point but not recorded (allowed without a journal: at most once more).
        outputs_compared: outputs compared with the fault-free run's.
        unexpected: unexpected re-executions (a call executed again after its outcome was
            recorded or journaled, or more than once after the restore).
        divergences: actions that failed with ``ReplayDivergenceError``.
        problems: other findings (outputs or error records that differ, calls skipped or
            new, a recovery that failed, a recorded outcome handed to a call whose
            arguments changed).
        effects: side effects of action code outside durable calls that the recovery did
            again (more often than the fault-free run did in total).
        seed: the ``PYTHONHASHSEED`` of the process the recovery ran in (``None``: the
            checker's own process).
        details: a traceback or source line per finding that has one (finding -> text).
    """

    point: int
    executed: int = 0
    replayed: int = 0
    served: int = 0
    reexecuted: int = 0
    outputs_compared: int = 0
    unexpected: list[str] = field(default_factory=list)
    divergences: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    effects: list[str] = field(default_factory=list)
    seed: int | None = None
    details: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """Whether every check passed at this point."""
        return not (self.unexpected or self.divergences or self.problems or self.effects)

    @property
    def label(self) -> str:
        """``point 3``, or ``point 3 (PYTHONHASHSEED=7)`` for a restore in another process."""
        return f"point {self.point}" + (f" (PYTHONHASHSEED={self.seed})"
                                        if self.seed is not None else "")

    def items(self) -> list[tuple[str, str]]:
        """Every finding of this point as ``(kind, message)``."""
        return [*(("unexpected re-execution", m) for m in self.unexpected),
                *(("divergence", m) for m in self.divergences),
                *(("", m) for m in self.problems),
                *(("side effect repeated", m) for m in self.effects)]


@dataclass
class Finding:
    """One distinct finding, with every crash point where it was seen.

    Attributes:
        kind: ``unexpected re-execution``, ``divergence``, ``outside durable calls`` (the
            agent's code itself), ``side effect repeated`` or '' (outputs, error records,
            calls, recoveries).
        message: what was found (the first point's wording).
        points: ``(point, seed)`` where it was seen (``seed``: the ``PYTHONHASHSEED`` of
            another process, ``None`` for the checker's own); empty for a finding of the
            agent's code itself.
        detail: a traceback or the user's source line, once ('' when none).
    """

    kind: str
    message: str
    points: list[tuple[int, int | None]] = field(default_factory=list)
    detail: str = ""

    @property
    def where(self) -> str:
        """The points, compactly: ``points 1-4, 7; in another process (PYTHONHASHSEED=5): 2``."""
        parts: list[str] = []
        for seed in dict.fromkeys(s for _, s in self.points):
            spans = _spans(sorted({p for p, s in self.points if s == seed}))
            parts.append(spans if seed is None
                         else f"in another process (PYTHONHASHSEED={seed}): {spans}")
        if not parts:
            return ""
        return f"{'points' if len(self.points) > 1 else 'point'} " + "; ".join(parts)

    @property
    def text(self) -> str:
        """The finding as report lines (the detail indented under it)."""
        where = f" [{self.where}]" if self.points else ""
        head = f"{self.kind + ': ' if self.kind else ''}{self.message}{where}"
        if not self.detail:
            return head
        return head + "\n" + "\n".join("      " + line for line in self.detail.splitlines())


def _spans(points: list[int]) -> str:
    """``1-4, 7`` for ``[1, 2, 3, 4, 7]`` (sorted, distinct)."""
    spans: list[list[int]] = []
    for p in points:
        if spans and spans[-1][1] == p - 1:
            spans[-1][1] = p
        else:
            spans.append([p, p])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def _group_key(kind: str, message: str) -> tuple[str, str]:
    # outputs that differ differ in their values from point to point: one finding per
    # key and position; everything else is the same text at every point
    for cut in (": got ", " executed again", "neither executed nor replayed", " diverged at ",
                "calls with other arguments", " done again after the restore"):
        if cut in message:
            return kind, message.split(cut, 1)[0] + cut
    return kind, message


def group_findings(points: Iterable[PointResult], sightings: Iterable[tuple[str, str]] = ()
                   ) -> list[Finding]:
    """Distinct findings: the same finding at several points once, with its points.

    Args:
        points: the points tried.
        sightings: findings of the agent's code itself (``(message, source line)``).

    Returns:
        The findings, in the order first seen.
    """
    found: dict[tuple[str, str], Finding] = {}
    for message, detail in sightings:
        found.setdefault(("outside durable calls", message),
                         Finding("outside durable calls", message, [], detail))
    for p in points:
        for kind, message in p.items():
            f = found.get(_group_key(kind, message))
            if f is None:
                f = found[_group_key(kind, message)] = Finding(
                    kind, message, [], p.details.get(message, ""))
            f.points.append((p.point, p.seed))
    return list(found.values())


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
        points: the crash points tried, with what each recovery in this process did.
        elsewhere: the same points restored again in another process (each with its
            ``seed``); empty when that was skipped (``other_process`` says why).
        seconds: how long the check took (fault-free run and every recovery), in seconds.
        sightings: side effects and clock or random reads of action code outside durable
            calls (``file:line: what ...``), each once.
        other_process: how restores in another process went: the seeds and points, or why
            they did not run ('' when not asked for).
        sighting_lines: the source line of each sighting, by sighting.
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
    elsewhere: list[PointResult] = field(default_factory=list)
    seconds: float = 0.0
    sightings: list[str] = field(default_factory=list)
    other_process: str = ""
    sighting_lines: dict[str, str] = field(default_factory=dict)

    TITLE = "replay safety of"
    FAILED = "the agent is not replay-safe"
    COMPARES_OUTPUTS = True

    @property
    def ok(self) -> bool:
        """Whether every point passed and action code made no side effect outside calls."""
        return all(p.ok for p in self.every_point) and not self.sightings

    @property
    def every_point(self) -> list[PointResult]:
        """The recoveries in this process, then those in other processes."""
        return [*self.points, *self.elsewhere]

    @property
    def reexecutions(self) -> int:
        """Calls executed again (in flight at their point) over all points."""
        return sum(p.reexecuted for p in self.every_point)

    @property
    def unexpected(self) -> int:
        """Unexpected re-executions over all points."""
        return sum(len(p.unexpected) for p in self.every_point)

    @property
    def divergences(self) -> int:
        """``ReplayDivergenceError`` failures over all points."""
        return sum(len(p.divergences) for p in self.every_point)

    @property
    def mismatches(self) -> int:
        """Points with other problems (outputs, error records, skipped or new calls)."""
        return sum(1 for p in self.every_point if p.problems)

    @property
    def outputs_compared(self) -> int:
        """Outputs compared over all points."""
        return sum(p.outputs_compared for p in self.every_point)

    @property
    def served(self) -> int:
        """Recorded outcomes the restores served instead of running the calls again."""
        return sum(p.served for p in self.every_point)

    @property
    def row(self) -> dict[str, Any]:
        """The report as one row of ``summary_table``."""
        return {
            "agent": self.agent, "journal": "yes" if self.journal else "no",
            "inputs": self.inputs, "points": f"{len(self.points)}/{self.points_total}",
            "other process": len(self.elsewhere),
            "calls": self.calls, "re-executed": self.reexecutions, "served": self.served,
            "unexpected": self.unexpected, "divergences": self.divergences,
            "mismatches": self.mismatches, "outside calls": len(self.sightings),
            "outputs compared": self.outputs_compared,
            "result": "ok" if self.ok else "FAILED",
        }

    @property
    def findings(self) -> list[str]:
        """Every finding, each prefixed with its crash point (or ``action code``)."""
        out = [f"action code: outside durable calls: {m}" for m in self.sightings]
        for p in self.every_point:
            out.extend(f"{p.label}: {kind + ': ' if kind else ''}{m}" for kind, m in p.items())
        return out

    @property
    def distinct(self) -> list[Finding]:
        """The findings, each distinct one once with the points where it was seen."""
        return group_findings(self.every_point, ((m, self.sighting_lines.get(m, ""))
                                            for m in self.sightings))

    @property
    def table(self) -> str:
        """The report as text: what was tried, and each distinct finding once."""
        executed = sum(p.executed for p in self.every_point)
        replayed = sum(p.replayed for p in self.every_point)
        lines = [
            f"{self.TITLE} {self.agent}: {self.inputs} input records, {self.keys} keys, "
            f"journal: {'yes' if self.journal else 'no'}, {self.seconds:.2f} s",
            f"  crash points tried          {len(self.points)} of {self.points_total}",
            *([f"  in another process          {self.other_process}"]
              if self.other_process else []),
            f"  durable calls (fault-free)  {self.calls} executed",
            f"  executed after restores     {executed} "
            f"(re-executions of calls in flight at the point: {self.reexecutions})",
            f"  served after restores       {self.served} "
            f"(recorded outcomes not run again; {replayed} replayed to re-entered actions)",
            f"  unexpected re-executions    {self.unexpected}",
            f"  divergences                 {self.divergences}",
            *([f"  outputs compared            {self.outputs_compared} "
               f"(fault-free: {self.outputs} outputs, {self.errors} error records)"]
              if self.COMPARES_OUTPUTS else []),
            f"  points with mismatches      {self.mismatches}",
            f"  outside durable calls       {len(self.sightings)} "
            "(side effects, clock or random reads)",
            f"  result                      {'ok' if self.ok else 'FAILED'}",
        ]
        found = self.distinct
        if found:
            lines.append(f"  findings ({len(found)} distinct, {len(self.findings)} in all):")
            for f in found[:_SHOW]:
                lines.extend("    " + line for line in f.text.splitlines())
            if len(found) > _SHOW:
                lines.append(f"    ... and {len(found) - _SHOW} more (report.distinct)")
        return "\n".join(lines)

    def assert_ok(self) -> None:
        """Raise ``AssertionError`` with the table when any check failed.

        Raises:
            AssertionError: naming every distinct finding once, with its crash points.
        """
        if not self.ok:
            raise AssertionError(f"{self.FAILED}:\n" + self.table)

    def __str__(self) -> str:
        return self.table


def summary_table(reports: Iterable[ReplaySafetyReport]) -> str:
    """Several reports as one text table, a row per agent.

    Args:
        reports: the reports (``check_replay_safety``'s results).

    Returns:
        The table (rows as ``ReplaySafetyReport.row``), or ``"(no reports)"``.
    """
    rows = [r.row for r in reports]
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
