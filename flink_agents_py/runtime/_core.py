"""``AgentCore``: the engine-neutral agent operator.

The core owns a per-key mailbox: one run per key at a time (later inputs of that key wait
in its queue, in order), while runs of different keys proceed independently. A run starts
with an ``InputEvent``; events route to the actions they trigger; actions are coroutines the
core steps on the host's thread; slow calls go to the I/O executor, and their outcomes come
back through an inbox the host drains by calling ``advance`` for the key (a wake-up).

Durability: every state change of a run is plain data in ``KeyState`` (see ``_state.py``):
the started action executions with their triggering events and the outcomes of their
durable calls, the run's sensory memory and the key's short-term memory. An action's events
and memory writes are applied at once when it completes. A host that restores this state
from a checkpoint gets, on the next ``advance`` of the key, every in-flight action re-entered
from its start with its recorded calls replayed instead of executed; completed actions are
not run again. Live objects (coroutines, futures) never enter state.

The core never reads the wall clock and never raises out of ``advance`` for a failing
action: the failure becomes an ``ErrorRecord`` output and the run goes on.
"""

from __future__ import annotations

import collections
import inspect
import logging
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from ..api import (
    Event,
    InputEvent,
    OutputEvent,
    ReplayDivergenceError,
    SerializationError,
    UnsupportedAwaitError,
    event_from_json,
)
from ..plan import ActionPlan, AgentPlan
from ._context import ActionContext, DurableCall, building_events
from ._executor import IOExecutor
from ._failures import FailureLog, FailureMessage, failure_text, never_awaited, redact_text
from ._long_term_memory import commit_long_term_memory
from ._memory import apply_writes
from ._observer import Observer
from ._resources import ResourceEnvironment, check_resources
from ._serde import event_json, from_json_value, is_tagged_model, to_json_value
from ._state import CallRecord, InflightAction, KeyState, RunState
from ._stepper import stepping
from ._subgraph import (
    cancel_invocation,
    deliver_to_caller,
    invocation_result,
    route_in_scope,
    start_call,
)

__all__ = ["AgentCore", "StepResult", "ErrorRecord", "Journal", "Failpoint"]

log = logging.getLogger("flink_agents_py.runtime")



def _input_record(record: Any) -> Any:
    """A queued input record as the agent gets it: a pydantic model queued in its tagged
    JSON form is the model again."""
    return from_json_value(record) if is_tagged_model(record) else record

class ErrorRecord(BaseModel):
    """An action that failed, as emitted on the error output.

    Attributes:
        key: the record key.
        seq: the input's position in its key's sequence.
        action: the failing action's name.
        execution_id: the failing execution's identity.
        error_type: the exception's type name.
        message: the exception's message (secret-looking values redacted).
        input: the input record of the run.
        traceback: where it failed: the traceback with the user's files and lines, and the
            original failure's when it crossed a boundary (a tool, a chat model call, a
            sub-agent, a restore); bounded and redacted (see ``runtime._failures``).
    """

    key: Any
    seq: int
    action: str
    execution_id: str
    error_type: str
    message: str
    input: Any = None
    traceback: str | None = None


@dataclass
class StepResult:
    """What one ``advance`` produced.

    Attributes:
        outputs: ``OutputEvent.output`` values, in emission order.
        errors: failed actions.
        busy: the key still has a run in flight or queued inputs (the host must wake it
            again when I/O completes; see ``AgentCore.wait_for``).
    """

    outputs: list[Any] = field(default_factory=list)
    errors: list[ErrorRecord] = field(default_factory=list)
    busy: bool = False


class Journal:
    """A write-ahead journal of durable call outcomes (the base records nothing).

    Subclasses append each outcome before the action continues and answer lookups at
    recovery for calls the restored checkpoint does not hold.
    """

    def append(self, key: Any, call_id: str, record: CallRecord) -> None:
        """Store ``record`` for ``(key, call_id)``."""

    def lookup(self, key: Any, call_id: str) -> CallRecord | None:
        """Return the record stored for ``(key, call_id)``, or ``None``."""
        return None

    def run_completed(self, key: Any, run: str) -> None:
        """Run ``run`` (``r<seq>``) of ``key`` completed: its entries may be pruned later."""


Failpoint = Callable[[str, Any, dict[str, Any]], None]
"""A test hook called at named points: ``(point, key, info)``. To inject a crash it raises
an exception that is not an ``Exception`` (the core lets those through, so the host's
callback fails and Flink restarts the job). Points: ``"call_recorded"`` (``call_id``),
``"run_completed"`` (``seq``), and the host's ``"element"``, ``"timer"`` and
``"outputs_emitted"`` (``outputs``)."""


