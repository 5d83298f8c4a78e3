"""The awaitables an action gets from its context: calls, chat futures, sub-agent handles.

They hold an outcome and, for a call not started yet, the command that starts it (see
``_commands``); they never start anything themselves. Awaiting an incomplete call yields it
to the core, which carries out its command and resumes the action once the outcome is
recorded.
"""

from __future__ import annotations

import inspect
import logging
import os
import sys
import threading
from collections.abc import Awaitable, Coroutine, Generator
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from ...api import (
    AsyncSubagentSetup,
    ChatMessage,
    ChatResponse,
    ChatResponseError,
    DurableExecutionError,
    NotInActionContextError,
    SubagentFuture,
    SubagentResult,
    SubagentSetup,
    UsageError,
)
from ...api.internal import json_schema_of
from ..recorder._state import CallKind

if TYPE_CHECKING:
    from ..core._commands import Command
    from ..recorder._execution import ActionExecution

__all__ = ["DurableCall", "ChatFuture", "MustAwait", "SubagentHandle", "chat_request",
           "creation_site", "not_its_call", "put_unawaited", "submission", "unawaited",
           "unawaited_effect"]

log = logging.getLogger("flink_agents_py.runtime")


def chat_request(model: str, messages: Any, prompt_args: dict[str, Any] | None,
                 output_schema: type[BaseModel] | dict[str, Any] | None,
                 ) -> tuple[dict[str, Any], type[BaseModel] | None]:
    """The request ``ctx.chat`` records and sends, and the output model class, if any.

    Args:
        model: the chat model setup's name.
        messages: ``ChatMessage`` objects or their dicts.
        prompt_args: the prompt's arguments, or ``None``.
        output_schema: a pydantic class, a JSON schema, or ``None``.

    Returns:
        ``({"model", "messages" (JSON form), "prompt_args", "output_schema" (JSON schema)},
        the pydantic class or None)``.

    Raises:
        UsageError: when ``messages`` is one text or one message instead of a list of them.
    """
    if isinstance(messages, (str, bytes, ChatMessage, dict)):
        raise UsageError(
            f"ctx.chat({model!r}, messages): messages must be a list of ChatMessage (or their "
            f"dicts), got one {type(messages).__name__}: write "
            f"[ChatMessage(role=\"user\", content=...)]")
    schema_cls = output_schema if isinstance(output_schema, type) and issubclass(
        output_schema, BaseModel) else None
    schema = json_schema_of(schema_cls) if schema_cls is not None else output_schema
    return {
        "model": model,
        "messages": [ChatMessage.model_validate(m).model_dump(mode="json") for m in messages],
        "prompt_args": prompt_args,
        "output_schema": schema,
    }, schema_cls


class DurableCall:
    """One durable call of an action execution: awaitable, completes once.

    Awaiting a completed call returns its result (or raises its exception) again without a
    new execution; awaiting an incomplete one suspends the action until the outcome arrives.
    ``kind`` and ``target`` say what made the call (kept in its record, see ``CallKind``);
    ``start`` is the command that starts a lazy call on its first await (``None`` once
    issued).
    """

    __slots__ = ("call_id", "ordinal", "done", "ok", "value", "replayed", "start", "digest",
                 "kind", "target", "site", "running", "used", "callees", "shape", "stop")

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
        self.start: Command | None = None
        self.site = ""  # where a lazy call was made (``file:line``), for the never-awaited warning
        self.running = False  # handed to the I/O executor, outcome not recorded yet
        self.used = False  # its outcome was asked for (awaited, or ``result()``)
        self.callees: list[str] | None = None  # what its callable calls (``CallRecord``)
        self.shape: str | None = None  # how its arguments bind (``CallRecord``)
        self.stop: threading.Event | None = None  # set: end a running poll (its call cancelled)

    def arm(self, command: Command) -> None:
        """Make this a lazy call: ``command`` starts it on its first await (see ``start``).

        Notes where the action made it (``site``), for the warning about a lazy call never
        awaited.
        """
        self.start = command
        self.site = creation_site()

    def complete(self, ok: bool, value: Any) -> None:
        """Set the outcome (a result, or the exception raised)."""
        self.done, self.ok, self.value, self.running = True, ok, value, False

    def result(self) -> Any:
        """Return the result or raise the exception (only once ``done``).

        Returns:
            The call's result.

        Raises:
            DurableExecutionError: when the call has not completed.
            BaseException: the exception the call raised.
        """
        if not self.done:
            raise DurableExecutionError(f"durable call {self.call_id} has not completed")
        self.used = True
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

    def __getitem__(self, key: Any) -> Any:
        # ``ctx.durable_execute_async(f)["a"]``: the value was meant (before: Python's bare
        # "'DurableCall' object is not subscriptable")
        raise TypeError(f"{type(self).__name__} is not subscriptable"
                        f"{put_unawaited(self)}")

    def __repr__(self) -> str:
        """``<DurableCall r0/go/c0 of ...>``: what made it, and whether it is done."""
        state = "done" if self.done else "not done"
        return f"<{type(self).__name__} {self.call_id} of {self.target or '?'}: {state}>"


