"""One model call of a chat: flow control, the error policy, the fallback models.

``call_model`` runs inside ONE durable call (``chat_model_action`` makes it), so whatever
happens here (calls held because the provider throttled, retries, a fallback model
answering) is recorded with its outcome and a replay hands the outcome back without calling
any model again.

Per attempt: the connection's ``FlowController`` admits the call (it may hold it: adaptive
concurrency, the provider's ``Retry-After`` and rate-limit headers, fixed rates), the setup
asks the connection, and the controller learns from the answer. A throttled call (429, 529)
is held and sent again without counting as an attempt of the ``error_policy``, for at most
``FlowControl.max_throttle_wait_s``. Other retryable errors follow the ``error_policy``, a
backoff never shorter than the provider's ``Retry-After``. When the call still fails with
an error class the setup's ``fallback_on`` names, the next setup of ``fallbacks`` is asked
(the response's ``metadata["model_setup"]`` names the setup that answered).
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any

from ..api import (
    ChatMessage,
    ChatModelConnection,
    ChatModelSetup,
    ChatResponse,
    ProviderError,
    RateLimitInfo,
    error_class,
)
from ..api.internal import (
    clip,
    collect_rate_limits,
    cut_masked,
    described,
    output_classes_of,
    refuse_truncated_calls,
)
from ._flow import ToldToWaitTooLong, flow_controller
from ._own_chat import pacing_connection
from ._spend import estimated_usage
from .core._executor import sleep_without_slot

__all__ = ["MAX_ANSWER_DEPTH", "call_model", "paid_answer", "deeper_than"]

def _retryable(error: BaseException) -> bool:
    """Whether a failed model call may succeed when tried again."""
    if isinstance(error, ProviderError):
        return error.retryable
    return isinstance(error, (TimeoutError, asyncio.TimeoutError))


def _told(error: BaseException | None) -> float | None:
    """The ``Retry-After`` of a failed call, as flow control acts on it.

    Returns:
        The seconds (``None``: none said, or no number to act on: NaN or infinite, as an
        adapter of one's own may say; ignored as the controller ignores it).
    """
    told = error.retry_after_s if isinstance(error, ProviderError) else None
    return told if isinstance(told, (int, float)) and math.isfinite(told) else None


def _backoff(setup: ChatModelSetup, retry: int, error: BaseException | None = None) -> float:
    """Exponential backoff with jitter (in ``[b/2, b]``), never shorter than ``Retry-After``."""
    cap = min(setup.retry_max_backoff_s, setup.retry_initial_backoff_s * (2 ** retry))
    drawn = float(cap / 2 + random.random() * cap / 2)
    return max(drawn, _told(error) or 0.0)


def _throttling(error: BaseException) -> bool:
    """Whether the provider said it is overloaded: 429/529, or 5xx naming a ``Retry-After``."""
    kind = error_class(error)
    return kind == "throttled" or (kind == "unavailable" and _told(error) is not None)


def _s(seconds: float) -> str:
    """Seconds as a message says them (``2.5 s``)."""
    return f"{round(seconds, 3):g} s"


def _named(setup: ChatModelSetup, connection: ChatModelConnection) -> str:
    return (f"chat model {setup.resource_name!r} "
            f"(connection {connection.resource_name!r})")


def _past_bound(held_s: float, wait_s: float, options: Any) -> str:
    """How long a call was held and would be, against ``max_throttle_wait_s``."""
    return (f"held {_s(held_s)} so far, it would have to wait {_s(wait_s)} more, "
            f"{_s(held_s + wait_s)} in all, past max_throttle_wait_s "
            f"({_s(options.max_throttle_wait_s)})")


def _told_too_long(setup: ChatModelSetup, connection: ChatModelConnection,
                   told: ToldToWaitTooLong, held_s: float, options: Any,
                   errors: list[str]) -> ProviderError:
    """The throttled error of a call not sent: its wait would pass ``max_throttle_wait_s``.

    It names the setup and its connection, why the connection is closed (a throttled
    answer, its status and the wait it asked for; or a spent rate-limit window) and how long
    the call was held and would be in all. It is a 429 (``throttled``): the setup's
    ``fallbacks`` apply as to a throttled answer.

    Args:
        setup: the chat model setup of the call.
        connection: its connection.
        told: what the controller said (how long the connection is closed, and why).
        held_s: how long the call was held so far, in seconds (from its first throttled
            answer, or from its start when it had none).
        options: the connection's ``FlowControl``.
        errors: the call's earlier failures (the last one is named).

    Returns:
        The error, to raise.
    """
    if told.window:
        why = ("its provider's rate-limit window is spent (no requests or tokens left until "
               "it resets)")
    else:
        said = [f"status {told.status}"] if told.status is not None else []
        said.append("naming no time to wait" if told.asked_s is None
                    else f"asking to wait {_s(told.asked_s)}")
        why = f"its provider throttled the connection (last answer: {', '.join(said)})"
    before = f"; before: {errors[-1]}" if errors else ""
    return ProviderError(
        f"{_named(setup, connection)} was not sent: {why}; "
        f"{_past_bound(held_s, told.wait_s, options)}{before}", status_code=429,
        retryable=True, rate_limit=RateLimitInfo(retry_after_s=told.wait_s))


def _gave_up(setup: ChatModelSetup, connection: ChatModelConnection, error: ProviderError,
             throttles: int, held_s: float, wait_s: float, options: Any) -> ProviderError:
    """The error of a throttled call that may not be held longer (``max_throttle_wait_s``).

    The provider's own error, named: the setup, its connection, how often the provider
    throttled the call, what it last asked for, and how long the call was held and would be
    in all. The status, ``retryable`` and ``rate_limit`` are the provider's (error policies
    and fallbacks see a throttled error as before).

    Args:
        setup: the chat model setup of the call.
        connection: its connection.
        error: the provider's last answer (429 or 529).
        throttles: the throttled answers the call got.
        held_s: seconds from its first throttled answer to its last.
        wait_s: seconds the controller would hold it again (``FlowController.settle``).
        options: the connection's ``FlowControl``.

    Returns:
        The error, to raise from ``error``.
    """
    asked = _told(error)
    if asked is None:
        said = "the provider named no time to wait: a backoff"
    elif asked + 0.001 >= wait_s:
        said = "as the provider asked"
    else:
        said = (f"the provider asked for {_s(asked)}; a longer backoff after throttled "
                f"answers in a row")
    times = "once" if throttles == 1 else f"{throttles} times in a row"
    named = ProviderError(
        f"{_named(setup, connection)} gave up after its provider throttled the call "
        f"{times}: {_past_bound(held_s, wait_s, options)} ({said}); its last answer: {error}",
        retryable=error.retryable, rate_limit=error.rate_limit)
    named.status_code = error.status_code  # its message already ends with the status
    return named


def _not_retried(setup: ChatModelSetup, connection: ChatModelConnection,
                 error: ProviderError, options: Any) -> ProviderError:
    """The error of a call whose provider asked to wait past ``max_throttle_wait_s`` to retry.

    Args:
        setup: the chat model setup of the call.
        connection: its connection.
        error: the provider's answer (a 5xx with a ``Retry-After``).
        options: the connection's ``FlowControl``.

    Returns:
        The error (the provider's status, ``retryable`` and ``rate_limit``), to raise from
        ``error``.
    """
    named = ProviderError(
        f"{_named(setup, connection)} was not retried: its provider asked to wait "
        f"{_s(_told(error) or 0.0)}, past max_throttle_wait_s "
        f"({_s(options.max_throttle_wait_s)}); its last answer: {error}",
        retryable=error.retryable, rate_limit=error.rate_limit)
    named.status_code = error.status_code
    return named


async def _ask(setup: ChatModelSetup, messages: list[ChatMessage],
               output_schema: dict[str, Any] | None,
               prompt_args: dict[str, Any] | None = None) -> ChatResponse:
    """One model call with the setup's error policy, paced by its connection's controller.

    Returns:
        The model's response (its ``metadata`` noting retries, and throttled answers when
        there were any).

    Raises:
        ChatCallFailed: when every attempt failed (after at least one retry).
        TypeError: when the model returned something other than a ``ChatResponse``.
    """  # noqa: DOC501 - the first failure is raised as it is
    connection = pacing_connection(setup)
    flow = flow_controller(connection)
    options = connection.flow_control
    attempts = setup.retry_max_attempts if setup.error_policy == "retry" else 1
    attempt, throttles, first_throttle, waited = 0, 0, None, 0.0
    errors: list[str] = []
    started = time.monotonic()
    while True:
        # the provider's waits count against the bound from the call's first throttle, or
        # from its start: a gate set by another call's answer (a Retry-After of an hour)
        # does not hold this call past the bound either
        bound_from = started if first_throttle is None else first_throttle
        try:
            ticket, held_s = await flow.admit_held(
                options.max_throttle_wait_s - (time.monotonic() - bound_from))
        except ToldToWaitTooLong as e:
            raise _told_too_long(setup, connection, e, time.monotonic() - bound_from,
                                 options, errors) from None
        waited += held_s
        settled = False
        response: Any = None
        try:
            with collect_rate_limits() as infos:
                response = await setup.achat(messages, output_schema=output_schema,
                                             with_prompt=False, prompt_args=prompt_args)
        except Exception as e:  # noqa: BLE001 - classified, then held, retried or raised
            gate = flow.settle(ticket, throttled=_throttling(e),
                               info=getattr(e, "rate_limit", None),
                               status=getattr(e, "status_code", None), answered=False)
            settled = True
            now = time.monotonic()
            failed: BaseException = e  # what the call fails with: named when flow control ends it
            if error_class(e) == "throttled" and options.hold_throttled:
                assert isinstance(e, ProviderError)
                first_throttle = now if first_throttle is None else first_throttle
                # held only while the provider's wait fits in what is left of the bound
                if now + (gate or 0.0) - first_throttle <= options.max_throttle_wait_s:
                    throttles += 1  # held: the controller's gate decides when it goes again
                    continue
                failed = _gave_up(setup, connection, e, throttles + 1, now - first_throttle,
                                  gate or 0.0, options)
            told = _told(e)
            too_long = told is not None and told > options.max_throttle_wait_s
            retry = attempt + 1 < attempts and _retryable(e)
            if retry and too_long and failed is e and isinstance(e, ProviderError):
                failed = _not_retried(setup, connection, e, options)
            if failed is not e:
                failed.__cause__ = e
            errors.append(described(failed))
            if retry and not too_long:
                await sleep_without_slot(_backoff(setup, attempt, e))  # others use its slot
                attempt += 1
                continue
            if attempt == 0:
                if failed is e:
                    raise
                raise failed from e
            from ._builtin_actions import ChatCallFailed  # its records name it there

            retries = "retry" if attempt == 1 else "retries"
            raise ChatCallFailed(
                f"{errors[-1]} (after {attempt + 1} attempts, {attempt} {retries}; earlier "
                f"errors: {'; '.join(errors[:-1])})") from failed
        finally:
            if not settled:  # answered, or cancelled
                usage = getattr(response, "usage", None)
                flow.settle(ticket, throttled=False, info=infos[-1] if infos else None,
                            tokens=(usage.input_tokens + usage.output_tokens) if usage else None,
                            answered=response is not None)
        break
    if not isinstance(response, ChatResponse):
        raise TypeError(f"chat model {setup.resource_name!r} returned "
                        f"{type(response).__name__}, not a ChatResponse")
    metadata = dict(response.metadata)
    if setup.error_policy == "retry":
        metadata["retries"] = attempt
        if errors:
            metadata["retry_errors"] = errors
    if throttles:
        metadata["throttled"] = throttles
    if waited >= 0.001:  # held by flow control before it was sent (not scheduling delays)
        metadata["flow_wait_s"] = round(waited, 3)
    if metadata == response.metadata:
        return response
    return response.model_copy(update={"metadata": metadata})


MAX_ANSWER_DEPTH = 64
"""The deepest a structured answer, or a tool call's arguments, may nest (objects and arrays)."""


