"""What a provider's HTTP answer may cost this process: its size and its time.

The SDKs (``openai``, ``anthropic``) read a whole answer into memory before they look at it,
and their ``timeout`` bounds each wait for bytes, not the answer: a server (hostile, broken,
or a proxy looping) that sends an endless body a little at a time kept a chat reading for
ever while this process grew by the body's size (1.2 GB in 20 s on 127.0.0.1, a
``timeout_s`` of 3), until the worker ran out of memory and every key's calls failed with
it. The clients here read each answer through ``answer_bounds``' hooks (the HTTP library's own,
so every transport and proxy the client mounts is covered):

- at most ``MAX_ANSWER_BYTES`` of body (64 MiB), or the connection's own
  ``max_answer_bytes``; past it the read stops, the connection is closed, and the call fails
  naming the bound and the URL;
- the body must have come whole ``timeout_s`` after its headers did, or the read stops as
  a timeout (retryable, as an unanswered request is);
- answers are asked for unencoded (``Accept-Encoding: identity``): a compressed body, whose
  decoded size no count of its bytes bounds (a few MB of gzip decode to gigabytes), is
  refused when a server sends one anyway;
- a redirect to another origin (scheme, host, port) is not followed: the SDKs follow
  redirects, and httpx then drops only an ``Authorization`` header, so the connection's
  other credential headers (``secret_headers``, a gateway's key) went to whatever host a
  server named. A redirect within the origin (and from ``http`` to ``https`` on the same
  host) is followed as before.
"""

from __future__ import annotations

import functools
import importlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

__all__ = [
    "AnswerBoundError",
    "AnswerRedirectedError",
    "AnswerTimeoutError",
    "AnswerTooLargeError",
    "MAX_ANSWER_BYTES",
    "answer_bounds",
    "blocking_answer_bounds",
    "bound_reason",
    "bound_response",
]

MAX_ANSWER_BYTES = 64 * 1024 * 1024
"""The most bytes of one HTTP answer of a chat model's provider that are read (64 MiB: an
answer of ``max_tokens`` tokens is a few MB at most), unless the connection sets its own
(``max_answer_bytes``, a field of every HTTP connection)."""


class AnswerBoundError(Exception):
    """A provider's answer broke a bound of ``answer_bounds``.

    Raised as the HTTP library's own error too (its ``ReadError`` or ``ReadTimeout``), so
    the SDK reports it as it reports a connection error or a timeout.
    """


class AnswerTooLargeError(AnswerBoundError):
    """A provider's answer longer than ``MAX_ANSWER_BYTES``, or compressed."""


class AnswerTimeoutError(AnswerBoundError):
    """A provider's answer still coming ``timeout_s`` after its headers."""


class AnswerRedirectedError(AnswerBoundError):
    """A provider's answer redirecting the request to another origin (not followed)."""


@dataclass(frozen=True)
class _Library:
    """The classes of one HTTP library (httpx, or the SDKs' httpx2) the bounds use."""

    body: type
    sync_body: type
    too_large: type[AnswerTooLargeError]
    too_slow: type[AnswerTimeoutError]
    redirected: type[AnswerRedirectedError]


class _BoundedBody:
    """A response body read at most ``MAX_ANSWER_BYTES`` long, and ``timeout_s`` only."""

    def __init__(
        self,
        inner: Any,
        request: Any,
        timeout_s: float,
        library: _Library,
        max_bytes: int | None = None,
    ) -> None:
        self._inner = inner
        self._request = request
        self._timeout_s = timeout_s
        self._deadline = time.monotonic() + timeout_s
        self._library = library
        self._max_bytes = max_bytes

    async def __aiter__(self) -> AsyncIterator[bytes]:
        total = 0
        async for chunk in self._inner:
            total += len(chunk)
            self._check(total)
            yield chunk

    def _check(self, total: int) -> None:
        """Raise when ``total`` bytes read break a bound."""
        limit = MAX_ANSWER_BYTES if self._max_bytes is None else self._max_bytes
        if total > limit:
            named = (
                "MAX_ANSWER_BYTES"
                if self._max_bytes is None
                else "the connection's max_answer_bytes"
            )
            raise self._library.too_large(  # type: ignore[call-arg]
                f"the answer from {self._request.url} is longer than {limit:,} "
                f"bytes ({named}): reading stopped there; a model's answer is a few MB "
                f"at most, so check that the connection's URL is the model server's",
                request=self._request,
            )
        if time.monotonic() > self._deadline:
            raise self._library.too_slow(  # type: ignore[call-arg]
                f"the answer from {self._request.url} was still coming {self._timeout_s} s "
                f"after it started ({total:,} bytes so far): reading stopped there",
                request=self._request,
            )

    async def aclose(self) -> None:
        await self._inner.aclose()


class _SyncBoundedBody(_BoundedBody):
    """``_BoundedBody`` for a blocking client (an embedding model's)."""

    def __iter__(self) -> Iterator[bytes]:
        total = 0
        for chunk in self._inner:
            total += len(chunk)
            self._check(total)
            yield chunk

    def close(self) -> None:
        self._inner.close()


