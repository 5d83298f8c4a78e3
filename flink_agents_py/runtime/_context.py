"""The runtime's ``RunnerContext``, its durable calls, and sub-agent handles."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Awaitable, Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from ..api import (
    AsyncSubagentSetup,
    ChatMessage,
    ChatResponse,
    ChatResponseError,
    DeferredSubagentSetup,
    DurableExecutionError,
    Event,
    InternalSubagent,
    Memory,
    NotInActionContextError,
    ReplayDivergenceError,
    Resource,
    ResourceNotFoundError,
    ResourceType,
    RunnerContext,
    SubagentFuture,
    SubagentResult,
    SubagentSetup,
)
from ..api._events import EVENT_ID_SOURCE
from ._failures import with_original
from ._knowledge import durable_view
from ._long_term_memory import ActionLongTermMemory
from ._memory import ActionMemory
from ._outcomes import call_digest, fn_name, rebuild_exception, store_outcome
from ._serde import dumps, event_json, from_json_value
from ._state import CallKind, CallRecord, InflightAction, RunState
from ._stepper import not_stepping

if TYPE_CHECKING:
    from ._core import AgentCore

__all__ = ["ActionContext", "building_events", "DurableCall", "ChatFuture", "SubagentHandle",
           "call_digest", "Start", "fn_name", "store_outcome"]

log = logging.getLogger("flink_agents_py.runtime")

_fn_name = fn_name


@contextlib.contextmanager
def building_events(ctx: ActionContext) -> Iterator[None]:
    """Give events built inside the block their id from ``ctx`` at once (see ``Event.id``).

    Only on this thread: work the block hands to the I/O executor inherits the context
    variable, and an event built there (in a tool, say) gets its id when sent, if ever.
    """
    owner = threading.get_ident()

    def source() -> str:
        return ctx.new_event_id() if threading.get_ident() == owner else ""

    token = EVENT_ID_SOURCE.set(source)
    try:
        yield
    finally:
        EVENT_ID_SOURCE.reset(token)


@dataclass
class Start:
    """How the core starts a lazy call on its first await (or right after its submit).

    ``kind``: ``"chat"`` (``payload``: the request), ``"subagent"`` (``payload``: the
    input; an internal sub-agent), ``"deferred"`` (``payload``: ``(setup, input)``),
    ``"poll"`` (``payload``: ``(setup, session_id)``, an async sub-agent's result), or
    ``"attach"`` (the invocation is in state already, after a restore: only wait).
    """

    kind: str
    name: str
    payload: Any = None


class DurableCall:
    """One durable call of an action execution: awaitable, completes once.

    Awaiting a completed call returns its result (or raises its exception) again without a
    new execution; awaiting an incomplete one suspends the action until the outcome arrives.
    ``kind`` and ``target`` say what made the call (kept in its record, see ``CallKind``).
    """

    __slots__ = ("call_id", "ordinal", "done", "ok", "value", "replayed", "start", "digest",
                 "kind", "target")

    def __init__(self, call_id: str, ordinal: int, digest: str = "",
                 kind: CallKind = CallKind.FUNCTION, target: str = "") -> None:
        self.call_id = call_id
        self.ordinal = ordinal
        self.digest = digest
        self.kind = kind
        self.target = target
        self.done = False
        self.ok = True
        self.value: Any = None
        self.replayed = False
        self.start: Start | None = None

    def complete(self, ok: bool, value: Any) -> None:
        """Set the outcome (a result, or the exception raised)."""
        self.done, self.ok, self.value = True, ok, value

    def result(self) -> Any:
        """Return the result or raise the exception (only once ``done``)."""
        if not self.done:
            raise DurableExecutionError(f"durable call {self.call_id} has not completed")
        if self.ok:
            return self.value
        raise self.value

    def __await__(self) -> Generator[DurableCall, None, Any]:
        if not self.done:
            yield self
        return self.result()

    def __getattr__(self, name: str) -> Any:
        # only reached for a missing attribute: most likely the future was not awaited
        raise AttributeError(_not_awaited(type(self).__name__, name, self.call_id))


class ChatFuture(DurableCall):
    """The lazy durable future ``ctx.chat`` returns; ``structured`` typed on await."""

    __slots__ = ("schema_cls",)

    def __init__(self, call_id: str, ordinal: int, digest: str,
                 schema_cls: type[BaseModel] | None, target: str = "") -> None:
        super().__init__(call_id, ordinal, digest, CallKind.CHAT, target)
        self.schema_cls = schema_cls

    def result(self) -> Any:
        value = super().result()
        if (self.schema_cls is not None and isinstance(value, ChatResponse)
                and isinstance(value.structured, dict)):
            try:
                typed = self.schema_cls.model_validate(value.structured)
            except ValidationError as e:
                raise ChatResponseError(
                    f"the chat's structured output does not fit {self.schema_cls.__name__}: {e}"
                ) from e
            value = value.model_copy(update={"structured": typed})
        return value


def _not_awaited(what: str, name: str, call_id: str | None) -> str:
    if name.startswith("_"):
        return f"{what!r} object has no attribute {name!r}"
    where = f", in action execution {call_id.rsplit('/', 1)[0]}" if call_id else ""
    hint = "response = await ctx.chat(...)" if what == "ChatFuture" else "value = await call"
    return f"{what} has no attribute {name!r}: await it first ({hint}){where}"


class _Settled:
    """An awaitable that is already complete (``await`` returns ``None`` at once)."""

    __slots__ = ()

    def __await__(self) -> Generator[Any, None, None]:
        return
        yield  # pragma: no cover - makes this a generator


_SETTLED = _Settled()


def _nothing_to_cancel(session_id: str, call_id: str) -> None:
    """The cancel request of an async run that had already ended: nothing to send."""


class SubagentHandle(SubagentFuture):
    """The handle of one sub-agent call (see ``SubagentFuture``)."""

    def __init__(self, ctx: ActionContext | None, call: DurableCall | None, name: str,
                 kind: str, session_id: str = "", setup: SubagentSetup | None = None,
                 failed: SubagentResult | None = None) -> None:
        self._ctx = ctx
        self._call = call
        self.name = name
        self.kind = kind
        self._session_id = session_id
        self._setup = setup
        self._failed = failed
        self._cancel: DurableCall | None = None

    @property
    def call_id(self) -> str | None:
        """The durable identity of this call (``None`` for a call refused at submit)."""
        return self._call.call_id if self._call is not None else None

    @property
    def session_id(self) -> str:
        """The session of this call ('' for an internal sub-agent or a refused call)."""
        return self._session_id

    def done(self) -> bool:
        """Whether the call's result is known (awaiting it then does not suspend)."""
        return self._call is None or self._call.done

    def __getattr__(self, name: str) -> Any:
        # only reached for a missing attribute: most likely the handle was not awaited
        if name.startswith("_"):
            raise AttributeError(name)
        call = self.__dict__.get("_call")
        where = f", in action execution {call.call_id.rsplit('/', 1)[0]}" if call else ""
        raise AttributeError(
            f"SubagentHandle of sub-agent {self.__dict__.get('name')!r} has no attribute "
            f"{name!r}: await it first (result = await handle) to get its SubagentResult{where}")

    def __await__(self) -> Generator[Any, None, SubagentResult]:
        if self._call is None:
            assert self._failed is not None
            return self._failed
        return (yield from self._call.__await__())

    def cancel(self) -> Awaitable[None]:
        """Cancel the call (see ``SubagentFuture.cancel``); a finished call is unaffected.

        Takes effect when called, awaited or not. For an async sub-agent, the first
        ``cancel()`` of a handle is one durable call (the cancel request, or nothing to send
        when the run had already ended), made in program order on the live path and on
        replay alike; awaiting the returned awaitable waits for the request to complete.
        """
        call, ctx = self._call, self._ctx
        if call is None or ctx is None:
            return _SETTLED
        ctx._check_live("cancel")
        if self.kind == "async" and isinstance(self._setup, AsyncSubagentSetup):
            if self._cancel is not None:
                return self._cancel  # one cancel request per handle
            ended = call.done and not (call.ok and isinstance(call.value, SubagentResult)
                                       and call.value.cancelled)
            send = _nothing_to_cancel if ended else self._setup.call_cancel_request
            self._cancel = ctx.execute_as(
                CallKind.SUBAGENT_CANCEL, self.name, send, (self._session_id, call.call_id),
                digest_name=f"{CallKind.SUBAGENT_CANCEL.value}:{self.name}")
            if not call.done:  # told to cancel: done now
                self._settle_cancelled(ctx, call)
            return self._cancel
        if call.done:
            return _SETTLED
        if self.kind == "internal" and call.call_id in ctx.run.invocations:
            ctx.core.invocation_cancelled(ctx, call.call_id)  # completes once its actions retire
        elif call.start is not None:  # not started yet: it never will be
            self._settle_cancelled(ctx, call)
        # a deferred call already running cannot be stopped: its result arrives as usual
        return _SETTLED

    def _settle_cancelled(self, ctx: ActionContext, call: DurableCall) -> None:
        if call in ctx.pending_starts:
            ctx.pending_starts.remove(call)
        call.start = None
        ctx.record_started(call, f"cancel:{self.name}")
        ctx.record_outcome(call, True, SubagentResult.cancelled_call(self.name))


class ActionContext(RunnerContext):
    """The context of one action execution (valid only while that execution runs).

    Args:
        core: the hosting core.
        key: the record key.
        execution_id: the identity of this action execution.
        record: the execution's state entry (durable call records live there).
        run: the run the execution belongs to.
        action_config: the action's configuration.
        short_term: the committed short-term memory of the action's environment.
        sensory: the committed sensory memory of the action's environment.
        env: the scope whose resources and memory the action uses.
    """

    def __init__(
        self, core: AgentCore, key: Any, execution_id: str, record: InflightAction,
        run: RunState, action_config: dict[str, Any], short_term: dict[str, Any],
        sensory: dict[str, Any], env: str | None,
    ) -> None:
        self.core = core
        self._key = key
        self.execution_id = execution_id
        self._record = record
        self.run = run
        self.env = env
        self._config = action_config
        self.short_term = ActionMemory(short_term, "short_term_memory")
        self.sensory = ActionMemory(sensory, "sensory_memory")
        self.emitted: list[tuple[Event, dict[str, Any]]] = []  # events sent, with their JSON
        self._event_seq = 0  # ids given to events built or sent by this execution
        self._unsent_ids: set[str] = set()  # ids given to events built here, not yet sent
        self.calls: dict[int, DurableCall] = {}
        self.pending_starts: list[DurableCall] = []
        self._next_ordinal = 0
        self.finished = False
        self.diverged: ReplayDivergenceError | None = None  # set once a replay diverged

    # -- RunnerContext -----------------------------------------------------------------
    @property
    def key(self) -> Any:
        return self._key

    @property
    def scope(self) -> str | None:
        """The invocation this action runs in (``None``: the agent's own flow)."""
        return self._record.scope

    @property
    def sensory_memory(self) -> Memory:
        return self.sensory

    @property
    def short_term_memory(self) -> Memory:
        return self.short_term

    @property
    def long_term_memory(self) -> ActionLongTermMemory:
        ltm = self.__dict__.get("_ltm")
        if ltm is None:
            ltm = self.__dict__["_ltm"] = ActionLongTermMemory(self)
        return ltm

    @property
    def action_config(self) -> dict[str, Any]:
        return dict(self._config)

    def send_event(self, event: Event) -> Event:
        self._check_live("send_event")
        if not isinstance(event, Event):
            raise TypeError(f"send_event takes an Event, got {type(event).__name__}")
        if event.id in self._unsent_ids:  # built in this execution: keeps the id it was given
            self._unsent_ids.discard(event.id)
            sent = event
        else:
            sent = event.model_copy(update={"id": self._next_event_id()})
        # checked now (a bad event fails the sending action), kept for dispatch
        self.emitted.append((sent, event_json(sent, f"event {sent.type} sent by {self.execution_id}")))
        return sent

    def _next_event_id(self) -> str:
        event_id = f"{self.execution_id}/e{self._event_seq}"
        self._event_seq += 1
        return event_id

    def new_event_id(self) -> str:
        """The id of an event built while this execution is stepped (replay-stable: the
        execution builds its events in the same order when it runs again)."""
        event_id = self._next_event_id()
        self._unsent_ids.add(event_id)
        return event_id

    def get_resource(self, name: str, resource_type: ResourceType) -> Resource:
        self._check_live("get_resource")
        res = self.core.resources_for(self.run, self.env).get(name, resource_type)
        return durable_view(self, name, res)  # embedding models, vector stores: durable calls

    def durable_execute(
        self, fn: Callable[..., Any], *args: Any, reconciler: Callable[[], Any] | None = None,
        **kwargs: Any,
    ) -> Any:
        kwargs.pop("durable_id", None)  # Flink Agents' call identity: ours is the call ordinal
        call, started = self._open_call(fn, args, kwargs, CallKind.FUNCTION, _fn_name(fn))
        if not call.done:
            self.record_started(call, _fn_name(fn))
            runner = reconciler if (started is not None and reconciler is not None) else None
            try:
                token = EVENT_ID_SOURCE.set(None)  # not replayed: takes no event ids
                try:
                    with not_stepping():
                        value = runner() if runner is not None else fn(*args, **kwargs)
                finally:
                    EVENT_ID_SOURCE.reset(token)
            except Exception as e:  # noqa: BLE001 - recorded, then re-raised
                self.record_outcome(call, False, e)
            else:
                self.record_outcome(call, True, value)
        return call.result()

    def durable_execute_async(
        self, fn: Callable[..., Any], *args: Any, reconciler: Callable[[], Any] | None = None,
        **kwargs: Any,
    ) -> DurableCall:
        kwargs.pop("durable_id", None)  # Flink Agents' call identity: ours is the call ordinal
        return self.execute_as(CallKind.FUNCTION, _fn_name(fn), fn, args, kwargs,
                               reconciler=reconciler)

    def lazy_execute_async(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> DurableCall:
        """Like ``durable_execute_async``, but the call starts only on its first await (or
        ``start_soon``): the call's identity is taken now, in program order."""
        return self.execute_as(CallKind.FUNCTION, _fn_name(fn), fn, args, kwargs, lazy=True)

    def execute_as(
        self, kind: CallKind, target: str, fn: Callable[..., Any], args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None, *, reconciler: Callable[[], Any] | None = None,
        lazy: bool = False, digest_name: str | None = None,
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

        Returns:
            The call (already ``done`` when replayed).

        Raises:
            ReplayDivergenceError: when the record at this call's identity was made by a
                call of another kind or target.
        """
        kwargs = kwargs or {}
        call, started = self._open_call(fn, args, kwargs, kind, target, digest_name)
        if call.done:
            return call
        if lazy:
            call.start = Start("fn", _fn_name(fn), (fn, args, kwargs))
            return call
        self.record_started(call, _fn_name(fn))  # the name observers classify calls by
        if started is not None and reconciler is not None:
            self.core.submit(self, call, reconciler, (), {})
        else:
            self.core.submit(self, call, fn, args, kwargs)
        return call

    def start_soon(self, call: DurableCall) -> None:
        """Start a lazy call as soon as the current step of the action ends."""
        if not call.done and call.start is not None:
            self.pending_starts.append(call)

    def chat(
        self, model: str, messages: Sequence[ChatMessage], *,
        prompt_args: dict[str, Any] | None = None,
        output_schema: type[BaseModel] | dict[str, Any] | None = None,
    ) -> ChatFuture:
        self._check_live("chat")
        schema_cls = output_schema if isinstance(output_schema, type) and issubclass(
            output_schema, BaseModel) else None
        schema = schema_cls.model_json_schema() if schema_cls is not None else output_schema
        request = {
            "model": model,
            "messages": [ChatMessage.model_validate(m).model_dump(mode="json") for m in messages],
            "prompt_args": prompt_args,
            "output_schema": schema,
        }
        ordinal, call_id, rec = self._allocate(CallKind.CHAT, model)
        dig = call_digest("chat", (request,), {}, call_id)
        call = ChatFuture(call_id, ordinal, dig, schema_cls, model)
        self.calls[ordinal] = call
        self._replay_or_prepare(call, rec, Start("chat", model, request))
        return call

    async def submit_subagent(self, name: str, input: Any) -> SubagentHandle:
        self._check_live("submit_subagent")
        setup, refusal = self._resolve_subagent(name)
        kind = (CallKind.SUBAGENT_REFUSED if setup is None
                else CallKind.SUBAGENT if isinstance(setup, InternalSubagent)
                else CallKind.SUBAGENT_DEFERRED if isinstance(setup, DeferredSubagentSetup)
                else CallKind.SUBAGENT_RESULT)
        # a refusal is recorded too, so a submit takes its identity on every path
        ordinal, call_id, rec = self._allocate(kind, name, check=False)
        if rec is not None and rec.kind is CallKind.SUBAGENT_REFUSED and rec.target == name \
                and rec.done:
            kind = CallKind.SUBAGENT_REFUSED  # refused then: refused again, as recorded
        elif rec is not None:
            self._check_same(call_id, rec, kind, name)
        dig = call_digest(f"subagent:{name}", (input,), {}, call_id)
        call = DurableCall(call_id, ordinal, dig, kind, name)
        self.calls[ordinal] = call
        if kind is CallKind.SUBAGENT_REFUSED:
            if rec is not None and rec.done:
                self._replay(call, rec, f"refused:{name}")
            else:
                self.record_started(call, f"refused:{name}")
                self.record_outcome(call, True, SubagentResult.error(refusal))
            return SubagentHandle(self, call, name, "refused")
        session_id = f"{dumps(self._key).decode()}/r{self.run.seq}"
        if isinstance(setup, InternalSubagent):
            self._replay_or_prepare(call, rec, Start("subagent", name, input))
            self.start_soon(call)  # submitted now, so several calls overlap
            return SubagentHandle(self, call, name, "internal")
        if isinstance(setup, DeferredSubagentSetup):
            self._replay_or_prepare(call, rec, Start("deferred", name, (setup, input)))
            return SubagentHandle(self, call, name, "deferred", session_id, setup)
        assert isinstance(setup, AsyncSubagentSetup)
        self._replay_or_prepare(call, rec, Start("poll", name, (setup, session_id)))
        # submitted once, durably; always awaited, so the call takes its ordinal on replay too
        await self.execute_as(
            CallKind.SUBAGENT_SUBMIT, name, setup.call_submit_request,
            (session_id, call_id, input),
            reconciler=lambda: setup.reconcile_submit_request(session_id, call_id, input))
        return SubagentHandle(self, call, name, "async", session_id, setup)

    def _resolve_subagent(self, name: str) -> tuple[SubagentSetup | None, str]:
        """The setup of sub-agent ``name``, or ``None`` and why it is refused."""
        try:
            setup = self.get_resource(name, ResourceType.AGENT)
        except ResourceNotFoundError as e:
            return None, f"sub-agent {name!r}: {e}"
        except Exception as e:  # noqa: BLE001 - a setup that cannot be built
            return None, f"sub-agent {name!r} cannot be built: {type(e).__name__}: {e}"
        if not isinstance(setup, SubagentSetup):
            return None, f"resource {name!r} is a {type(setup).__name__}, not a sub-agent setup"
        if not isinstance(setup, (InternalSubagent, DeferredSubagentSetup, AsyncSubagentSetup)):
            return None, (f"sub-agent {name!r}: {type(setup).__name__} is neither internal, "
                          "deferred nor async")
        return setup, ""

    # -- runtime side ------------------------------------------------------------------
    def rebind(self, record: InflightAction, run: RunState, short_term: dict[str, Any],
               sensory: dict[str, Any]) -> None:
        """Point at the current state objects (a host may deserialize state per callback)."""
        self._record = record
        self.run = run
        self.short_term.rebase(short_term)
        self.sensory.rebase(sensory)

    def _check_live(self, what: str) -> None:
        if self.finished:
            raise NotInActionContextError(
                f"{what} called after action execution {self.execution_id} finished; "
                "a RunnerContext is valid only during the action it was passed to"
            )

    def _allocate(self, kind: CallKind, target: str, *, check: bool = True
                  ) -> tuple[int, str, CallRecord | None]:
        """Take the next call ordinal; return it, the call id and any record at that identity.

        Raises:
            ReplayDivergenceError: (with ``check``) when the record was made by a call of
                another kind or target; also for every later call of an execution that
                diverged (so an action cannot catch the error and go on).
        """
        self._check_live("a durable call")
        if self.diverged is not None:
            raise self.diverged
        ordinal = self._next_ordinal
        self._next_ordinal += 1
        call_id = f"{self.execution_id}/c{ordinal}"
        rec = self._record.calls.get(str(ordinal))
        if rec is None or not rec.done:
            journaled = self.core.journal_lookup(self._key, call_id)
            if journaled is not None and journaled.done:
                rec = self._record.calls[str(ordinal)] = journaled
        if check and rec is not None:
            self._check_same(call_id, rec, kind, target)
        return ordinal, call_id, rec

    def _check_same(self, call_id: str, rec: CallRecord, kind: CallKind, target: str) -> None:
        """Raise ``ReplayDivergenceError`` unless ``rec`` was made by ``kind``/``target``.

        Records written before kinds were kept (``kind`` ``None``) are not checked.
        """
        if rec.kind is None or (rec.kind is kind and rec.target == target):
            return
        err = ReplayDivergenceError(call_id, self._record.action,
                                    (rec.kind.value, rec.target or ""), (kind.value, target))
        self.diverged = err
        self.core.counters["replay_divergences"] += 1
        log.error("%s", err)
        raise err

    def _replay(self, call: DurableCall, rec: CallRecord, name: str) -> None:
        if rec.digest and rec.digest != call.digest:
            log.warning(
                "durable call %s replays a recorded outcome but its arguments changed "
                "(digest %s, recorded %s); replay goes by identity",
                call.call_id, call.digest, rec.digest)
        call.replayed = True
        if rec.ok:
            call.complete(True, from_json_value(rec.value))
        else:
            call.complete(False, with_original(
                rebuild_exception(rec), rec.traceback))
        self.core.call_made(self._key, call.call_id, name, replayed=True)

    def _replay_or_prepare(self, call: DurableCall, rec: CallRecord | None, start: Start) -> None:
        """Replay a recorded lazy call, re-attach to its open invocation, or arm its start."""
        if rec is not None and rec.done:
            self._replay(call, rec, f"{start.kind}:{start.name}")
        elif rec is not None and call.call_id in self.run.invocations:
            call.start = Start("attach", start.name)
        else:
            call.start = start

    def _open_call(
        self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
        kind: CallKind, target: str, digest_name: str | None = None,
    ) -> tuple[DurableCall, CallRecord | None]:
        """Allocate the next call and replay its record when there is one.

        Returns the call (already ``done`` when replayed) and, when the call had started
        before a restore but its outcome was recorded nowhere, that record.
        """
        ordinal, call_id, rec = self._allocate(kind, target)
        call = DurableCall(call_id, ordinal,
                           call_digest(digest_name or fn, args, kwargs, call_id), kind, target)
        self.calls[ordinal] = call
        if rec is not None and rec.done:
            self._replay(call, rec, _fn_name(fn))
            return call, None
        return call, rec

    def record_started(self, call: DurableCall, function: str = "") -> None:
        """Note in state that ``call`` has started (its outcome is not known yet)."""
        self._record.calls[str(call.ordinal)] = CallRecord(
            digest=call.digest, kind=call.kind, target=call.target)
        self.core.call_made(self._key, call.call_id, function, replayed=False)

    def record_outcome(self, call: DurableCall, ok: bool, value: Any) -> None:
        """Record a call's outcome in the execution's state entry, then complete the call."""
        rec = self._record.calls.setdefault(str(call.ordinal), CallRecord(
            digest=call.digest, kind=call.kind, target=call.target))
        ok, value = store_outcome(rec, call.call_id, ok, value)
        call.complete(ok, value)
        self.core.outcome_recorded(self._key, call.call_id, rec)
