"""The upgrade checker: snapshots of the old agent restored into the new one.

``check_upgrade_safety`` answers, before a deploy, what the new code would do to runs in
flight: it runs the old agent fault-free on the local runner, takes the operator state at
every point a checkpoint (or the savepoint of a stop-with-savepoint) could be taken, and
restores each into a new runtime running the **new** agent. Each recovery runs to completion
and every divergence, every recorded outcome handed to a call whose arguments changed, every
recorded outcome the new code no longer asks for, every failed action and every recorded
call executed again is a finding. Outputs are not compared: an upgrade may change them.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..api import Agent
from ..local import default_key_selector
from ..local.internal import check_records
from ..plan import AgentPlan
from ..runtime import Journal
from ._process import draw_seeds
from ._replay import _sample, add_sightings, repeated_effects, restore_again
from ._report import PointResult, ReplaySafetyReport
from ._runs import Observed, Setup, TeeJournal, changed_arguments, fault_free, run_recovery

__all__ = ["check_upgrade_safety", "UpgradeSafetyReport"]


@dataclass
class UpgradeSafetyReport(ReplaySafetyReport):
    """What ``check_upgrade_safety`` found: per point, the old agent's state in the new agent.

    The attributes are those of ``ReplaySafetyReport`` (``agent`` reads ``Old -> New``;
    ``calls``, ``outputs`` and ``errors`` are the old agent's fault-free run's; outputs are
    not compared). Findings per point: ``divergences`` (the new code made another call at a
    recorded identity), ``problems`` (a recorded outcome handed to a call with other
    arguments, a recorded outcome the new code no longer asks for, an action that failed, a
    recovery that could not finish) and ``unexpected`` (a recorded call executed again).
    """

    TITLE = "upgrade safety of"
    FAILED = "the upgrade is not safe for runs in flight"
    COMPARES_OUTPUTS = False


def _name(agent: Agent | AgentPlan, qualified: bool = False) -> str:
    cls = type(agent)
    if isinstance(agent, AgentPlan):
        return "AgentPlan"
    return f"{cls.__module__}.{cls.__qualname__}" if qualified else cls.__name__


def _pair(old: Agent | AgentPlan, new: Agent | AgentPlan) -> str:
    """``Old -> New``; the classes' modules too when their names are the same."""
    same = _name(old) == _name(new) and type(old) is not type(new)
    return f"{_name(old, same)} -> {_name(new, same)}"


def check_upgrade_safety(
    old_agent: Agent | AgentPlan,
    new_agent: Agent | AgentPlan,
    inputs: Iterable[Any],
    *,
    key_selector: Callable[[Any], Any] | None = None,
    journal_factory: Callable[[], Journal] | None = None,
    reset: Callable[[], None] | None = None,
    max_in_flight: int = 8,
    max_points: int | None = None,
    name: str | None = None,
    other_process: bool = True,
    hash_seeds: int | Sequence[int] = 2,
) -> UpgradeSafetyReport:
    """Restore the old agent's state, at every point a checkpoint could be taken, into the new.

    The old agent runs once fault-free on the local runner; after every host callback its
    operator state is taken (through its JSON form, as a checkpoint or savepoint keeps
    keyed state). Each state is restored into a new runtime running ``new_agent``, the
    records not yet delivered are fed again, and the job runs to completion. Actions in
    flight re-enter in the new code and replay their recorded durable calls; per point the
    report has:

    - every ``ReplayDivergenceError`` (the new code made another kind of call, or called
      another function, model, tool or sub-agent, at a recorded identity; or reordered its
      calls), with the line of the new code that made the call;
    - every recorded outcome handed to a call whose arguments changed (the runtime replays
      it by identity and logs a warning: here it is a finding);
    - every recorded outcome the new code no longer asks for (an action that re-entered
      makes fewer calls);
    - every action that failed after the restore, and every recovery that could not finish;
    - every call recorded before the point that the new code executed again.

    As ``check_replay_safety`` does, every point is restored once more in another process
    under another ``PYTHONHASHSEED`` (a restarted TaskManager: new code whose durable calls
    follow a set's iteration order shows there), and an I/O sentinel watches both agents'
    action code outside durable calls: socket connects and sends, file writes outside
    temporary directories, subprocess starts and clock or random reads are findings named
    with their file and line, and a side effect a recovery does again is reported.

    Outputs are not compared (an upgrade may change them). A change guarded by
    ``ctx.patched("change-id")`` (see ``docs/concepts/replay-divergence.md``) keeps the old
    path for runs recorded by the old code, and reports nothing here.

    Args:
        old_agent: the agent that is running now (or its plan).
        new_agent: the agent to deploy (or its plan).
        inputs: the input records.
        key_selector: the record's key (default: ``record["key"]``).
        journal_factory: makes a new, empty write-ahead journal each call (see
            ``check_replay_safety``); ``None``: no journal.
        reset: called before every run to reset the fakes' external state.
        max_in_flight: the most I/O calls running at once (local runner).
        max_points: try at most this many points, evenly spread (default: all).
        name: the report's name for the pair (default: ``Old -> New`` class names).
        other_process: restore every point once more in another process (see
            ``check_replay_safety``: the new agent's actions must be importable by
            ``module:qualname``, the callables picklable; otherwise the report says why it
            was skipped). ``False``: this process only.
        hash_seeds: the other processes' ``PYTHONHASHSEED`` values, or how many to draw.

    Returns:
        The report; ``report.assert_ok()`` raises ``AssertionError`` naming each distinct
        finding once, with its points.

    Raises:
        RuntimeError: when the old agent's fault-free run does not complete.
        ValueError: when ``max_points`` or ``hash_seeds`` is not valid.
        UsageError: when ``inputs`` is one value (a dict, a string, one record), not a
            list of records.
    """
    check_records(inputs, "check_upgrade_safety",
                  "check_upgrade_safety(old_agent, new_agent, {})")
    seeds = draw_seeds(hash_seeds) if other_process else []
    old = old_agent if isinstance(old_agent, AgentPlan) else AgentPlan.from_agent(old_agent)
    new = new_agent if isinstance(new_agent, AgentPlan) else AgentPlan.from_agent(new_agent)
    t0 = time.monotonic()
    setup = Setup(old, list(inputs), key_selector or default_key_selector, journal_factory,
                  reset, max_in_flight)
    tee = TeeJournal(journal_factory()) if journal_factory is not None else None
    run, snapshots, _marks = fault_free(setup, tee)
    upgraded = Setup(new, setup.records, setup.selector, journal_factory, reset, max_in_flight,
                     tee.appended if tee is not None else [], lineage=setup.lineage)
    report = UpgradeSafetyReport(
        agent=name or _pair(old_agent, new_agent), inputs=len(setup.records),
        keys=len({e[0] for e in run.errors} | {o[0] for o in run.outputs}),
        journal=journal_factory is not None, points_total=len(snapshots),
        calls=len(run.executed), outputs=len(run.outputs), errors=len(run.errors))
    points = _sample(len(snapshots), max_points)
    recoveries = [run_recovery(upgraded, snapshots[point]) for point in points]
    for point, rec in zip(points, recoveries, strict=True):
        report.points.append(_judge(run, point, rec, None))
    if other_process:
        recoveries += restore_again(report, upgraded, snapshots, points, seeds,
                                    f"check_upgrade_safety({report.agent})",
                                    lambda point, rec, seed: _judge(run, point, rec, seed))
    add_sightings(report, [run, *recoveries])  # the old code's, then the new code's
    report.seconds = time.monotonic() - t0
    return report


