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
import logging
from collections.abc import Callable
from types import CoroutineType, GeneratorType
from typing import Any

from ...api import Event, OutputEvent, ResourceType, SerializationError
from ...api.internal import EVENT_ID_SOURCE
from ...plan import ActionPlan, AgentPlan, warn_if_returned
from .._builtins import BUILTIN_NAMES
from .._failures import FailureLog, never_awaited, unless_stopping
from .._memory_events import WRITE_TYPES, send_memory_events
from .._resources import ResourceEnvironment, check_resources
from .._serde import event_json
from .._spend import spend_windows
from .._unread import logged
from ..context._action_context import ActionContext
from ..context._calls import DurableCall, not_its_call
from ..context._long_term_memory import begin_lineage, commit_long_term_memory
from ..recorder._execution import ActionExecution
from ..recorder._ledger import CallLedger, Failpoint, Journal
from ..recorder._state import InflightAction, KeyState, RunState, StateFormatError
from ..recorder._versioning import (
    action_or_removed,
    missing_subagent,
    restored_event,
    stand_in_event,
)
from ._at_once import (
    REPORTED,
    dispatch_emitted,
    single_input_action,
    start_at_once,
    unsupported_await,
)
from ._carry_out import carry_out
from ._commands import StartWait
from ._completion import commit_memory, commit_spend, completion_error, emit_output, report_failure
from ._damaged import read_run, unreadable_record
from ._executor import IOExecutor
from ._inbox import Inbox, InboxQueries
from ._invocation_end import check_invocation, env_of
from ._observer import Observer, probe_of
from ._results import ErrorRecord, StepResult, event_of, input_event, input_form, unqueued_record
from ._siblings import new_siblings
from ._stepper import STEPPING_LOOP, leave_stepping, running_loop, set_running_loop
from ._subgraph import plan_at, route_at_root, route_in_scope
from ._tasks import Delivery as _Delivery
from ._tasks import Step as _Step
from ._tasks import Task as _Task
from ._tasks import memories
from ._unfinished import UnfinishedCore

__all__ = ["AgentCore", "StepResult", "ErrorRecord"]

log = logging.getLogger("flink_agents_py.runtime")
_UNREAD: Any = object()  # ``advance``'s run not read by ``on_input``
_RUNNING: Any = object()  # ``_step``: the coroutine has not returned