class _SafeObserver(Observer):
    """Calls an observer's hooks, logging (never raising) what they throw."""

    def __init__(self, inner: Observer) -> None:
        self._inner = inner
        for name in dir(Observer):  # wrapped once: hooks are on the hot path
            if not name.startswith("_") and callable(getattr(Observer, name)):
                setattr(self, name, self._safe(name, getattr(inner, name)))

    @staticmethod
    def _safe(name: str, hook: Callable[..., Any]) -> Callable[..., None]:
        def safe(*args: Any, **kwargs: Any) -> None:
            try:
                hook(*args, **kwargs)
            except Exception:  # noqa: BLE001
                log.exception("observer hook %s failed", name)

        return safe


@dataclass
class _Task:
    action: ActionPlan
    event: Event
    ctx: ActionContext
    coro: Coroutine[Any, Any, Any] | None = None
    started: bool = False
    reentered: bool = False
    waiting: DurableCall | None = None


@dataclass
class _Step:
    """What one ``advance`` works on: the key, its state and run, the result, the ready queue."""

    key: Any
    state: KeyState
    run: RunState
    res: StepResult
    live: dict[str, _Task]
    ready: collections.deque[_Task] = field(default_factory=collections.deque)


@dataclass
class _Delivery:
    ctx: ActionContext
    call: DurableCall
    ok: bool
    value: Any