class ChatFuture(DurableCall):
    """The lazy durable future ``ctx.chat`` returns; ``structured`` typed on await."""

    __slots__ = ("schema_cls",)

    def __init__(self, call_id: str, ordinal: int, digest: str,
                 schema_cls: type[BaseModel] | None, target: str = "") -> None:
        super().__init__(call_id, ordinal, digest, CallKind.CHAT, target)
        self.schema_cls = schema_cls

    def result(self) -> Any:
        """The chat's ``ChatResponse``, ``structured`` typed by the output schema class.

        Returns:
            The response.

        Raises:
            ChatResponseError: when the structured output does not fit the schema class
                (or the chat failed).
        """
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


_RUNTIME = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_INTERNAL = (_RUNTIME + os.sep, os.path.join(os.path.dirname(_RUNTIME), "api", ""))
"""Where the runtime's and the API's own frames come from (skipped by ``creation_site``)."""


def creation_site() -> str:
    """``file:line`` of the first frame on the stack outside the runtime and the API.

    Returns:
        The place in the action's code that made the current call ('' when none is found).
    """
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not filename.startswith(_INTERNAL):
            return f"{filename}:{frame.f_lineno}"
        frame = frame.f_back  # type: ignore[assignment]
    return ""


_AWAITED_FOR_EFFECT = {CallKind.WAIT: "ctx.wait_for(...)", CallKind.SLEEP: "ctx.sleep(...)"}
"""The calls that open eagerly but give the action anything only when awaited (by kind)."""


_ASYNC_RUN = "an async sub-agent call"
"""What ``unawaited`` says of an async sub-agent's handle: its run started at submit."""


def unawaited(call: DurableCall) -> str:
    """How the action made ``call`` (``ctx.sleep(...)``...) if it needed an await it never got.

    A lazy call (``ctx.chat``, a deferred sub-agent call) starts only on its first await; a
    wait or a sleep makes the action wait only when awaited; an async sub-agent's run starts
    at submit, but is polled and fetched only when its handle is awaited. (A
    ``durable_execute_async`` call runs awaited or not: the action completes once its
    outcome is recorded.) This is the one test behind the never-awaited warning of an async
    action and the ``UsageError`` of a plain one.

    Args:
        call: a call the action made.

    Returns:
        How the action made it, or ``''``.
    """
    if call.used:
        return ""
    if call.kind in _AWAITED_FOR_EFFECT:
        return _AWAITED_FOR_EFFECT[call.kind]
    if not call.done and call.start is not None:
        if call.kind is CallKind.SUBAGENT_RESULT:
            return _ASYNC_RUN
        return "ctx.chat(...)" if call.kind is CallKind.CHAT else f"a lazy {call.kind.value} call"
    return ""


def unawaited_effect(made: str) -> str:
    """What a call of ``made`` (see ``unawaited``) left undone by not being awaited.

    Returns:
        The words for a warning or an error message.
    """
    if made in _AWAITED_FOR_EFFECT.values():
        return ("so the action did not wait for it (a wait or a sleep waits, and gives its "
                "outcome, only when awaited)")
    if made == _ASYNC_RUN:
        return ("so its remote run, started at submit, was left going: never polled, fetched "
                "or cancelled (await the handle, or cancel it)")
    return "so it never ran (a lazy call such as ctx.chat(...) starts on its first await)"