def deeper_than(value: Any, limit: int) -> bool:
    """Whether ``value`` nests objects and arrays more than ``limit`` levels.

    Counted without recursion, so the answer never depends on how deep the interpreter's
    stack already is (a replay need not share it).

    Args:
        value: a JSON-like value.
        limit: the most levels allowed.

    Returns:
        ``True`` when it nests deeper.
    """
    level: list[tuple[Any, int]] = [(value, 0)]
    while level:
        item, depth = level.pop()
        children = item.values() if isinstance(item, dict) else item \
            if isinstance(item, list) else ()
        for child in children:
            if isinstance(child, (dict, list)):
                if depth + 1 >= limit:
                    return True
                level.append((child, depth + 1))
    return False


def class_problem(value: Any, schema: dict[str, Any]) -> str | None:
    """Why a structured answer that follows ``schema`` is refused by its pydantic class.

    A class given as the output schema (``ctx.chat(..., output_schema=Rating)``, a
    ``ReActAgent``'s) validates more than its JSON Schema says: its validators, a ``date``
    or ``UUID`` field's format. An answer it refuses is told to the model as a schema
    violation is, instead of failing the caller's await with no second chance.

    Args:
        value: the answer's JSON value (it follows ``schema``).
        schema: the chat's output JSON Schema.

    Returns:
        The reason (the first three errors, each bounded), or ``None`` when no class given
        for ``schema`` in this process refuses it.
    """
    from pydantic import ValidationError

    for cls in output_classes_of(schema)[:1]:  # the class given last for this schema
        try:
            cls.model_validate(value)
        except ValidationError as e:
            errors = e.errors(include_url=False)
            shown = "; ".join(
                "at $" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"])
                + f": {clip(str(err['msg']), 300)}" for err in errors[:3])
            more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
            return f"the answer does not fit {cls.__name__}: {shown}{more}"
    return None


