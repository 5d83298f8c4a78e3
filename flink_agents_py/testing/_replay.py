"""The crash-everywhere checker: restore an agent at every checkpoint opportunity and compare.

``check_replay_safety`` runs an agent once without faults on the local runner, taking a
snapshot after every host callback (every point where a checkpoint could be taken) and noting
every durable call. Then, for each point, it restores a new runtime from that snapshot (through
its JSON form, as Flink restores keyed state), re-feeds the records the source had not yet
delivered, runs to completion and checks what a user relies on: the same outputs and error
records, no recorded call executed again, no call skipped, no ``ReplayDivergenceError``.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..api import Agent
from ..api.internal import warn_at_user
from ..local import default_key_selector
from ..local.internal import check_records
from ..plan import AgentPlan
from ..runtime import Journal
from ._process import draw_seeds, restore_elsewhere
from ._report import PointResult, ReplaySafetyReport, short
from ._runs import KeyId, Observed, Setup, TeeJournal, changed_arguments, fault_free, run_recovery

__all__ = ["check_replay_safety", "add_sightings", "restore_again", "repeated_effects"]


@dataclass
class _Baseline:
    """The fault-free run, and what each recovery is compared with."""

    run: Observed
    ordered: bool
    journal: bool

    def __post_init__(self) -> None:
        self.expected_out = _by_key((k, (s, t)) for k, s, t in self.run.outputs)
        self.expected_err = _by_key(self.run.errors)
        self.executed_all = {c for _, c in self.run.executed}
        self.made_all = self.executed_all | {c for _, c in self.run.replayed}
        self.recorded_all = {c for _, c in self.run.recorded}


def _by_key(items: Iterable[tuple[Any, Any]]) -> dict[Any, list[Any]]:
    out: dict[Any, list[Any]] = collections.defaultdict(list)
    for key, value in items:
        out[KeyId(key)].append(value)  # keys told apart as the runtime does (1 != True)
    return out


def _sample(total: int, max_points: int | None) -> list[int]:
    if max_points is None or max_points >= total:
        return list(range(total))
    if max_points < 1:
        raise ValueError(f"max_points must be >= 1, got {max_points}")
    if max_points == 1:
        return [total // 2]
    return sorted({round(k * (total - 1) / (max_points - 1)) for k in range(max_points)})


def _compare(what: str, expected: dict[Any, list[Any]], got: dict[Any, list[Any]],
             ordered: bool, problems: list[str]) -> int:
    """Compare per key (``(type tree, shown)`` items, in order unless not ``ordered``).

    Returns:
        The items compared.
    """
    compared = 0
    for key in sorted(set(expected) | set(got), key=repr):
        want = [v[0] for v in expected.get(key, [])]
        have = [v[0] for v in got.get(key, [])]
        compared += len(want)
        if not ordered:
            want, have = sorted(want, key=repr), sorted(have, key=repr)
        if want == have:
            continue
        if len(want) != len(have):
            problems.append(f"{what} mismatch: key {key!r}: {len(have)} {what}, "
                            f"the fault-free run had {len(want)}")
            continue
        i = next(i for i, (a, b) in enumerate(zip(want, have, strict=True)) if a != b)
        shown, wanted = got[key][i][1], expected[key][i][1]
        if shown == wanted:  # the same text: the types differ
            shown, wanted = (f"{shown} (shape {short(have[i])})",
                             f"{wanted} (shape {short(want[i])})")
        problems.append(f"{what} mismatch: key {key!r} #{i}: got {shown}, fault-free {wanted}")
    return compared


def _errors(items: Iterable[tuple[Any, Any]]) -> list[tuple[Any, tuple[Any, str]]]:
    return [(k, (v, short(v))) for k, v in items]


def check_replay_safety(
    agent: Agent | AgentPlan,
    inputs: Iterable[Any],
    *,
    key_selector: Callable[[Any], Any] | None = None,
    journal_factory: Callable[[], Journal] | None = None,
    reset: Callable[[], None] | None = None,
    max_in_flight: int = 8,
    max_points: int | None = None,
    ordered: bool = True,
    name: str | None = None,
    other_process: bool = True,
    hash_seeds: int | Sequence[int] = 2,
    events: Iterable[Any] = (),
    interleaved: bool = False,
) -> ReplaySafetyReport:
    """Crash the agent at every point a checkpoint could be taken; check each recovery.

    First one fault-free run on the local runner records every point between two host
    callbacks (an input record handed to the operator, or a key woken for completed I/O),
    the operator state there, and every durable call. Then, for each point, a new runtime is
    restored from that state through its JSON form (as Flink restores keyed state), the
    records the source had not delivered are fed again, and the job runs to completion:
    once in this process, and once more in another process started with another
    ``PYTHONHASHSEED`` (as a restarted TaskManager is), so that an action whose durable
    calls follow a set's iteration order of strings (which changes between processes)
    shows. Per point it checks:

    - outputs (``OutputEvent.output``): what the fault-free run emitted before the point,
      then what the recovery emitted, equal to the fault-free outputs per key, in order, as
      type trees (a pydantic model and a dict of the same fields differ);
    - error records equal the same way (key, seq, action, execution id, type, message);
    - no durable call whose outcome was recorded before the point executes again; each other
      call executes at most once more; with ``journal_factory``, no call whose outcome the
      crashed attempt journaled executes again (exactly once in total);
    - no call of the fault-free run is skipped, and no call it never made appears;
    - no action fails with ``ReplayDivergenceError`` (in any sub-agent or chat too), and no
      recorded outcome is handed to a call whose arguments changed;
    - no side effect of action code outside durable calls is done again.

    While the agent's actions run (outside their durable calls), an I/O sentinel reports
    socket connects and sends, file writes outside temporary directories, subprocess
    starts and ``time``/``random``/``uuid``/``secrets`` reads, each once with the file and
    line of the user's code that made it (a file write inside a temporary directory is
    reported when a recovery repeats it).

    The journal case assumes the crashed attempt ran to the end before failing (the most it
    can have journaled). Fakes must answer the same request the same way in every run (a
    pure function of the request, or made so by ``reset``), in every process.

    Args:
        agent: the agent (compiled once) or its plan.
        inputs: the input records (re-fed from the start of each recovery's unread part).
        key_selector: the record's key (default: ``record["key"]``).
        journal_factory: makes a new, empty write-ahead journal (e.g. a ``SqliteJournal``
            on a new path) each call; the checker fills each recovery's with what the
            crashed attempt appended. ``None``: no journal.
        reset: called before every run (the fault-free one and each recovery, in the other
            process too) to reset the fakes' external state.
        max_in_flight: the most I/O calls running at once (local runner).
        max_points: try at most this many points, evenly spread (default: all).
        ordered: compare each key's outputs in order (``False``: as multisets, for agents
            whose outputs within a run race each other).
        name: the agent's name in the report (default: its class name).
        other_process: restore every point tried once more in another process, under
            another ``PYTHONHASHSEED``. That needs the agent's actions importable as
            ``module:qualname`` (defined at the top level of a module, not in a test
            function or ``__main__``) and the agent, ``reset``, ``key_selector`` and
            ``journal_factory`` picklable with cloudpickle; otherwise the report says why
            it was skipped (``report.other_process``) and the check runs in this process
            only. ``False``: this process only (fakes that keep an external service's
            state in this process's memory need it).
        hash_seeds: the other processes' ``PYTHONHASHSEED`` values, or how many to draw at
            random (default 2; never the seed of this process); the points are shared out
            among them in turn, and the processes run side by side. Two seeds give a set
            of three strings the order it had here with a chance of about 1 in 6 each, so
            a defect seen at two or more points is missed about 3 times in 100. The report
            names each seed, to rerun a finding.
        events: outside events for an agent that waits (its second input, as the local
            runner's ``connect`` takes them: ``ExternalEvent`` items or their dicts,
            ``AdvanceTime`` and ``AfterRecords``), read once into a list. The crash points
            include each event's delivery and each timer's firing; a recovery gets the
            events not delivered before its point, on the virtual clock of the snapshot.
        interleaved: deliver ``events`` between the records, where their ``AfterRecords``
            place them (default: after all records).

    Returns:
        The report; ``report.assert_ok()`` raises ``AssertionError`` with its table when any
        check failed, each distinct finding once.

    Raises:
        RuntimeError: when the fault-free run itself does not complete.
        ValueError: when ``max_points`` or ``hash_seeds`` is not valid.
        UsageError: when ``inputs`` is one value (a dict, a string, one record), not a
            list of records.
    """
    check_records(inputs, "check_replay_safety", "check_replay_safety(agent, {})")
    seeds = draw_seeds(hash_seeds) if other_process else []
    plan = agent if isinstance(agent, AgentPlan) else AgentPlan.from_agent(agent)
    label = name or (type(agent).__name__ if not isinstance(agent, AgentPlan) else "AgentPlan")
    t0 = time.monotonic()
    setup = Setup(plan, list(inputs), key_selector or default_key_selector, journal_factory,
                  reset, max_in_flight, events=list(events), interleaved=interleaved)
    tee = TeeJournal(journal_factory()) if journal_factory is not None else None
    run, snapshots, marks = fault_free(setup, tee)
    setup.journaled = tee.appended if tee is not None else []
    ff = _Baseline(run, ordered, journal_factory is not None)
    report = ReplaySafetyReport(
        agent=label, inputs=len(setup.records),
        keys=len(set(ff.expected_out) | set(ff.expected_err)),
        journal=journal_factory is not None, points_total=len(snapshots),
        calls=len(run.executed), outputs=len(run.outputs), errors=len(run.errors))
    add_sightings(report, [run])
    points = _sample(len(snapshots), max_points)
    for point in points:
        report.points.append(_judge(ff, point, marks[point],
                                    run_recovery(setup, snapshots[point]), None))
    if other_process:
        restore_again(report, setup, snapshots, points, seeds, f"check_replay_safety({label})",
                      lambda point, rec, seed: _judge(ff, point, marks[point], rec, seed))
    report.seconds = time.monotonic() - t0
    return report


def add_sightings(report: ReplaySafetyReport, runs: Iterable[Observed]) -> None:
    """Note in ``report`` each distinct side effect or read of action code that ``runs`` saw.

    A file write inside a temporary directory is left out (reported only when a recovery
    repeats it, see ``repeated_effects``).
    """
    found = {s.describe(): s for run in runs for _, s in run.sightings if not s.temporary}
    for s in sorted(found.values(), key=lambda s: (s.file, s.line, s.what)):
        if s.describe() not in report.sighting_lines:
            report.sightings.append(s.describe())
            report.sighting_lines[s.describe()] = s.code


def restore_again(report: ReplaySafetyReport, setup: Setup, snapshots: list[str | None],
                  points: list[int], seeds: list[int], caller: str,
                  judge: Callable[[int, Observed, int], PointResult]) -> list[Observed]:
    """Restore ``points`` once more in other processes (one ``PYTHONHASHSEED`` each).

    Each recovery is judged by ``judge(point, observed, seed)`` into ``report.elsewhere``;
    ``report.other_process`` says which seeds ran, or why none did (also warned about,
    naming ``caller``).

    Returns:
        What each recovery in another process observed.
    """
    done, report.other_process = restore_elsewhere(
        setup, [(p, snapshots[p]) for p in points], seeds)
    for point, seed, observed in done:
        report.elsewhere.append(judge(point, observed, seed))
    if not done or len(done) < len(points):
        warn_at_user(UserWarning(f"{caller}: restores in another process "
                                 f"{report.other_process}"))
    return [observed for _, _, observed in done]


def _judge(ff: _Baseline, point: int, mark: tuple[int, int], rec: Observed, seed: int | None
           ) -> PointResult:
    """Check the recovery from ``point`` (what ``rec`` observed) against the fault-free run."""
    res = PointResult(point=point, seed=seed)
    if not rec.completed:
        first = rec.failure.splitlines()[0] if rec.failure else "unknown"
        res.problems.append(f"recovery failed: {first}")
        res.details[res.problems[-1]] = rec.failure
        return res
    n_out, n_err = mark
    base = ff.run
    got_out = _by_key([*((k, (s, t)) for k, s, t in base.outputs[:n_out]),
                       *((k, (s, t)) for k, s, t in rec.outputs)])
    got_err = _by_key(_errors([*base.errors[:n_err], *rec.errors]))
    res.outputs_compared = _compare("outputs", ff.expected_out, got_out, ff.ordered,
                                    res.problems)
    known = len(res.problems)
    _compare("error records", _by_key(_errors(base.errors)), got_err, ff.ordered,
             res.problems)
    _explain_new_results(base, rec, point, res.problems)
    for message in res.problems[known:]:  # where the key's first new error was raised
        for e, tb in zip(rec.errors, rec.error_tracebacks, strict=False):
            if tb and e not in base.errors and "Divergence" not in e[1][3] \
                    and message.startswith(f"error records mismatch: key {KeyId(e[0])!r}"):
                res.details[message] = tb
                break

    recorded = {c for step, c in base.recorded if step <= point}
    started = {c for step, c in base.executed if step <= point}
    runs = collections.Counter(c for _, c in rec.executed)
    journaled = ff.recorded_all if ff.journal else set()
    res.executed, res.replayed = len(rec.executed), len(rec.replayed)
    for call, n in runs.items():
        where = f"key {call[0]!r} call {call[1]}"
        if call in recorded:
            res.unexpected.append(f"{where}: recorded before the point, executed again")
        elif n > 1:
            res.unexpected.append(f"{where}: executed {n} times after the restore")
        elif call in journaled:
            res.unexpected.append(f"{where}: journaled by the crashed attempt, executed again")
        elif call not in ff.executed_all:
            res.problems.append(f"unknown call: {where}: made after the restore only")
        elif call in started:
            res.reexecuted += 1
    replayed = {c for _, c in rec.replayed}
    # served: outcomes the restore had (state or journal) that did not run again
    res.served = len((recorded | (replayed & ff.recorded_all)) - set(runs))
    # made again: executed, replayed, or re-attached to its open invocation and completed
    made = set(runs) | replayed | {c for _, c in rec.recorded}
    answered = replayed | recorded  # a chat or sub-agent call answered from its record...
    skipped: dict[Any, list[str]] = collections.defaultdict(list)
    for call in sorted(ff.made_all - recorded - made, key=repr):
        parts = call[1].split("/")
        if any((call[0], "/".join(parts[:i])) in answered for i in range(1, len(parts))):
            continue  # ...does not run what was inside it again
        done_at = base.finished.get((call[0], call[1].rsplit("/", 1)[0]))
        if done_at is not None and done_at <= point:
            continue  # its action had completed (without awaiting it): nothing re-enters
        if call in started and call not in ff.recorded_all:
            continue  # open at the point, never completed (a sub-agent call its action, which
            # raised, never awaited: cancelled): re-attached to, it has nothing to record
        skipped[call[0]].append(call[1])
    for key, calls in skipped.items():
        shown = ", ".join(calls[:4]) + (f" and {len(calls) - 4} more" if len(calls) > 4 else "")
        res.problems.append(f"skipped call: key {key!r}: made by the fault-free run after the "
                            f"point, neither executed nor replayed: {shown}")
    res.problems.extend(changed_arguments(base, rec))
    for message, where in rec.divergences:
        res.divergences.append(message)
        if where:
            res.details[message] = where
    repeated_effects(ff.run, point, rec, res)
    return res


def _explain_new_results(base: Observed, rec: Observed, point: int, problems: list[str]) -> None:
    """Say which calls gave the mismatched outputs of a key other results when run again.

    A call in flight at the point (started, its outcome not recorded) runs again after the
    restore, as it may (at least once); when it then returns another result than in the
    fault-free run (a fake that draws a random number, reads the clock or counts its calls)
    the outputs built from it differ, and the mismatch alone does not say why.
    """
    recorded = {c for step, c in base.recorded if step <= point}
    changed: dict[KeyId, list[str]] = collections.defaultdict(list)
    for _, call in rec.executed:
        was, now = base.results.get(call), rec.results.get(call)
        if call not in recorded and was and now and was != now:
            changed[call[0]].append(f"{call[1]} ({rec.targets.get(call, '?')})")
    if not changed:
        return
    for i, message in enumerate(problems):
        for key, calls in changed.items():
            if message.startswith((f"outputs mismatch: key {key!r}",
                                   f"error records mismatch: key {key!r}")):
                one = len(calls) == 1
                problems[i] = (
                    f"{message}; {'call' if one else 'calls'} {', '.join(calls[:3])} "
                    f"{'was' if one else 'were'} in flight at the point, ran again after the "
                    "restore (or its reconciler did; as a call without a recorded outcome "
                    "may) and returned another result than in the fault-free run: in the "
                    "test, make what it calls (and its reconciler) return the same result "
                    "for the same arguments (a fake, a fixed seed)")
                break


def repeated_effects(base: Observed, point: int, rec: Observed, res: PointResult) -> None:
    """Side effects outside durable calls the recovery did again (an e-mail sent twice).

    Args:
        base: the fault-free run (of the old agent, for an upgrade).
        point: the crash point.
        rec: what the recovery from there did.
        res: the point's findings, to add to.
    """
    effects = collections.Counter(
        s.site for _, s in base.sightings if s.kind not in ("clock", "random"))
    before = collections.Counter(s.site for step, s in base.sightings
                                 if step <= point and s.kind not in ("clock", "random"))
    again = collections.Counter(s.site for _, s in rec.sightings
                                if s.kind not in ("clock", "random"))
    shown: dict[tuple[str, str, int], Any] = {s.site: s for _, s in rec.sightings}
    for site, n in again.items():
        total = effects.get(site, 0)
        if before[site] + n > total:
            s = shown[site]
            message = (f"{s.where}: {s.what} in action {s.action} done again after the "
                       f"restore (the fault-free run did it {total} "
                       f"{'time' if total == 1 else 'times'})")
            res.effects.append(message)
            if s.code:
                res.details[message] = s.code
