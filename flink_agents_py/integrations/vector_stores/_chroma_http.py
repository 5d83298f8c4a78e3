"""A Chroma server's answers read within bounds: their size and their time.

``chromadb.HttpClient`` talks to the server through an ``httpx.Client`` it makes itself with
``timeout=None`` and no bound on an answer's size: a server (hostile, broken, or a proxy
looping) that never answered, or sent an endless body, kept a store's call (and the key
waiting on it) for ever while this process grew by the body. Its first request (the tenant
and database check) is sent while the client is being made, so the bounds cannot be added
afterwards: ``bounded_http_client`` makes the client with chromadb's ``httpx`` seen through
``_BoundedHttpx``, which gives the ``httpx.Client`` made then the store's ``timeout_s`` (each
wait) and ``chat_models._bounded_http``'s hooks (at most ``max_answer_bytes`` of body, the
body whole within ``timeout_s`` of its headers, unencoded). Clients chromadb makes for anyone
else, in any other thread, are made as chromadb makes them.
"""

from __future__ import annotations

import threading
from typing import Any

from ..chat_models._bounded_http import blocking_answer_bounds

__all__ = ["bounded_http_client"]

_OPENING = threading.local()
"""The bounds of the client this thread is making (``timeout_s``, ``max_bytes``), if any."""
_INSTALL_LOCK = threading.Lock()


class _BoundedHttpx:
    """``httpx`` as chromadb's HTTP client module sees it: ``Client`` bounded while opening.

    Args:
        httpx: the ``httpx`` module.
    """

    def __init__(self, httpx: Any) -> None:
        self._httpx = httpx

    def __getattr__(self, name: str) -> Any:
        return getattr(self._httpx, name)

    def Client(self, *args: Any, **kwargs: Any) -> Any:  # noqa: N802 - httpx's name
        """``httpx.Client``, with the bounds of the client this thread is making, if any.

        Returns:
            The client.
        """
        bounds = getattr(_OPENING, "bounds", None)
        if bounds is not None:
            timeout_s, max_bytes = bounds
            kwargs["timeout"] = timeout_s
            kwargs["follow_redirects"] = False  # (httpx's default: a token stays on its host)
            kwargs["event_hooks"] = blocking_answer_bounds(timeout_s, max_bytes)
        return self._httpx.Client(*args, **kwargs)


def bounded_http_client(
    chromadb: Any, timeout_s: float, max_bytes: int | None, **kwargs: Any
) -> Any:
    """``chromadb.HttpClient(**kwargs)``, its answers read within bounds (module docstring).

    Args:
        chromadb: the ``chromadb`` module.
        timeout_s: each wait for the server, and the longest an answer's body may take once
            its headers came, in seconds.
        max_bytes: the most bytes of one answer read (``None``: ``MAX_ANSWER_BYTES``).
        **kwargs: ``chromadb.HttpClient``'s arguments.

    Returns:
        The client.
    """
    from chromadb.api import fastapi  # the module that makes the client's ``httpx.Client``

    with _INSTALL_LOCK:
        if not isinstance(fastapi.httpx, _BoundedHttpx):
            fastapi.httpx = _BoundedHttpx(fastapi.httpx)  # type: ignore[assignment]
    _OPENING.bounds = (timeout_s, max_bytes)
    try:
        return chromadb.HttpClient(**kwargs)
    finally:
        _OPENING.bounds = None