async def call_model(setup: ChatModelSetup, messages: list[ChatMessage],
                     output_schema: dict[str, Any] | None,
                     resolve: Callable[[str], ChatModelSetup],
                     prompt_args: dict[str, Any] | None = None,
                     guard: Callable[..., Awaitable[ChatResponse]] | None = None,
                     estimate: bool = False) -> ChatResponse:
    """One model call of a chat, trying the setup's fallbacks (run as ONE durable call).

    Args:
        setup: the chat's model setup.
        messages: the conversation, prompt included.
        output_schema: the JSON Schema the answer must follow, if any.
        resolve: the ``CHAT_MODEL`` setup of a fallback name.
        prompt_args: the request's prompt values, for a setup with its own ``chat`` (which
            fills its prompt at each call); others have the prompt in ``messages``.
        guard: asks each setup tried as ``guard(setup, ask)`` (``_budgets.fallback_guard``:
            a fallback through its own budget); ``None``: asked directly.
        estimate: give an answer without usage an estimated one (``_spend.estimated_usage``:
            a budget counts it).

    Returns:
        The response; when a fallback answered, ``metadata["model_setup"]`` names it and
        ``metadata["fallback_errors"]`` says why the setups before it were passed over.

    Raises:
        ChatCallFailed: when the last setup tried failed after retries.
    """  # noqa: DOC501, DOC502 - raised by _ask; the AssertionError marks unreachable code
    async def ask(asked: ChatModelSetup) -> ChatResponse:
        response = await _ask(asked, messages, output_schema, prompt_args)
        return estimated_usage(messages, response) if estimate else response

    names = [setup.resource_name, *setup.fallbacks]
    passed: list[str] = []
    current = setup
    for i, name in enumerate(names):
        current = setup if i == 0 else resolve(name)
        try:
            response = await (ask(current) if guard is None else guard(current, ask))
        except Exception as e:  # noqa: BLE001 - the fallbacks decide
            if i + 1 < len(names) and error_class(_cause(e)) in setup.fallback_on:
                passed.append(f"{name}: {described(e)}")
                continue
            raise
        if i == 0:
            return response
        metadata = {**response.metadata, "model_setup": name, "fallback_errors": passed}
        return response.model_copy(update={"metadata": metadata})
    raise AssertionError("unreachable")  # pragma: no cover


