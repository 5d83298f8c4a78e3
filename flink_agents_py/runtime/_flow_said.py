"""What a provider said about its limits, as flow control keeps it (``runtime._flow``).

``sane_rate_limit`` drops what cannot be acted on and reads Unix times; ``within_cap`` bounds
every wait said to ``max_throttle_wait_s`` (the controller then probes); ``RateWindow`` keeps
what the answers said of one window (requests or tokens); ``TokenBucket`` paces a fixed rate.
"""

from __future__ import annotations

import math
import time

from ..api import RateLimitInfo

__all__ = ["RateWindow", "TokenBucket", "sane_rate_limit", "within_cap"]

_UNKNOWN_RESET_S = 1.0
"""How long a window an answer says is spent (``x-ratelimit-remaining-requests: 0``) holds
calls when no answer said when it resets, in seconds: then one call goes to ask again."""


_EPOCH_FROM, _EPOCH_TO = 1e9, 1e10
"""A reset in this range (2001 to 2286 as a Unix time; 31 to 317 years as a duration) is a
Unix time."""


def _finite(value: float | None, low: float | None = 0.0) -> float | None:
    """A number a provider said, or ``None`` when it is no number to act on (NaN, infinite).

    Args:
        value: the number (``None``: not said).
        low: the least it may be (a smaller one is raised to it); ``None``: no least.

    Returns:
        The number, or ``None``.
    """
    if value is None or not math.isfinite(value):
        return None
    return value if low is None else max(low, value)


def sane_rate_limit(info: RateLimitInfo | None) -> RateLimitInfo | None:
    """What an answer said about the provider's limits, without what cannot be acted on.

    A NaN or infinite value is dropped (an infinite ``Retry-After`` or reset would close
    the connection for good); a negative one is 0. A reset or ``Retry-After`` that is a
    Unix time in seconds (some gateways send ``x-ratelimit-reset-requests: 1767225600``, or
    ``Retry-After: 1767225600``; ``retry-after-ms`` as a Unix time in ms reads the same):
    read as a duration it is 56 years, and every call of every key failed as told to wait
    too long, for the life of the process) is the seconds until then.

    Args:
        info: what the answer said (``None``: nothing).

    Returns:
        The information, cleaned (``None`` for ``None``).
    """
    if info is None:
        return None
    values = info.model_dump()
    clean = {name: _finite(value) for name, value in values.items()}
    for name in ("retry_after_s", "reset_requests_s", "reset_tokens_s"):
        reset = clean.get(name)
        if reset is not None and _EPOCH_FROM <= reset < _EPOCH_TO:
            clean[name] = max(0.0, reset - time.time())
    return info if clean == values else RateLimitInfo(**clean)


def within_cap(
    info: RateLimitInfo | None, cap: float, throttled: bool
) -> tuple[RateLimitInfo | None, float | None]:
    """``info`` with every wait it names at most ``cap``, and the longest one past it.

    A wait past the cap (a ``Retry-After`` dated in the year 9999, a reset years ahead) closes
    the connection for the cap only: then one call probes the provider (``FlowController``).

    Args:
        info: what the answer said, cleaned (``sane_rate_limit``).
        cap: the longest the connection may be closed, in seconds (``max_throttle_wait_s``).
        throttled: whether the answer was throttled (only then its ``Retry-After`` holds calls).

    Returns:
        The information, its waits capped, and the longest wait past the cap that holds calls
        (a throttled answer's ``Retry-After``, the reset of a window it says is spent);
        ``None`` when none does.
    """
    if info is None:
        return None, None
    over = [
        wait
        for wait, holds in (
            (info.retry_after_s, throttled),
            (
                info.reset_requests_s,
                info.remaining_requests is not None and info.remaining_requests < 1,
            ),
            (info.reset_tokens_s, info.remaining_tokens is not None and info.remaining_tokens < 1),
        )
        if holds and wait is not None and wait > cap
    ]
    capped = {
        name: min(wait, cap)
        for name in ("retry_after_s", "reset_requests_s", "reset_tokens_s")
        if (wait := getattr(info, name)) is not None and wait > cap
    }
    return (info.model_copy(update=capped) if capped else info), max(over, default=None)


class TokenBucket:
    """A token bucket: ``rate`` per second, holding at most ``capacity``."""

    def __init__(self, rate: float, capacity: float, now: float) -> None:
        self.rate = rate
        self.capacity = capacity
        self.level = capacity
        self.at = now

    def delay(self, amount: float, now: float) -> float:
        """Seconds until ``amount`` can be taken (0: now)."""
        self.level = min(self.capacity, self.level + (now - self.at) * self.rate)
        self.at = now
        need = min(amount, self.capacity) - self.level
        return 0.0 if need <= 0 else need / self.rate


class RateWindow:
    """What the provider said about one of its windows (requests or tokens)."""

    def __init__(self) -> None:
        self.limit: float | None = None
        self.remaining: float | None = None
        self.reset_at = 0.0
        self.period = 0.0  # the longest reset the provider named: about its window, in s
        self.rolled_at_ticket = 0  # the last call admitted before a new window was assumed
        self.guessed = False  # the reset is ``_UNKNOWN_RESET_S`` after an answer, not said

    def update(
        self,
        limit: float | None,
        remaining: float | None,
        reset_s: float | None,
        unanswered: int,
        now: float,
        stale: bool,
        ticket: int = 0,
    ) -> None:
        if limit is not None and limit < 1:
            return  # a limit of 0 would serve nothing: a gateway's "none set", not a window
        if limit is not None:
            self.limit = limit
        if remaining is not None and reset_s is None:
            # no reset said (a header left out, or unreadable): the window the answers
            # already named, else a short one when nothing is left (a spent window must
            # hold calls, not be ignored); with something left there is nothing to hold
            if self.remaining is not None and now < self.reset_at:
                reset_s = self.reset_at - now
            elif remaining - unanswered < 1:
                reset_s = _UNKNOWN_RESET_S
                self.guessed = True
        elif reset_s is not None:
            self.guessed = False
        said = reset_s if reset_s is not None and not self.guessed else 0.0  # (a guess: no period)
        if remaining is not None and reset_s is not None:
            # requests sent after this one are not counted in its answer yet
            left = remaining - unanswered
            at = now + reset_s  # never before the provider's reset: it was said before now
            half = max(self.period, reset_s) / 2
            if self.remaining is not None and now < self.reset_at:
                if ticket <= self.rolled_at_ticket and at < self.reset_at - half:
                    return  # sent before the window rolled, about the window before: read late
                if stale:
                    self.remaining = min(self.remaining, left)  # a later call's answer came first
                    return
                if abs(at - self.reset_at) < half:
                    # the same window: the earliest reading is the closest (an answer read
                    # late, on a busy machine, would push the reset later than it is)
                    at = min(at, self.reset_at)
            self.remaining = left
            self.reset_at = at
            self.period = max(self.period, said)

    def delay(self, amount: float, now: float, tickets: int = 0, in_flight: float = 0.0) -> float:
        if self.remaining is None:
            return 0.0
        if now >= self.reset_at:  # a new window: its limit if known, else unknown
            if self.limit is None:
                self.remaining = None
                return 0.0
            # calls sent before it and not answered yet may reach the provider in it
            self.remaining = self.limit - in_flight
            self.reset_at = now + (self.period or 1.0)  # until an answer says when it resets
            self.rolled_at_ticket = tickets
        return 0.0 if self.remaining >= amount else max(0.0, self.reset_at - now)

    def take(self, amount: float) -> None:
        if self.remaining is not None:
            self.remaining -= amount
