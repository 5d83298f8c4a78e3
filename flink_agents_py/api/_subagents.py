"""Sub-agents: resources of type ``AGENT`` an action (or a chat model) delegates work to.

Three kinds, one calling convention (``handle = await setup.submit(ctx, input)``, then
``result = await handle``, a ``SubagentResult``):

- ``InternalSubagent``: another ``Agent`` compiled into the parent's plan and run in the same
  operator on a private event flow, with its own resources and memory isolated per call.
- ``DeferredSubagentSetup``: your ``prepare`` returns ``(key, call, reconciler)``; nothing is
  sent at submit time, the call runs under durable execution when the caller first awaits.
- ``AsyncSubagentSetup``: publish/subscribe against a remote run: submit once, poll the
  status without blocking the operator, fetch the result, cancel on request.

External setups are registered by descriptor (``ResourceDescriptor(clazz="pkg.mod.Setup",
endpoint=..., description=..., input_schema=...)``): every extra argument is a pydantic field
of the setup. The shapes follow Apache Flink Agents' sub-agent documentation.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, ClassVar, Literal, overload

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ._resources import Resource, ResourceType
from ._secret_scrub import described
from ._secrets import MaskedStr

if TYPE_CHECKING:
    from ._context import RunnerContext

__all__ = [
    "SUBAGENT_DESCRIPTION_MARKER",
    "subagent_callable",
    "declared_input_schema",
    "TEXT_INPUT_SCHEMA",
    "subagent_prompt_values",
    "SubagentResult",
    "RunStatus",
    "SubagentFuture",
    "SubagentSetup",
    "InternalSubagent",
    "DeferredSubagentSetup",
    "AsyncSubagentSetup",
    "PreparedCall",
]


class _ErrorOrFailed:
    """``SubagentResult.error``: on a result, its error message; on the class, ``failed``.

    A result's ``error`` reads as data (``if r.error: ...``), so it is the message (``None``
    when the call succeeded), never a bound method, which is always true; on the class,
    ``SubagentResult.error(reason)`` still makes a failed result, as it always has.
    """

    @overload
    def __get__(self, obj: None, owner: type[SubagentResult]
                ) -> Callable[..., SubagentResult]: ...

    @overload
    def __get__(self, obj: SubagentResult, owner: type[SubagentResult] | None = None
                ) -> str | None: ...

    def __get__(self, obj: SubagentResult | None, owner: type[SubagentResult] | None = None
                ) -> Any:
        if obj is None:
            assert owner is not None
            return owner.failed
        return obj.error_message


class SubagentResult(BaseModel):
    """The outcome of one sub-agent call.

    A caller receives the result in its plain JSON form, on the live path and after a
    replay alike (see ``docs/concepts/replay-divergence.md``): pydantic models and
    dataclasses are objects, enums their values, datetimes ISO 8601 text, tuples lists. Use
    ``result_as`` to read it as a type.

    Attributes:
        success: whether the sub-agent produced a result.
        result: the result (for an internal sub-agent, the list of its ``OutputEvent``
            payloads, a list even when it emitted one).
        error_message: why the call failed (names the sub-agent and what happened).
        cancelled: the call failed because it was cancelled.
        traceback: where the sub-agent failed, when an exception did (an internal
            sub-agent's action): the original traceback, bounded and redacted.

    Known secrets in ``error_message`` and ``traceback`` are masked (``api.mask_secrets``).

    ``result.error`` is ``error_message`` (``None`` when the call succeeded);
    ``SubagentResult.error(reason)`` on the class is ``failed(reason)``.
    """

    model_config = ConfigDict(frozen=True, ignored_types=(_ErrorOrFailed,), defer_build=True)

    success: bool
    result: Any = None
    error_message: MaskedStr | None = None
    cancelled: bool = False
    traceback: MaskedStr | None = None

    @classmethod
    def ok(cls, value: Any) -> SubagentResult:
        """A successful result carrying ``value``."""
        return cls(success=True, result=value)

    error: ClassVar[_ErrorOrFailed] = _ErrorOrFailed()
    """A result's error message (``None`` when it succeeded); on the class, ``failed``."""

    @classmethod
    def failed(cls, reason: Any, traceback: str | None = None) -> SubagentResult:
        """A failed result; ``reason`` (text or an exception) becomes the error message.

        Args:
            reason: text or an exception.
            traceback: where it failed (text), when known.

        Returns:
            The failed result.
        """
        if isinstance(reason, BaseException):
            reason = described(reason)
        return cls(success=False, error_message=str(reason), traceback=traceback)

    def result_as(self, type_: Any) -> Any:
        """The result validated as ``type_`` (a pydantic model, dataclass, ``list[...]``...).

        Args:
            type_: what to read the JSON result as.

        Returns:
            The validated value.

        Raises:
            ValueError: when the call failed (it has no result).
            pydantic.ValidationError: when the result does not fit ``type_``.
        """
        if not self.success:
            raise ValueError(f"the sub-agent call failed, so it has no result: "
                             f"{self.error_message}")
        from pydantic import TypeAdapter

        return TypeAdapter(type_).validate_python(self.result)

    @classmethod
    def cancelled_call(cls, name: str) -> SubagentResult:
        """The result of a call to sub-agent ``name`` that was cancelled."""
        return cls(success=False, error_message=f"sub-agent {name!r} call was cancelled",
                   cancelled=True)


class RunStatus(BaseModel):
    """The status of a remote run, as ``AsyncSubagentSetup.call_query_status`` reports it."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    state: Literal["not_started", "running", "completed", "failed"]
    error: str | None = None

    @classmethod
    def not_started(cls) -> RunStatus:
        """The remote has no run for this call."""
        return cls(state="not_started")

    @classmethod
    def running(cls) -> RunStatus:
        """The run goes on."""
        return cls(state="running")

    @classmethod
    def completed(cls) -> RunStatus:
        """The run finished; fetch its result."""
        return cls(state="completed")

    @classmethod
    def failed(cls, error: str) -> RunStatus:
        """The run failed with ``error``."""
        return cls(state="failed", error=error)

    @property
    def terminal(self) -> bool:
        """Whether the run has ended (completed or failed)."""
        return self.state in ("completed", "failed")


class SubagentFuture(Awaitable[SubagentResult]):
    """The handle of one sub-agent call; ``await`` it for the ``SubagentResult``.

    Awaiting it again returns the same result. Valid only within the action execution that
    submitted the call: awaiting it in another (or after its own ended) raises
    ``NotInActionContextError``.
    """

    @abstractmethod
    def __await__(self) -> Any: ...

    @abstractmethod
    def cancel(self) -> Awaitable[None]:
        """Cancel the call; awaiting the handle afterwards gives a failed result saying so.

        An internal child stops dispatching, a deferred call that has not started never
        starts, an async one gets ``call_cancel_request``.

        The cancellation takes effect when ``cancel()`` is called, whether or not the
        returned awaitable is awaited (``handle.cancel()`` alone is enough); ``await
        handle.cancel()`` also waits until an async sub-agent's cancel request was sent,
        and raises what that request raised. Each handle sends at most one cancel request.
        A call that already finished keeps its result.

        Returns:
            An awaitable that completes once the cancellation is done.
        """


SUBAGENT_DESCRIPTION_MARKER = "(This callable delegates the task to a sub-agent.)"
"""Ends the description of every ``_subagent_`` callable offered to a chat model."""

_GENERIC_DESCRIPTION = "Delegate a task to the sub-agent {name!r}."


class SubagentSetup(Resource):
    """Base of ``AGENT`` resources.

    Attributes:
        description: what the sub-agent does (shown to chat models that may delegate).
        input_schema: JSON Schema of the input, as its JSON text (a dict given is kept as
            its text); ``None`` when undeclared. It wins over a declared input type; a blank
            one is rejected.
        input_type: ``module:qualname`` of the input's type (a pydantic model, dataclass or
            ``TypedDict``); its JSON Schema is derived when no ``input_schema`` is given.
    """

    RESOURCE_TYPE: ClassVar[ResourceType] = ResourceType.AGENT

    description: str | None = None
    input_schema: str | None = None
    input_type: str | None = None


    @field_validator("input_schema", mode="before")
    @classmethod
    def _schema_text(cls, v: Any) -> Any:
        if isinstance(v, dict):  # a JSON Schema object is kept as its JSON text
            import json

            return json.dumps(v)
        if v is not None and not isinstance(v, str):
            raise ValueError(f"input_schema must be a JSON Schema: a dict, or its JSON text; "
                             f"got a {type(v).__name__}")
        if v is not None and not v.strip():
            raise ValueError("input_schema must not be blank; omit it instead")
        return v

    @property
    def name(self) -> str:
        """The name the sub-agent is registered under."""
        return self.resource_name

    @property
    def subagent_name(self) -> str:
        """The name the sub-agent is registered under (Apache Flink Agents' name of ``name``)."""
        return self.resource_name

    def submit(self, ctx: RunnerContext, input: Any) -> Awaitable[SubagentFuture]:
        """Submit ``input``; await this for the call's handle (see the module docstring)."""
        return ctx.submit_subagent(self.name, input)

    def result_type(self) -> type | None:
        """The declared type of a successful result (narrows what a chat model sees)."""
        return None

    def declared_input_type(self) -> type | None:
        """The input type (``input_type`` imported), or ``None`` when undeclared.

        Returns:
            The class, or ``None``.

        Raises:
            ResourceError: when ``input_type`` cannot be imported.
        """
        if self.input_type is None:
            return None
        from ._resources import import_qualified

        input_type: type = import_qualified(self.input_type)
        return input_type


def _refs_cycle(schema: dict[str, Any]) -> bool:
    """Whether the ``$defs`` of a pydantic schema refer to themselves (a recursive type)."""
    defs = schema.get("$defs", {})

    def refs(node: Any) -> set[str]:
        found: set[str] = set()
        stack = [node]
        while stack:
            n = stack.pop()
            if isinstance(n, dict):
                ref = n.get("$ref")
                if isinstance(ref, str) and ref.startswith("#/$defs/"):
                    found.add(ref.rsplit("/", 1)[1])
                stack.extend(n.values())
            elif isinstance(n, list):
                stack.extend(n)
        return found

    graph = {name: refs(d) for name, d in defs.items()}
    top = refs({k: v for k, v in schema.items() if k != "$defs"})
    if any(r not in graph for r in top):
        return True  # the top level itself is a $ref into a recursive definition
    visiting: set[str] = set()
    done: set[str] = set()

    def cyclic(n: str) -> bool:
        if n in done:
            return False
        if n in visiting:
            return True
        visiting.add(n)
        if any(cyclic(m) for m in graph.get(n, ())):
            return True
        visiting.discard(n)
        done.add(n)
        return False

    return any(cyclic(n) for n in graph)


TEXT_INPUT_SCHEMA = (
    '{"type": "object", "properties": {"input": {"type": "string"}}, "required": ["input"]}')
"""The input schema of an agent that declares none as a sub-agent (the ReAct agent's default).

It tells a chat model to send ``{"input": text}``; submits are not checked by it, since such
an agent takes any input (a text, or an object filling its prompt).
"""


def declared_input_schema(name: str, setup: SubagentSetup) -> dict[str, Any] | None:
    """The JSON Schema sub-agent ``name`` declares for its input, if it declares one.

    Returns:
        The explicit ``input_schema`` when declared, else the schema pydantic derives from the
        declared input type (without its title); ``None`` when the sub-agent declares neither.

    Raises:
        ResourceError: naming the sub-agent, when ``input_schema`` is no JSON, or the input
            type cannot be rendered as JSON Schema or is self-referential.
    """
    import json

    from pydantic import TypeAdapter

    from ._errors import ResourceError

    if setup.input_schema is not None:
        try:
            explicit: dict[str, Any] = json.loads(setup.input_schema)
        except json.JSONDecodeError as e:
            raise ResourceError(f"sub-agent {name!r}: input_schema is not JSON ({e})") from e
        return explicit
    declared = setup.declared_input_type()
    if declared is None:
        return None
    try:
        schema: dict[str, Any] = TypeAdapter(declared).json_schema()
    except Exception as e:  # noqa: BLE001 - pydantic cannot render the type
        raise ResourceError(f"sub-agent {name!r}: input type {declared!r} cannot be "
                            f"rendered as JSON Schema ({e}); {_REMEDY}") from e
    if _refs_cycle(schema):
        raise ResourceError(f"sub-agent {name!r}: input type {declared.__name__} is "
                            f"self-referential, which chat models cannot take; {_REMEDY}")
    schema.pop("title", None)
    return schema


_REMEDY = "declare input_schema (JSON Schema text of an object) on the sub-agent"


def subagent_callable(name: str, setup: SubagentSetup) -> dict[str, Any]:
    """The callable a chat model is offered for sub-agent ``name``.

    Returns:
        ``{"name": "_subagent_<name>", "description": ..., "parameters": <JSON Schema>}``:
        the description is the setup's (or a generic delegation one) followed by
        ``SUBAGENT_DESCRIPTION_MARKER``; the schema is the explicit ``input_schema`` when
        declared, else derived from the declared input type with pydantic (``required`` lists
        fields without defaults; ``bytes`` is ``{"type": "string", "format": "binary"}``).

    Raises:
        ResourceError: naming the sub-agent, when it has neither an explicit schema nor an
            input type that renders as a JSON object, or its type is self-referential.
    """
    from ._errors import ResourceError
    from ._tools import RESERVED_TOOL_PREFIX

    schema = declared_input_schema(name, setup)
    if schema is None:
        raise ResourceError(
            f"sub-agent {name!r} has neither an input_schema nor an input_type, so it "
            f"cannot be offered to a chat model: {_REMEDY}")
    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise ResourceError(f"sub-agent {name!r}: its input schema is not a JSON object "
                            f"schema; {_REMEDY}")
    text = (setup.description or _GENERIC_DESCRIPTION.format(name=name)).rstrip()
    return {"name": f"{RESERVED_TOOL_PREFIX}{name}",
            "description": f"{text} {SUBAGENT_DESCRIPTION_MARKER}", "parameters": schema}


def subagent_prompt_values(input: Any) -> dict[str, Any] | None:
    """The values an internal sub-agent's prompt placeholders take from the call's input.

    An object input fills them with its fields: a ``dict`` as it is, a pydantic model or a
    dataclass by its fields in their JSON form (as the same input given as a ``dict``, or
    by a chat model calling the sub-agent, would fill them).

    Returns:
        The values, or ``None`` for an input that is no object (its prompts stay as written).
    """
    import dataclasses

    from pydantic import BaseModel

    if isinstance(input, dict):
        return input
    try:
        if isinstance(input, BaseModel):
            values: dict[str, Any] = input.model_dump(mode="json")
            return values
        if dataclasses.is_dataclass(input) and not isinstance(input, type):
            return {f.name: getattr(input, f.name) for f in dataclasses.fields(input)}
    except Exception:  # noqa: BLE001 - a model that cannot dump: its prompts stay as written
        return None
    return None


class InternalSubagent(SubagentSetup):
    """Another agent run inside the same operator as a sub-agent.

    ``ResourceDescriptor(InternalSubagent, agent=ReviewerAgent(), description=...,
    input_schema=...)``: ``agent`` is an ``Agent`` instance or class, or its
    ``module:qualname``. The child's chat prompts take their ``{placeholders}`` from the input's
    fields when the input is an object: a field the prompt does not use is ignored, and a
    placeholder no field fills stays as literal text.
    """

    agent: Any = None


PreparedCall = tuple[str, Callable[[], SubagentResult], Callable[[], SubagentResult] | None]
"""What ``DeferredSubagentSetup.prepare`` returns: ``(key, call, reconciler_or_None)``."""


class DeferredSubagentSetup(SubagentSetup):
    """An external sub-agent whose one call runs when the caller first awaits it.

    Implement ``prepare``. ``session_id`` and ``call_id`` are assigned by the framework and
    are the only values a replay reproduces: build the key (and any idempotency token you
    send) from them alone. ``call()`` returns ``SubagentResult.ok(...)`` or
    ``SubagentResult.failed(...)``; an exception escaping it is a system fault that fails the
    calling action. The reconciler, if any, is called at recovery instead of ``call`` when the
    call had started but its outcome was recorded nowhere. What ``prepare`` raises is the
    call's recorded outcome: raised at the caller's ``await``, and again on replay without
    calling ``prepare``. The caller gets the result's plain JSON form (see
    ``SubagentResult``); a result with no JSON form is a failed result naming where.

    Attributes:
        timeout_s: the longest the call (or its reconciler) may run, in s (``None``: no
            limit). Past it the call ends as a failed result saying it timed out, naming
            the sub-agent and the limit, recorded like any outcome (a replay gives it again
            without calling); a ``call()`` that never returns would otherwise hold its
            key's later records for ever. It is left running in a daemon thread of its own
            (it holds no I/O slot nor the process at exit), and what it returns is
            ignored. Counted from the call's first start, in wall-clock time: the deadline
            is kept in keyed state, so a restore does not start it again.
    """

    timeout_s: float | None = Field(default=None, gt=0, allow_inf_nan=False)

    # out of the setup's JSON form (and so of recorded calls' digests) while unset
    __json_omit_empty__: ClassVar[tuple[str, ...]] = ("timeout_s",)

    @abstractmethod
    def prepare(
        self, ctx: RunnerContext, input: Any, session_id: str, call_id: str
    ) -> PreparedCall:
        """Return ``(key, call, reconciler_or_None)`` for one invocation.

        Args:
            ctx: the caller's context.
            input: the sub-agent's input.
            session_id: the caller's session (stable across replays).
            call_id: the call's id (stable across replays).

        Returns:
            The call's key, the call, and its reconciler or ``None``.
        """


class AsyncSubagentSetup(SubagentSetup):
    """An external sub-agent reached by submit / poll status / fetch result.

    The framework submits once (durably) when the caller submits, polls
    ``call_query_status`` every ``status_poll_interval_millis`` on the I/O executor (never on
    the operator thread) until the run ends, then fetches the result; all of that is one
    durable call, replayed after a restore. If a crash falls between "request sent" and
    "request recorded", recovery calls ``reconcile_submit_request``, which by default probes the
    status and re-submits only when the probe says the run never started.

    Attributes:
        status_poll_interval_millis: time between status probes, in ms.
        timeout_s: the longest a remote run is polled, in s (``None``: no limit). Past it
            the run is sent ``call_cancel_request`` and the call fails, saying it timed out:
            a remote run that never ends would otherwise hold its key's later records for
            ever. Counted from the first poll, in wall-clock time: the deadline is kept in
            keyed state, so a restore (which polls again) does not start it again.
    """

    status_poll_interval_millis: int = Field(default=500, ge=1)
    timeout_s: float | None = Field(default=None, gt=0, allow_inf_nan=False)

    # added after setups were recorded in durable calls' arguments: out of their JSON form
    # (and so of the calls' digests) while unset (``runtime._serde.OMIT_EMPTY``)
    __json_omit_empty__: ClassVar[tuple[str, ...]] = ("timeout_s",)

    @abstractmethod
    def call_submit_request(self, session_id: str, call_id: str, input: Any) -> None:
        """Start the remote run for this call.

        Args:
            session_id: the caller's session (stable across replays).
            call_id: the call's id (stable across replays): the remote's idempotency key.
            input: the sub-agent's input.
        """

    @abstractmethod
    def call_query_status(self, session_id: str, call_id: str) -> RunStatus:
        """Probe the run's status (read-only).

        Args:
            session_id: the caller's session (stable across replays).
            call_id: the call's id (stable across replays): the remote's idempotency key.

        Returns:
            The run's status.
        """

    @abstractmethod
    def call_fetch_result(self, session_id: str, call_id: str) -> SubagentResult:
        """Fetch the result of an ended run (idempotent).

        Args:
            session_id: the caller's session (stable across replays).
            call_id: the call's id (stable across replays): the remote's idempotency key.

        Returns:
            The run's result.
        """

    def call_cancel_request(self, session_id: str, call_id: str) -> None:
        """Ask the remote to cancel the run. Default: nothing.

        May be called twice after a replay, so make it idempotent.

        Args:
            session_id: the caller's session (stable across replays).
            call_id: the call's id (stable across replays): the remote's idempotency key.
        """

    def reconcile_submit_request(self, session_id: str, call_id: str, input: Any) -> None:
        """Repair an unrecorded submit after a crash: re-submit only if never started.

        Args:
            session_id: the caller's session (stable across replays).
            call_id: the call's id (stable across replays): the remote's idempotency key.
            input: the sub-agent's input.
        """
        if self.call_query_status(session_id, call_id).state == "not_started":
            self.call_submit_request(session_id, call_id, input)
