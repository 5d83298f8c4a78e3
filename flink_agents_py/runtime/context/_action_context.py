"""``ActionContext``: the ``RunnerContext`` a user's action receives from the runtime.

It carries exactly what ``RunnerContext`` promises, each call a one-line delegation to the
``ActionExecution`` the core owns (``_execution``): recording, replay and the commands for the
core live there, out of the user's reach (as Temporal's ``workflow`` functions delegate to
the hidden workflow instance).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Generator, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from ...api import (
    AgentConfig,
    BaseLongTermMemory,
    ChatMessage,
    ChatResponse,
    Event,
    Memory,
    MemoryObject,
    MetricGroup,
    Resource,
    ResourceType,
    RunnerContext,
    SubagentFuture,
    UsageError,
    VersionedMemorySet,
)
from ...api.internal import (
    BUILTIN_TYPE_NAMES,
    EVENT_ID_SOURCE,
    agent_metric_group,
    builtin_of,
    cut_masked,
    event_to_send,
    resource_type_argument,
)
from ..core._stepper import DURABLE_FUNCTION
from ._call_options import UNSET, runtime_options
from ._calls import submission
from ._long_term_memory import ActionLongTermMemory, ActionMemorySet
from ._memory import ActionMemory
from ._nested import refuse_nested
from ._owner import refuse_foreign

if TYPE_CHECKING:
    from ..recorder._execution import ActionExecution

__all__ = ["ActionContext"]


class ActionContext(RunnerContext):
    """The context of one action execution (valid only while that execution runs).

    Args:
        execution: the execution it speaks for.
    """

    # ``_subagent_ids``: (sessions given, calls given per session), set at the first
    # ``next_session_id`` / ``next_call_id`` (unset on most executions: no cost)
    __slots__ = ("_execution", "_subagent_ids")
    _subagent_ids: tuple[dict[str, int], dict[str, int]]

    def __init__(self, execution: ActionExecution) -> None:
        self._execution = execution

    @property
    def key(self) -> Any:
        """The key of the record this run processes."""
        return self._execution.key

    @property
    def sensory_memory(self) -> Memory:
        """Memory of the current run: cleared when the run ends."""
        execution = self._execution  # ``refuse_foreign``'s usual case inline: its own action
        if EVENT_ID_SOURCE.get() != execution.event_id_source:  # (its bound method: equal
            refuse_foreign(execution, "ctx.sensory_memory")  # when of the same execution)
        memory = execution.sensory_view  # made at its first use (``ActionExecution.sensory``)
        return memory if memory is not None else execution.sensory

    @property
    def short_term_memory(self) -> Memory:
        """Memory of the current key: survives runs, kept in keyed state."""
        execution = self._execution  # (as ``sensory_memory``)
        if EVENT_ID_SOURCE.get() != execution.event_id_source:
            refuse_foreign(execution, "ctx.short_term_memory")
        memory = execution.short_term_view
        return memory if memory is not None else execution.short_term

    @property
    def long_term_memory(self) -> BaseLongTermMemory:
        """Memory sets searched by meaning, kept in a vector store."""
        refuse_foreign(self._execution, "ctx.long_term_memory")
        return self._execution.long_term_memory

    @property
    def config(self) -> AgentConfig:
        """See ``RunnerContext.config``."""
        return AgentConfig(self._execution.plan.config)

    @property
    def agent_metric_group(self) -> MetricGroup:
        """See ``RunnerContext.agent_metric_group``."""
        return agent_metric_group(self._execution.plan.agent)

    @property
    def action_metric_group(self) -> MetricGroup:
        """See ``RunnerContext.action_metric_group``."""
        return self.agent_metric_group.get_sub_group("action").get_sub_group(
            self._execution.action_name)

    @property
    def action_config(self) -> dict[str, Any]:
        """Configuration of the running action (from the plan), a copy."""
        return self._execution.action_config

    def send_event(self, event: Event | None = None, *, identifier: str | None = None,
                   **attributes: Any) -> Event:
        """See ``RunnerContext.send_event``."""
        if DURABLE_FUNCTION.get() is not None:  # (checked inline: once per event sent)
            refuse_nested("ctx.send_event")
        execution = self._execution  # (as ``sensory_memory``)
        if EVENT_ID_SOURCE.get() != execution.event_id_source:
            refuse_foreign(execution, "ctx.send_event")
        if identifier is not None or attributes or event is None:  # else it is ``event``
            event = event_to_send(event, identifier, attributes)
        if event.__class__ is Event and event.type in BUILTIN_TYPE_NAMES:
            event = builtin_of(event)  # Flink Agents' ``Event(type="_output_event", ...)``
        return execution.send_event(event)

    def get_resource(self, name: str, resource_type: ResourceType | None = None,
                     metric_group: MetricGroup | None = None, *,
                     type: ResourceType | None = None) -> Resource:  # noqa: A002 - theirs
        """See ``RunnerContext.get_resource``."""
        if resource_type is None and type is None:  # the type forgotten: say which it is
            raise TypeError(self._execution.resources.untyped_message(name))
        return self._execution.get_resource(name, resource_type_argument(resource_type, type))

    def durable_execute(
        self, fn: Callable[..., Any] | None = None, *args: Any,
        reconciler: Any = UNSET, strict: Any = UNSET, **kwargs: Any,
    ) -> Any:
        """See ``RunnerContext.durable_execute`` (a memory operation: called as it is)."""
        if fn is None:
            fn = _named_function("durable_execute", kwargs)
        if reconciler is not UNSET or strict is not UNSET or "durable_id" in kwargs:
            fn, reconciler, strict = runtime_options("durable_execute", fn, reconciler,
                                                     strict, kwargs)
        else:
            reconciler = strict = None
        if _is_memory_operation(fn):
            value = fn(*args, **kwargs)
            if inspect.iscoroutine(value):  # ``memory_set.asearch``: awaited, not run here
                value.close()
                raise TypeError(f"ctx.durable_execute({fn.__qualname__}) got a coroutine: "
                                "await ctx.durable_execute_async(...) in an async action")
            return value
        return self._execution.durable_execute(fn, *args, reconciler=reconciler, strict=strict,
                                               **kwargs)

    def durable_execute_async(
        self, fn: Callable[..., Any] | None = None, *args: Any,
        reconciler: Any = UNSET, strict: Any = UNSET, **kwargs: Any,
    ) -> Awaitable[Any]:
        """See ``RunnerContext.durable_execute_async`` (a memory operation: called now)."""
        if fn is None:
            fn = _named_function("durable_execute_async", kwargs)
        if reconciler is not UNSET or strict is not UNSET or "durable_id" in kwargs:
            fn, reconciler, strict = runtime_options("durable_execute_async", fn, reconciler,
                                                     strict, kwargs)
        else:
            reconciler = strict = None
        if _is_memory_operation(fn):
            return _Called(fn, args, kwargs)
        return self._execution.durable_execute_async(fn, *args, reconciler=reconciler,
                                                     strict=strict, **kwargs)

    def chat(
        self, model: str, messages: Sequence[ChatMessage], *,
        prompt_args: dict[str, Any] | None = None,
        output_schema: type[BaseModel] | dict[str, Any] | None = None,
    ) -> Awaitable[ChatResponse]:
        """See ``RunnerContext.chat``."""
        refuse_nested("ctx.chat")
        return self._execution.chat(model, messages, prompt_args=prompt_args,
                                    output_schema=output_schema)

    def submit_subagent(self, name: str, input: Any) -> Awaitable[SubagentFuture]:
        """See ``RunnerContext.submit_subagent``."""
        refuse_nested("ctx.submit_subagent")
        return submission(self._execution.submit_subagent(name, input), name)

    def next_session_id(self) -> str:
        """See ``RunnerContext.next_session_id``."""
        counts = self._id_counts()
        n = counts[0].get("", 0)
        counts[0][""] = n + 1
        return f"{self._execution.execution_id}/s{n}"

    def next_call_id(self, session_id: str) -> str:
        """See ``RunnerContext.next_call_id``."""
        if not isinstance(session_id, str) or not session_id:
            raise UsageError(f"ctx.next_call_id takes the session id as a non-empty string, "
                             f"got {type(session_id).__name__} {cut_masked(repr(session_id), 80)}")
        calls = self._id_counts()[1]
        n = calls.get(session_id, 0) + 1
        calls[session_id] = n
        return f"{session_id}-{n}"

    def _id_counts(self) -> tuple[dict[str, int], dict[str, int]]:
        """The sub-agent ids this execution gave: sessions (under ``""``), calls by session."""
        counts: tuple[dict[str, int], dict[str, int]] | None = getattr(
            self, "_subagent_ids", None)
        if counts is None:
            counts = ({}, {})
            self._subagent_ids = counts
        return counts

    def patched(self, change_id: str) -> bool:
        """See ``RunnerContext.patched``."""
        refuse_nested("ctx.patched")
        return self._execution.patched(change_id)

    def deprecate_patch(self, change_id: str) -> None:
        """See ``RunnerContext.deprecate_patch``."""
        refuse_nested("ctx.deprecate_patch")
        self._execution.deprecate_patch(change_id)

    def wait_for(self, correlation_id: str, *, timeout_s: float | None = None) -> Awaitable[Any]:
        """See ``RunnerContext.wait_for``."""
        refuse_nested("ctx.wait_for")
        return self._execution.wait_for(correlation_id, timeout_s=timeout_s)

    def sleep(self, seconds: float) -> Awaitable[None]:
        """See ``RunnerContext.sleep``."""
        refuse_nested("ctx.sleep")
        return self._execution.sleep(seconds)


_MEMORY_TYPES = (ActionMemory, MemoryObject, ActionLongTermMemory, ActionMemorySet,
                 VersionedMemorySet)


def _is_memory_operation(fn: Any) -> bool:
    """Whether ``fn`` is a method of a memory or a memory set (``memory_set.add``).

    Flink Agents' programs run memory operations as durable calls (its long-term memory
    example: ``await ctx.durable_execute_async(memory_set.add, items=...)``). They are
    durable already (a read is a durable call of its own; a write is applied with the
    action's other writes as it completes), and inside a durable call's function a write
    would be lost on a replay, which does not run the function again (it is refused there).
    So they are called in the action, as they are.

    Returns:
        Whether it is one.
    """
    owner = getattr(fn, "__self__", None)  # (a plain function has none: no ABC checks)
    return owner is not None and isinstance(owner, _MEMORY_TYPES)


class _Called:
    """``durable_execute_async`` of a memory operation, called now.

    ``await`` gives its result, or raises what it raised.
    """

    __slots__ = ("_error", "_value")

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...],
                 kwargs: dict[str, Any]) -> None:
        self._value: Any = None
        self._error: BaseException | None = None
        try:
            self._value = fn(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - raised where it is awaited, as a call's is
            self._error = e

    def __await__(self) -> Generator[Any, None, Any]:
        if self._error is not None:
            raise self._error
        value = self._value
        if inspect.isawaitable(value):  # ``memory_set.asearch``: its own durable call
            value = yield from value.__await__()
        return value


def _named_function(method: str, kwargs: dict[str, Any]) -> Callable[..., Any]:
    """The function a call names by Apache Flink Agents' keyword (``durable_execute(func=f)``).

    Raises:
        TypeError: when ``kwargs`` names no callable ``func`` (it is taken out of them).
    """  # noqa: DOC201
    fn: Callable[..., Any] | None = kwargs.pop("func", None)
    if fn is None or not callable(fn):
        raise TypeError(f"ctx.{method}() needs the function to call: ctx.{method}(fn, *args, "
                        "**kwargs), or Flink Agents' keyword func=fn")
    return fn
