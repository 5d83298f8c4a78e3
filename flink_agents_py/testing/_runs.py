"""One run of the checker: the fault-free run with its snapshots, and one recovery.

``run_recovery`` is what a restore does, in this process or in another one (see
``_process``): it restores a new runtime from a snapshot's JSON text, runs the job to
completion and returns what it observed as plain data (``Observed``), so the checker in
this process can judge it against the fault-free run (``_replay``).
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import logging
import os
import secrets
import traceback
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..api.internal import described
from ..local import LocalExecutionEnvironment
from ..plan import AgentPlan
from ..runtime import (
    CallRecord,
    ErrorRecord,
    HostOptions,
    Journal,
    KeyEncodingError,
    Observer,
    encode_key,
)
from ..runtime.internal import shape_parts
from ._report import shape, short
from ._sentinel import Sighting, watching

if TYPE_CHECKING:
    from ..runtime.internal import CallCommand

__all__ = ["Setup", "Observed", "Recorder", "KeyId", "TeeJournal", "changed_arguments",
           "fault_free",
           "run_recovery", "portable", "user_line"]

DIVERGENCE = "ReplayDivergenceError"
"""The error type name a diverging replay raises (matched by name, through the MRO)."""

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep



class KeyId:
    """A record key as the runtime tells keys apart: by its encoded identity.

    Python merges ``1``, ``True`` and ``1.0`` (and ``0.0`` and ``-0.0``) in sets and dicts;
    the runtime keeps them apart (Flink's default key encoding, ``runtime.encode_key``). The
    checker keys its bookkeeping by ``KeyId`` so it counts each key's calls, outputs and
    errors as the runtime does. It shows as the key's value (``repr``).

    Attributes:
        value: the key's value (lists as tuples, as the runtime keys them).
        identity: ``runtime.encode_key`` of the value; a key it cannot encode (the key of a
            rejected record) by its type and ``repr``.
    """

    __slots__ = ("identity", "value")

    def __init__(self, key: Any) -> None:
        self.value: Any = key.value if type(key) is KeyId else _tuples(key)
        try:
            self.identity: Any = encode_key(self.value)
        except (KeyEncodingError, TypeError, ValueError):
            self.identity = (type(self.value).__qualname__, repr(self.value))

    def __eq__(self, other: object) -> bool:
        return type(other) is KeyId and self.identity == other.identity

    def __hash__(self) -> int:
        return hash(self.identity)

    def __repr__(self) -> str:
        return repr(self.value)

    def __reduce__(self) -> tuple[Any, ...]:
        return KeyId, (self.value,)


def _tuples(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return tuple(_tuples(v) for v in value)
    return value


CallKey = tuple[KeyId, str]  # (record key, call id)


class Recorder(Observer):
    """Notes, with the host callback they happened in, what the checker compares."""

    def __init__(self) -> None:
        self.step = 0  # host callbacks completed; hooks now run in callback ``step + 1``
        self.executed: list[tuple[int, CallKey]] = []
        self.replayed: list[tuple[int, CallKey]] = []
        self.recorded: list[tuple[int, CallKey]] = []
        self.targets: dict[CallKey, str] = {}
        self.digests: dict[CallKey, str] = {}  # the digest of each call's arguments
        self.results: dict[CallKey, str] = {}  # the digest of each call's recorded outcome
        self.outputs: list[tuple[KeyId, Any]] = []
        self.divergences: list[tuple[str, str]] = []  # (message, where in the user's code)
        self.finished: dict[tuple[KeyId, str], int] = {}  # (key, execution id) -> callback
        self.changes: dict[tuple[KeyId, str], str] = {}  # (key, execution id) -> warning

    def call_started(self, key: Any, call_id: str, command: CallCommand, replayed: bool) -> None:
        call_key = (KeyId(key), call_id)
        (self.replayed if replayed else self.executed).append((self.step + 1, call_key))
        self.targets[call_key] = str(command)
        call = getattr(command, "call", None)
        shape = getattr(call, "shape", None)  # the values by parameter: what the runtime checks
        if shape:  # and what a lambda's code does with them (a third part, when it has one)
            binding, _, code, _, _, taken, full = shape_parts(shape)
            # the values run with, defaults taken included; a tool's or a sub-agent's shape
            # keeps only the defaults taken (its digest binds its arguments by name)
            base = full if binding else f"{getattr(call, 'digest', '')}/{taken}"
            self.digests[call_key] = f"{base}/{code}" if code else base
        else:
            self.digests[call_key] = getattr(call, "digest", "")

    def replay_finding(self, key: Any, execution_id: str, kind: str, message: str) -> None:
        # what changed, as the runtime's warning says it, for a recorded outcome handed over
        # (not a call that had started and runs again: no recorded outcome is handed over)
        if kind == "arguments_changed" and "replays" in message:
            self.changes.setdefault((KeyId(key), execution_id), message)

    def call_finished(self, key: Any, call_id: str, ok: bool, result: Any) -> None:
        self.recorded.append((self.step + 1, (KeyId(key), call_id)))
        try:
            text = repr((ok, portable(shape(result))))
        except Exception:  # noqa: BLE001 - an outcome without a shape: not compared
            return
        self.results[(KeyId(key), call_id)] = hashlib.blake2b(
            text.encode(), digest_size=8).hexdigest()

    def output_emitted(self, key: Any, output: Any, parent: str) -> None:
        self.outputs.append((KeyId(key), output))

    def action_finished(self, key: Any, execution_id: str, action: str,
                        error: BaseException | None) -> None:
        self.finished.setdefault((KeyId(key), execution_id), self.step + 1)
        if error is not None and DIVERGENCE in {c.__name__ for c in type(error).__mro__}:
            self.divergences.append((f"key {key!r}: {execution_id}: {error}", user_line(error)))


def user_line(error: BaseException) -> str:
    """Where in the user's code ``error`` was raised: the innermost frame not of a library.

    Returns:
        ``File "...", line N, in fn`` and the source line, or ''.
    """
    frames = [f for f in traceback.extract_tb(error.__traceback__)
              if not f.filename.startswith(_PACKAGE) and "site-packages" not in f.filename
              and not f.filename.startswith("<")]
    if not frames:
        return ""
    return "".join(traceback.format_list(frames[-1:])).rstrip()


class TeeJournal(Journal):
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
class Setup:
    """How to run the agent: what ``check_replay_safety`` was given (sent to other processes).

    Attributes:
        plan: the agent's plan (the new agent's, for an upgrade's recoveries).
        records: the input records.
        selector: the record's key.
        journal_factory: makes a new, empty journal, or ``None``.
        reset: resets the fakes before every run, or ``None``.
        max_in_flight: the most I/O calls at once.
        journaled: what the crashed attempt appended to its journal (key, call id, record).
        events: the outside events of the agent's second input (``connect``), with
            ``AdvanceTime`` and ``AfterRecords`` items; empty: none.
        interleaved: deliver ``events`` between the records (``connect(interleaved=True)``).
        lineage: the job's lineage token (``HostOptions.lineage``), shared by the
            fault-free run and every recovery, as a job's attempts share it.
    """

    plan: AgentPlan
    records: list[Any]
    selector: Callable[[Any], Any]
    journal_factory: Callable[[], Journal] | None
    reset: Callable[[], None] | None
    max_in_flight: int
    journaled: list[tuple[Any, str, CallRecord]] = field(default_factory=list)
    events: list[Any] = field(default_factory=list)
    interleaved: bool = False
    lineage: str = field(default_factory=lambda: secrets.token_hex(8))

    def job(self, env: LocalExecutionEnvironment) -> Any:
        """The job on ``env``: the records, and the outside events when there are some.

        Returns:
            The local job, the plan applied.
        """
        job = env.from_list(self.records, self.selector)
        if self.events:
            job.connect(self.events, interleaved=self.interleaved)
        return job.apply(self.plan)


@dataclass
class Observed:
    """What one run did, as plain data (picklable across processes).

    Attributes:
        executed: ``(callback, (key, call id))`` per call executed.
        replayed: the same, per call answered from its record.
        recorded: the same, per outcome recorded.
        targets: what each call called (``module:qualname``, ``chat:<setup>``...).
        digests: the digest of each call's arguments (the call's, not its record's).
        results: the digest of each outcome recorded (its shape, equal in every process).
        outputs: ``(key, portable shape, short repr)`` per output, in order (every key here
            a ``KeyId``: keys told apart as the runtime tells them apart).
        errors: ``(key, (seq, action, execution id, type, message))`` per error record.
        error_tracebacks: each error record's traceback ('' when none), in order.
        divergences: ``(message, user line)`` per action failed with a divergence.
        finished: ``(key, execution id) -> callback`` of each completed action execution.
        changes: ``(key, execution id) -> the runtime's first "arguments changed" warning``.
        sightings: ``(callback, Sighting)`` per side effect or read outside durable calls.
        failure: why the run could not finish (with its traceback), or ''.
        completed: whether the run completed.
    """

    executed: list[tuple[int, CallKey]] = field(default_factory=list)
    replayed: list[tuple[int, CallKey]] = field(default_factory=list)
    recorded: list[tuple[int, CallKey]] = field(default_factory=list)
    targets: dict[CallKey, str] = field(default_factory=dict)
    digests: dict[CallKey, str] = field(default_factory=dict)
    results: dict[CallKey, str] = field(default_factory=dict)
    outputs: list[tuple[Any, Any, str]] = field(default_factory=list)
    errors: list[tuple[Any, Any]] = field(default_factory=list)
    error_tracebacks: list[str] = field(default_factory=list)
    divergences: list[tuple[str, str]] = field(default_factory=list)
    changes: dict[tuple[Any, str], str] = field(default_factory=dict)
    finished: dict[tuple[KeyId, str], int] = field(default_factory=dict)
    sightings: list[tuple[int, Sighting]] = field(default_factory=list)
    failure: str = ""
    completed: bool = True


def portable(value: Any) -> Any:
    """A shape (``shape(value)``) whose leaves are plain values, equal in every process.

    Returns:
        The shape, with leaves that are not ``str``, ``int``, ``float``, ``bool``, ``bytes``
        or ``None`` replaced by their ``repr``.
    """
    if isinstance(value, tuple):
        return tuple(portable(v) for v in value)
    if value is None or isinstance(value, (str, int, float, bool, bytes)):
        return value
    return ("repr", repr(value))


def _error_view(err: ErrorRecord) -> tuple[Any, Any]:
    return KeyId(err.key), (err.seq, err.action, err.execution_id, err.error_type, err.message)


@contextlib.contextmanager
def _quiet_runtime_log() -> Iterator[None]:
    """Keep the runtime's log records of a recovery from the log for the block.

    A recovery logs each divergence again at every point: the report shows each once.

    Yields:
        Nothing.
    """
    logger = logging.getLogger("flink_agents_py.runtime")
    keep = logger.propagate
    sink = logging.NullHandler()  # or logging's last resort prints what was kept back
    logger.addHandler(sink)
    logger.propagate = False
    try:
        yield
    finally:
        logger.propagate = keep
        logger.removeHandler(sink)


def changed_arguments(base: Observed, rec: Observed) -> list[str]:
    """Recorded outcomes the recovery handed to a call whose arguments changed.

    The runtime replays such a call by identity (with a warning); the checker compares the
    digest of the arguments each replayed call was made with to the digest of the call the
    fault-free run made at that identity. Every other ``arguments changed`` warning of the
    runtime that hands a recorded outcome over is a finding too: a ``ctx.chat`` still open
    at the point, which the re-entered action re-attaches to (no call is replayed) although
    its setup's configuration changed, went unreported before. (A call that had started
    and runs again with its new arguments hands nothing over: not a finding.)

    Args:
        base: the fault-free run (of the old agent, for an upgrade).
        rec: the recovery.

    Returns:
        One finding per action execution, naming its calls (``c1 (module:qualname)``).
    """
    by_execution: dict[tuple[Any, str], list[str]] = {}
    for _, call in rec.replayed:
        was, now = base.digests.get(call, ""), rec.digests.get(call, "")
        if was and now and was != now:
            execution, _, ordinal = call[1].rpartition("/")
            by_execution.setdefault((call[0], execution), []).append(
                f"{ordinal} ({rec.targets.get(call, '?')})")
    out = []
    for (key, execution), calls in by_execution.items():
        shown = ", ".join(calls[:4]) + (f" and {len(calls) - 4} more" if len(calls) > 4 else "")
        said = rec.changes.get((key, execution))
        out.append(f"key {key!r}: {execution}: recorded outcomes handed to calls with other "
                   f"arguments: {shown}" + (f" ({said})" if said else ""))
    for (key, execution), said in rec.changes.items():  # no replayed call showed it: a
        if (key, execution) not in by_execution:  # chat still open re-attached to, say
            out.append(f"key {key!r}: {execution}: the runtime warned: {said}")
    return out


def _observe(rec: Recorder, result: Any, seen: list[tuple[int, Sighting]]) -> Observed:
    return Observed(
        executed=rec.executed, replayed=rec.replayed, recorded=rec.recorded,
        targets=rec.targets, digests=rec.digests, results=rec.results,
        outputs=[(k, portable(shape(v)), short(v)) for k, v in rec.outputs],
        errors=[_error_view(e) for e in result.errors] if result is not None else [],
        error_tracebacks=[e.traceback or "" for e in result.errors] if result is not None
        else [],
        divergences=rec.divergences, finished=rec.finished, changes=rec.changes,
        sightings=list(seen))


def _wrapped(fn: Any) -> Any:
    """What ``fn`` calls.

    Returns:
        The function a decorator, a static method or a partial wraps, or a callable
        object's ``__call__``; ``None`` when nothing.
    """
    inner = getattr(fn, "__wrapped__", None) or getattr(fn, "__func__", None) \
        or getattr(fn, "func", None)
    if inner is not None or isinstance(fn, (types.FunctionType, type)):
        return inner
    method = type(fn).__dict__.get("__call__")
    return method if isinstance(method, types.FunctionType) else None


def agent_code(plan: AgentPlan) -> tuple[list[dict[str, Any]], list[types.CodeType]]:
    """The globals of the modules that define the plan's actions, and the actions' code.

    Its sub-agents' actions too; the framework's own actions are left out.

    Returns:
        One globals dict per module (each once), and the code objects of every action
        function and of the functions it wraps.
    """
    found: dict[int, dict[str, Any]] = {}
    codes: list[types.CodeType] = []
    plans = [plan]
    while plans:
        p = plans.pop()
        plans.extend(p.subagents.values())
        for act in p.actions.values():
            try:
                fn: Any = act.function.resolve()
            except Exception:  # noqa: BLE001,S112 - not importable: nothing to watch there
                continue
            for _ in range(8):  # the function, and what it wraps (a few levels)
                code = getattr(fn, "__code__", None)
                if isinstance(code, types.CodeType):
                    codes.append(code)
                fn = _wrapped(fn)
                if fn is None:
                    break
            ns = getattr(inspect.unwrap(act.function.resolve()), "__globals__", None)
            if isinstance(ns, dict) and not str(ns.get("__name__", "")).startswith(
                    "flink_agents_py."):
                found[id(ns)] = ns
    return list(found.values()), codes


def fault_free(setup: Setup, tee: TeeJournal | None
               ) -> tuple[Observed, list[str | None], list[tuple[int, int]]]:
    """The fault-free run: what it did, the snapshot after each host callback, and marks.

    Args:
        setup: how to run the agent.
        tee: the journal the run appends to (kept for recoveries), or ``None``.

    Returns:
        What the run did, the snapshots (JSON text; ``None`` at point 0, a fresh start),
        and per point ``(outputs, error records)`` emitted by then.
    """
    if setup.reset is not None:
        setup.reset()
    rec = Recorder()
    env = LocalExecutionEnvironment(options=HostOptions(
        max_in_flight=setup.max_in_flight, journal=tee, metrics=False, observer=rec,
        lineage=setup.lineage))
    job = setup.job(env)
    snapshots: list[str | None] = [None]
    marks: list[tuple[int, int]] = [(0, 0)]

    def on_step(j: Any) -> None:
        rec.step += 1
        snapshots.append(json.dumps(j.snapshot()))
        marks.append((len(rec.outputs), len(j.result.errors)))

    with watching(lambda: rec.step + 1, *agent_code(setup.plan)) as seen:
        result = job.run(on_step=on_step)
    return _observe(rec, result, seen), snapshots, marks


def run_recovery(setup: Setup, snapshot: str | None) -> Observed:
    """Restore a new runtime from ``snapshot`` and run the job to completion.

    Args:
        setup: how to run the agent (its journal starts with what the crashed attempt
            appended).
        snapshot: the state's JSON text (``None``: start afresh).

    Returns:
        What the recovery did (``failure`` set when it could not finish).
    """
    if setup.reset is not None:
        setup.reset()
    journal: Journal | None = None
    if setup.journal_factory is not None:
        journal = setup.journal_factory()
        for key, call_id, record in setup.journaled:  # what the crashed attempt left behind
            journal.append(key, call_id, record)
    rec = Recorder()
    env = LocalExecutionEnvironment(options=HostOptions(
        max_in_flight=setup.max_in_flight, journal=journal, metrics=False, observer=rec,
        lineage=setup.lineage))
    job = setup.job(env)
    if snapshot is not None:
        job.restore(json.loads(snapshot))
    result = None
    failure = ""
    with _quiet_runtime_log(), watching(lambda: 0, *agent_code(setup.plan)) as seen:
        try:
            result = job.run()
        except Exception as e:  # noqa: BLE001 - a recovery that cannot finish is a finding
            failure = f"{described(e)}\n" + "".join(
                traceback.format_exception(e)).rstrip()
    out = _observe(rec, result, seen)
    out.failure, out.completed = failure, not failure
    return out
