"""A run that starts and ends in one callback, without the general machinery.

Most runs are one action: the agent's only action on ``InputEvent`` takes the input, sends
its ``OutputEvent`` (or nothing) and returns at once, without a durable call, memory, or
an await. For such a run the core's general path dispatches the input event (routing,
sibling lists, a copy of the event for each action), builds the task through the code that
also rebuilds restored executions, queues it, steps it through the loop that resumes
awaiting coroutines, finishes it through the checks of every kind of completion, and
dispatches each output the same way: a few dozen Python calls per record spent on cases the
run does not have (issue 31, part 4).

``start_at_once`` runs the first step of such a run in one straight line. Whether the plan
allows it is decided once per core (``single_input_action``: exactly one action of the
agent's own, not a built-in one, is triggered by ``InputEvent``); whether the action keeps
to the simple case is seen as it goes, and at the first thing it does that the simple case
does not cover (a durable call, a memory, an await, an event that triggers an action, an
output its host checks, an exception) the step is handed to the general code at the very
point the general path would have reached, with the same objects in the same state, so what
follows is the general path's own. What the straight line does is what the general path
does for the simple case, in the same order: the same counters, probe hooks (metrics, event
log, traces), keyed state, outputs and event ids. ``tests/test_at_once.py`` runs programs
with it and without it and compares everything observable.
"""

from __future__ import annotations

import collections
from sys import exc_info
from types import CoroutineType, GeneratorType
from typing import TYPE_CHECKING, Any, Protocol

from ...api import ChatRequestEvent, Event, OutputEvent, UnsupportedAwaitError
from ...api.internal import EVENT_ID_SOURCE
from ...plan import ActionPlan, warn_if_returned
from .._builtins import BUILTIN_NAMES, CHAT_ROUTES
from .._failures import never_awaited, unless_stopping
from .._memory_events import WRITE_TYPES
from ..context._action_context import ActionContext
from ..context._calls import DurableCall
from ..recorder._execution import ActionExecution
from ..recorder._state import InflightAction, KeyState, RunState
from ._commands import StartWait
from ._completion import commit_memory
from ._observer import Probe
from ._results import StepResult, event_of
from ._stepper import STEPPING_LOOP, leave_stepping, running_loop, set_running_loop
from ._subgraph import route_at_root
from ._tasks import Step, Task

if TYPE_CHECKING:
    import collections.abc

    from ...api import Budget
    from ...plan import AgentPlan
    from .._resources import ResourceEnvironment
    from ..recorder._ledger import CallLedger, Failpoint


class CoreParts(Protocol):
    """What of ``_core.AgentCore`` the straight line uses (the core imports this module)."""

    plan: AgentPlan
    resources: ResourceEnvironment
    ledger: CallLedger
    probe: Probe | None
    counters: collections.Counter[str]
    output_check: collections.abc.Callable[[Any], Any] | None
    failpoint: Failpoint | None
    _windows: dict[str, Budget] | None
    _routes: dict[str, tuple[ActionPlan, ...]]
    _fns: dict[str, collections.abc.Callable[..., Any]]
    _cancelled: list[str]

    def _dispatch(
        self,
        step: Step,
        event: Event,
        scope: str | None,
        check: bool = True,
        data: dict[str, Any] | None = None,
        own: bool = False,
        reported: bool = False,
    ) -> None: ...

    def _step(self, step: Step, task: Task, thrown: BaseException | None = None) -> None: ...

    def _drain(
        self, step: Step, task: Task, awaited: DurableCall | None
    ) -> BaseException | None: ...

    def _end(self, step: Step, task: Task, error: BaseException | None) -> None: ...

    def _finish(self, step: Step, task: Task, error: BaseException | None) -> None: ...

    def _settled(self, step: Any, task: Task) -> bool: ...


__all__ = [
    "AT_ONCE",
    "REPORTED",
    "dispatch_emitted",
    "single_input_action",
    "start_at_once",
    "unsupported_await",
]

AT_ONCE = True
"""Whether cores made from now on take the straight line for the runs it covers (tests turn
it off to compare both paths: ``single_input_action``)."""