class AgentCore(UnfinishedCore, InboxQueries):
    """Runs an ``AgentPlan`` for many keys; hosts call it from a single thread.

    Args:
        plan: the compiled agent.
        max_in_flight: the most I/O calls running at once across all keys.
        max_in_flight_per_key: the most of them one key runs at once (``IOExecutor``).
        notify: called with a key (from an executor thread) when I/O of that key completed;
            the host must then call ``advance`` for it on its own thread.
        journal: an optional write-ahead journal of durable call outcomes.
        failpoint: a test hook (see ``Failpoint``).
        observer: receives what the core does (metrics, event log); see ``Observer``. The
            core reports to its ``Probe`` (``probe_of``).
        key_value: a key's value (``ctx.key``, errors) from the host's key (``KeyEncoding``).
        output_check: raises for an output the host's output type cannot hold (``emit_output``).
    """

    def __init__(
        self, plan: AgentPlan, *, max_in_flight: int = 32,
        notify: Callable[[Any], None] | None = None,
        journal: Journal | None = None, failpoint: Failpoint | None = None,
        observer: Observer | None = None, key_value: Callable[[Any], Any] | None = None,
        lineage: str | None = None, output_check: Callable[[Any], Any] | None = None,
        max_in_flight_per_key: int | None = None,
    ) -> None:
        self.plan, self._key_value = plan, key_value or (lambda key: key)  # key -> its value
        self.output_check = output_check  # a host's declared output type (``emit_output``)
        self.lineage = lineage  # the job's (``HostOptions.lineage``): keys' memory epochs
        self._epochs = bool(plan.resources.get(ResourceType.VECTOR_STORE)) or (
            lineage is not None and bool(plan.resources.get(ResourceType.AGENT)))  # (see below)
        self.probe = probe_of(observer)  # what the core reports to (``Probe``)
        self.failpoint, self.journal = failpoint, journal
        self.resources = ResourceEnvironment(plan)
        self._windows = spend_windows(plan)  # (an old spend entry's window: ``commit_memory``)
        self.executor = IOExecutor(max_in_flight, max_in_flight_per_key=max_in_flight_per_key)
        self._notify = notify or (lambda key: None)
        self._live: dict[Any, dict[str, _Task]] = {}
        self._envs: dict[tuple[str, ...], ResourceEnvironment] = {(): self.resources}
        self._cancelled: list[str] = []
        self._cancelling = []
        self._inbox = Inbox()
        self._fns: dict[str, Callable[..., Any]] = {}
        self._routes: dict[str, tuple[ActionPlan, ...]] = {}  # the root plan's, by event type
        self._run_tokens: dict[Any, Any] = {}  # the probe's token of a run in flight, by key
        self.counters: collections.Counter[str] = collections.Counter()
        self.ledger = CallLedger(self.counters, self.probe, journal, failpoint)
        self._failure_log = FailureLog(log)
        self._warned_sites: set[str] = set()  # lazy calls never awaited, warned once a line
        self._single: Any = _UNREAD  # ``single_input_action``, found at the first run

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
        self.join_cancels()  # (runs given up: their remote runs' cancel requests)
        self.executor.stop()
        for env in self._envs.values():
            env.close()

    def on_input(self, key: Any, record: Any, state: KeyState, where: str = "",
                 source: str | None = None, *, fresh: bool = False) -> StepResult:
        """Queue ``record`` for ``key`` and advance the key.

        A record with no JSON form is not queued but becomes an ``ErrorRecord`` (action
        ``"<input>"``, execution id ``where`` e.g. ``"record 8"``, input ``shown_input``).
        ``fresh``: no one else holds ``record`` (the Flink operator's, decoded for this
        call), so an action starting on it now may get it without a copy (``input_event``).

        Returns:
            What the key's advance produced.
        """
        try:
            stored = input_form(record, key, self._key_value)
        except SerializationError as e:
            res = self.advance(key, state)
            res.errors.append(logged(unqueued_record(self._key_value(key), record, e, where,
                                                     source)))
            return res
        unreadable = None  # the run, read once (before the queue is found from it)
        try:
            run = state.run
        except StateFormatError as e:  # damaged: reported here, dropped (``run`` None)
            unreadable, run = read_run(state, lambda err: self.unreadable_run(key, err), e), None
        state.push_input(stored, source)  # its JSON form, as keyed state holds it (``input_event``)
        res = self.advance(key, state, _run=run, _fresh=(stored, record) if fresh else None)
        if unreadable is not None:
            res.errors.insert(0, unreadable)
        return res

    def advance(self, key: Any, state: KeyState, *, _run: Any = _UNREAD,
                _fresh: tuple[Any, Any] | None = None) -> StepResult:
        """Run everything of ``key`` that can run now, then flush its state.

        Starts the next queued input when the key is idle, rebuilds action executions that
        are in state but not live (after a restore), applies completed I/O, and steps actions
        until each has completed or waits for I/O. ``_run``: the run ``on_input`` read;
        ``_fresh``: ``on_input``'s (stored form, fresh record), see ``input_event``.

        Returns:
            The outputs and errors produced, and whether the key is still busy.
        """
        res = StepResult()
        if _run is not _UNREAD:
            run = _run
        else:  # (``_read_run`` inline, its run kept: read once a callback)
            try:
                run = state.run
            except StateFormatError as e:  # damaged: reported here, dropped (``read_run``)
                unreadable = read_run(state, lambda err: self.unreadable_run(key, err), e)
                if unreadable is not None:
                    res.errors.append(unreadable)
                run = state.run
        shown = self._key_value(key)  # the key's value; ``key`` keys the core's own tables
        live = self._live.get(key)
        if live is None:
            live = self._live[key] = {}
        counters, probe = self.counters, self.probe
        if probe is not None:  # (no reading an earlier callback kept: ``Probe.reading``)
            probe.reading = None
        token: Any = None  # the probe's token of a run this callback started
        held = None  # early events the last run did not claim, for the next (``_waits``)
        while True:
            if run is None:
                if live:
                    live.clear()
                nxt = state.pop_input()
                if nxt is None:
                    break
                seq, record = nxt
                run = RunState(seq=seq, input=record, waits=held or {}, siblings_kept=True,
                               ltm_done=[], source=state.popped_source)
                state.run = run
                if self._epochs:  # (``begin_lineage`` does nothing for other plans)
                    begin_lineage(self.plan, state, self.lineage, shown)  # the key's epoch
                counters["runs_started"] += 1
                event, data = input_event(f"r{seq}", record, _fresh[1] if _fresh is not None
                                          and record is _fresh[0] else None)
                if probe is not None:  # the run's start and its event's dispatch: one hook
                    token = probe.input_dispatched(shown, seq, event)
                # the straight line of a one-action run (``_at_once``; decided once)
                if (single := self._single) is _UNREAD:
                    single = self._single = single_input_action(self)
                if single is not None:  # (``None``, ``REPORTED``: its action finished, as did
                    step = start_at_once(self, single, shown, state, run, res, live, key,
                                         event, data, token)  # its run: ``_at_once``)
                else:  # (the general path)
                    step = _Step(shown, state, run, res, live, collections.deque(), key)
                    self._dispatch(step, event, None, data=data, own=True, reported=True)
            else:
                if run.parked and not self._inbox.has(key):
                    break  # only its outside event or timer moves it on (``_waits``)
                token = None  # started in an earlier callback (or another process)
                step = _Step(shown, state, run, res, live, collections.deque(), key)
                self._reconcile_live(step)
                self._apply_deliveries(step)
            if step is not None and step.ready:
                ready = step.ready
                loop = running_loop()  # the stand-in loop: once per callback
                set_running_loop(STEPPING_LOOP)
                try:
                    while ready:
                        self._step(step, ready.popleft())
                finally:
                    leave_stepping(loop)
            if run.inflight:
                if token is not None:
                    self._run_tokens[key] = token
                break
            if self.failpoint is not None:
                self.failpoint("run_completed", shown, {"seq": run.seq})
            more = state.queued() > 0  # (else no input to pop: the loop ends below)
            held = self._run_ended(key, run, res, more) if run.waits else None
            state.run = None
            if live:
                live.clear()
            counters["runs_completed"] += 1
            if probe is not None and step is not REPORTED:  # (else reported with its action)
                if token is None and key in (tokens := self._run_tokens):
                    token = tokens[key]  # (kept by the callback that started it)
                    del tokens[key]
                probe.run_completed(shown, run.seq, token)
            if self.journal is not None:
                self.journal.run_completed(shown, f"r{run.seq}")
            run = None  # as ``state.run`` is now
            if not more:
                break
        res.busy = run is not None  # (the loop ends idle only with nothing queued)
        if run is not None and run.waits:
            self._park(key, state, res)  # only waits: not busy, nothing of it kept live
        if not res.busy and key in self._live:  # (``pop`` without a call)
            del self._live[key]
        state.flush()
        return res

    def unreadable_run(self, key: Any, error: StateFormatError) -> ErrorRecord:
        """The error record (returned) of ``key``'s damaged stored run, dropped."""
        return unreadable_record(self._key_value(key), error, self.counters)

    # -- internals ---------------------------------------------------------------------
    def _read_run(self, key: Any, state: KeyState) -> ErrorRecord | None:
        try:  # (read inline: twice a record; ``read_run`` once a damaged run raised)
            state.run  # noqa: B018 - read here, so that a damaged run fails nothing else
        except StateFormatError as e:
            return read_run(state, lambda err: self.unreadable_run(key, err), e)
        return None

    def resources_at(self, path: tuple[str, ...]) -> ResourceEnvironment:
        """The resources of the plan at the internal sub-agent ``path`` (``()``: the agent's)."""
        found = self._envs.get(path)
        if found is None:
            found = self._envs[path] = ResourceEnvironment(  # falling back to its parent's
                plan_at(self.plan, path), self.resources.parallelism,
                parent=self.resources_at(path[:-1]), path=path)
        return found

    def _new_task(self, step: _Step, exec_id: str, rec: InflightAction,
                  event: Event | None = None, restored: bool = False) -> _Task:
        """A live execution of ``rec`` (given ``event``, or one built from its JSON form).

        ``restored``: ``rec`` was in state but not live (a restore); an event the new code
        cannot rebuild, or no longer triggers the action by, fails the execution alone.

        Returns:
            The task (its ``refused`` set when it cannot replay).
        """
        run = step.run
        env = env_of(run, rec.scope) if rec.scope is not None else None
        path = tuple(run.invocations[env].plan_path) if env is not None else ()
        plan, resources, gone = self.plan, self.resources, None
        if path:
            try:
                plan = plan_at(self.plan, path)
            except KeyError:  # restored inside an internal sub-agent the new code lacks
                gone = path
            else:
                resources = self.resources_at(path)
        action = plan.actions.get(rec.action) if gone is None else None
        action = action or action_or_removed({}, rec.action)  # (a stand-in: no such action)
        short_term, sensory, key_memory = memories(step.state, run, env)
        ctx = ActionExecution(self.ledger, step.key, exec_id, rec, run, action.config,
                              short_term, sensory, env, plan, resources, key_memory)
        if gone is not None:
            return _Task(action, stand_in_event(rec.event), ctx,
                         refused=missing_subagent(ctx, gone, self.plan))
        if not restored:
            return _Task(action, event if event is not None else event_of(rec.event), ctx)
        # restored: its event as the new code rebuilds it, or why the execution cannot replay
        event, refused = restored_event(ctx, action, rec.action in BUILTIN_NAMES)
        return _Task(action, event, ctx, refused=refused)

    def _reconcile_live(self, step: _Step) -> None:
        run, live = step.run, step.live
        same = live.keys() == run.inflight.keys()  # (the usual: nothing to drop or restore)
        for exec_id in () if same else [e for e in live if e not in run.inflight]:
            del live[exec_id]
        restored = () if same else [e for e in run.inflight if e not in live]
        added = new_siblings(self.plan, run, restored, step.key) if restored else ()
        for exec_id, rec in run.inflight.items():
            task = live.get(exec_id)
            if task is None:  # in state but not live: restored (or added for a restored event)
                task = live[exec_id] = self._new_task(step, exec_id, rec, restored=True)
                task.reentered = exec_id not in added
                self.counters["actions_reentered"] += task.reentered
                step.ready.append(task)
            else:  # the host may hand over fresh objects each callback
                env = env_of(run, rec.scope) if rec.scope is not None else None
                task.ctx.rebind(rec, run, *memories(step.state, run, env))

    def _apply_deliveries(self, step: _Step) -> None:
        items: list[_Delivery] = self._inbox.take(step.identity)
        for d in items:
            task = step.live.get(d.ctx.execution_id)
            if task is None or task.ctx is not d.ctx or d.call.done:
                continue  # from an execution that no longer exists, or a cancelled call
            d.ctx.record_outcome(d.call, d.ok, d.value)
            if task.waiting is d.call or task.ending is not None:
                task.waiting = None
                step.ready.append(task)

    def _dispatch(self, step: _Step, event: Event, scope: str | None, check: bool = True,
                  data: dict[str, Any] | None = None, own: bool = False,
                  reported: bool = False) -> None:
        """Route ``event`` in ``scope`` and queue the actions it triggers.

        ``check``: see whether the invocation ``scope`` completed (off while a finishing
        action's events are dispatched one by one; ``_finish`` checks after the last).
        ``data``: the event's JSON form when already made. ``own``: ``event`` was built from
        ``data`` for this dispatch, or is a fresh object no code holds (what a built-in action
        sent), so the first action triggered may have it (the others get their own copy, as
        after a restore). ``reported``: the probe has it (a run's input event, ``advance``).
        """
        self.counters["events"] += 1
        probe = self.probe  # an output let through as it is: one hook for it and its event
        output = scope is None and isinstance(event, OutputEvent)
        out = output and self.output_check is None
        if probe is not None and not reported:
            if out:
                probe.output_dispatched(step.key, event)
            else:
                probe.event_dispatched(step.key, event)
        if scope is None:
            etype = event.type
            actions = self._routes.get(etype)
            if actions is None:
                actions = self._routes[etype] = route_at_root(self.plan, etype, event.id)
            if out:
                step.res.outputs.append(event.output)  # type: ignore[attr-defined]
            elif output:  # an error record if its type refuses it
                emit_output(step, event, self.output_check, probe)  # type: ignore[arg-type]
        else:
            actions = route_in_scope(self.plan, step.run, scope, event)
        if actions and data is None:
            data = event_json(event, f"event {event.id}")
        siblings = [a.name for a in actions] if len(actions) > 1 else None  # (``_siblings``)
        for action in actions:
            assert data is not None
            exec_id = f"{event.id}/{action.name}"
            rec = InflightAction(action=action.name, scope=scope, event=data, siblings=siblings)
            step.run.inflight[exec_id] = rec
            task = step.live[exec_id] = self._new_task(step, exec_id, rec,
                                                        event if own else None)
            own = False
            step.ready.append(task)
        if scope is not None and check:
            check_invocation(step, scope, self.ledger)

    def _step(self, step: _Step, task: _Task, thrown: BaseException | None = None) -> None:
        """Run ``task``'s action until it completes or waits (``thrown`` first: ``_at_once``)."""
        ctx = task.ctx
        if task.ending is not None:  # returned; waits for the calls it started (``_end``)
            if not ctx.finished:
                self._end(step, task, task.ending[0])
            return
        token = None  # set: the event id source is ctx's already (first step, nothing between)
        if not task.started:
            task.started = True
            name = task.action.name
            self.counters["actions_started"] += 1
            if (probe := self.probe) is not None:
                task.token = probe.action_started(step.key, ctx.execution_id, name,
                                                  task.reentered)
            if task.refused is not None:  # restored, and cannot replay: the code never runs
                self._end(step, task, task.refused)
                return
            token = EVENT_ID_SOURCE.set(ctx.event_id_source)
            keep = False
            try:
                fn = self._fns.get(name) if not ctx.env else None
                if fn is None:
                    fn = task.action.function.resolve()
                    if not ctx.env:  # the agent's own actions, by name
                        self._fns[name] = fn
                # the user's action gets its context; a built-in one, the execution itself
                out = fn(task.event, ctx if name in BUILTIN_NAMES else ActionContext(ctx))
                # keep: an async action (or a generator: ``yield from ctx.execute_async``)
                resumable = type(out) is CoroutineType or type(out) is GeneratorType
                keep = resumable and not ctx.commands and not self._cancelled
            except BaseException as e:  # noqa: BLE001 - a failing action is an outcome
                unless_stopping(e)  # (KeyboardInterrupt, SystemExit: the process ends)
                self._drain(step, task, None)
                self._end(step, task, e)
                return
            finally:
                if not keep:
                    EVENT_ID_SOURCE.reset(token)
            if not keep:  # (each check below skipped when there is nothing to check)
                token = None
                misuse = None if resumable or not ctx.calls else never_awaited(name, ctx.calls)
                if misuse is not None:  # a plain action's waits: nothing will answer them
                    ctx.commands = [c for c in ctx.commands if not isinstance(c, StartWait)]
                if ctx.commands or self._cancelled:  # (else ``_drain`` has nothing to do)
                    self._drain(step, task, None)
                if not resumable:
                    if out is not None:
                        warn_if_returned(task.action, out, ctx.emitted)
                    self._end(step, task, misuse)
                    return
            task.coro = out
        elif (probe := self.probe) is not None:  # resumed: its code runs after what the
            probe.reading = None  # probe's last hook saw (``Probe.reading``)
        coro = task.coro
        assert coro is not None
        error = thrown
        returned: Any = _RUNNING  # what the coroutine returned, once it has
        while True:
            if token is None:
                token = EVENT_ID_SOURCE.set(ctx.event_id_source)
            try:
                if error is not None:
                    yielded = coro.throw(error)
                    error = None
                else:
                    yielded = coro.send(None)
            except StopIteration as stop:
                returned = stop.value  # finished below: outside this handler (as a plain one)
            except BaseException as e:  # noqa: BLE001 - a CancelledError of its own too
                unless_stopping(e)
                self._drain(step, task, None)
                self._end(step, task, e)
                return
            finally:
                EVENT_ID_SOURCE.reset(token)
                token = None
            if returned is not _RUNNING:  # (what the next action dispatched runs in: ``_at_once``)
                task.coro = None  # (returned: nothing to close)
                if returned is not None:
                    warn_if_returned(task.action, returned, ctx.emitted)
                if ctx.commands or self._cancelled:
                    self._drain(step, task, None)
                task.ending = (None,)  # ``_end`` inline
                if not ctx.calls or self._settled(step, task):
                    self._finish(step, task, None)
                return
            if isinstance(yielded, DurableCall):
                error = self._drain(step, task, yielded)
                if error is not None or yielded.done:
                    continue
                task.waiting = yielded
                return
            self._drain(step, task, None)
            error = unsupported_await(task.action.name, yielded)

    def _drain(self, step: _Step, task: _Task, awaited: DurableCall | None
               ) -> BaseException | None:
        """Carry out the commands ``task``'s action recorded in its last step, in order.

        Then check the invocations they cancelled, and start the lazy call the action awaits.

        Returns:
            What starting the awaited call raised (thrown into the action), or ``None``.
        """
        ctx = task.ctx
        commands = ctx.commands  # taken: those carrying them out records go to a new list
        if commands:
            ctx.commands = []
            for command in commands:
                carry_out(self, step, ctx, command)
        if self._cancelled:  # their waits end, then each call is checked (``_waits``)
            self._end_cancelled(step)
        if awaited is not None and task.ctx.calls.get(awaited.ordinal) is not awaited:
            return not_its_call(awaited, task.ctx.execution_id)  # its outcome goes elsewhere
        if awaited is not None and not awaited.done and awaited.start is not None:
            try:
                carry_out(self, step, task.ctx, awaited.start)
            except Exception as e:  # noqa: BLE001 - e.g. an event with no JSON form
                return e
        return None

    def _end(self, step: _Step, task: _Task, error: BaseException | None) -> None:
        """The action returned or raised: finish it once the calls it started are recorded."""
        task.ending = (error,)
        if not task.ctx.calls or self._settled(step, task):
            self._finish(step, task, error)

    def _finish(self, step: _Step, task: _Task, error: BaseException | None) -> None:
        ctx = task.ctx
        if ctx.used_long_term_memory:  # its writes: one durable call; later reads see them
            error = commit_long_term_memory(ctx, error)
        if error is None and ctx.diverged is None and (ctx.calls or task.reentered):
            error = completion_error(ctx, task.reentered, self._warned_sites)
        if error is None and ctx.memory_used and (  # Flink Agents' memory write events
                WRITE_TYPES[0] in (by := ctx.plan.actions_by_event) or WRITE_TYPES[1] in by):
            error = send_memory_events(ctx)
        ctx.finished = True
        if ctx.diverged is not None:  # a replay divergence fails the action, caught or not
            error = ctx.diverged
        scope, exec_id = ctx.scope, ctx.execution_id
        if exec_id in (live := step.live):  # (``pop`` without a call)
            del live[exec_id]
        if exec_id in (inflight := step.run.inflight):
            del inflight[exec_id]
        if step.run.invocations:  # sub-agent calls it left open: cancelled (``_waits``)
            self._cancel_left_behind(step, ctx)
        if task.coro is not None:
            task.coro.close()
        if (probe := self.probe) is not None:
            probe.action_finished(step.key, ctx.execution_id, task.action.name, error, task.token)
        if error is not None:
            report_failure(step, task, error, self._failure_log, self.counters)
            commit_spend(ctx, step.state, self._windows)  # its answered calls' spend counts
        else:
            self.counters["actions_completed"] += 1
            if ctx.memory_used or ctx.key_merges:  # (else it has nothing to commit)
                commit_memory(ctx, step.state, step.run, self._windows)
            # a built-in action's events are fresh objects nothing else holds, built from
            # values rebuilt from their JSON forms: the first action they trigger may have them
            fresh = task.action.name in BUILTIN_NAMES
            emitted = ctx.emitted
            if scope is None and emitted and emitted[-1][1] is not None:  # (it triggers one)
                dispatch_emitted(self, step, emitted, fresh, ctx.handed)  # (``_at_once``)
            else:
                for event, data in emitted:
                    self._dispatch(step, event, scope, check=False, data=data, own=fresh)
        if scope is not None:
            check_invocation(step, scope, self.ledger)