def _judge(base: Observed, point: int, rec: Observed, seed: int | None) -> PointResult:
    """What the new code did with the old code's state at ``point``.

    Args:
        base: the old agent's fault-free run.
        point: the crash point.
        rec: what the new agent's recovery from there did.
        seed: the other process's ``PYTHONHASHSEED`` (``None``: this process).

    Returns:
        The point's findings.
    """
    res = PointResult(point=point, seed=seed)
    if not rec.completed:
        first = rec.failure.splitlines()[0] if rec.failure else "unknown"
        res.problems.append(f"recovery failed: {first}")
        res.details[res.problems[-1]] = rec.failure
        return res
    res.executed, res.replayed = len(rec.executed), len(rec.replayed)
    recorded = {c for step, c in base.recorded if step <= point}
    runs = collections.Counter(c for _, c in rec.executed)
    for call in sorted(recorded & set(runs), key=repr):
        res.unexpected.append(f"key {call[0]!r} call {call[1]}: recorded before the point, "
                              "executed again by the new code")
    replayed = {c for _, c in rec.replayed}
    res.served = len(recorded - set(runs))
    res.problems.extend(changed_arguments(base, rec))
    for message, where in rec.divergences:
        res.divergences.append(message)
        if where:
            res.details[message] = where
    diverged = {m.split(": ", 2)[1] for m, _ in rec.divergences if m.count(": ") >= 2}
    # a recorded outcome of an action that re-entered, which the new code never asked for
    answered = replayed | recorded
    for call in sorted(recorded - replayed - set(runs), key=repr):
        execution = call[1].rsplit("/", 1)[0]
        parts = call[1].split("/")
        if any((call[0], "/".join(parts[:i])) in answered for i in range(1, len(parts))):
            continue  # inside a chat or sub-agent call answered from its own record
        done_at = base.finished.get((call[0], execution))
        if done_at is not None and done_at <= point:
            continue  # its action had completed: it does not re-enter
        if execution in diverged or (call[0], execution) not in rec.finished:
            continue  # failed at a divergence (reported), or never re-entered
        res.problems.append(f"recorded outcome no longer asked for: key {call[0]!r} call "
                            f"{call[1]} ({base.targets.get(call, '?')}): the new code of "
                            "its action makes fewer durable calls")
    old_errors = {(e[1][1], e[1][3], e[1][4]) for e in base.errors}
    for key, (_seq, act, execution, etype, message) in rec.errors:
        if (act, etype, message) not in old_errors and "Divergence" not in etype:
            res.problems.append(f"action failed after the upgrade: key {key!r}: {execution}: "
                                f"{etype}: {message}")
    repeated_effects(base, point, rec, res)
    return res