def put_unawaited(value: Any) -> str:
    """Why ``value`` (put in an event, memory...) has no JSON form, when it is not awaited.

    ``OutputEvent(output=ctx.durable_execute_async(fn, x))`` put the call itself, not its
    result, in the event.

    Args:
        value: a value with no JSON form.

    Returns:
        ``": it is ... not awaited; ..."`` naming what made it and the fix, or ``''`` when
        ``value`` is no awaitable of an action's context (or a coroutine).
    """
    if isinstance(value, ChatFuture):
        made, fix = f"ctx.chat({value.target!r}, ...)", "response = await ctx.chat(...)"
    elif isinstance(value, DurableCall):
        if value.kind is CallKind.FUNCTION:
            fn = value.target.rpartition(":")[2] or "fn"
            made = f"ctx.durable_execute_async({fn}, ...)"
        else:
            made = _AWAITED_FOR_EFFECT.get(value.kind, f"a {value.kind.value} call")
        fix = f"value = await {made}"
    elif isinstance(value, SubagentHandle):
        made, fix = f"the handle of sub-agent {value.name!r}", "result = await handle"
    elif hasattr(value, "cr_code"):  # a coroutine: an async function called, not awaited
        fn = getattr(value, "__qualname__", "") or "f"
        made, fix = f"the coroutine {fn}(...)", f"value = await {fn}(...)"
    else:
        return ""
    return (f": it is {made}, not awaited; await it first ({fix}) and put the value it "
            f"gives instead")


def not_its_call(call: DurableCall, by: str | None) -> NotInActionContextError:
    """The error of awaiting ``call`` outside the action execution that made it.

    A call's future or handle is valid only within the action execution that made it: the
    outcome goes to that execution alone, so another that awaited it would wait for ever.

    Args:
        call: the call awaited.
        by: the action execution that awaited it (``None``: after its own had finished).

    Returns:
        The error, naming the call and the execution it belongs to.
    """
    if call.kind is CallKind.CHAT:
        what = f"ctx.chat({call.target!r}, ...)"
    elif call.kind.value.startswith("subagent"):
        what = f"the handle of sub-agent {call.target!r}"
    else:
        what = f"durable call {call.call_id}"
    owner = call.call_id.rsplit("/", 1)[0]
    where = (f"by action execution {by}, not by action execution {owner} that made it"
             if by is not None else f"after action execution {owner} that made it finished")
    return NotInActionContextError(
        f"{what} was awaited {where}: a call's future or handle is valid only within the "
        "action execution that made it (pass on its result instead)")


def _not_awaited(what: str, name: str, call_id: str | None) -> str:
    if name.startswith("_"):
        return f"{what!r} object has no attribute {name!r}"
    where = f", in action execution {call_id.rsplit('/', 1)[0]}" if call_id else ""
    hint = "response = await ctx.chat(...)" if what == "ChatFuture" else "value = await call"
    return f"{what} has no attribute {name!r}: await it first ({hint}){where}"


class MustAwait(Awaitable[Any]):
    """An awaitable of the action's context that does nothing until it is awaited.

    What ``ctx.submit_subagent(...)`` and ``memory_set.acompact(...)`` return. One dropped
    without being awaited (in a plain action, which cannot await, or by a slip) does
    nothing: a WARNING says what was not done, names the line that made it and the fix
    (once per line), instead of Python's bare ``RuntimeWarning`` about a coroutine, which
    points into the runtime.
    """

    __slots__ = ("_coro", "_what", "_effect", "_fix", "_site")
    _warned: set[str] = set()  # the lines warned about, in this process

    def __init__(self, coro: Coroutine[Any, Any, Any], what: str, effect: str, fix: str
                 ) -> None:
        self._coro: Coroutine[Any, Any, Any] | None = coro
        self._what, self._effect, self._fix, self._site = what, effect, fix, creation_site()

    def __await__(self) -> Generator[Any, None, Any]:
        coro, self._coro = self._coro, None  # (this object may go before the coroutine runs)
        if coro is None:
            raise RuntimeError(f"{self._what} was awaited already: await it once")
        return coro.__await__()

    def __del__(self) -> None:
        coro = self._coro
        if coro is None or inspect.getcoroutinestate(coro) != inspect.CORO_CREATED:
            return
        coro.close()  # (else Python warns of it, at a line of the runtime)
        if self._site not in MustAwait._warned:
            MustAwait._warned.add(self._site)
            log.warning("%s%s was never awaited, %s; %s", self._what,
                        f" at {self._site}" if self._site else "", self._effect, self._fix)