class AgentCore:
    """Runs an ``AgentPlan`` for many keys; hosts call it from a single thread.

    Args:
        plan: the compiled agent.
        max_in_flight: the most I/O calls running at once across all keys.
        notify: called with a key (from an executor thread) when I/O of that key completed;
            the host must then call ``advance`` for it on its own thread.
        journal: an optional write-ahead journal of durable call outcomes.
        failpoint: a test hook (see ``Failpoint``).
        observer: receives what the core does (metrics, event log); see ``Observer``.
    """

    def __init__(
        self,
        plan: AgentPlan,
        *,
        max_in_flight: int = 32,
        notify: Callable[[Any], None] | None = None,
        journal: Journal | None = None,
        failpoint: Failpoint | None = None,
        observer: Observer | None = None,
    ) -> None:
        self.plan = plan
        self.observer = _SafeObserver(observer) if observer is not None else None
        self.failpoint = failpoint
        self.resources = ResourceEnvironment(plan)
        self.executor = IOExecutor(max_in_flight)
        self.journal = journal
        self._notify = notify or (lambda key: None)
        self._live: dict[Any, dict[str, _Task]] = {}
        self._envs: dict[tuple[str, ...], ResourceEnvironment] = {(): self.resources}
        self._cancelled: list[str] = []
        self._inbox: dict[Any, list[_Delivery]] = {}
        self._cond = threading.Condition()
        self.counters: collections.Counter[str] = collections.Counter()
        self._failure_log = FailureLog(log)

    # -- host interface ------------------------------------------------------------------
    def open(self) -> None:
        """Check the declared resources, then start the I/O executor.

        Raises:
            AgentsError: what a resource's ``check`` raised, e.g. ``MissingApiKeyError``
                naming the environment variable and the resource (before any record).
        """
        check_resources(self.plan, self._envs)
        self.executor.start()

    def close(self) -> None:
        """Stop the executor and close the resources."""
        self.executor.stop()
        for env in self._envs.values():
            env.close()

    def on_input(self, key: Any, record: Any, state: KeyState) -> StepResult:
        """Queue ``record`` for ``key`` and advance the key.

        A record with no JSON form is not queued: it becomes an ``ErrorRecord`` (action
        ``"<input>"``) and the key goes on with its other records.
        """
        try:
            stored = to_json_value(record, f"input record of key {key!r}")
        except SerializationError as e:
            res = self.advance(key, state)
            res.errors.append(ErrorRecord(key=key, seq=-1, action="<input>", execution_id="",
                                          error_type=type(e).__name__, message=str(e)))
            return res
        # a pydantic model record is queued in its tagged JSON form (keyed state holds JSON)
        # and handed to the agent as the model again (see ``_input_record``)
        state.push_input(stored if isinstance(record, BaseModel) else record)
        return self.advance(key, state)

    def advance(self, key: Any, state: KeyState) -> StepResult:
        """Run everything of ``key`` that can run now, then flush its state.

        Starts the next queued input when the key is idle, rebuilds action executions that
        are in state but not live (after a restore), applies completed I/O, and steps actions
        until each has completed or waits for I/O.
        """
        res = StepResult()
        live = self._live.setdefault(key, {})
        while True:
            run = state.run
            if run is None:
                live.clear()
                nxt = state.pop_input()
                if nxt is None:
                    break
                seq, record = nxt
                record = _input_record(record)
                run = RunState(seq=seq, input=record)
                state.run = run
                self.counters["runs_started"] += 1
                if self.observer is not None:
                    self.observer.run_started(key, seq)
                step = _Step(key, state, run, res, live)
                self._dispatch(step, InputEvent(id=f"r{seq}", input=record), None)
            else:
                step = _Step(key, state, run, res, live)
                self._reconcile_live(step)
                self._apply_deliveries(step)
            while step.ready:
                self._step(step, step.ready.popleft())
            if run.inflight:
                break
            if self.failpoint is not None:
                self.failpoint("run_completed", key, {"seq": run.seq})
            state.run = None
            live.clear()
            self.counters["runs_completed"] += 1
            if self.observer is not None:
                self.observer.run_completed(key, run.seq)
            if self.journal is not None:
                self.journal.run_completed(key, f"r{run.seq}")
        res.busy = state.run is not None or state.queued() > 0
        if not res.busy:
            self._live.pop(key, None)
        state.flush()
        return res

    def has_deliveries(self, key: Any) -> bool:
        """Whether completed I/O of ``key`` waits to be applied by ``advance``."""
        with self._cond:
            return bool(self._inbox.get(key))

    def wait_for(self, key: Any, timeout_s: float) -> bool:
        """Block until completed I/O of ``key`` is waiting, or ``timeout_s`` passes.

        Returns:
            Whether something is waiting.
        """
        with self._cond:
            return self._cond.wait_for(lambda: bool(self._inbox.get(key)), timeout=timeout_s)

    def wait_any(self, timeout_s: float) -> bool:
        """Block until completed I/O of any key is waiting, or ``timeout_s`` passes.

        Returns:
            Whether something is waiting.
        """
        with self._cond:
            return self._cond.wait_for(lambda: any(self._inbox.values()), timeout=timeout_s)

    def live_keys(self) -> list[Any]:
        """Keys with live action executions in this process."""
        return [k for k, v in self._live.items() if v]

    # -- used by ActionContext --------------------------------------------------------
    def submit(self, ctx: ActionContext, call: DurableCall, fn: Callable[..., Any],
               args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Run ``fn`` on the I/O executor for ``ctx``'s action; deliver to its key's inbox."""
        key = ctx.key

        def on_done(ok: bool, value: Any) -> None:
            with self._cond:
                self._inbox.setdefault(key, []).append(_Delivery(ctx, call, ok, value))
                self._cond.notify_all()
            self._notify(key)

        self.executor.submit(fn, args, kwargs, on_done)

    def call_made(self, key: Any, call_id: str, function: str, replayed: bool) -> None:
        """Count one durable call (executed, or answered from its record)."""
        self.counters["calls_replayed" if replayed else "calls_executed"] += 1
        if self.observer is not None:
            self.observer.call_started(key, call_id, function, replayed)

    def outcome_recorded(self, key: Any, call_id: str, record: CallRecord) -> None:
        """An outcome entered keyed state: journal it (before the action goes on)."""
        if self.observer is not None:
            self.observer.call_finished(key, call_id, record.ok, record.value if record.ok
                                        else FailureMessage(record.error_message or "",
                                                            record.traceback))
        if self.journal is not None:
            self.journal.append(key, call_id, record)
        if self.failpoint is not None:
            self.failpoint("call_recorded", key, {"call_id": call_id})

    def journal_lookup(self, key: Any, call_id: str) -> CallRecord | None:
        """Look an outcome up in the journal, when there is one."""
        return self.journal.lookup(key, call_id) if self.journal is not None else None

    def resources_for(self, run: RunState, env: str | None) -> ResourceEnvironment:
        """The resources of scope ``env`` (the agent's own, or an internal sub-agent's)."""
        path = tuple(run.invocations[env].plan_path) if env is not None else ()
        found = self._envs.get(path)
        if found is None:
            found = self._envs[path] = ResourceEnvironment(self.plan_at(path))
        return found

    def plan_at(self, path: tuple[str, ...] | list[str]) -> AgentPlan:
        """The plan of the sub-agent reached by ``path`` of names from the root plan."""
        plan = self.plan
        for name in path:
            plan = plan.subagents[name]
        return plan

    def invocation_cancelled(self, ctx: ActionContext, invocation_id: str) -> None:
        """The caller cancelled an internal sub-agent call: stop its (and its nested calls')
        dispatch now; each completes, as cancelled, once its scheduled actions retire."""
        self._cancelled.extend(cancel_invocation(ctx.run, invocation_id))

    # -- internals ---------------------------------------------------------------------
    def _env_of(self, run: RunState, scope: str | None) -> str | None:
        return run.invocations[scope].env if scope is not None and scope in run.invocations else None

    def _memories(self, state: KeyState, run: RunState, env: str | None
                  ) -> tuple[dict[str, Any], dict[str, Any]]:
        if env is None:
            return state.memory, run.sensory
        inv = run.invocations[env]
        return inv.memory, inv.sensory

    def _new_task(self, step: _Step, exec_id: str, rec: InflightAction) -> _Task:
        env = self._env_of(step.run, rec.scope)
        path = step.run.invocations[env].plan_path if env is not None else []
        action = self.plan_at(path).actions[rec.action]
        short_term, sensory = self._memories(step.state, step.run, env)
        ctx = ActionContext(self, step.key, exec_id, rec, step.run, action.config, short_term,
                            sensory, env)
        return _Task(action=action, event=event_from_json(rec.event), ctx=ctx)

    def _reconcile_live(self, step: _Step) -> None:
        run, live = step.run, step.live
        for exec_id in [e for e in live if e not in run.inflight]:
            del live[exec_id]
        for exec_id, rec in run.inflight.items():
            task = live.get(exec_id)
            if task is None:  # in state but not live: restored from a checkpoint
                task = live[exec_id] = self._new_task(step, exec_id, rec)
                task.reentered = True
                self.counters["actions_reentered"] += 1
                step.ready.append(task)
            else:  # the host may hand over fresh objects each callback
                env = self._env_of(run, rec.scope)
                task.ctx.rebind(rec, run, *self._memories(step.state, run, env))

    def _apply_deliveries(self, step: _Step) -> None:
        with self._cond:
            items = self._inbox.pop(step.key, [])
        for d in items:
            task = step.live.get(d.ctx.execution_id)
            if task is None or task.ctx is not d.ctx or d.call.done:
                continue  # from an execution that no longer exists, or a cancelled call
            d.ctx.record_outcome(d.call, d.ok, d.value)
            if task.waiting is d.call:
                task.waiting = None
                step.ready.append(task)

    def _dispatch(self, step: _Step, event: Event, scope: str | None, check: bool = True,
                  data: dict[str, Any] | None = None) -> None:
        """Route ``event`` in ``scope`` and queue the actions it triggers.

        ``check``: see whether the invocation ``scope`` completed (off while a finishing
        action's events are dispatched one by one; ``_finish`` checks after the last).
        ``data``: the event's JSON form when already made.
        """
        self.counters["events"] += 1
        if self.observer is not None:
            parent = event.id.rsplit("/", 1)[0] if "/" in event.id else None
            self.observer.event_dispatched(step.key, event, parent)
        if scope is None:
            actions = self.plan.actions_for(event.type)
            if isinstance(event, OutputEvent):
                step.res.outputs.append(event.output)
                if self.observer is not None:
                    self.observer.output_emitted(step.key, event.output, event.id)
        else:
            actions = route_in_scope(self, step.run, scope, event)
        if actions and data is None:
            data = event_json(event, f"event {event.id}")
        for action in actions:
            exec_id = f"{event.id}/{action.name}"
            rec = InflightAction(action=action.name, scope=scope, event=data)
            step.run.inflight[exec_id] = rec
            task = step.live[exec_id] = self._new_task(step, exec_id, rec)
            step.ready.append(task)
        if scope is not None and check:
            self._check_invocation(step, scope)

    def _step(self, step: _Step, task: _Task) -> None:
        if not task.started:
            task.started = True
            self.counters["actions_started"] += 1
            if self.observer is not None:
                self.observer.action_started(step.key, task.ctx.execution_id, task.action.name,
                                             task.reentered)
            try:
                with stepping(), building_events(task.ctx):
                    out = task.action.function.resolve()(task.event, task.ctx)
            except Exception as e:  # noqa: BLE001 - a failing action is an outcome
                self._after_send(step, task)
                self._finish(step, task, e)
                return
            self._after_send(step, task)
            if not inspect.iscoroutine(out):
                self._finish(step, task, never_awaited(task.action.name, task.ctx.calls.values()))
                return
            task.coro = out
        assert task.coro is not None
        error: BaseException | None = None
        while True:
            try:
                with stepping(), building_events(task.ctx):
                    if error is not None:
                        yielded = task.coro.throw(error)
                        error = None
                    else:
                        yielded = task.coro.send(None)
            except StopIteration:
                self._after_send(step, task)
                self._finish(step, task, None)
                return
            except Exception as e:  # noqa: BLE001
                self._after_send(step, task)
                self._finish(step, task, e)
                return
            self._after_send(step, task)
            if isinstance(yielded, DurableCall):
                if not yielded.done and yielded.start is not None:
                    try:
                        start_call(self, step, task.ctx, yielded)
                    except Exception as e:  # noqa: BLE001 - e.g. a prepare() that raised
                        error = e
                        continue
                if yielded.done:
                    continue
                task.waiting = yielded
                return
            error = UnsupportedAwaitError(
                f"action {task.action.name!r} awaited {type(yielded).__name__}, which the "
                "runtime cannot make durable: actions are stepped by the operator, not by an "
                "asyncio loop. Await only futures a RunnerContext returns, and run other "
                "async code through ctx.durable_execute_async(...)"
            )

    def _after_send(self, step: _Step, task: _Task) -> None:
        """Start what the action submitted in its last step; check cancelled invocations."""
        ctx = task.ctx
        while ctx.pending_starts:
            call = ctx.pending_starts.pop(0)
            if not call.done and call.start is not None:
                start_call(self, step, ctx, call)
        while self._cancelled:
            self._check_invocation(step, self._cancelled.pop(0))

    def _finish(self, step: _Step, task: _Task, error: BaseException | None) -> None:
        ctx = task.ctx
        if error is None and ctx.diverged is None:  # long-term memory writes: one durable call
            error = commit_long_term_memory(ctx)
        ctx.finished = True
        if ctx.diverged is not None:  # a replay divergence fails the action, caught or not
            error = ctx.diverged
        scope = ctx.scope
        step.live.pop(ctx.execution_id, None)
        step.run.inflight.pop(ctx.execution_id, None)
        if task.coro is not None:
            task.coro.close()
        if self.observer is not None:
            self.observer.action_finished(step.key, ctx.execution_id, task.action.name, error)
        if error is not None:
            self.counters["actions_failed"] += 1
            message, text = redact_text(str(error)), failure_text(error)
            self._failure_log.action_failed(ctx.execution_id, task.action.name, step.key,
                                            error, message, text)
            inv = step.run.invocations.get(scope) if scope is not None else None
            if inv is not None:  # captured by the invocation; its caller sees the failure
                if not inv.failed:
                    inv.failed = (f"action {task.action.name!r} raised "
                                  f"{type(error).__name__}: {message}")
                    inv.failed_traceback = text
            if inv is None or isinstance(error, ReplayDivergenceError):  # always reported
                step.res.errors.append(ErrorRecord(
                    key=step.key, seq=step.run.seq, action=task.action.name,
                    execution_id=ctx.execution_id, error_type=type(error).__name__,
                    message=message, input=step.run.input, traceback=text,
                ))
        else:
            self.counters["actions_completed"] += 1
            short_term, sensory = self._memories(step.state, step.run, ctx.env)
            apply_writes(short_term, ctx.short_term.writes)
            apply_writes(sensory, ctx.sensory.writes)
            for event, data in ctx.emitted:
                self._dispatch(step, event, scope, check=False, data=data)
        if scope is not None:
            self._check_invocation(step, scope)

    def _check_invocation(self, step: _Step, scope: str) -> None:
        """Complete invocation ``scope`` if none of its actions is in flight any more.

        Its actions include those of a chat nested in it, which use its memory: after a
        restore, a caller answered from the journal can complete before such a chat.
        """
        while scope is not None:
            inv = step.run.invocations.get(scope)
            if inv is None or any(a.scope == scope or self._env_of(step.run, a.scope) == scope
                                  for a in step.run.inflight.values()):
                return
            del step.run.invocations[scope]
            ok, value = invocation_result(inv, scope)
            deliver_to_caller(self, step, inv, scope, ok, value)
            scope = inv.caller_scope  # a caller that did not wait may have left its scope empty
