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
import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..api import Agent
from ..local import LocalExecutionEnvironment, default_key_selector
from ..plan import AgentPlan
from ..runtime import CallRecord, ErrorRecord, Journal, Observer
from ._report import PointResult, ReplaySafetyReport, shape, short

if TYPE_CHECKING:
    from ..runtime._commands import CallCommand

__all__ = ["check_replay_safety"]

DIVERGENCE = "ReplayDivergenceError"
"""The error type name a diverging replay raises (matched by name, through the MRO)."""

CallKey = tuple[Any, str]  # (record key, call id)


class _Recorder(Observer):
    """Notes, with the host callback they happened in, what the checker compares."""

    def __init__(self) -> None:
        self.step = 0  # host callbacks completed; hooks now run in callback ``step + 1``
        self.executed: list[tuple[int, CallKey]] = []
        self.replayed: list[tuple[int, CallKey]] = []
        self.recorded: list[tuple[int, CallKey]] = []
        self.outputs: list[tuple[Any, Any]] = []
        self.divergences: list[str] = []
        self.finished: dict[tuple[Any, str], int] = {}  # (key, execution id) -> callback

    def call_started(self, key: Any, call_id: str, command: CallCommand, replayed: bool) -> None:
        (self.replayed if replayed else self.executed).append((self.step + 1, (key, call_id)))

    def call_finished(self, key: Any, call_id: str, ok: bool, result: Any) -> None:
        self.recorded.append((self.step + 1, (key, call_id)))

    def output_emitted(self, key: Any, output: Any, parent: str) -> None:
        self.outputs.append((key, output))

    def action_finished(self, key: Any, execution_id: str, action: str,
                        error: BaseException | None) -> None:
        self.finished.setdefault((key, execution_id), self.step + 1)
        if error is not None and DIVERGENCE in {c.__name__ for c in type(error).__mro__}:
            self.divergences.append(f"key {key!r}: {execution_id}: {error}")


class _TeeJournal(Journal):
    """Forwards to the user's journal and keeps a copy of every append.

    The copy re-creates what a crashed attempt left in a journal that outlives it.
    """

    def __init__(self, inner: Journal) -> None:
        self.inner = inner
        self.appended: list[tuple[Any, str, CallRecord]] = []

    def append(self, key: Any, call_id: str, record: CallRecord) -> None:
        self.appended.append((key, call_id, record.model_copy(deep=True)))
        self.inner.append(key, call_id, record)

    def lookup(self, key: Any, call_id: str) -> CallRecord | None:
        return self.inner.lookup(key, call_id)

    def run_completed(self, key: Any, run: str) -> None:
        self.inner.run_completed(key, run)


@dataclass
class _Baseline:
    """The fault-free run, and how to run a recovery like it."""

    plan: AgentPlan
    records: list[Any]
    selector: Callable[[Any], Any]
    journal_factory: Callable[[], Journal] | None
    reset: Callable[[], None] | None
    max_in_flight: int
    ordered: bool
    rec: _Recorder
    tee: _TeeJournal | None
    errors: list[tuple[Any, Any]]

    def __post_init__(self) -> None:
        self.expected_out = _by_key(self.rec.outputs)
        self.expected_err = _by_key(self.errors)
        self.executed_all = {c for _, c in self.rec.executed}
        self.made_all = self.executed_all | {c for _, c in self.rec.replayed}
        self.recorded_all = {c for _, c in self.rec.recorded}


def _by_key(items: Iterable[tuple[Any, Any]]) -> dict[Any, list[Any]]:
    out: dict[Any, list[Any]] = collections.defaultdict(list)
    for key, value in items:
        out[_freeze(key)].append(value)
    return out


def _freeze(key: Any) -> Any:
    return tuple(_freeze(k) for k in key) if isinstance(key, (list, tuple)) else key