def submission(coro: Coroutine[Any, Any, Any], name: str) -> MustAwait:
    """What ``ctx.submit_subagent(name, ...)`` returns: ``handle = await`` it.

    Returns:
        The awaitable of the call's handle (nothing is submitted until it is awaited).
    """
    return MustAwait(coro, f"ctx.submit_subagent({name!r}, ...)",
                     f"so sub-agent {name!r} was never called",
                     "submit with 'handle = await ctx.submit_subagent(...)' (in an async "
                     "action), then 'result = await handle'")


class _Settled:
    """An awaitable that is already complete (``await`` returns ``None`` at once)."""

    __slots__ = ()

    def __await__(self) -> Generator[Any, None, None]:
        yield from ()


_SETTLED = _Settled()


def _nothing_to_cancel(session_id: str, call_id: str) -> None:
    """The cancel request of an async run that had already ended: nothing to send."""


class SubagentHandle(SubagentFuture):
    """The handle of one sub-agent call (see ``SubagentFuture``).

    ``kind`` is its call's ``CallKind``: ``SUBAGENT`` (internal), ``SUBAGENT_DEFERRED``,
    ``SUBAGENT_RESULT`` (async external) or ``SUBAGENT_REFUSED``.
    """

    def __init__(self, ctx: ActionExecution | None, call: DurableCall | None, name: str,
                 kind: CallKind, session_id: str = "", setup: SubagentSetup | None = None,
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
        """Whether the call's result is known (awaiting it then does not suspend).

        Returns:
            Whether the result is known.
        """
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
        if self._ctx is not None and self._call is not None and self._ctx.finished:
            raise not_its_call(self._call, None)
        if self._call is None:
            assert self._failed is not None
            return self._failed
        result: SubagentResult = yield from self._call.__await__()
        return result

    def cancel(self) -> Awaitable[None]:
        """Cancel the call (see ``SubagentFuture.cancel``); a finished call is unaffected.

        Takes effect when called, awaited or not. For an async sub-agent, the first
        ``cancel()`` of a handle is one durable call (the cancel request, or nothing to send
        when the run had already ended), made in program order on the live path and on
        replay alike; awaiting the returned awaitable waits for the request to complete.

        Returns:
            What to await for the cancellation to be carried out.
        """
        call, ctx = self._call, self._ctx
        if call is None or ctx is None:
            return _SETTLED
        ctx.check_live("cancel")
        if self.kind is CallKind.SUBAGENT_RESULT and isinstance(self._setup, AsyncSubagentSetup):
            if self._cancel is not None:
                return self._cancel  # one cancel request per handle
            ended = call.done and not (call.ok and isinstance(call.value, SubagentResult)
                                       and call.value.cancelled)
            send = _nothing_to_cancel if ended else self._setup.call_cancel_request
            self._cancel = ctx.execute_as(
                CallKind.SUBAGENT_CANCEL, self.name, send, (self._session_id, call.call_id),
                digest_name=f"{CallKind.SUBAGENT_CANCEL.value}:{self.name}")
            if not call.done:  # told to cancel: done now
                ctx.settle_unstarted(call, f"cancel:{self.name}",
                                     SubagentResult.cancelled_call(self.name))
            return self._cancel
        if call.done:
            return _SETTLED
        if self.kind is CallKind.SUBAGENT and call.call_id in ctx.run.invocations:
            ctx.cancel_invocation(call.call_id)  # completes once its actions retire
        elif call.start is not None:  # not started yet: it never will be
            ctx.settle_unstarted(call, f"cancel:{self.name}",
                                 SubagentResult.cancelled_call(self.name))
        # a deferred call already running cannot be stopped: its result arrives as usual
        return _SETTLED