REPORTED = Step(None, None, None, None, {}, collections.deque(), None)  # type: ignore[arg-type]
"""What ``start_at_once`` returns for a run it finished and reported whole to a probe that
takes such runs in one hook (``Probe.run_at_once``): the core does not report its end again
(nothing is ready in it)."""

_EACH_HOOK = Probe.run_at_once
"""The default ``run_at_once`` (each hook in turn): the core calls the hooks at their sites."""


def single_input_action(core: CoreParts) -> ActionPlan | None:
    """The action ``start_at_once`` may run for ``core``'s plan (asked once per core).

    Returns:
        The agent's own action when it is the only one ``InputEvent`` triggers at the
        agent's root (a built-in action gets the execution itself, not a context: it takes
        the general path), else ``None``.
    """
    routes = core._routes
    actions = routes.get("InputEvent")
    if actions is None:  # found as ``_dispatch`` finds it (and logs what it logs, once)
        actions = routes["InputEvent"] = route_at_root(core.plan, "InputEvent")
    if not AT_ONCE or len(actions) != 1 or actions[0].name in BUILTIN_NAMES:
        return None
    return actions[0]


def dispatch_emitted(
    core: CoreParts,
    step: Step,
    emitted: list[tuple[Event, dict[str, Any] | None]],
    fresh: bool,
    handed: tuple[dict[str, Any], Event] | None = None,
    chat_only: bool = False,
) -> None:
    """Dispatch a completed action's events at the root, in order (``_finish``'s).

    Each goes through ``_dispatch``, except the last when it triggers one action of the
    agent's own, or the built-in chat action for a ``ChatRequestEvent``, and nothing is
    ready in ``step``: the general path would queue that action and step it next, so it is
    dispatched and stepped here (``start_at_once``, with the dispatch's probe hook and the
    execution's own start and end hooks; the built-in gets its execution, as ``_core._step``
    gives it), and finished in the same frame when it keeps to the simple case (a chat's
    answer: its action reads its memory and sends its output), or left waiting for its call
    (a chat's request: the chat action submits its model call there). Only routes found
    already qualify (the first look-up of a type may log that nothing takes it, where
    ``_dispatch`` logs it), no output (its host's check, its listener: ``_dispatch``'s),
    and not while an exception is being handled (what the action raised would be chained
    to it: ``_step`` finishes a coroutine outside its ``StopIteration`` handler).

    Args:
        core: the core.
        step: the finishing action's step.
        emitted: its events with their JSON forms (``ActionExecution.emitted``; the last one
            with its form: it triggers an action).
        fresh: a built-in action's events, fresh objects nothing else holds, built from
            values rebuilt from their JSON forms: the first action they trigger may have them.
        handed: the finishing action's last chat request with the chat action's copy
            (``ActionExecution.handed``).
        chat_only: start only the built-in chat action at once (``_at_once._finished``: its
            first step submits the model call, or ends the chat with its answer dispatched
            through the general path, so no chain of actions each finishing in the frame of
            the one before grows the stack; an event chain may be
            ``EventChainLimitError.LIMIT`` actions long).
    """
    for event, data in emitted[:-1]:
        core._dispatch(step, event, None, check=False, data=data, own=fresh)
    event, data = emitted[-1]
    if AT_ONCE and data is not None and not step.ready and exc_info()[1] is None:
        actions = core._routes.get(event.type)
        if (
            actions is not None
            and len(actions) == 1
            and (
                ((name := (action := actions[0]).name) not in BUILTIN_NAMES and not chat_only)
                or (name == _CHAT_ACTION and type(event) is ChatRequestEvent)
            )  # (a tool response's chat step, the other built-ins: the general path)
            and not isinstance(event, OutputEvent)
        ):
            if fresh:  # (its dispatch is reported with its action's start: ``start_at_once``)
                own = event
            elif handed is not None and handed[0] is data:  # (the copy ``event_of`` builds)
                own = handed[1]
            else:
                own = event_of(data)
            start_at_once(
                core, action, step.key, step.state, step.run, step.res, step.live,
                step.identity, own, data, None, step, event,
            )  # fmt: skip
            return
    core._dispatch(step, event, None, check=False, data=data, own=fresh)