@functools.lru_cache(maxsize=4)
def _library(name: str) -> _Library:
    """The bounds' classes as those of HTTP library ``name``.

    Its ``Response`` takes only a stream of its own, and the SDK turns only its errors into
    its connection and timeout errors.

    Returns:
        The classes.
    """
    lib = importlib.import_module(name)
    return _Library(
        body=type("BoundedBody", (_BoundedBody, lib.AsyncByteStream), {}),
        sync_body=type("SyncBoundedBody", (_SyncBoundedBody, lib.SyncByteStream), {}),
        too_large=type("AnswerTooLargeError", (AnswerTooLargeError, lib.ReadError), {}),
        too_slow=type("AnswerTimeoutError", (AnswerTimeoutError, lib.ReadTimeout), {}),
        redirected=type("AnswerRedirectedError", (AnswerRedirectedError, lib.ReadError), {}),
    )


def answer_bounds(
    timeout_s: float, max_bytes: int | None = None
) -> dict[str, list[Callable[[Any], Awaitable[None]]]]:
    """The httpx ``event_hooks`` bounding each answer (see the module docstring).

    Args:
        timeout_s: how long an answer's body may take once its headers came, in seconds.
        max_bytes: the most bytes of body read (``None``: ``MAX_ANSWER_BYTES``).

    Returns:
        The hooks, for the client's ``event_hooks=``.
    """

    async def unencoded(request: Any) -> None:
        request.headers["Accept-Encoding"] = "identity"

    async def bounded(response: Any) -> None:
        bound_response(response, response.request, timeout_s, max_bytes=max_bytes)

    return {"request": [unencoded], "response": [bounded]}


def blocking_answer_bounds(
    timeout_s: float, max_bytes: int | None = None
) -> dict[str, list[Callable[[Any], None]]]:
    """``answer_bounds`` for a blocking client (``httpx.Client``: an embedding model's).

    Args:
        timeout_s: how long an answer's body may take once its headers came, in seconds.
        max_bytes: the most bytes of body read (``None``: ``MAX_ANSWER_BYTES``).

    Returns:
        The hooks, for the client's ``event_hooks=``.
    """

    def unencoded(request: Any) -> None:
        request.headers["Accept-Encoding"] = "identity"

    def bounded(response: Any) -> None:
        bound_response(response, response.request, timeout_s, blocking=True, max_bytes=max_bytes)

    return {"request": [unencoded], "response": [bounded]}


def bound_response(
    response: Any,
    request: Any,
    timeout_s: float,
    blocking: bool = False,
    max_bytes: int | None = None,
) -> None:
    """Bound the body of ``response`` to ``request`` in place (see the module docstring).

    For a transport that reads an answer itself, before the client's hooks run.

    Args:
        response: the response, its body not read yet.
        request: its request (named in the errors).
        timeout_s: how long its body may take from now, in seconds.
        blocking: whether a blocking client reads it (``httpx.Client``), not an async one.
        max_bytes: the most bytes of body read (``None``: ``MAX_ANSWER_BYTES``).

    Raises:
        AnswerTooLargeError: (as the library's ``ReadError``) for a compressed body.
        AnswerRedirectedError: (as the library's ``ReadError``) for a redirect to another
            origin.
    """
    library = _library(type(response).__module__.partition(".")[0])
    elsewhere = _other_origin(request, response)
    if elsewhere is not None:
        raise library.redirected(  # type: ignore[call-arg]
            f"the answer from {request.url} redirects the request to another origin, "
            f"{elsewhere}: not followed, since the request's headers (its credentials) would "
            f"go there too; give the connection the URL it redirects to",
            request=request,
        )
    encoding = response.headers.get("content-encoding", "").strip().lower()
    if encoding not in ("", "identity"):
        raise library.too_large(  # type: ignore[call-arg]
            f"the answer from {request.url} is {encoding}-encoded though it was asked for "
            f"unencoded (Accept-Encoding: identity): its decoded size could not be bounded, "
            f"so it was not read; turn response compression off on that server, or on the "
            f"proxy in front of it, for requests that ask for identity",
            request=request,
        )
    body = library.sync_body if blocking else library.body
    response.stream = body(response.stream, request, timeout_s, library, max_bytes)


_DEFAULT_PORTS = {"http": 80, "https": 443}


def _other_origin(request: Any, response: Any) -> str | None:
    """The origin a redirect answer sends ``request`` to, when it is another one.

    Returns:
        ``scheme://host:port`` of the redirect's target (never its path or query, which may
        hold a token), or ``None``: no redirect, or one within the request's origin (or
        from ``http`` to ``https`` on the same host, as httpx itself allows).
    """
    if not response.has_redirect_location:
        return None
    here = request.url
    try:
        there = here.join(response.headers["Location"])
    except Exception:  # noqa: BLE001 - a Location httpx cannot read: not followed either
        return "an unreadable Location"

    def origin(url: Any) -> tuple[str, str, int | None]:
        return url.scheme, url.host, url.port or _DEFAULT_PORTS.get(url.scheme)

    ours, theirs = origin(here), origin(there)
    if ours == theirs or (
        ours[1] == theirs[1]
        and ours[0] == "http"
        and theirs[0] == "https"
        and ours[2] == 80
        and theirs[2] == 443
    ):
        return None
    return f"{theirs[0]}://{theirs[1]}:{theirs[2]}"


def bound_reason(error: BaseException) -> str:
    """Why an answer's reading was stopped by ``answer_bounds``, from an SDK's error.

    Args:
        error: the SDK's connection or timeout error (its ``__cause__`` chain is read).

    Returns:
        ``": <the reason>"``, or ``""`` when no bound stopped it.
    """
    seen: BaseException | None = error
    for _ in range(8):
        if seen is None:
            break
        if isinstance(seen, AnswerBoundError):
            return f": {seen}"
        seen = seen.__cause__ or seen.__context__
    return ""
