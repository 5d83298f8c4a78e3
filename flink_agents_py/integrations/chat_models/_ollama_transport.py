"""The ``ollama`` client's HTTP transport: tool call arguments sent as JSON text, read.

The ``ollama`` client takes an ``/api/chat`` answer's ``tool_calls[].function.arguments``
as an object only (``Input should be a valid dictionary``); servers imitating Ollama's API
and proxies translating OpenAI's form send JSON text there. Needs ``httpx`` (installed with
the ``ollama`` extra).
"""

from __future__ import annotations

import json
import os
import urllib.request

import httpx

from ._answers import tool_arguments
from ._bounded_http import bound_response

__all__ = ["ArgumentsAsObjects"]


class ArgumentsAsObjects(httpx.AsyncBaseTransport):
    """An HTTP transport reading tool call arguments sent as JSON text as their object.

    The ``ollama`` client refuses an ``/api/chat`` answer whose ``tool_calls[].function.
    arguments`` is a string (``Input should be a valid dictionary``); some servers speaking
    Ollama's API send OpenAI's form there. Each such string is replaced by the object it
    holds (``_answers.tool_arguments``: unreadable text is the call's error, told to the
    model) before the client reads the answer. Requests go through ``httpx``'s own
    transport, over the proxy the environment names for ``host`` (``HTTP(S)_PROXY``,
    ``NO_PROXY``), as the client's would.

    Every answer is read within the bounds of ``_bounded_http`` (its size, ``timeout_s``
    from its headers, unencoded).

    Args:
        host: the Ollama server (``None``: ``OLLAMA_HOST``, else Ollama's default, local).
        timeout_s: how long an answer's body may take once its headers came, in seconds.
        max_bytes: the most bytes of an answer's body read (``None``: ``MAX_ANSWER_BYTES``).
    """

    def __init__(self, host: str | None, timeout_s: float = 120.0,
                 max_bytes: int | None = None) -> None:
        self._inner = httpx.AsyncHTTPTransport(proxy=_env_proxy(host))
        self._timeout_s = timeout_s
        self._max_bytes = max_bytes

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request``; an ``/api/chat`` answer's string arguments as objects.

        Args:
            request: the client's request.

        Returns:
            The server's response (an ``/api/chat`` answer's body read whole, decoded).
        """
        request.headers["Accept-Encoding"] = "identity"
        response = await self._inner.handle_async_request(request)
        try:  # read within bounds (``_bounded_http``): its size, its time, its encoding
            bound_response(response, request, self._timeout_s, max_bytes=self._max_bytes)
        except BaseException:
            await response.aclose()
            raise
        if response.status_code != 200 or not request.url.path.endswith("/api/chat"):
            return response
        content = _with_objects(await response.aread())
        await response.aclose()
        headers = [(k, v) for k, v in response.headers.items()
                   if k.lower() not in ("content-encoding", "content-length",
                                        "transfer-encoding")]
        return httpx.Response(response.status_code, headers=headers, content=content,
                              extensions=response.extensions, request=request)

    async def aclose(self) -> None:
        """Close the connections."""
        await self._inner.aclose()


def _with_objects(content: bytes) -> bytes:
    """An ``/api/chat`` answer with each tool call's string ``arguments`` as its object.

    Args:
        content: the answer's body.

    Returns:
        The answer (as it came when it is no non-streamed answer holding such calls).
    """
    try:
        body = json.loads(content)
        calls = body["message"]["tool_calls"]
        texts = [(i, c["function"]) for i, c in enumerate(calls)
                 if isinstance(c["function"].get("arguments"), str)]
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError):
        return content  # no JSON, a stream's lines, no calls, calls of another shape, too deep
    if not texts:
        return content
    for i, fn in texts:
        fn["arguments"] = tool_arguments(fn["arguments"], i, fn.get("name"))
    return json.dumps(body).encode()


def _env_proxy(host: str | None) -> str | None:
    """The proxy the environment names for ``host`` (``None``: none, or no host named)."""
    host = host or os.environ.get("OLLAMA_HOST")
    if not host:
        return None
    url = host if "://" in host else f"http://{host}"
    parts = httpx.URL(url)
    if urllib.request.proxy_bypass(parts.host):
        return None
    return urllib.request.getproxies().get(parts.scheme)