_CHAT_REQUEST = ChatRequestEvent.EVENT_TYPE
_CHAT_ACTION = CHAT_ROUTES[_CHAT_REQUEST]
"""The built-in action that answers a chat's request (the one built-in started at once)."""


def unsupported_await(name: str, awaited: Any) -> UnsupportedAwaitError:
    """The error thrown into action ``name``, which awaited ``awaited`` (not a durable call).

    Returns:
        The error (it says what to await instead).
    """
    return UnsupportedAwaitError(
        f"action {name!r} awaited {type(awaited).__name__}, which the runtime cannot make "
        "durable: actions are stepped by the operator, not by an asyncio loop. Await only "
        "futures a RunnerContext returns, and run other async code through "
        "ctx.durable_execute_async(...)"
    )


def start_at_once(
    core: CoreParts,
    action: ActionPlan,
    key: Any,
    state: KeyState,
    run: RunState,
    res: StepResult,
    live: dict[str, Task],
    identity: Any,
    event: Event,
    data: dict[str, Any],
    token: Any,
    step: Step | None = None,
    sent: Event | None = None,
) -> Step | None:
    """Dispatch a new run's input ``event`` to ``action`` and run its first step.

    As ``AgentCore._dispatch`` (the input event, reported already) and then ``_step`` would,
    in one frame: the execution is recorded in the run, started, and, when it returns at
    once having sent only events that trigger nothing (outputs, usually) and used nothing
    that needs the general completion, finished here. Anything else is handed over where
    the general path would be at that moment (see the module docstring).

    Args:
        core: the core.
        action: ``single_input_action(core)``.
        key: the key's value.
        state: the key's state.
        run: the run just started (``state.run``).
        res: the callback's result.
        live: the key's live executions.
        identity: the key as the host keys it.
        event: the run's input event (the action gets it as it is: ``own``).
        data: its JSON form.
        token: the probe's token of the run (``input_dispatched``'s; ``None`` without one).
        step: the step an event a finishing action sent is dispatched in (``dispatch_emitted``:
            the execution's start and end are its own hooks), else ``None`` (the run's input).
        sent: with ``step``, that event as it was sent: its dispatch is reported with the
            execution's start, in one hook (``Probe.event_triggered``).

    Returns:
        ``None`` when the action finished here (its run has nothing in flight),
        ``REPORTED`` when its run's end was reported too (``Probe.run_at_once``), else the
        step the general path goes on with (its ready queue as the general path left it).
    """
    core.counters["events"] += 1  # (``_dispatch``'s, for the input event)
    name = action.name
    exec_id = f"{event.id}/{name}"
    rec = InflightAction(action=name, scope=None, event=data, siblings=None)
    run.inflight[exec_id] = rec
    ctx = ActionExecution(
        core.ledger,
        key,
        exec_id,
        rec,
        run,
        action.config,
        lambda: state.memory,
        run.sensory,
        None,
        core.plan,
        core.resources,
    )
    # its ``Task`` (live) and the ``Step`` are made when the general code is handed them:
    # nothing reads the key's live executions while its first step runs
    started: Any = None  # the probe's token of the execution's start
    coro: Any = None  # its coroutine, once the general path would have kept it
    loop = running_loop()  # (``advance``'s stepping, for this one task: set once, here
    if loop is not STEPPING_LOOP:  # or by the action whose end dispatched this one)
        set_running_loop(STEPPING_LOOP)
    try:  # ``_step``'s first step, its general cases handed over as they arise
        counters = core.counters
        counters["actions_started"] += 1
        if (probe := core.probe) is not None:
            if step is not None:  # an event a finishing action sent: its dispatch and this
                started = probe.event_triggered(key, sent, name)  # start, in one hook
            else:  # the run's input (reported): one that takes the run whole, the run's
                started = (
                    token
                    if type(probe).run_at_once is not _EACH_HOOK
                    else probe.action_started(key, exec_id, name, False)
                )
        token = EVENT_ID_SOURCE.set(ctx.event_id_source)
        keep = False
        out: Any = None
        try:
            fns = core._fns  # (resolved at its first run; a look-up without a call)
            fn = fns[name] if name in fns else None
            if fn is None:
                fn = fns[name] = action.function.resolve()
            # the user's action gets its context; a built-in one (a chat's), the execution
            out = fn(event, ctx if name in BUILTIN_NAMES else ActionContext(ctx))
            resumable = type(out) is CoroutineType or type(out) is GeneratorType
            keep = resumable and not ctx.commands and not core._cancelled
        except BaseException as e:  # noqa: BLE001 - a failing action is an outcome
            unless_stopping(e)  # (``_core._step``)
            step, task = _handed(
                action, event, ctx, started, None, key, state, run, res, live, identity, step
            )
            core._drain(step, task, None)
            core._end(step, task, e)
            return step
        finally:
            if not keep:
                EVENT_ID_SOURCE.reset(token)
        if not keep:  # a plain action (or a coroutine with something to carry out first)
            if (
                not resumable
                and out is None
                and not ctx.calls
                and not ctx.commands
                and not core._cancelled
            ):  # ``_end`` and ``_finish``: the simple case
                return _finished(
                    core, action, event, ctx, started, key, state, run, res, live, identity, step
                )
            step, task = _handed(
                action, event, ctx, started, None, key, state, run, res, live, identity, step
            )
            misuse = None if resumable or not ctx.calls else never_awaited(name, ctx.calls)
            if misuse is not None:  # a plain action's waits: nothing will answer them
                ctx.commands = [c for c in ctx.commands if not isinstance(c, StartWait)]
            if ctx.commands or core._cancelled:
                core._drain(step, task, None)
            if not resumable:
                if out is not None:
                    warn_if_returned(action, out, ctx.emitted)
                core._end(step, task, misuse)
                return step
            task.coro = out
            core._step(step, task)  # its loop, from the first send
            return step
        coro = out
        try:  # the first send, the event id source still the action's (as in ``_step``)
            yielded = out.send(None)
        except StopIteration as stop:
            if stop.value is None and not ctx.commands and not core._cancelled and not ctx.calls:
                return _finished(
                    core, action, event, ctx, started, key, state, run, res, live, identity, step
                )
            step, task = _handed(  # (its coroutine returned: nothing to close)
                action, event, ctx, started, None, key, state, run, res, live, identity, step
            )
            if stop.value is not None:
                warn_if_returned(action, stop.value, ctx.emitted)
            if ctx.commands or core._cancelled:
                core._drain(step, task, None)
            task.ending = (None,)
            if not ctx.calls or core._settled(step, task):
                core._finish(step, task, None)
            return step
        except BaseException as e:  # noqa: BLE001
            unless_stopping(e)
            step, task = _handed(
                action, event, ctx, started, out, key, state, run, res, live, identity, step
            )
            core._drain(step, task, None)
            core._end(step, task, e)
            return step
        finally:
            EVENT_ID_SOURCE.reset(token)
        # it awaited something: the rest of the first step, then ``_step``'s loop goes on
        task = live[exec_id] = Task(action, event, ctx, out, True, token=started)  # (_handed)
        if step is None:
            step = Step(key, state, run, res, live, collections.deque(), identity)
        if isinstance(yielded, DurableCall):
            error = core._drain(step, task, yielded)
            if error is None and not yielded.done:
                task.waiting = yielded
                return step
        else:
            core._drain(step, task, None)
            error = unsupported_await(name, yielded)
        core._step(step, task, error)
        return step
    except BaseException:  # (SystemExit...) leaves ``advance`` with its task live, as there
        if exec_id in run.inflight and exec_id not in live:
            _handed(action, event, ctx, started, coro, key, state, run, res, live, identity, step)
        raise
    finally:
        if loop is not STEPPING_LOOP:
            leave_stepping(loop)


