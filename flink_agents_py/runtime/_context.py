"""The runtime's ``RunnerContext`` and its durable calls."""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any

from ..api import (
    DurableExecutionError,
    Event,
    Memory,
    NotInActionContextError,
    Resource,
    ResourceType,
    RunnerContext,
    SerializationError,
    import_qualified,
)
from ._memory import ActionMemory
from ._serde import digest, from_json_value, to_json_value
from ._state import CallRecord, InflightAction
from ._stepper import not_stepping

if TYPE_CHECKING:
    from ._core import AgentCore

__all__ = ["ActionContext", "DurableCall", "call_digest"]

log = logging.getLogger("flink_agents_py.runtime")


def _fn_name(fn: Callable[..., Any]) -> str:
    return f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', repr(fn))}"


def call_digest(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
                call_id: str) -> str:
    """Digest of a call's function name and arguments (raises ``SerializationError``)."""
    where = f"arguments of durable call {call_id} ({_fn_name(fn)})"
    return digest([_fn_name(fn), to_json_value(list(args), where), to_json_value(kwargs, where)])


class DurableCall:
    """One durable call of an action execution: awaitable, completes once.

    Awaiting a completed call returns its result (or raises its exception) again without a
    new execution; awaiting an incomplete one suspends the action until the I/O executor
    delivers the outcome.
    """

    __slots__ = ("call_id", "ordinal", "done", "ok", "value", "replayed")

    def __init__(self, call_id: str, ordinal: int) -> None:
        self.call_id = call_id
        self.ordinal = ordinal
        self.done = False
        self.ok = True
        self.value: Any = None
        self.replayed = False

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


def _rebuild_exception(type_path: str | None, message: str | None) -> BaseException:
    try:
        cls = import_qualified(type_path or "")
        if isinstance(cls, type) and issubclass(cls, Exception):
            return cls(message)
    except Exception:  # noqa: BLE001 - fall back to a generic, still-typed error
        pass
    return DurableExecutionError(f"recorded failure {type_path}: {message}")


class ActionContext(RunnerContext):
    """The context of one action execution (valid only while that execution runs).

    Args:
        core: the hosting core.
        key: the record key.
        execution_id: the identity of this action execution.
        record: the execution's state entry (durable call records live there).
        action_config: the action's configuration.
        short_term: the key's committed short-term memory.
        sensory: the run's committed sensory memory.
    """

    def __init__(
        self, core: AgentCore, key: Any, execution_id: str, record: InflightAction,
        action_config: dict[str, Any], short_term: dict[str, Any], sensory: dict[str, Any],
    ) -> None:
        self._core = core
        self._key = key
        self.execution_id = execution_id
        self._record = record
        self._config = action_config
        self.short_term = ActionMemory(short_term, "short_term_memory")
        self.sensory = ActionMemory(sensory, "sensory_memory")
        self.emitted: list[Event] = []
        self.calls: dict[int, DurableCall] = {}
        self._next_ordinal = 0
        self.finished = False

    # -- RunnerContext -----------------------------------------------------------------
    @property
    def key(self) -> Any:
        return self._key

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
        where = f"event {sent.type} sent by {self.execution_id}"
        try:
            data = sent.model_dump(mode="python")
        except Exception as e:  # noqa: BLE001 - pydantic's own serialization failure
            raise SerializationError(f"{where}: {e}") from e
        to_json_value(data, where)
        self.emitted.append(sent)
        return sent

    def get_resource(self, name: str, resource_type: ResourceType) -> Resource:
        self._check_live("get_resource")
        return self._core.resources.get(name, resource_type)

    def durable_execute(
        self, fn: Callable[..., Any], *args: Any, reconciler: Callable[[], Any] | None = None,
        **kwargs: Any,
    ) -> Any:
        call, rec = self._open_call(fn, args, kwargs)
        if not call.done:
            runner = reconciler if (rec is not None and reconciler is not None) else None
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
        call, rec = self._open_call(fn, args, kwargs)
        if not call.done:
            if rec is not None and reconciler is not None:
                self._core.submit(self, call, reconciler, (), {})
            else:
                self._core.submit(self, call, fn, args, kwargs)
        return call

    # -- runtime side ------------------------------------------------------------------
    def rebind(self, record: InflightAction, short_term: dict[str, Any],
               sensory: dict[str, Any]) -> None:
        """Point at the current state objects (a host may deserialize state per callback)."""
        self._record = record
        self.short_term.rebase(short_term)
        self.sensory.rebase(sensory)

    def _check_live(self, what: str) -> None:
        if self.finished:
            raise NotInActionContextError(
                f"{what} called after action execution {self.execution_id} finished; "
                "a RunnerContext is valid only during the action it was passed to"
            )

    def _open_call(
        self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[DurableCall, CallRecord | None]:
        """Allocate the next call ordinal and replay its record when there is one.

        Returns the call (already ``done`` when replayed) and, when the call had started
        before a restore but its outcome was recorded nowhere, that record.
        """
        self._check_live("durable_execute")
        ordinal = self._next_ordinal
        self._next_ordinal += 1
        call_id = f"{self.execution_id}/c{ordinal}"
        call = DurableCall(call_id, ordinal)
        self.calls[ordinal] = call
        dig = call_digest(fn, args, kwargs, call_id)
        rec = self._record.calls.get(str(ordinal))
        if rec is None or not rec.done:
            journaled = self._core.journal_lookup(self._key, call_id)
            if journaled is not None and journaled.done:
                rec = self._record.calls[str(ordinal)] = journaled
        if rec is not None and rec.done:
            if rec.digest != dig:
                log.warning(
                    "durable call %s replays a recorded outcome but its arguments changed "
                    "(digest %s, recorded %s); replay goes by identity", call_id, dig, rec.digest
                )
            call.replayed = True
            if rec.ok:
                call.complete(True, from_json_value(rec.value))
            else:
                call.complete(False, _rebuild_exception(rec.error_type, rec.error_message))
            self._core.call_made(self._key, call_id, _fn_name(fn), replayed=True)
            return call, None
        started = rec  # started before a restore, outcome unknown
        self._record.calls[str(ordinal)] = CallRecord(digest=dig)
        self._core.call_made(self._key, call_id, _fn_name(fn), replayed=False)
        return call, started

    def record_outcome(self, call: DurableCall, ok: bool, value: Any) -> None:
        """Record a call's outcome in the execution's state entry, then complete the call.

        A result with no JSON form fails the call with a ``SerializationError`` naming it.
        """
        rec = self._record.calls[str(call.ordinal)]
        if ok:
            try:
                stored = to_json_value(value, f"result of durable call {call.call_id}")
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
        call.complete(ok, value)
        self._core.outcome_recorded(self._key, call.call_id, rec)
