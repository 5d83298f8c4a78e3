"""``RunnerContext``: what an action can do. A small interface the runtime implements.

The same action runs unchanged on the local runner and on the Flink operator: each host
passes its own implementation. A context is valid only during the action execution it was
passed to; keeping it past that is unsupported.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Generator, Sequence
from enum import Enum
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from ._batch_calls import Outcome, batch_awaitables, gather_outcomes
from ._events import Event
from ._memory import Memory
from ._messages import ChatMessage, ChatResponse
from ._metric_groups import MetricGroup
from ._resources import Resource, ResourceType

if TYPE_CHECKING:
    from ._long_term_memory import BaseLongTermMemory
    from ._subagents import SubagentFuture

__all__ = ["RunnerContext", "AgentConfig"]

T = TypeVar("T")


class AgentConfig:
    """The agent's configuration as an action reads it (Flink Agents' ``ctx.config``).

    Keys set with ``Agent.set_config`` or on the compat environment's configuration.

    Args:
        values: the configuration.
    """

    __slots__ = ("_values",)

    def __init__(self, values: dict[str, Any]) -> None:
        self._values = values

    def get(self, option: Any, default: Any = None) -> Any:
        """The value of ``option`` (a key, or an option with ``key`` and ``default``).

        An option whose ``config_type`` is an enum gives its member (Flink Agents' typed
        options: ``ctx.config.get(AgentExecutionOptions.ERROR_HANDLING_STRATEGY)``).

        Returns:
            The value set, else ``default``, else the option's default.
        """
        key = getattr(option, "key", option)
        if default is None:
            default = getattr(option, "default", None)
        value = self._values.get(str(key), default)
        kind = getattr(option, "config_type", None)
        if isinstance(kind, type) and issubclass(kind, Enum) and not isinstance(value, kind):
            found = [m for m in kind if value in (m.value, m.name)]
            return found[0] if found else value
        return value

    def get_str(self, option: Any, default: Any = None) -> Any:
        """The value of ``option`` (Flink Agents' typed getters are all this one here)."""
        return self.get(option, default)

    get_int = get_float = get_bool = get_str


class _AwaitOrYieldFrom:
    """A durable call that an ``async`` action awaits and a generator action yields from."""

    __slots__ = ("_call",)

    def __init__(self, call: Awaitable[Any]) -> None:
        self._call = call

    def __await__(self) -> Generator[Any, None, Any]:
        return self._call.__await__()

    __iter__ = __await__


class RunnerContext(ABC):
    """The context an action receives; its methods delegate to the hosting runtime."""

    __slots__ = ()  # an implementation chooses its own (the runtime's keeps one slot)

    @property
    @abstractmethod
    def key(self) -> Any:
        """The key of the record this run processes."""

    @property
    @abstractmethod
    def sensory_memory(self) -> Memory:
        """Memory of the current run: cleared when the run ends."""

    @property
    @abstractmethod
    def short_term_memory(self) -> Memory:
        """Memory of the current key: survives runs, kept in keyed state."""

    @property
    def long_term_memory(self) -> BaseLongTermMemory:
        """Memory sets searched by meaning, kept in a vector store (see ``BaseLongTermMemory``).

        Raises:
            NotImplementedError: when the hosting runtime offers no long-term memory.
        """
        raise NotImplementedError(f"{type(self).__name__} has no long-term memory")

    def get_short_term_memory(self) -> Memory:
        """``short_term_memory`` (Apache Flink Agents 0.1's name, its first examples')."""
        return self.short_term_memory

    def get_sensory_memory(self) -> Memory:
        """``sensory_memory`` (Apache Flink Agents 0.1's name)."""
        return self.sensory_memory

    def get_long_term_memory(self) -> BaseLongTermMemory:
        """``long_term_memory`` (Apache Flink Agents 0.1's name)."""
        return self.long_term_memory

    @property
    def config(self) -> AgentConfig:
        """The agent's configuration, read-only (Flink Agents' ``ctx.config``)."""
        raise NotImplementedError(f"{type(self).__name__} has no configuration")

    @property
    def agent_metric_group(self) -> MetricGroup:
        """Metrics of the agent an action may update (Flink Agents' name).

        Counters, meters, histograms and gauges by name, kept in this process (see
        ``MetricGroup``).
        """
        raise NotImplementedError(f"{type(self).__name__} has no metric groups")

    @property
    def action_metric_group(self) -> MetricGroup:
        """The running action's own metrics.

        ``agent_metric_group``'s sub-group ``action``, then the action's name.
        """
        raise NotImplementedError(f"{type(self).__name__} has no metric groups")

    @property
    @abstractmethod
    def action_config(self) -> dict[str, Any]:
        """Configuration of the running action (from the plan), read-only."""

    def get_action_config(self) -> dict[str, Any]:
        """``action_config`` (Apache Flink Agents' getter of it)."""
        return self.action_config

    def get_config(self) -> AgentConfig:
        """``config`` (Apache Flink Agents' getter of it)."""
        return self.config

    def get_agent_metric_group(self) -> MetricGroup:
        """``agent_metric_group`` (Apache Flink Agents' getter of it)."""
        return self.agent_metric_group

    def get_action_metric_group(self) -> MetricGroup:
        """``action_metric_group`` (Apache Flink Agents' getter of it)."""
        return self.action_metric_group

    def get_action_config_value(self, key: str, default: Any = None) -> Any:
        """One value of ``action_config`` (Flink Agents' name), or ``default``."""
        return self.action_config.get(key, default)

    @abstractmethod
    def send_event(self, event: Event | None = None, *, identifier: str | None = None,
                   **attributes: Any) -> Event:
        """Send ``event`` to the actions it triggers.

        Events an action sends are delivered, in the order sent, when the action completes.

        Args:
            event: the event; an ``OutputEvent`` leaves the agent as an output.
            identifier: instead of ``event``, the type of an event made of ``attributes``
                (Apache Flink Agents' dynamic event: ``send_event(identifier="Scored",
                score=3)`` sends ``DynamicEvent(identifier="Scored", score=3)``, which
                ``@action("Scored")`` receives).
            **attributes: that event's attributes (only with ``identifier``).

        Returns:
            The event as sent, carrying its assigned replay-stable ``id``.

        Raises:
            SerializationError: when the event has no JSON form.
            SendEventArgumentError: (a ``ValueError``, as Flink Agents raises, and a
                ``UsageError``) when given both an event and an identifier, or neither.
        """

    @abstractmethod
    def get_resource(self, name: str, resource_type: ResourceType | None = None,
                     metric_group: MetricGroup | None = None, *,
                     type: ResourceType | None = None) -> Resource:  # noqa: A002 - theirs
        """Return the resource of ``resource_type`` named ``name``, built on first use.

        Args:
            name: the resource's registered name.
            resource_type: its type.
            metric_group: taken for Apache Flink Agents' signature and not used: a
                resource's calls are measured by the built-in metrics here.
            type: the same as ``resource_type`` (Flink Agents' keyword:
                ``ctx.get_resource(name="m", type=ResourceType.CHAT_MODEL)``).

        Returns:
            The resource.

        Raises:
            ResourceNotFoundError: when none is registered under that name and type.
        """

    @abstractmethod
    def durable_execute(
        self, fn: Callable[..., T], *args: Any, reconciler: Callable[[], T] | None = None,
        strict: bool | None = None, **kwargs: Any,
    ) -> T:
        """Call ``fn(*args, **kwargs)`` on the operator thread, recording its outcome.

        A replay of this call (same action execution, same call ordinal) returns the recorded
        result, or raises the recorded exception, without calling ``fn``. Arguments and the
        result must have a JSON form (pydantic models are fine). What ``fn`` binds counts as
        arguments too: a ``functools.partial``'s arguments, a lambda's or closure's captured
        values and defaults, a bound method's object, a callable object's state (see
        ``docs/concepts/replay-divergence.md``).

        Args:
            fn: the function; blocks the operator while it runs (prefer the async form).
                Apache Flink Agents' keyword for it, ``func=``, is taken too.
            *args: positional arguments of ``fn``.
            reconciler: called at recovery instead of ``fn`` when the call had started but its
                outcome was recorded nowhere (the runtime's, as in Apache Flink Agents).
            strict: on replay, fail with ``ReplayDivergenceError`` when the arguments differ
                from the recorded ones (``None``: the agent's ``replay`` mode, lenient by
                default: the recorded outcome is returned with a warning). When ``fn`` has a
                parameter ``strict`` (not bound by ``functools.partial``), it is ``fn``'s
                instead, as Flink Agents passes it.
            **kwargs: keyword arguments of ``fn``; ``durable_id`` (Flink Agents' call id) is
                the runtime's, taken and not used. ``reconciler=``/``durable_id=`` given to
                an ``fn`` with a parameter so named (one taking ``**kwargs`` does not get
                them), or any of the three to one whose parameters cannot be read, is
                ambiguous and raises ``UsageError``: bind
                ``fn``'s with ``functools.partial(fn, name=...)``, or make the call with
                ``durable_execute_all_async([DurableCallSpec(func=fn, kwargs={...})])``.

        Returns:
            What ``fn`` returned (or, on replay, what it returned the first time).

        Raises:
            UsageError: when a keyword may be the runtime's or ``fn``'s (above).
            SerializationError: when an argument or the result has no JSON form (a generator
                function's generator too: its body never runs; return a list).
            ReplayDivergenceError: on replay, when the call is not the one recorded at its
                place (another function, or a lambda or wrapper now calling another one;
                the arguments of another recorded call, or the recorded ones bound to other
                parameters; or, when strict, other arguments).
        """

    @abstractmethod
    def chat(
        self, model: str, messages: Sequence[ChatMessage], *,
        prompt_args: dict[str, Any] | None = None,
        output_schema: type[BaseModel] | dict[str, Any] | None = None,
    ) -> Awaitable[ChatResponse]:
        """Return a lazy durable future of a whole chat with the setup named ``model``.

        Nothing is dispatched until the future is first awaited; then the chat runs its
        model calls and tool rounds on a private event route (the agent's own actions do
        not see its events) with this action's resources and memory stores. Awaiting it
        again returns the same outcome. Replay returns a recorded outcome without another
        model call. There is no whole-chat timeout (the model's and tools' own apply).

        Args:
            model: name of a ``CHAT_MODEL`` resource.
            messages: the conversation (the setup's prompt is prepended).
            prompt_args: values for the prompt's ``{placeholders}``.
            output_schema: a pydantic model class (the result's ``structured`` is then an
                instance of it) or a JSON Schema.

        Returns:
            An awaitable of the ``ChatResponse``: ``await`` it (in an ``async def`` action)
            before using the response; reading an attribute of the future itself raises an
            ``AttributeError`` saying so.

        Raises:
            ChatResponseError: on await, when the chat failed (carries the reason; a failure
                that raised, e.g. in the model call, has the original traceback as its
                ``__cause__``).
            UsageError: (the action fails with it) when a plain ``def`` action calls
                ``chat``: the chat would never run, as only an await starts it.
            UnsupportedAwaitError: when combined with ``asyncio.gather`` or tasks; await chat
                futures one after another instead.
        """

    @abstractmethod
    def submit_subagent(self, name: str, input: Any) -> Awaitable[SubagentFuture]:
        """Submit ``input`` to the ``AGENT`` resource ``name``; await this for the call's handle.

        ``handle = await ctx.submit_subagent(name, input)``: nothing is submitted until this
        is awaited (one never awaited is logged as a WARNING naming its line).

        An unknown or non-``AGENT`` name gives a handle whose result is a failed
        ``SubagentResult`` naming the problem. ``result = await handle`` gives the
        ``SubagentResult`` (a failed one carries the sub-agent's ``traceback``).

        Args:
            name: the ``AGENT`` resource's name.
            input: the sub-agent's input (its declared input type, or JSON data).

        Returns:
            The call's handle; awaiting it gives the ``SubagentResult``.
        """

    @abstractmethod
    def durable_execute_async(
        self, fn: Callable[..., Any], *args: Any, reconciler: Callable[[], Any] | None = None,
        strict: bool | None = None, **kwargs: Any,
    ) -> Awaitable[Any]:
        """Start ``fn(*args, **kwargs)`` on the I/O executor and return an awaitable of it.

        ``fn`` may be a plain function (run in a worker thread) or an ``async`` one (run on
        the executor's event loop). The call starts at once, so several calls created before
        any is awaited run concurrently. Recording and replay are as for ``durable_execute``.
        The caller's action is suspended while it awaits; other keys keep running. The call
        belongs to the action, as a task to an asyncio ``TaskGroup``: an action that returns
        without awaiting it completes only once its outcome is recorded.

        Args:
            fn: the function, plain or ``async`` (Flink Agents' keyword ``func=`` too).
            *args: positional arguments of ``fn``.
            reconciler: called at recovery instead of ``fn`` when the call had started but its
                outcome was recorded nowhere.
            strict: as for ``durable_execute`` (``fn``'s when it has a parameter so named).
            **kwargs: keyword arguments of ``fn`` (the runtime's keywords as for
                ``durable_execute``: an ambiguous one raises ``UsageError``).

        Returns:
            An awaitable of what ``fn`` returns (or, on replay, returned the first time).
        """

    def durable_execute_all_async(self, callables: Sequence[Any]) -> Awaitable[list[Outcome[Any]]]:
        """Run a batch of durable calls concurrently; await this for one ``Outcome`` per call.

        ``outcomes = await ctx.durable_execute_all_async([DurableCall(func=f, args=(1,)),
        ...])`` (Apache Flink Agents' batch). Each call is this action's durable call, as
        ``durable_execute_async`` makes it: started at once (all of them, before any is
        awaited), run concurrently within the runtime's limits on calls in flight, recorded,
        and replayed after a restore without being called again. What a call raises is its
        failed ``Outcome`` (recorded and replayed as well); the others are not affected.

        Args:
            callables: the calls, each a ``DurableCall`` (``compat``; ``api.DurableCallSpec``)
                or an object with its ``func``, ``args``, ``kwargs`` and ``reconciler``.

        Returns:
            An awaitable (``await`` it, or ``yield from`` it in a generator action) of the
            list of ``Outcome``, one per call in the order given.

        Raises:
            UsageError: at once, when ``callables`` is not a list of calls (naming the first
                that is not), or an argument has no JSON form (``SerializationError``).
        """
        return _AwaitOrYieldFrom(gather_outcomes(batch_awaitables(self, callables)))

    def close(self) -> None:
        """Apache Flink Agents' ``RunnerContext.close``: nothing to do here.

        The runtime owns what an action's context uses (resources, executors, state) and
        releases it when the operator closes; an action calling ``close`` changes nothing.
        """
        return None

    def execute_async(self, fn: Callable[..., Any], *args: Any, **kwargs: Any
                      ) -> _AwaitOrYieldFrom:
        """``durable_execute_async`` by Flink Agents' first name (0.1 and 0.2).

        ``result = yield from ctx.execute_async(fn, *args)`` in a plain ``def`` action (a
        generator, which the runtime steps as it steps a coroutine), or ``result = await
        ctx.execute_async(fn, *args)`` in an ``async def`` one (as Flink Agents' local
        environment tests write it; it was a ``TypeError``, a generator being no awaitable,
        before the port of those tests found it).

        Args:
            fn: the function, plain or ``async``.
            *args: positional arguments of ``fn``.
            **kwargs: keyword arguments of ``fn`` (and ``durable_execute_async``'s own).

        Returns:
            The call, to ``await`` or ``yield from``: either gives what ``fn`` returns (or,
            on replay, returned the first time).
        """
        return _AwaitOrYieldFrom(self.durable_execute_async(fn, *args, **kwargs))

    def patched(self, change_id: str) -> bool:
        """Whether this action execution takes the new branch of change ``change_id``.

        A versioning marker, as Temporal's ``workflow.patched``: write ``if
        ctx.patched("price-v2"): <new calls> else: <old calls>`` to change an action's
        durable calls while runs recorded by the old code are in flight. A new execution, or
        a replay that reaches this point with nothing recorded beyond it, records the marker
        and gets ``True``; a replay of an execution recorded before the change (it has
        recorded calls beyond this point and no marker) gets ``False`` and keeps its old
        calls. The answer is recorded in the execution's state entry (not at a call
        ordinal), so it is the same for every later ``patched`` of that change in the
        execution and after every later restore. Once no run recorded before the change is
        in flight, replace the call with ``deprecate_patch`` and remove the old branch.

        Args:
            change_id: a name for the change, unique within the action.

        Returns:
            ``True`` for the new branch, ``False`` for the old one.

        Raises:
            UsageError: when ``change_id`` is not a non-empty string.
            NotImplementedError: when the hosting runtime has no versioning markers.
        """
        raise NotImplementedError(f"{type(self).__name__} has no versioning markers")

    def deprecate_patch(self, change_id: str) -> None:
        """Mark that change ``change_id``'s old branch is gone (after ``patched``).

        Records the marker for new executions as ``patched`` does. A replay of an
        execution recorded before the change fails with ``ReplayDivergenceError`` (its old
        branch no longer exists) instead of silently taking the new one. Markers do not
        take call ordinals, so removing this call later shifts no call.

        Args:
            change_id: the name given to ``patched``.

        Raises:
            ReplayDivergenceError: when the execution took the old branch.
            UsageError: when ``change_id`` is not a non-empty string.
            NotImplementedError: when the hosting runtime has no versioning markers.
        """
        raise NotImplementedError(f"{type(self).__name__} has no versioning markers")

    def wait_for(self, correlation_id: str, *, timeout_s: float | None = None) -> Awaitable[Any]:
        """Wait, durably, for an outside event of this key with ``correlation_id``.

        The action pauses until an ``ExternalEvent`` with this key and ``correlation_id``
        arrives on the agent's second input (``connect``), and the wait returns its
        ``payload``. The wait is a durable call: while it is open the run lives in keyed
        state only (no thread, no coroutine held: the action re-enters from its start and
        replays its recorded calls when the event or the timeout arrives), and its outcome
        is recorded, so a replay returns the same payload. The timeout is a timer of the
        host (Flink's processing-time timer service on Flink), kept across checkpoints, a
        crash and a rescale. Events that arrive for no open wait go to the error output.

        Args:
            correlation_id: the id the outside event carries; waited for once per run.
            timeout_s: how long to wait, in seconds (``None``: until the event comes, or
                all input ends).

        Returns:
            An awaitable of the event's payload.

        Raises:
            WaitTimeoutError: (when awaited) no event arrived within ``timeout_s``, or all
                input ended while waiting.
            UsageError: when ``correlation_id`` is not a non-empty string, ``timeout_s`` is
                not a positive number, or the run waits for that id already.
            NotImplementedError: when the hosting runtime has no waits.
        """
        raise NotImplementedError(f"{type(self).__name__} has no waits for outside events")

    def sleep(self, seconds: float) -> Awaitable[None]:
        """Pause the action for ``seconds``, durably (a timer of the host, not a thread).

        Like ``wait_for`` without an event: the run lives in keyed state while it sleeps,
        the wake-up is a timer (Flink's processing-time timer service on Flink, kept across
        checkpoints and restores), and a replay does not sleep again. The local runner
        skips time: a sleep ends as soon as nothing else can happen.

        Args:
            seconds: how long, in seconds (> 0).

        Returns:
            An awaitable that completes when the time has passed.

        Raises:
            UsageError: when ``seconds`` is not a positive number.
            NotImplementedError: when the hosting runtime has no timers.
        """
        raise NotImplementedError(f"{type(self).__name__} has no durable timers")

    def next_session_id(self) -> str:
        """A new sub-agent session id, stable across replays (Apache Flink Agents' name).

        Each call gives the next id of this action execution: a replay of the execution,
        calling in the same order, gets the same ids, so an external sub-agent may use them
        as idempotency keys. An id is unique among the executions of the key's runs.

        Returns:
            The session id.

        Raises:
            NotImplementedError: when the hosting runtime assigns no ids.
        """
        raise NotImplementedError(f"{type(self).__name__} assigns no sub-agent session ids")

    def next_call_id(self, session_id: str) -> str:
        """The next call id within ``session_id`` (Apache Flink Agents' name).

        ``"<session_id>-1"``, then ``-2``..., counted per session within this action
        execution, so a replay calling in the same order gets the same ids.

        Args:
            session_id: the session (one ``next_session_id`` gave, or the program's own).

        Returns:
            The call id.

        Raises:
            UsageError: when ``session_id`` is not a non-empty string.
            NotImplementedError: when the hosting runtime assigns no ids.
        """
        raise NotImplementedError(f"{type(self).__name__} assigns no sub-agent call ids")
