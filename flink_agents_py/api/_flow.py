"""Provider flow control: the options of a connection, rate-limit feedback, error classes.

A chat model connection is shared by every key of an operator; its ``flow_control`` options
say how the operator paces the calls it makes to the provider (see
``docs/how-to/flow-control.md``). Provider adapters tell the runtime what the provider said
about its limits with ``RateLimitInfo``: attached to a ``ProviderError`` when a call failed,
handed to ``report_rate_limit`` when it succeeded. Nothing here runs the pacing: the runtime
does, one controller per connection per operator.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import Callable, Iterator
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ._errors import ProviderError
from ._field_hints import NamesNearestField

__all__ = ["ErrorClass", "FlowControl", "RateLimitInfo", "error_class", "report_rate_limit"]

ErrorClass = Literal["throttled", "unavailable", "timeout", "rejected", "error"]
"""What kind of failure a model call ended in (``error_class``)."""

_THROTTLED_STATUS = frozenset({429, 529})
"""429 Too Many Requests; 529 is Anthropic's "overloaded"."""


class FlowControl(NamesNearestField):
    """How an operator paces the calls of one chat model connection (shared by all keys).

    The defaults change nothing while the provider does not throttle: no concurrency limit
    until the first throttled answer, no fixed rate.

    Attributes:
        adaptive: adapt the number of calls in flight to the provider: halve it
            (``decrease_factor``) when a call is throttled, add one per ``limit`` calls
            answered (additive increase, multiplicative decrease).
        max_concurrency: the most calls in flight to this connection per operator instance
            (``None``: no fixed bound; the adaptive limit applies once throttled).
        initial_concurrency: where the adaptive limit starts (``None``: unlimited until the
            first throttled answer); it grows by one per call answered (doubling per round
            trip, TCP's slow start) until the first throttled answer, then by one per
            ``limit`` answers. The HTTP adapters (OpenAI, Anthropic) start at 8, so a burst
            of queued calls does not all hit a rate limit at once.
        min_concurrency: the adaptive limit never goes below this.
        decrease_factor: what the limit is multiplied by on throttling (0 < f < 1).
        requests_per_minute: a fixed request rate per operator instance (``None``: none).
        tokens_per_minute: a fixed token rate (input + output, estimated from recent calls
            before a call, corrected with its reported usage) per operator instance.
        hold_throttled: a throttled call (429, 529) is held and sent again when the provider
            allows (its ``Retry-After`` or rate-limit reset), without counting as an attempt
            of the setup's ``error_policy``; ``False``: it fails like other errors.
        max_throttle_wait_s: the longest one call is held in all because of throttling; then
            it fails with the throttled ``ProviderError`` (and a setup's fallbacks apply).
            Finite: a provider answering 429 for ever would hold its calls, and their keys'
            later records, for ever (``inf`` is refused).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    adaptive: bool = True
    max_concurrency: int | None = Field(default=None, ge=1)
    initial_concurrency: int | None = Field(default=None, ge=1)
    min_concurrency: int = Field(default=1, ge=1)
    decrease_factor: float = Field(default=0.5, gt=0, lt=1)
    requests_per_minute: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    tokens_per_minute: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    hold_throttled: bool = True
    max_throttle_wait_s: float = Field(default=300.0, ge=0, allow_inf_nan=False)

    @model_validator(mode="after")
    def _bounds(self) -> FlowControl:
        if self.max_concurrency is not None and self.min_concurrency > self.max_concurrency:
            # the adaptive limit could not keep both: after a throttle it went to the floor,
            # past the fixed bound
            raise ValueError(f"flow control: min_concurrency ({self.min_concurrency}) is above "
                             f"max_concurrency ({self.max_concurrency})")
        return self


class RateLimitInfo(BaseModel):
    """What a provider's answer said about its rate limits (every field optional).

    Attributes:
        retry_after_s: how long to wait before sending again, in seconds (``Retry-After``).
        limit_requests: the requests allowed per window.
        remaining_requests: the requests left in the current window.
        reset_requests_s: seconds until the request window resets.
        limit_tokens: the tokens allowed per window.
        remaining_tokens: the tokens left in the current window.
        reset_tokens_s: seconds until the token window resets.
    """

    model_config = ConfigDict(frozen=True, defer_build=True)

    retry_after_s: float | None = None
    limit_requests: float | None = None
    remaining_requests: float | None = None
    reset_requests_s: float | None = None
    limit_tokens: float | None = None
    remaining_tokens: float | None = None
    reset_tokens_s: float | None = None

    def is_empty(self) -> bool:
        """Whether the answer said nothing about limits."""
        return all(v is None for v in self.model_dump().values())


_SINK: contextvars.ContextVar[Callable[[RateLimitInfo], None] | None] = contextvars.ContextVar(
    "flink_agents_py_rate_limit_sink", default=None)


def report_rate_limit(info: RateLimitInfo) -> None:
    """Tell the runtime what a successful answer said about the provider's limits.

    Called by provider adapters from inside ``achat``/``chat``; outside a model call made by
    the runtime it does nothing.

    Args:
        info: what the provider's headers said.
    """
    sink = _SINK.get()
    if sink is not None and not info.is_empty():
        sink(info)


@contextlib.contextmanager
def collect_rate_limits() -> Iterator[list[RateLimitInfo]]:
    """Collect the ``report_rate_limit`` calls made in this context (the runtime's hook).

    Yields:
        The list the reports are appended to, oldest first.
    """
    got: list[RateLimitInfo] = []
    token = _SINK.set(got.append)
    try:
        yield got
    finally:
        _SINK.reset(token)


def error_class(error: BaseException) -> ErrorClass:
    """Classify a failed model call.

    ``throttled``: 429 or 529 (overloaded), but for a used-up quota (``rejected``);
    ``unavailable``: 503 and other 5xx;
    ``timeout``: a timeout or connection failure (a ``ProviderError`` without a status, a
    ``TimeoutError``) or 408; ``rejected``: any other 4xx (the request itself is wrong:
    not retryable); ``error``: anything else.

    Args:
        error: what the call raised.

    Returns:
        The class.
    """
    if isinstance(error, ProviderError):
        status = error.status_code
        if status in _THROTTLED_STATUS:
            return "rejected" if error.quota_exhausted else "throttled"
        if status is None:
            return "timeout" if error.retryable else "error"
        if status == 408:
            return "timeout"
        if status >= 500:
            return "unavailable"
        if 400 <= status < 500:
            return "rejected"
        return "error"
    if isinstance(error, (TimeoutError, asyncio.TimeoutError)):
        return "timeout"
    return "error"
