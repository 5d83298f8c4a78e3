"""The runtime's ``RunnerContext``, its durable calls, and sub-agent handles."""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator, Sequence
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
    Resource,
    ResourceNotFoundError,
    ResourceType,
    RunnerContext,
    SerializationError,
    SubagentFuture,
    SubagentResult,
    SubagentSetup,
    import_qualified,
)
from ._memory import ActionMemory
from ._serde import digest, dumps, event_json, from_json_value, to_json_value
from ._state import CallRecord, InflightAction, RunState
from ._stepper import not_stepping

if TYPE_CHECKING:
    from ._core import AgentCore

__all__ = ["ActionContext", "DurableCall", "ChatFuture", "SubagentHandle", "call_digest",
           "Start"]

log = logging.getLogger("flink_agents_py.runtime")


def _fn_name(fn: Callable[..., Any]) -> str:
    return f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', repr(fn))}"


def call_digest(fn: Callable[..., Any] | str, args: tuple[Any, ...], kwargs: dict[str, Any],
                call_id: str) -> str:
    """Digest of a call's function name and arguments (raises ``SerializationError``)."""
    name = fn if isinstance(fn, str) else _fn_name(fn)
    where = f"arguments of durable call {call_id} ({name})"
    return digest([name, to_json_value(list(args), where), to_json_value(kwargs, where)])


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
    """

    __slots__ = ("call_id", "ordinal", "done", "ok", "value", "replayed", "start", "digest")

    def __init__(self, call_id: str, ordinal: int, digest: str = "") -> None:
        self.call_id = call_id
        self.ordinal = ordinal
        self.digest = digest
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


class ChatFuture(DurableCall):
    """The lazy durable future ``ctx.chat`` returns; ``structured`` typed on await."""

    __slots__ = ("schema_cls",)

    def __init__(self, call_id: str, ordinal: int, digest: str,
                 schema_cls: type[BaseModel] | None) -> None:
        super().__init__(call_id, ordinal, digest)
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

    @property
    def call_id(self) -> str | None:
        """The durable identity of this call (``None`` for a call refused at submit)."""
        return self._call.call_id if self._call is not None else None

    def __await__(self) -> Generator[Any, None, SubagentResult]:
        if self._call is None:
            assert self._failed is not None
            return self._failed
        return (yield from self._call.__await__())

    async def cancel(self) -> None:
        """Cancel the call (see ``SubagentFuture.cancel``); a finished call is unaffected."""
        call, ctx = self._call, self._ctx
        if call is None or ctx is None or call.done:
            return
        ctx._check_live("cancel")
        if self.kind == "async" and isinstance(self._setup, AsyncSubagentSetup):
            await ctx.durable_execute_async(
                self._setup.call_cancel_request, self._session_id, call.call_id)
        elif self.kind == "internal" and call.call_id in ctx.run.invocations:
            ctx.core.invocation_cancelled(ctx, call.call_id)  # completes once its actions retire
            return
        if call.done:
            return
        if call.start is not None or self.kind == "async":
            # not started yet (it never will be), or an async run told to cancel: done now
            if call in ctx.pending_starts:
                ctx.pending_starts.remove(call)
            call.start = None
            ctx.record_started(call, f"cancel:{self.name}")
            ctx.record_outcome(call, True, SubagentResult.cancelled_call(self.name))
        # a deferred call already running cannot be stopped: its result arrives as usual


def _rebuild_exception(type_path: str | None, message: str | None) -> BaseException:
    try:
        cls = import_qualified(type_path or "")
        if isinstance(cls, type) and issubclass(cls, Exception):
            return cls(message)
    except Exception:  # noqa: BLE001 - fall back to a generic, still-typed error
        pass
    return DurableExecutionError(f"recorded failure {type_path}: {message}")


def store_outcome(rec: CallRecord, call_id: str, ok: bool, value: Any) -> tuple[bool, Any]:
    """Write an outcome into ``rec``; returns the outcome as the caller will see it.

    A result with no JSON form turns into a failure with a ``SerializationError``.
    """
    if ok:
        try:
            stored = to_json_value(value, f"result of durable call {call_id}")
        except Exception as e:  # noqa: BLE001
            ok, value = False, e
        else:
            rec.done, rec.ok, rec.value = True, True, stored
    if not ok:
        exc = value if isinstance(value, BaseException) else DurableExecutionError(str(value))
        cls = type(exc)
        rec.done, rec.ok = True, False
        rec.error_type = f"{cls.__module__}:{cls.__qualname__}"
        rec.error_message = str(exc)
        value = exc
    return ok, value


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
        self.calls: dict[int, DurableCall] = {}
        self.pending_starts: list[DurableCall] = []
        self._next_ordinal = 0
        self.finished = False

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
    def action_config(self) -> dict[str, Any]:
        return dict(self._config)

    def send_event(self, event: Event) -> Event:
        self._check_live("send_event")
        if not isinstance(event, Event):
            raise TypeError(f"send_event takes an Event, got {type(event).__name__}")
        sent = event.model_copy(update={"id": f"{self.execution_id}/e{len(self.emitted)}"})
        # checked now (a bad event fails the sending action), kept for dispatch
        self.emitted.append((sent, event_json(sent, f"event {sent.type} sent by {self.execution_id}")))
        return sent

    def get_resource(self, name: str, resource_type: ResourceType) -> Resource:
        self._check_live("get_resource")
        return self.core.resources_for(self.run, self.env).get(name, resource_type)

    def durable_execute(
        self, fn: Callable[..., Any], *args: Any, reconciler: Callable[[], Any] | None = None,
        **kwargs: Any,
    ) -> Any:
        call, started = self._open_call(fn, args, kwargs)
        if not call.done:
            self.record_started(call, _fn_name(fn))
            runner = reconciler if (started is not None and reconciler is not None) else None
            try:
                with not_stepping():
                    value = runner() if runner is not None else fn(*args, **kwargs)
            except Exception as e:  # noqa: BLE001 - recorded, then re-raised
                self.record_outcome(call, False, e)
            else:
                self.record_outcome(call, True, value)
        return call.result()

    def durable_execute_async(
        self, fn: Callable[..., Any], *args: Any, reconciler: Callable[[], Any] | None = None,
        **kwargs: Any,
    ) -> DurableCall:
        call, started = self._open_call(fn, args, kwargs)
        if not call.done:
            self.record_started(call, _fn_name(fn))
            if started is not None and reconciler is not None:
                self.core.submit(self, call, reconciler, (), {})
            else:
                self.core.submit(self, call, fn, args, kwargs)
        return call

    def lazy_execute_async(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> DurableCall:
        """Like ``durable_execute_async``, but the call starts only on its first await (or
        ``start_soon``): the call's identity is taken now, in program order."""
        call, _ = self._open_call(fn, args, kwargs)
        if not call.done:
            call.start = Start("fn", _fn_name(fn), (fn, args, kwargs))
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
        ordinal, call_id, dig, rec = self._allocate("chat", request)
        call = ChatFuture(call_id, ordinal, dig, schema_cls)
        self.calls[ordinal] = call
        self._replay_or_prepare(call, rec, Start("chat", model, request))
        return call

    async def submit_subagent(self, name: str, input: Any) -> SubagentHandle:
        self._check_live("submit_subagent")
        try:
            setup = self.get_resource(name, ResourceType.AGENT)
        except ResourceNotFoundError as e:
            return SubagentHandle(None, None, name, "refused",
                                  failed=SubagentResult.error(f"sub-agent {name!r}: {e}"))
        except Exception as e:  # noqa: BLE001 - a setup that cannot be built
            return SubagentHandle(None, None, name, "refused", failed=SubagentResult.error(
                f"sub-agent {name!r} cannot be built: {type(e).__name__}: {e}"))
        if not isinstance(setup, SubagentSetup):
            return SubagentHandle(None, None, name, "refused", failed=SubagentResult.error(
                f"resource {name!r} is a {type(setup).__name__}, not a sub-agent setup"))
        ordinal, call_id, dig, rec = self._allocate(f"subagent:{name}", input)
        call = DurableCall(call_id, ordinal, dig)
        self.calls[ordinal] = call
        session_id = f"{dumps(self._key).decode()}/r{self.run.seq}"
        if isinstance(setup, InternalSubagent):
            self._replay_or_prepare(call, rec, Start("subagent", name, input))
            self.start_soon(call)  # submitted now, so several calls overlap
            return SubagentHandle(self, call, name, "internal")
        if isinstance(setup, DeferredSubagentSetup):
            self._replay_or_prepare(call, rec, Start("deferred", name, (setup, input)))
            return SubagentHandle(self, call, name, "deferred", session_id, setup)
        if isinstance(setup, AsyncSubagentSetup):
            self._replay_or_prepare(call, rec, Start("poll", name, (setup, session_id)))
            # submitted once, durably; always awaited, so the call takes its ordinal on replay too
            await self.durable_execute_async(
                setup.call_submit_request, session_id, call_id, input,
                reconciler=lambda: setup.reconcile_submit_request(session_id, call_id, input))
            return SubagentHandle(self, call, name, "async", session_id, setup)
        return SubagentHandle(None, None, name, "refused", failed=SubagentResult.error(
            f"sub-agent {name!r}: {type(setup).__name__} is neither internal, deferred nor async"))

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

    def _allocate(self, name: str, payload: Any) -> tuple[int, str, str, CallRecord | None]:
        """Take the next call ordinal; return it, the call id, the digest and any record."""
        self._check_live("a durable call")
        ordinal = self._next_ordinal
        self._next_ordinal += 1
        call_id = f"{self.execution_id}/c{ordinal}"
        dig = call_digest(name, (payload,), {}, call_id)
        rec = self._record.calls.get(str(ordinal))
        if rec is None or not rec.done:
            journaled = self.core.journal_lookup(self._key, call_id)
            if journaled is not None and journaled.done:
                rec = self._record.calls[str(ordinal)] = journaled
        return ordinal, call_id, dig, rec

    def _replay(self, call: DurableCall, rec: CallRecord, name: str) -> None:
        if rec.digest != call.digest:
            log.warning(
                "durable call %s replays a recorded outcome but its arguments changed "
                "(digest %s, recorded %s); replay goes by identity",
                call.call_id, call.digest, rec.digest)
        call.replayed = True
        if rec.ok:
            call.complete(True, from_json_value(rec.value))
        else:
            call.complete(False, _rebuild_exception(rec.error_type, rec.error_message))
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
        self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[DurableCall, CallRecord | None]:
        """Allocate the next call and replay its record when there is one.

        Returns the call (already ``done`` when replayed) and, when the call had started
        before a restore but its outcome was recorded nowhere, that record.
        """
        ordinal, call_id, _, rec = self._allocate("", None)
        call = DurableCall(call_id, ordinal, call_digest(fn, args, kwargs, call_id))
        self.calls[ordinal] = call
        if rec is not None and rec.done:
            self._replay(call, rec, _fn_name(fn))
            return call, None
        return call, rec

    def record_started(self, call: DurableCall, function: str = "") -> None:
        """Note in state that ``call`` has started (its outcome is not known yet)."""
        self._record.calls[str(call.ordinal)] = CallRecord(digest=call.digest)
        self.core.call_made(self._key, call.call_id, function, replayed=False)

    def record_outcome(self, call: DurableCall, ok: bool, value: Any) -> None:
        """Record a call's outcome in the execution's state entry, then complete the call."""
        rec = self._record.calls.setdefault(str(call.ordinal), CallRecord(digest=call.digest))
        ok, value = store_outcome(rec, call.call_id, ok, value)
        call.complete(ok, value)
        self.core.outcome_recorded(self._key, call.call_id, rec)
