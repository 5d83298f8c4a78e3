"""``ActionExecution``: the runtime's side of one action execution, owned by the core.

The user's action gets a thin ``ActionContext`` (``_action_context``: what ``RunnerContext``
promises, each method one line that delegates here); everything that records, replays and
hands commands to the core lives on this object. Built-in actions take it directly.

The execution only records: each durable call gets its identity (the execution's next call ordinal)
and its record in the execution's state entry; a call recorded before (replay) is answered from its
record, and a new one becomes a typed command (``_commands``) that the core carries out after the
action's step. The execution never calls the core: what it tells besides keyed state (journal,
observer, counters) goes through the ``CallLedger`` it is given.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from pydantic import BaseModel

from ...api import (
    CallLimitError,
    ChatMessage,
    Event,
    EventChainLimitError,
    Memory,
    NotInActionContextError,
    ReplayDivergenceError,
    Resource,
    ResourceType,
)
from ...api.internal import EVENT_ID_SOURCE, not_an_event_message
from .._knowledge import durable_view
from .._serde import event_is_plain
from ..context._calls import ChatFuture, DurableCall, SubagentHandle, chat_request
from ..context._long_term_memory import ActionLongTermMemory
from ..context._memory import ActionMemory, KeyMerge, MemoryClock, MemoryLoader
from ..context._nested import inside_durable_function, run_nested, run_nested_async
from ..context._owner import refuse_foreign
from ..core._commands import (
    CallCommand,
    CancelInvocation,
    Command,
    InlineCall,
    RunFunction,
    Settle,
    StartChat,
)
from ..core._stepper import run_inline
from ._call_changes import tool_shape
from ._callees import callees
from ._identity import bound_state
from ._journaled import journaled
from ._ledger import CallLedger
from ._order import check_displaced
from ._outcomes import argument_shape, call_digest, fn_name, legacy_name, store_outcome
from ._partial_forms import as_recorded
from ._replays import Replays
from ._sent import sent_form
from ._setup_shapes import setup_shape
from ._state import CallKind, CallRecord, InflightAction, RunState
from ._subagent_calls import submit_subagent
from ._versioning import check_arguments, is_strict, patched
from ._wait_calls import wait_call

if TYPE_CHECKING:
    from ...plan import AgentPlan
    from .._resources import ResourceEnvironment

__all__ = ["ActionExecution"]

log = logging.getLogger("flink_agents_py.runtime")

_fn_name = fn_name
_get_ident = threading.get_ident
_EVENT_CLASSES: set[type] = set()
"""Classes of events sent so far, each an ``Event`` subclass (``send_event``'s check, once)."""


class ActionExecution(Replays):
    """One action execution as the core runs it (valid only while that execution runs).

    It offers what ``RunnerContext`` promises (the user's ``ActionContext`` delegates each
    call here; the execution does not point back at it, so no reference cycle outlives the
    run) and the runtime's own work: call identities, replay, recording outcomes, the
    commands for the core, rebinding to fresh state objects.

    Args:
        ledger: where call records go besides keyed state (journal, observer, counters).
        key: the record key.
        execution_id: the identity of this action execution.
        record: the execution's state entry (durable call records live there).
        run: the run the execution belongs to.
        action_config: the action's configuration.
        short_term: gives the committed short-term memory of the action's environment
            (called on the action's first use of it: a key's memory is loaded only then).
        sensory: the committed sensory memory of the action's environment.
        env: the scope whose resources and memory the action uses.
        plan: the plan of that scope.
        resources: the resources of that scope.
        key_memory: gives the key's committed short-term memory (``short_term`` outside
            sub-agents); what ``key_merges`` (merged when the action completes) go into.
    """

    __slots__ = ("ledger", "key", "scope", "execution_id", "_record", "run", "env", "plan",
                 "resources", "_config", "_short_term_base", "short_term_view", "_sensory_base",
                 "sensory_view", "emitted", "_event_seq", "_unsent_ids", "calls", "commands",
                 "_next_ordinal", "finished", "diverged", "_owner", "used_long_term_memory",
                 "ltm", "_clock", "key_memory", "key_merges", "memory_used", "displaced", "handed")

    def __init__(
        self, ledger: CallLedger, key: Any, execution_id: str, record: InflightAction,
        run: RunState, action_config: dict[str, Any],
        short_term: Callable[[], dict[str, Any]], sensory: dict[str, Any], env: str | None,
        plan: AgentPlan, resources: ResourceEnvironment, key_memory: MemoryLoader | None = None,
    ) -> None:
        self.ledger = ledger
        self.key = key  # the record key (plain attributes: read on every action's path)
        self.scope = record.scope  # the invocation it runs in (``None``: the agent's own flow)
        self.execution_id = execution_id
        self._record = record
        self.run = run
        self.env = env
        self.plan = plan
        self.resources = resources
        self._config = action_config
        self._short_term_base = short_term
        self.short_term_view: ActionMemory | None = None  # made on first use (``short_term``)
        self._sensory_base = sensory
        self.sensory_view: ActionMemory | None = None  # made on first use (``sensory``)
        # events sent, with their JSON form (None: no action takes it, so it is never stored)
        self.emitted: list[tuple[Event, dict[str, Any] | None]] = []
        self._event_seq = 0  # ids given to events built or sent by this execution
        self._unsent_ids: dict[str, None] | None = None  # ids given to events built here,
        # not sent (a dict: one is dropped without a call)
        self.calls: dict[int, DurableCall] = {}
        self.commands: list[Command] = []  # recorded in the current step (``AgentCore._drain``)
        self._next_ordinal = 0
        self.finished = False
        self.diverged: ReplayDivergenceError | None = None  # set once a replay diverged
        self._owner = _get_ident()  # the operator thread (see ``event_id_source``)
        self.used_long_term_memory = False  # its writes are committed when the action ends
        self.ltm: ActionLongTermMemory | None = None  # made on first use
        self._clock: MemoryClock | None = None  # counts memory operations (made on first use)
        self.key_memory = key_memory or short_term
        self.key_merges: list[KeyMerge] = []
        self.memory_used = False  # its short-term or sensory memory was used (it may write)
        self.displaced: dict[str, str] | None = None  # records replayed to other arguments
        self.handed: tuple[dict[str, Any], Event] | None = None  # a chat request (``_sent``)

    # -- what RunnerContext promises (``ActionContext`` delegates here) ------------------
    @property
    def sensory_memory(self) -> Memory:
        """``RunnerContext.sensory_memory``."""
        return self.sensory

    @property
    def sensory(self) -> ActionMemory:
        """The action's view of its environment's sensory memory (made on first use)."""
        if self.sensory_view is None:
            clock = self._clock  # made with the first memory, shared (no cycle to self)
            if clock is None:
                clock = self._clock = MemoryClock(self._record, self.key)
            self.sensory_view = ActionMemory(self._sensory_base, "sensory_memory", clock)
            self.memory_used = True
        return self.sensory_view

    def sensory_writes(self) -> list[tuple[list[str], Any]]:
        """The sensory memory writes the action logged (none when it never used it).

        Returns:
            The write log, in order.
        """
        return self.sensory_view.writes if self.sensory_view is not None else []

    @property
    def short_term_memory(self) -> Memory:
        """``RunnerContext.short_term_memory``."""
        return self.short_term

    @property
    def short_term(self) -> ActionMemory:
        """The action's view of its environment's short-term memory (loaded on first use)."""
        if self.short_term_view is None:
            clock = self._clock  # made with the first memory, shared (no cycle to self)
            if clock is None:
                clock = self._clock = MemoryClock(self._record, self.key)
            self.short_term_view = ActionMemory(self._short_term_base(), "short_term_memory",
                                                clock)
            self.memory_used = True
        return self.short_term_view

    def short_term_writes(self) -> list[tuple[list[str], Any]]:
        """The short-term memory writes the action logged (none when it never used it).

        Returns:
            The write log, in order.
        """
        return self.short_term_view.writes if self.short_term_view is not None else []

    @property
    def long_term_memory(self) -> ActionLongTermMemory:
        """``RunnerContext.long_term_memory`` (made on first use; committed at the end)."""
        ltm = self.ltm
        if ltm is None:
            self.used_long_term_memory = True
            ltm = self.ltm = ActionLongTermMemory(self)
        return ltm

    @property
    def action_name(self) -> str:
        """The running action's name in the plan of its scope."""
        return self._record.action

    @property
    def action_config(self) -> dict[str, Any]:
        """``RunnerContext.action_config`` (a copy)."""
        return dict(self._config)

    def send_event(self, event: Event, known: dict[str, Any] | None = None) -> Event:
        """``RunnerContext.send_event`` (``known``: fields' JSON forms, see ``event_json``)."""
        if self.finished:
            self.check_live("send_event")
        if type(event) not in _EVENT_CLASSES:  # (a class seen before: no ``isinstance``)
            if not isinstance(event, Event):
                raise TypeError(not_an_event_message(event))
            if len(_EVENT_CLASSES) >= 256:  # (classes made at run time: not kept for ever)
                _EVENT_CLASSES.clear()
            _EVENT_CLASSES.add(type(event))
        limit = EventChainLimitError.LIMIT
        eid = self.execution_id  # 2 "/" per action: an id of at most 2 * limit characters
        if eid[2 * limit:] and eid.count("/") > 2 * limit:  # has no more (no count needed)
            types = (str(self._record.event.get("type", "?")), type(event).__name__)
            raise EventChainLimitError(self.execution_id, limit, key=self.key, event_types=types)
        unsent = self._unsent_ids
        if unsent is not None and event.id in unsent:  # built here: keeps the id it was given
            del unsent[event.id]
            sent = event
        else:
            n = self._event_seq  # (its next id, as ``event_id_source`` gives it)
            self._event_seq = n + 1
            sent = event.model_copy(update={"id": f"{self.execution_id}/e{n}"})
        # checked now (a bad event fails the sending action), kept for dispatch; an event
        # that triggers no action of the agent's own flow (an output, usually) is only checked
        data: dict[str, Any] | None = None
        if self.scope is not None or sent.type in self.plan.actions_by_event \
                or not event_is_plain(sent):
            data = sent_form(self, sent, known)  # (a chat's request: its copy kept too)
        self.emitted.append((sent, data))
        return sent

    def event_id_source(self) -> str:
        """The id an event built now gets: the next one on the operator thread, else ''.

        Returns:
            The id (see ``Event.id``; replay-stable: the execution builds its events in the
            same order when it runs again), kept as not sent yet (``send_event``).
        """
        if _get_ident() != self._owner:
            return ""
        n = self._event_seq  # (inline: no call per event built)
        self._event_seq = n + 1
        event_id = f"{self.execution_id}/e{n}"
        if self._unsent_ids is None:
            self._unsent_ids = {event_id: None}
        else:
            self._unsent_ids[event_id] = None
        return event_id

    def get_resource(self, name: str, resource_type: ResourceType) -> Resource:
        """``RunnerContext.get_resource`` (embedding models and stores as durable views)."""
        self.check_live("get_resource")
        res = self.resources.get(name, resource_type)
        view: Resource = durable_view(self, name, res)  # embedding models, vector stores
        return view

    def durable_execute(
        self, fn: Callable[..., Any], *args: Any, reconciler: Callable[[], Any] | None = None,
        strict: bool | None = None, **kwargs: Any,
    ) -> Any:
        """``RunnerContext.durable_execute`` (inside a durable call's function: ``_nested``)."""
        kwargs.pop("durable_id", None)  # Flink Agents' call identity: ours is the call ordinal
        if inside_durable_function() is not None:
            return run_nested(fn, args, kwargs)
        name = _fn_name(fn)
        call, started = self._open_call(fn, args, kwargs, CallKind.FUNCTION, name,
                                        lambda c: InlineCall(c, name), strict=strict, name=name)
        if not call.done:
            self.record_started(InlineCall(call, name))
            runner = reconciler if (started is not None and reconciler is not None) else None
            try:
                value = run_inline(name, runner or (lambda: fn(*args, **kwargs)), self)
            except Exception as e:  # noqa: BLE001 - recorded, then re-raised
                self.record_outcome(call, False, e)
            else:
                self.record_outcome(call, True, value)
        return call.result()

    def durable_execute_async(
        self, fn: Callable[..., Any], *args: Any, reconciler: Callable[[], Any] | None = None,
        strict: bool | None = None, **kwargs: Any,
    ) -> Awaitable[Any]:
        """``RunnerContext.durable_execute_async`` (inside a durable call's function too)."""
        kwargs.pop("durable_id", None)  # Flink Agents' call identity: ours is the call ordinal
        if inside_durable_function() is not None:
            return run_nested_async(fn, args, kwargs)
        name = _fn_name(fn)
        return self.execute_as(CallKind.FUNCTION, name, fn, args, kwargs,
                               reconciler=reconciler, strict=strict, name=name)

    def patched(self, change_id: str) -> bool:
        """``RunnerContext.patched``."""
        return patched(self, change_id)

    def wait_for(self, correlation_id: str, *, timeout_s: float | None = None) -> DurableCall:
        """``RunnerContext.wait_for``."""
        return wait_call(self, CallKind.WAIT, correlation_id, correlation_id, timeout_s)

    def sleep(self, seconds: float) -> DurableCall:
        """``RunnerContext.sleep``."""
        return wait_call(self, CallKind.SLEEP, "", None, seconds)

    def deprecate_patch(self, change_id: str) -> None:
        """``RunnerContext.deprecate_patch``."""
        patched(self, change_id, deprecated=True)

    def execute_as(
        self, kind: CallKind, target: str, fn: Callable[..., Any], args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None, *, reconciler: Callable[[], Any] | None = None,
        lazy: bool = False, digest_name: str | None = None, strict: bool | None = None,
        name: str | None = None, args_json: list[Any] | None = None,
    ) -> DurableCall:
        """Make a durable call of ``fn(*args, **kwargs)`` recorded as ``kind``/``target``.

        The framework's own durable calls (model calls, tool calls, sub-agent requests) go
        through here so their records say what made them.

        Args:
            kind: what makes the call.
            target: the tool, model or sub-agent name (a function's ``module:qualname``).
            fn: what to run (on the I/O executor).
            args: its positional arguments.
            kwargs: its keyword arguments.
            reconciler: run instead of ``fn`` at recovery when the call had started but its
                outcome was recorded nowhere.
            lazy: start only on the first await (or ``start_soon``); the identity is taken now.
            digest_name: the name the argument digest uses instead of ``fn``'s (for a call
                whose function depends on something a replay cannot see).
            strict: replay strictly (``None``: as the agent does; see ``_versioning``).
            name: ``fn``'s ``module:qualname`` (``fn_name``), when the caller has it already.
            args_json: ``args``' JSON form for the digest, when the caller made it already
                (see ``call_digest``).

        Returns:
            The call (already ``done`` when replayed).

        Raises:
            ReplayDivergenceError: when the record at this call's identity was made by a
                call of another kind or target.
        """
        kwargs = kwargs or {}
        if name is None:
            name = _fn_name(fn)
        if digest_name is None and kind is not CallKind.FUNCTION:
            digest_name = name  # the framework's calls: what their function binds is its own
        call, started = self._open_call(fn, args, kwargs, kind, target,
                                        lambda c: RunFunction(c, fn, args, kwargs, name),
                                        digest_name, strict, name, args_json)
        if call.done:
            return call
        if lazy:
            call.arm(RunFunction(call, fn, args, kwargs, name))
        elif started is not None and reconciler is not None:
            self.commands.append(RunFunction(call, reconciler, (), {}, name))
        else:
            self.commands.append(RunFunction(call, fn, args, kwargs, name))
        return call

    def start_soon(self, call: DurableCall) -> None:
        """Start a lazy call as soon as the current step of the action ends."""
        if not call.done and call.start is not None:
            self.commands.append(call.start)

    def chat(
        self, model: str, messages: Sequence[ChatMessage], *,
        prompt_args: dict[str, Any] | None = None,
        output_schema: type[BaseModel] | dict[str, Any] | None = None,
    ) -> ChatFuture:
        """``RunnerContext.chat``."""
        self.check_live("chat")
        request, schema_cls = chat_request(model, messages, prompt_args, output_schema)
        ordinal, call_id, dig, rec = self._allocate(
            CallKind.CHAT, model, lambda cid: call_digest("chat", (request,), {}, cid))
        call = ChatFuture(call_id, ordinal, dig, schema_cls, model)
        call.shape = setup_shape(self.resources, model)  # the setup's configuration
        self.calls[ordinal] = call
        self._replay_or_prepare(call, rec, StartChat(call, model, request))
        return call

    async def submit_subagent(self, name: str, input: Any, *,
                              check_input: bool = False) -> SubagentHandle:
        """``RunnerContext.submit_subagent`` (``check_input``: a model's call, see below)."""
        return await submit_subagent(self, name, input, check_input=check_input)

    # -- runtime side ------------------------------------------------------------------
    def record_of(self, call: DurableCall) -> CallRecord | None:
        """The record of ``call`` in the execution's state entry (``None``: none)."""
        return self._record.calls.get(str(call.ordinal))

    def cancel_invocation(self, invocation_id: str) -> None:
        """Record the cancellation of an internal sub-agent call (carried out by the core)."""
        self.commands.append(CancelInvocation(invocation_id))

    def settle_unstarted(self, call: DurableCall, label: str, value: Any) -> None:
        """Complete a call that has not started (and now never will) with ``value``."""
        self.commands = [c for c in self.commands if getattr(c, "call", None) is not call]
        call.start = None
        self.record_started(Settle(call, label))
        self.record_outcome(call, True, value)

    def rebind(self, record: InflightAction, run: RunState, short_term: MemoryLoader,
               sensory: dict[str, Any], key_memory: MemoryLoader) -> None:
        """Point at the current state objects (a host may deserialize state per callback)."""
        self._record = record
        if self._clock is not None:
            self._clock.record = record
        self.scope = record.scope  # (the same execution's: its scope, unchanged)
        self.run = run
        self.key_memory = key_memory
        self._short_term_base = short_term
        if self.short_term_view is not None:
            self.short_term_view.rebase(short_term())
        self._sensory_base = sensory
        if self.sensory_view is not None:
            self.sensory_view.rebase(sensory)

    def check_live(self, what: str) -> None:
        """Refuse ``what`` once the execution has finished, or while another is stepped.

        Raises:
            NotInActionContextError: when it has finished, or from ``refuse_foreign``.
        """
        if self.finished:
            raise NotInActionContextError(
                f"{what} called after action execution {self.execution_id} finished; "
                "a RunnerContext is valid only during the action it was passed to"
            )
        if EVENT_ID_SOURCE.get() != self.event_id_source:  # (else stepped: its own action)
            refuse_foreign(self, what)

    def _allocate(self, kind: CallKind, target: str, digest_of: Callable[[str], str], *,
                  check: bool = True) -> tuple[int, str, str, CallRecord | None]:
        """Take the next call ordinal (``digest_of(call_id)``: the call's argument digest).

        A journal's record stands in for a keyed-state one when the same call made it, or
        the crashed attempt of this run (``_journaled``).

        Returns:
            The ordinal, the call id, the call's digest and any record at that identity.

        Raises:
            ReplayDivergenceError: (with ``check``) when the record was made by a call of
                another kind or target; also for every later call of an execution that
                diverged (so an action cannot catch the error and go on).
            CallLimitError: when the call is new and the run tree has started
                ``CallLimitError.LIMIT`` calls already (and for every later new call).
        """
        if self.finished or EVENT_ID_SOURCE.get() != self.event_id_source:  # (else: live and
            self.check_live("a durable call")  # its own action's: ``check_live`` inline)
        if self.diverged is not None:
            raise self.diverged
        ordinal = self._next_ordinal
        self._next_ordinal += 1
        call_id = f"{self.execution_id}/c{ordinal}"
        digest = digest_of(call_id)
        rec = self._record.calls.get(str(ordinal))
        if (rec is None or not rec.done) and self.ledger.journal is not None:
            rec = journaled(self, ordinal, call_id, digest, (kind, target)) or rec
        if rec is None:  # a call the run starts now (a replayed one has its record)
            run = self.run
            run.calls_started += 1
            if run.calls_started > CallLimitError.LIMIT:  # the run tree's, sub-agents' too
                raise CallLimitError(CallLimitError.LIMIT, self.key, self.execution_id)
        elif check:
            self._check_same(call_id, rec, kind, target)
        return ordinal, call_id, digest, rec

    def _check_same(self, call_id: str, rec: CallRecord, kind: CallKind, target: str) -> None:
        """Raise ``ReplayDivergenceError`` unless ``rec`` was made by ``kind``/``target``.

        Records written before kinds were kept (``kind`` ``None``) are not checked.

        Raises:
            ReplayDivergenceError: when the record was made by another kind or target.
        """
        if rec.kind is None or (rec.kind is kind and (rec.target == target or (
                kind is CallKind.FUNCTION and legacy_name(target, rec.target)))):
            return
        self._diverge(ReplayDivergenceError(call_id, self._record.action,
                                            (rec.kind.value, rec.target or ""),
                                            (kind.value, target)))

    def _diverge(self, err: ReplayDivergenceError) -> NoReturn:
        """Fail this execution with ``err`` (each later durable call raises it again)."""
        self.diverged = err
        self.ledger.counters["replay_divergences"] += 1
        log.error("%s", err)
        raise err

    def _open_call(
        self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
        kind: CallKind, target: str, command: Callable[[DurableCall], CallCommand],
        digest_name: str | None = None, strict: bool | None = None, name: str | None = None,
        args_json: list[Any] | None = None,
    ) -> tuple[DurableCall, CallRecord | None]:
        """Allocate the next call and replay its record when there is one.

        ``digest_name``: what the digest names instead of ``fn`` (its name, and no state it
        binds); ``name``: ``fn``'s ``module:qualname`` when the caller has it already;
        ``args_json``: the arguments' JSON form, made already (with ``digest_name``).

        Returns:
            The call (already ``done`` when replayed) and, when the call had started before
            a restore but its outcome was recorded nowhere, that record.
        """
        if strict is not None:
            is_strict(self, strict)  # a bad value is refused on every path, replay or not
        if not digest_name:  # the function's name and what it binds, found once
            named, bound = name or _fn_name(fn), bound_state(fn)
            ordinal, call_id, dig, rec = self._allocate(
                kind, target, lambda cid: call_digest(named, args, kwargs, cid, bound))
            if rec is not None and rec.target != target and legacy_name(target, rec.target):
                target = named = str(rec.target)  # named before ``fn_name`` said its module
                dig = call_digest(named, args, kwargs, call_id, bound)
        else:
            bound = None
            ordinal, call_id, dig, rec = self._allocate(
                kind, target, lambda cid: call_digest(digest_name, args, kwargs, cid,
                                                      args_json=args_json))
        call = DurableCall(call_id, ordinal, dig, kind, target)
        if digest_name is None and kind is CallKind.FUNCTION:  # what it calls, how it binds
            call.callees = callees(fn) if bound is not None else None  # (binds nothing)
            call.shape = argument_shape(fn, args, kwargs)
            if rec is not None and rec.digest != dig:  # (a partial's arguments given otherwise?)
                as_recorded(call, named, fn, args, kwargs, rec, self._record.calls)
        elif kind is CallKind.TOOL:  # ``(tool, ToolCall)``: the defaults the call leaves
            call.shape = tool_shape(*args)
        elif kind is CallKind.MODEL and (self.scope is None or getattr(self.run.invocations.get(
                self.scope), "kind", None) is not CallKind.CHAT):  # a chat event's: its setup
            call.shape = setup_shape(self.resources, target)  # (a ctx.chat's call has it)
        self.calls[ordinal] = call
        if rec is None and self.displaced:  # its record may have gone to an earlier call
            check_displaced(self, call)
        if rec is not None and rec.done:
            self._replay(call, rec, command(call), strict)
            return call, None
        if rec is not None:  # started before the restore, outcome recorded nowhere
            check_arguments(self, call, rec, strict, reruns=True)
        return call, rec

    def record_started(self, command: CallCommand) -> None:
        """Note in state that the command's call has started (its outcome is not known)."""
        call = command.call
        self._record.calls[str(call.ordinal)] = CallRecord(
            digest=call.digest, kind=call.kind, target=call.target, callees=call.callees,
            shape=call.shape)
        self.ledger.started(self.key, command, replayed=False)

    def record_outcome(self, call: DurableCall, ok: bool, value: Any) -> None:
        """Record a call's outcome in the execution's state entry, then complete the call."""
        calls, ordinal = self._record.calls, str(call.ordinal)
        rec = calls.get(ordinal)  # (``record_started`` made it, for a call that ran)
        if rec is None:
            rec = calls[ordinal] = CallRecord(
                digest=call.digest, kind=call.kind, target=call.target, callees=call.callees,
                shape=call.shape)
        ok, value = store_outcome(rec, call.call_id, ok, value)
        call.complete(ok, value)
        self.ledger.recorded(self.key, call.call_id, rec, self.run, self._record.event)