def _handed(
    action: ActionPlan,
    event: Event,
    ctx: ActionExecution,
    started: Any,
    coro: Any,
    key: Any,
    state: KeyState,
    run: RunState,
    res: StepResult,
    live: dict[str, Task],
    identity: Any,
    step: Step | None,
) -> tuple[Step, Task]:
    """The step and the live task of an execution the general code takes over, started.

    Returns:
        The step (``step``, else a new one, its ready queue empty) and the task
        (``started``: its probe token; ``coro``: its coroutine, once sent), in ``live`` as
        ``_dispatch`` puts it.
    """
    task = live[ctx.execution_id] = Task(action, event, ctx, coro, True, token=started)
    if step is None:
        step = Step(key, state, run, res, live, collections.deque(), identity)
    return step, task


def _finished(
    core: CoreParts,
    action: ActionPlan,
    event: Event,
    ctx: ActionExecution,
    started: Any,
    key: Any,
    state: KeyState,
    run: RunState,
    res: StepResult,
    live: dict[str, Task],
    identity: Any,
    given: Step | None,
) -> Step | None:
    """Finish the execution, which returned at once having made no call (``_finish`` inline).

    Its short-term and sensory memory writes are committed here too, where ``_finish``
    commits them (after its end is reported, before its events are dispatched), unless the
    agent takes memory write events (the general completion sends them first).

    Returns:
        ``None`` when it finished here (or ``given``, the dispatching step, when the rest
        went to it), else the step the general code finished it with.
    """
    memory = ctx.memory_used
    if (
        ctx.used_long_term_memory
        or ctx.key_merges
        or ctx.diverged
        or run.invocations
        or (
            memory
            and (WRITE_TYPES[0] in (by := core.plan.actions_by_event) or WRITE_TYPES[1] in by)
        )
    ):  # what the general completion checks and applies
        task = live[ctx.execution_id] = Task(
            action, event, ctx, None, True, token=started, ending=(None,)
        )  # (``_handed`` inline)
        fallback = given or Step(key, state, run, res, live, collections.deque(), identity)
        core._finish(fallback, task, None)
        return fallback
    ctx.finished = True
    exec_id = ctx.execution_id
    del run.inflight[exec_id]  # (never in ``live``)
    probe = core.probe
    counters = core.counters
    routes = core._routes
    if (
        probe is not None
        and given is None  # (the run's input action: its run ends with it)
        and not memory  # (committed between the end's hook and the outputs' ones)
        and type(probe).run_at_once is not _EACH_HOOK
        and core.output_check is None
        and not run.waits
        and core.failpoint is None
    ):  # a probe that takes the run whole, when it sent only outputs nothing takes: the
        # core's run end (``REPORTED``) as the probe's (``Probe.run_at_once``), in one hook
        outputs: list[OutputEvent] = []
        for sent, _ in ctx.emitted:
            if not isinstance(sent, OutputEvent) or routes.get(sent.type) != ():
                break  # (the loop below, as for any other probe)
            outputs.append(sent)
        else:
            counters["actions_completed"] += 1
            counters["events"] += len(outputs)
            emitted = res.outputs
            for sent in outputs:
                emitted.append(sent.output)
            probe.run_at_once(key, run.seq, event, exec_id, action.name, outputs, started)
            return REPORTED
    if probe is not None:
        probe.action_finished(key, exec_id, action.name, None, started)
    counters["actions_completed"] += 1
    if memory:  # (its writes, as ``_finish`` commits them: after its end, before its events)
        commit_memory(ctx, state, run, core._windows)
    step: Step | None = given
    general = False  # the rest in order through the general dispatch
    for event, data in ctx.emitted:  # ``_dispatch`` at the root, for an event nothing takes
        if (
            not general
            and routes.get(event.type) == ()
            and (core.output_check is None or not isinstance(event, OutputEvent))
        ):
            counters["events"] += 1
            if isinstance(event, OutputEvent):
                if probe is not None:
                    probe.output_dispatched(key, event)
                res.outputs.append(event.output)
            elif probe is not None:
                probe.event_dispatched(key, event)
            continue
        if step is None:
            step = Step(key, state, run, res, live, collections.deque(), identity)
        general = True
        if data is not None and data is ctx.emitted[-1][1] and (
                (kind := event.type) is _CHAT_REQUEST or kind == _CHAT_REQUEST):
            # (``is`` first: ``==`` on the built-in type is a Python call)
            # the last, a chat's request: the chat starts here, nothing else (see below)
            dispatch_emitted(core, step, ctx.emitted[-1:], False, ctx.handed, chat_only=True)
            break
        core._dispatch(step, event, None, check=False, data=data, own=False)
    return step if general else None