def _cause(error: BaseException) -> BaseException:
    """The provider's error behind a ``ChatCallFailed`` (what failed last)."""
    from ._builtin_actions import ChatCallFailed

    if isinstance(error, ChatCallFailed) and error.__cause__ is not None:
        return error.__cause__
    return error


def paid_answer(response: ChatResponse) -> ChatResponse:
    """``response``, when its tool calls may run: whole, nested at most ``MAX_ANSWER_DEPTH``.

    Checked inside the durable call, so the refusal is what is recorded (a response nested
    deeper could not be recorded, or handled, within the interpreter's stack), and after its
    budgets counted what it spent (``call_model``'s caller checks it): the call was answered,
    so it was paid for, also when its answer is refused. The refusal carries the answer's
    budget metadata (``spend_metadata``: ``budget`` and ``fallback_budget``, JSON, recorded
    and replayed with it), which the chat's action adds to the key's entries as for an answer
    it takes. Before, ``call_model`` refused it inside the budgeted call: no budget counted
    it, and a model whose answers were refused was called without limit.

    Returns:
        The response.

    Raises:
        ValueError: naming the call and the tool, when one nests deeper.
        ProviderError: when the answer was cut at the token limit while writing its tool
            calls (``refuse_truncated_calls``), whichever connection gave it.
    """
    calls = response.message.tool_calls
    try:  # (no call of its own: it is on every chat's path)
        refuse_truncated_calls(response.finish_reason, [c.name for c in calls])
        for i, c in enumerate(calls):
            if deeper_than(c.arguments, MAX_ANSWER_DEPTH):
                raise ValueError(f"tool call {i} ({cut_masked(c.name, 100)!r}) has arguments "
                                 f"nested deeper than {MAX_ANSWER_DEPTH} levels; none was run")
    except Exception as e:
        e.spend_metadata = {k: response.metadata[k]  # type: ignore[attr-defined]
                            for k in ("budget", "fallback_budget") if k in response.metadata}
        raise
    return response