def _error_view(err: ErrorRecord) -> tuple[Any, Any]:
    return err.key, (err.seq, err.action, err.execution_id, err.error_type, err.message)


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
    """Compare per key (type trees, in order unless not ``ordered``); returns items compared."""
    compared = 0
    for key in sorted(set(expected) | set(got), key=repr):
        want = [shape(v) for v in expected.get(key, [])]
        have = [shape(v) for v in got.get(key, [])]
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
        problems.append(f"{what} mismatch: key {key!r} #{i}: got {short(got[key][i])} "
                        f"(shape {short(have[i])}), fault-free {short(expected[key][i])} "
                        f"(shape {short(want[i])})")
    return compared


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
) -> ReplaySafetyReport:
    """Crash the agent at every point a checkpoint could be taken; check each recovery.

    First one fault-free run on the local runner records every point between two host
    callbacks (an input record handed to the operator, or a key woken for completed I/O),
    the operator state there, and every durable call. Then, for each point, a new runtime is
    restored from that state through its JSON form (as Flink restores keyed state), the
    records the source had not delivered are fed again, and the job runs to completion.
    Per point it checks:

    - outputs (``OutputEvent.output``): what the fault-free run emitted before the point,
      then what the recovery emitted, equal to the fault-free outputs per key, in order, as
      type trees (a pydantic model and a dict of the same fields differ);
    - error records equal the same way (key, seq, action, execution id, type, message);
    - no durable call whose outcome was recorded before the point executes again; each other
      call executes at most once more; with ``journal_factory``, no call whose outcome the
      crashed attempt journaled executes again (exactly once in total);
    - no call of the fault-free run is skipped, and no call it never made appears;
    - no action fails with ``ReplayDivergenceError`` (in any sub-agent or chat too).

    The journal case assumes the crashed attempt ran to the end before failing (the most it
    can have journaled). Fakes must answer the same request the same way in every run (a
    pure function of the request, or made so by ``reset``).

    Args:
        agent: the agent (compiled once) or its plan.
        inputs: the input records (re-fed from the start of each recovery's unread part).
        key_selector: the record's key (default: ``record["key"]``).
        journal_factory: makes a new, empty write-ahead journal (e.g. a ``SqliteJournal``
            on a new path) each call; the checker fills each recovery's with what the
            crashed attempt appended. ``None``: no journal.
        reset: called before every run (the fault-free one and each recovery) to reset the
            fakes' external state.
        max_in_flight: the most I/O calls running at once (local runner).
        max_points: try at most this many points, evenly spread (default: all).
        ordered: compare each key's outputs in order (``False``: as multisets, for agents
            whose outputs within a run race each other).
        name: the agent's name in the report (default: its class name).

    Returns:
        The report; ``report.assert_ok()`` raises ``AssertionError`` with its table when any
        check failed.

    Raises:
        RuntimeError: when the fault-free run itself does not complete.
    """
    plan = agent if isinstance(agent, AgentPlan) else AgentPlan.from_agent(agent)
    records = list(inputs)
    selector = key_selector or default_key_selector
    label = name or (type(agent).__name__ if not isinstance(agent, AgentPlan) else "AgentPlan")
    t0 = time.monotonic()

    if reset is not None:
        reset()
    base = _Recorder()
    tee = _TeeJournal(journal_factory()) if journal_factory is not None else None
    env = LocalExecutionEnvironment(max_in_flight, journal=tee, metrics=False, observer=base)
    job = env.from_list(records, selector).apply(plan)
    snapshots: list[str | None] = [None]  # point 0: before the first callback (a fresh start)
    marks: list[tuple[int, int]] = [(0, 0)]

    def on_step(j: Any) -> None:
        base.step += 1
        snapshots.append(json.dumps(j.snapshot()))
        marks.append((len(base.outputs), len(j.result.errors)))

    result = job.run(on_step=on_step)
    ff = _Baseline(plan, records, selector, journal_factory, reset, max_in_flight, ordered, base,
                   tee, [_error_view(e) for e in result.errors])
    report = ReplaySafetyReport(
        agent=label, inputs=len(records), keys=len(set(ff.expected_out) | set(ff.expected_err)),
        journal=journal_factory is not None, points_total=len(snapshots),
        calls=len(base.executed), outputs=len(base.outputs), errors=len(result.errors))
    for point in _sample(len(snapshots), max_points):
        report.points.append(_recover(ff, point, snapshots[point], marks[point]))
    report.seconds = time.monotonic() - t0
    return report


def _recover(ff: _Baseline, point: int, snapshot: str | None, mark: tuple[int, int]
             ) -> PointResult:
    """Restore at ``point``, run to completion, and check the recovery against ``ff``."""
    res = PointResult(point=point)
    if ff.reset is not None:
        ff.reset()
    journal: Journal | None = None
    if ff.journal_factory is not None and ff.tee is not None:
        journal = ff.journal_factory()
        for key, call_id, record in ff.tee.appended:  # what the crashed attempt left behind
            journal.append(key, call_id, record)
    rec = _Recorder()
    env = LocalExecutionEnvironment(ff.max_in_flight, journal=journal, metrics=False, observer=rec)
    job = env.from_list(ff.records, ff.selector).apply(ff.plan)
    if snapshot is not None:
        job.restore(json.loads(snapshot))
    try:
        out = job.run()
    except Exception as e:  # noqa: BLE001 - a recovery that cannot finish is a finding
        res.problems.append(f"recovery failed: {type(e).__name__}: {e}")
        return res
    n_out, n_err = mark
    got_out = _by_key([*ff.rec.outputs[:n_out], *rec.outputs])
    got_err = _by_key([*ff.errors[:n_err], *(_error_view(e) for e in out.errors)])
    res.outputs_compared = _compare("outputs", ff.expected_out, got_out, ff.ordered,
                                    res.problems)
    _compare("error records", ff.expected_err, got_err, ff.ordered, res.problems)

    recorded = {c for step, c in ff.rec.recorded if step <= point}
    started = {c for step, c in ff.rec.executed if step <= point}
    runs = collections.Counter(c for _, c in rec.executed)
    res.executed, res.replayed = len(rec.executed), len(rec.replayed)
    for call, n in runs.items():
        where = f"key {call[0]!r} call {call[1]}"
        if call in recorded:
            res.unexpected.append(f"{where}: recorded before the point, executed again")
        elif n > 1:
            res.unexpected.append(f"{where}: executed {n} times after the restore")
        elif journal is not None and call in ff.recorded_all:
            res.unexpected.append(f"{where}: journaled by the crashed attempt, executed again")
        elif call not in ff.executed_all:
            res.problems.append(f"unknown call: {where}: made after the restore only")
        elif call in started:
            res.reexecuted += 1
    # made again: executed, replayed, or re-attached to its open invocation and completed
    replayed = {c for _, c in rec.replayed}
    made = set(runs) | replayed | {c for _, c in rec.recorded}
    answered = replayed | recorded  # a chat or sub-agent call answered from its record...
    for call in sorted(ff.made_all - recorded - made, key=repr):
        parts = call[1].split("/")
        if any((call[0], "/".join(parts[:i])) in answered for i in range(1, len(parts))):
            continue  # ...does not run what was inside it again
        done_at = ff.rec.finished.get((call[0], call[1].rsplit("/", 1)[0]))
        if done_at is not None and done_at <= point:
            continue  # its action had completed (without awaiting it): nothing re-enters
        res.problems.append(f"skipped call: key {call[0]!r} call {call[1]}: made by the "
                            "fault-free run after the point, neither executed nor replayed")
    res.divergences = list(rec.divergences)
    return res
