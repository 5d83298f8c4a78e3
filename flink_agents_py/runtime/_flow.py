"""Flow control of model calls: one controller per chat model connection per operator.

Every model call a chat makes passes through its connection's ``FlowController`` (all keys of
an operator share it): ``admit`` holds the call until the provider may take it, and
``settle`` tells the controller how the call ended. The controller keeps:

- an adaptive concurrency limit (additive increase, multiplicative decrease): none until the
  provider first throttles; then the calls in flight times ``decrease_factor``, at most once
  per gate; one more per ``limit`` calls answered since;
- a gate: after a throttled answer no call is sent before its ``Retry-After`` (or the rate
  limit's reset); the wait after throttled answers in a row grows at least exponentially
  whatever the provider says (a ``Retry-After`` of 0, negative, tiny or in the past is no
  reason to send again sooner), and an answer to a call sent after the gate ends the streak;
- a wait said past ``max_throttle_wait_s`` (a ``Retry-After`` dated in the year 9999, a spent
  window resetting years ahead) closes the connection for that bound only: calls meanwhile
  fail at once as told, then it is half-open: one call (the probe) is sent, the others wait
  for its answer; answered, the connection is open to every call, throttled again, it is
  closed for the bound again (before, it stayed closed for as long as said: for good);
- what the provider's rate-limit headers said (requests and tokens left in the window, when
  it resets): when none are left, calls wait for the reset instead of drawing a 429 (calls
  still in flight when a window resets count against the new one's requests);
- fixed request and token rates (token buckets), when the connection's options set them.

A held call gives its I/O executor slot up while it waits (``io_slot``): calls to other
connections, and tool calls, run meanwhile. It still counts as a waiting call, so when many
are held the operator stops taking input (backpressure, ``docs/how-to/limits.md``): records
wait, nothing fails. The controller runs inside a durable call and reads the wall clock
only for pacing: what a replay sees is the recorded outcome, never the controller.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import threading
import time
from collections.abc import Callable
from typing import Any

from ..api import ChatModelConnection, FlowControl, RateLimitInfo
from ._flow_said import RateWindow, TokenBucket, sane_rate_limit, within_cap
from ._per_object import PerObject
from .core._executor import IOSlot, given_up_slot

log = logging.getLogger(__name__)

_WARN_EVERY_S = 60.0  # the least time between two warnings that a provider throttles

__all__ = ["FlowController", "FlowStats", "ToldToWaitTooLong", "flow_controller",
           "sane_rate_limit"]

_SAFETY_WAKE_S = 0.5
"""A call waiting for a free slot looks again at least this often (a missed wake-up costs no
more than this)."""

_BACKOFF_FIRST_S, _BACKOFF_MAX_S = 0.5, 30.0
"""The backoff after throttled answers in a row, in seconds: doubling from the first, at
most the last (drawn in ``[b/2, b]``). It is the gate when the provider names no positive
wait, and the least gate from the second throttled answer in a row on."""

class FlowStats:
    """Counters of one controller (read by metrics and tests; updated under its lock).

    Attributes:
        calls: calls admitted (each attempt counts).
        throttled: answers that were throttled (429, 529, or 503 with ``Retry-After``).
        held: admissions that had to wait.
        wait_s: total time calls waited to be admitted, in seconds.
        limit: the current concurrency limit (``None``: not limited).
        in_flight: calls sent and not answered yet.
        max_in_flight: the most calls in flight at once so far.
    """

    def __init__(self) -> None:
        self.calls = 0
        self.throttled = 0
        self.held = 0
        self.wait_s = 0.0
        self.limit: float | None = None
        self.in_flight = 0
        self.max_in_flight = 0

    def as_dict(self) -> dict[str, Any]:
        """The counters as a plain dict."""
        return {"calls": self.calls, "throttled": self.throttled, "held": self.held,
                "wait_s": self.wait_s, "limit": self.limit, "in_flight": self.in_flight,
                "max_in_flight": self.max_in_flight}


class ToldToWaitTooLong(Exception):
    """A call would wait longer than it may (``FlowController.admit_held``).

    Args:
        wait_s: how long the connection is closed from now, in seconds: a throttled
            answer's gate (its ``Retry-After``, or the backoff after throttled answers in a
            row) or a spent rate-limit window.
        window: whether a spent rate-limit window (no requests or tokens left until its
            reset) is what holds the call, rather than a throttled answer's gate.
        status: the HTTP status of the connection's last throttled answer (``None``: none
            was told, or it had no status).
        asked_s: how long that answer asked to wait, in seconds (its ``Retry-After``, or the
            reset of the window it said was spent); ``None``: it named no time.
    """

    def __init__(self, wait_s: float, *, window: bool = False, status: int | None = None,
                 asked_s: float | None = None) -> None:
        self.wait_s = wait_s
        self.window = window
        self.status = status
        self.asked_s = asked_s
        super().__init__(f"the connection is closed for {wait_s:g} s more")


class FlowController:
    """Paces the calls to one connection; shared by every key (thread-safe, any loop).

    Args:
        options: the connection's ``FlowControl``.
        clock: the monotonic clock, in seconds (injected by tests).
        name: the connection, as its warnings name it.
    """

    def __init__(self, options: FlowControl,
                 clock: Callable[[], float] = time.monotonic, name: str = "a connection") -> None:
        self.options = options
        self._clock = clock
        self._name = name
        self._warned_at: float | None = None
        self._lock = threading.Lock()
        self.stats = FlowStats()
        start = options.initial_concurrency or options.max_concurrency
        # within [min_concurrency, max_concurrency]: a start below the floor would be raised
        # to it by the first throttle (the answer meant to slow down sped the calls up)
        self._limit: float = (min(float(max(start, options.min_concurrency)),
                                  float(options.max_concurrency or math.inf))
                              if start else math.inf)
        self._throttled_once = False
        self._tickets = 0
        self._estimates: dict[int, float] = {}  # tokens taken at admission, by ticket
        self._newest_info = 0  # the newest call whose answer told the provider's limits
        self._gate_until = 0.0
        self._decrease_until = 0.0
        self._streak = 0  # throttled answers in a row (one per gate), 0 after an answer
        self._streak_ticket = 0  # the last call sent when the streak last grew
        self._last_status: int | None = None  # the last throttled answer's status...
        self._last_asked_s: float | None = None  # ... and the wait it asked for, in s
        # a wait said past max_throttle_wait_s closes the connection for that long only (calls
        # meanwhile are checked against what was said: they fail at once, as told); then it is
        # half-open: one call at a time (the probe) goes until one is answered
        self._said_until = 0.0  # when the provider said the connection reopens, past the cap
        self._half_open = False
        self._probe: int | None = None  # the ticket of the probe in flight
        self._avg_tokens: float | None = None
        self._requests = RateWindow()
        self._tokens = RateWindow()
        now = clock()
        self._rpm = (TokenBucket(options.requests_per_minute / 60.0,
                             max(1.0, options.requests_per_minute / 60.0), now)
                     if options.requests_per_minute else None)
        self._tpm = (TokenBucket(options.tokens_per_minute / 60.0,
                             max(1.0, options.tokens_per_minute / 60.0), now)
                     if options.tokens_per_minute else None)
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        self._sync_stats()

    @property
    def limit(self) -> float | None:
        """The current concurrency limit (``None``: not limited)."""
        return None if math.isinf(self._limit) else self._limit

    def _sync_stats(self) -> None:
        self.stats.limit = self.limit

    def _estimate_tokens(self) -> float:
        return self._avg_tokens if self._avg_tokens is not None else 1.0

    def _told_delay(self, now: float) -> float:
        """Seconds the provider's answers hold the next call: its gate, its windows.

        The gate is a throttled answer's ``Retry-After``, or the backoff after throttled
        answers in a row; a window holds calls while it has no requests or tokens left.

        Returns:
            The seconds, 0 or more.
        """
        return max(self._gate_until - now,
                   self._requests.delay(1, now, self._tickets, self.stats.in_flight),
                   self._tokens.delay(self._estimate_tokens(), now, self._tickets))

    def _delay(self, now: float) -> float:
        """Seconds until a call may be sent (0: now; ``inf``: when a call ends)."""
        waits = [self._told_delay(now)]
        if self._rpm is not None:
            waits.append(self._rpm.delay(1, now))
        if self._tpm is not None:
            waits.append(self._tpm.delay(self._estimate_tokens(), now))
        wait = max(waits)
        if wait > 0:
            return wait
        if self.stats.in_flight + 1 > max(self._limit, 1.0) or (
                self._half_open and self._probe is not None):
            return math.inf  # until a call ends (the probe: until it is answered)
        return 0.0

    async def admit(self) -> int:
        """Wait until a call may be sent, and count it as in flight.

        Returns:
            The call's ticket, for ``settle``.
        """
        ticket, _ = await self.admit_held()
        return ticket

    async def admit_held(self, max_told_wait_s: float | None = None) -> tuple[int, float]:
        """``admit``, also saying how long the controller held the call.

        Args:
            max_told_wait_s: the longest the call may wait, from now, because the provider
                told to (its ``Retry-After``, a spent rate-limit window); ``None``: no
                bound. Waits for a free slot or a fixed rate do not count.

        Returns:
            The call's ticket, for ``settle``, and the seconds the call was held (``0.0``
            when it went at once: scheduling delays of an open gate are not a hold).

        Raises:
            ToldToWaitTooLong: when the provider's wait ends past ``max_told_wait_s`` (the
                call is not counted: nothing is to settle).
        """
        loop = asyncio.get_running_loop()
        start = self._clock()
        held = False
        slot: IOSlot | None = None  # the I/O executor slot, given up while the call is held
        try:
            while True:
                fut: asyncio.Future[None] | None = None
                with self._lock:
                    now = self._clock()
                    if max_told_wait_s is not None:
                        told = self._told_delay(now)
                        # while closed, a call is told what the provider said (for years:
                        # it fails at once); after the cap, it may probe
                        said = max(told, self._said_until - now) if told > 0 else 0.0
                        if said > 0 and now + said > start + max_told_wait_s:
                            raise ToldToWaitTooLong(
                                said, window=told > self._gate_until - now,
                                status=self._last_status, asked_s=self._last_asked_s)
                    delay = self._delay(now)
                    if delay <= 0 and (slot is None or not slot.given_up):
                        if held:
                            self.stats.held += 1
                            self.stats.wait_s += now - start
                        return self._take(), (now - start) if held else 0.0
                    if delay > 0:
                        held = True
                        if math.isinf(delay):
                            fut = loop.create_future()
                            self._waiters.append((loop, fut))
                if delay <= 0:  # it may go: first its slot back, then look again
                    assert slot is not None
                    await slot.take_back()
                    continue
                slot = given_up_slot(slot)  # other calls (other connections') run meanwhile
                if fut is None:
                    await asyncio.sleep(min(delay, _BACKOFF_MAX_S))
                    continue
                try:
                    await asyncio.wait_for(asyncio.shield(fut), _SAFETY_WAKE_S)
                except asyncio.TimeoutError:
                    pass
                finally:
                    with self._lock:
                        try:
                            self._waiters.remove((loop, fut))
                        except ValueError:
                            pass
        finally:
            if slot is not None and slot.given_up:  # not sent (too long, cancelled)
                await slot.take_back()

    def _take(self) -> int:
        self._tickets += 1
        if self._half_open and self._probe is None:
            self._probe = self._tickets  # the one call that asks the provider again
        self._estimates[self._tickets] = self._estimate_tokens()
        self.stats.calls += 1
        self.stats.in_flight += 1
        self.stats.max_in_flight = max(self.stats.max_in_flight, self.stats.in_flight)
        self._requests.take(1)
        self._tokens.take(self._estimate_tokens())
        if self._rpm is not None:
            self._rpm.level -= 1
        if self._tpm is not None:
            self._tpm.level -= self._estimate_tokens()
        return self._tickets

    def settle(self, ticket: int, *, throttled: bool, info: RateLimitInfo | None = None,
               tokens: int | None = None, status: int | None = None,
               answered: bool = True) -> float | None:
        """Count a call as answered and learn from its answer.

        A throttled answer closes the connection's gate for the wait the provider asked for
        (``Retry-After``, RFC 9110 section 10.2.3: delay seconds or an HTTP date; or the
        reset of a window its rate-limit headers say is spent). That wait is a floor, not
        the gate itself: when it is not positive (0, negative, a date in the past) the gate
        is the backoff, as when the provider names no time; from the second throttled answer
        in a row on, the gate is at least the backoff (0.5 s doubling to 30 s, drawn in
        ``[b/2, b]``), so a provider that keeps throttling while saying "now" is not asked
        again hundreds of times a second. Throttled answers to calls sent before the gate
        closed count once; an answer to a call sent after it ends the streak.

        Args:
            ticket: what ``admit`` returned for the call.
            throttled: whether the provider throttled the call.
            info: what the answer said about the provider's limits.
            tokens: the tokens the call used (input + output), when reported.
            status: the answer's HTTP status, when it had one (kept for the messages of
                calls that may not wait so long).
            answered: whether the provider answered the call (``False``: it failed, with a
                5xx, a timeout or a dropped connection, or was cancelled). Only an answer
                ends a streak of throttled answers and adds to the concurrency limit: a
                provider that fails or times out is not sent more calls at once for it.

        Returns:
            For a throttled call, how long it should wait before it is sent again, in
            seconds (until the gate opens); ``None`` otherwise.
        """
        cap = self.options.max_throttle_wait_s
        info, over = within_cap(sane_rate_limit(info), cap, throttled)
        with self._lock:
            now = self._clock()
            if ticket == self._probe:
                self._probe = None
                if answered and not throttled:
                    self._half_open = False  # the provider took it: open to every call
                    self._said_until = 0.0
            if over is not None:
                self._half_open = True  # closed for the cap only, then one call probes
                self._said_until = now + over
            elif throttled:
                self._said_until = 0.0  # what it says now is within the cap
            in_flight = self.stats.in_flight  # with this call
            self.stats.in_flight -= 1
            estimated = self._estimates.pop(ticket, 0.0)
            if tokens is not None:
                self._learn_tokens(max(0, tokens), estimated)
            if info is not None:
                # calls still in flight may not be counted by this answer: the provider may
                # take them in another order than they were sent, so count every one
                unanswered = self.stats.in_flight
                stale = ticket < self._newest_info
                self._newest_info = max(self._newest_info, ticket)
                self._requests.update(info.limit_requests, info.remaining_requests,
                                      info.reset_requests_s, unanswered, now, stale, ticket)
                self._tokens.update(info.limit_tokens, info.remaining_tokens,
                                    info.reset_tokens_s, unanswered, now, stale, ticket)
            wait: float | None = None
            if throttled:
                self.stats.throttled += 1
                if self._streak == 0 or ticket > self._streak_ticket:
                    self._streak += 1  # sent after the last throttled answer: again
                    self._streak_ticket = self._tickets
                self._last_status = status
                wait = self._throttled(info, now)
                if self._streak == 1 and (self._warned_at is None
                                          or now - self._warned_at >= _WARN_EVERY_S):
                    self._warned_at = now
                    self._warn_throttled(status, wait)
                if over is not None:  # this call was told past the bound: it fails at once
                    wait = max(wait, over)
                    self._last_asked_s = max(self._last_asked_s or 0.0, over)
            elif answered:
                if ticket > self._streak_ticket:
                    self._streak = 0  # the provider took a call sent after the gate
                if self.options.adaptive and not math.isinf(self._limit) \
                        and in_flight * 2 >= self._limit:
                    # only while the limit binds (at least half of it in flight): a quiet
                    # spell of a call or two at a time says nothing about a burst, and
                    # must not raise the limit to hundreds for it (limit inflation)
                    cap = float(self.options.max_concurrency or math.inf)
                    # slow start (one more per answer) until the first throttle, then additive
                    step = 1.0 if not self._throttled_once else 1.0 / self._limit
                    self._limit = min(cap, self._limit + step)
            self._sync_stats()
            self._wake(now)
            return wait

    def _warn_throttled(self, status: int | None, wait: float) -> None:
        """Say that the provider throttles and what the calls do meanwhile (else silent)."""
        opts = self.options
        then = (f"the call is held and sent again when the provider allows, up to "
                f"max_throttle_wait_s ({opts.max_throttle_wait_s:g} s) in all, then fails"
                if opts.hold_throttled else "hold_throttled is off: the error policy decides")
        log.warning("the provider of %s throttled a call (status %s; next call in %.1f s): %s "
                    "(FlowControl, docs/how-to/flow-control.md; said at most once a minute)",
                    self._name, status if status is not None else "unknown", wait, then)

    def _learn_tokens(self, tokens: int, estimated: float) -> None:
        avg = self._avg_tokens
        self._avg_tokens = float(tokens) if avg is None else avg + 0.2 * (tokens - avg)
        if self._tpm is not None:  # the estimate taken at admission, corrected
            self._tpm.level -= tokens - estimated

    def _throttled(self, info: RateLimitInfo | None, now: float) -> float:
        told = None
        if info is not None:
            told = info.retry_after_s
            own = [r for r, left in ((info.reset_requests_s, info.remaining_requests),
                                     (info.reset_tokens_s, info.remaining_tokens))
                   if r is not None and left is not None and left < 1]
            rounded = (told is not None and bool(own) and told > max(own)
                       and told == math.ceil(max(own)))
            if rounded:
                # Retry-After counts whole seconds: here it is the spent window's own reset
                # rounded up, and the window resets sooner (a 429 near a window's end would
                # otherwise lose the whole next window)
                told = max(own)
            for window in (self._requests, self._tokens):
                if window.guessed and told is not None and told > 0:
                    window.reset_at = now + told  # its reset was not said: the answer's wait
            resets = [window.reset_at - now for window in (self._requests, self._tokens)
                      if window.remaining is not None and window.remaining < 1]
            if resets:
                reset = max(0.0, max(resets))
                told = reset if rounded else max(told or 0.0, reset)
        self._last_asked_s = told
        # the told wait is a floor: a provider that keeps throttling while it says "now" (0,
        # a negative value, a date in the past, a reset of 0 s) or a few milliseconds is
        # backed off from as one that names no time (the first positive wait of a streak is
        # taken as said: a 429 near a window's end is sent again at its reset)
        backoff = min(_BACKOFF_MAX_S, _BACKOFF_FIRST_S * 2 ** min(self._streak - 1, 16))
        backoff = backoff / 2 + random.random() * backoff / 2
        if told is None or told <= 0:
            wait = backoff
        elif self._streak <= 1:
            wait = told
        else:
            wait = max(told, backoff)
        self._gate_until = max(self._gate_until, now + wait)
        self._throttled_once = True
        if self.options.adaptive and now >= self._decrease_until:
            base = min(self._limit, float(self.stats.in_flight + 1))
            floor = float(self.options.min_concurrency)
            # a decrease: never above the limit it decreases (nor, so, past max_concurrency)
            self._limit = min(self._limit, max(floor, base * self.options.decrease_factor))
            self._decrease_until = self._gate_until  # one decrease per gate
        return max(0.0, self._gate_until - now)

    def _wake(self, now: float) -> None:
        """Wake as many waiting calls as could be sent now (called under the lock)."""
        free = max(self._limit, 1.0) - self.stats.in_flight
        if free <= 0 or not self._waiters:
            return
        n = int(free) if not math.isinf(free) else len(self._waiters)
        for loop, fut in self._waiters[:max(1, n)]:
            loop.call_soon_threadsafe(_resolve, fut)


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


_CONTROLLERS: PerObject[FlowController] = PerObject()


def flow_controller(connection: ChatModelConnection) -> FlowController:
    """The flow controller of ``connection`` (made on first use, dropped with it).

    One per connection object: an operator builds its own resources, so one per connection
    per subtask, shared by its keys; its warnings name the connection's resource and class.

    Args:
        connection: the chat model connection.

    Returns:
        Its controller.
    """

    def make() -> FlowController:
        cls, name = type(connection).__name__, connection.resource_name  # two of a class
        return FlowController(connection.flow_control, name=f"connection {name!r} ({cls})"
                              if name else f"connection {cls}")

    return _CONTROLLERS.get_or_make(connection, make)
