"""MCP transports with a bound on what one message from the server may hold.

**stdio.** The SDK's stdio client (``mcp.client.stdio.stdio_client``) joins the server's
stdout into one string until a newline comes: a server that writes without ever ending its
line (by a bug, or on purpose) grows that string without bound, and re-joins it for every
chunk read, so the client process spends its memory and CPU on one message.
``bounded_stdio_client`` reads the server's stdout as bytes and refuses a line longer than
``max_bytes``: the server is stopped, the session ends with ``McpMessageTooLarge`` naming the
server and the bound, and a request waiting for its answer fails with that reason
(``Connection.call``). A server whose stdout ends (it exited, or closed it) ends the
session too, with ``McpServerExited`` naming the server and its exit code: the call that
waited fails with it, and the next call starts the server again. The rest follows the SDK's
stdio transport and the MCP specification's stdio lifecycle
(https://modelcontextprotocol.io/specification/2025-06-18/basic/transports#stdio and
``.../basic/lifecycle#shutdown``): one JSON-RPC message per line, UTF-8, written to the
server's stdin and read from its stdout; its stderr goes where ``errlog`` says; at the end
stdin is closed, the server gets ``PROCESS_EXIT_S`` to exit, then its process group is
terminated (SIGTERM, SIGKILL after as long again: the SDK's
``terminate_posix_process_tree``). POSIX only: on Windows the SDK's own transport is used.

**Streamable HTTP.** The SDK reads a JSON answer whole and an event stream event by event,
each without bound. ``bound_http_client`` wraps the HTTP client's transport so that a
response body may carry at most ``max_bytes`` without a blank line (the end of a
server-sent event; a JSON answer has none, so its whole body counts).
"""

from __future__ import annotations

import contextlib
import functools
import json
import sys
from collections.abc import AsyncIterator
from typing import IO, Any

from ...api import mask_secrets
from ...api.internal import validation_masked

__all__ = ["McpMessageTooDeep", "McpMessageTooLarge", "McpServerExited", "PROCESS_EXIT_S",
           "bound_http_client", "bounded_stdio_client"]

_NOT_MCP = -32600  # JSON-RPC's "invalid request": the error a request answered so gets
PROCESS_EXIT_S = 2.0
"""How long a server may take to exit once its stdin is closed, in seconds (as the SDK)."""


class McpMessageTooLarge(ConnectionError):
    """An MCP server sent a message longer than its ``max_message_bytes``."""


class McpServerExited(ConnectionError):
    """A stdio MCP server exited (or closed its stdout) while its session was open."""


class McpMessageTooDeep(ConnectionError):
    """An MCP server sent a message nested too deeply for a JSON reader of this process."""


def too_deep(where: str) -> McpMessageTooDeep:
    """The error of a server's message nested deeper than Python's JSON reader goes."""
    return McpMessageTooDeep(f"MCP server {where} sent a message nested too deeply to be "
                             f"read; its session was ended")


def too_large(where: str, max_bytes: int, what: str) -> McpMessageTooLarge:
    """The error of a server's message over the bound (``what``: where it came)."""
    return McpMessageTooLarge(
        f"MCP server {where} sent a message ({what}) of more than "
        f"max_message_bytes={max_bytes:,} bytes; its session was ended")


@contextlib.asynccontextmanager
async def bounded_stdio_client(command: list[str], env: dict[str, str] | None,
                               cwd: str | None, errlog: IO[str], max_bytes: int, where: str,
                               on_failure: Any = None) -> AsyncIterator[tuple[Any, Any]]:
    """Start the server ``command`` and yield the session's ``(read, write)`` streams.

    Args:
        command: the program and its arguments.
        env: variables added to the SDK's default inherited environment.
        cwd: the server's working directory (``None``: ours).
        errlog: where the server's stderr goes (a file with a descriptor).
        max_bytes: the longest line (one JSON-RPC message) the server may write, in bytes.
        where: the server, as messages name it.
        on_failure: called with the error (an ``McpMessageTooLarge`` for a line over
            ``max_bytes``, an ``McpServerExited`` when the server's stdout ended before the
            session was closed) when the transport ends the session, before the session sees
            it end.

    Yields:
        The read stream (``SessionMessage`` or an ``Exception`` for a line that is not
        JSON-RPC, which the session reports) and the write stream (``SessionMessage``).

    Raises:
        McpMessageTooLarge: (out of the task group) when the server wrote a longer line.
        OSError: when the program cannot be started.
    """
    import anyio
    from mcp.client.stdio import get_default_environment
    from mcp.os.posix.utilities import terminate_posix_process_tree
    from mcp.shared.message import SessionMessage
    from mcp.types import JSONRPCMessage
    from pydantic import TypeAdapter

    messages: TypeAdapter[Any] = TypeAdapter(JSONRPCMessage)
    process = await anyio.open_process(command, env={**get_default_environment(), **(env or {})},
                                       cwd=cwd, stderr=errlog, start_new_session=True)
    read_in, read_out = anyio.create_memory_object_stream[Any](0)
    write_in, write_out = anyio.create_memory_object_stream[Any](0)

    def parsed(line: bytes) -> Any:
        try:
            return SessionMessage(messages.validate_json(line))
        except ValueError as e:  # not JSON-RPC: an answer is failed, anything else reported
            return unreadable(line, e)

    def unreadable(line: bytes, error: ValueError) -> Any:
        """A line the SDK cannot read: an error answer to the request it answers, if any.

        The SDK reported such a line and dropped it: the request it answered waited for its
        whole timeout, named as a server that "did not answer" (an answer nested deeper than
        the SDK's JSON reader goes, about 200 levels; a ``result`` that is no object).

        Returns:
            A JSON-RPC error answering the line's request (naming the server and the
            problem), or ``error`` when the line answers none (the session reports it).

        Raises:
            McpMessageTooDeep: when even this process's JSON reader refuses its nesting.
        """
        try:
            message = json.loads(line)
        except RecursionError:
            error_deep = too_deep(where)
            raise error_deep from None
        except ValueError:  # not JSON at all (a server printing to stdout): reported
            return error
        rid = message.get("id") if isinstance(message, dict) else None
        if (isinstance(rid, bool) or not isinstance(rid, (int, str))
                or not ("result" in message or "error" in message)):
            return error
        shown = str(validation_masked(error))  # what it quotes masked before it is cut
        problem = mask_secrets(" ".join(shown.splitlines()[1:3]))[:300]  # its first error
        return SessionMessage(messages.validate_python({
            "jsonrpc": "2.0", "id": rid, "error": {"code": _NOT_MCP, "message": (
                f"MCP server {where} answered with a message that is not MCP ({problem})")}}))

    stopping = False  # set when the session ends the server (its exit is then expected)

    async def exited() -> None:
        """Report the server's end (its stdout ended while the session was open)."""
        with anyio.move_on_after(PROCESS_EXIT_S):
            await process.wait()
        code = process.returncode
        how = (f"exited (exit code {code})" if code is not None
               else "closed its stdout (it is still running)")
        if not stopping and on_failure is not None:
            on_failure(McpServerExited(f"MCP server {where} {how}; its session was ended "
                                       "(the next call starts the server again)"))

    async def read() -> None:
        assert process.stdout is not None
        held = bytearray()  # the line being read
        try:
            async with read_in:
                async for chunk in process.stdout:
                    start = 0
                    while True:
                        end = chunk.find(b"\n", start)
                        piece = len(chunk) - start if end < 0 else end - start
                        if len(held) + piece > max_bytes:
                            raise too_large(where, max_bytes, "a line on its stdout")
                        if end < 0:
                            held += chunk[start:]
                            break
                        held += chunk[start:end]
                        start = end + 1
                        if held.strip():
                            await read_in.send(parsed(bytes(held)))
                        held.clear()
                await exited()  # before ``read_in`` closes: a waiting call sees the reason
        except (McpMessageTooLarge, McpMessageTooDeep) as e:
            if on_failure is not None:
                on_failure(e)
            raise
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
            pass

    async def write() -> None:
        assert process.stdin is not None
        try:
            async with write_out:
                async for message in write_out:
                    line = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await process.stdin.send(line.encode() + b"\n")
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await read_in.aclose()  # the server stopped reading: end the session

    async def stop() -> None:
        with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            await process.stdin.aclose()  # type: ignore[union-attr]
        with anyio.move_on_after(PROCESS_EXIT_S):
            while process.returncode is None:
                await anyio.sleep(0.01)
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                await terminate_posix_process_tree(process, PROCESS_EXIT_S)
        # closes the pipes and waits for the exit to be seen (which closes the asyncio
        # transport); bounded: a process the server left behind may hold its stdout
        with anyio.move_on_after(PROCESS_EXIT_S), contextlib.suppress(
                OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            await process.aclose()

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(read)
        tasks.start_soon(write)
        try:
            yield read_out, write_in
        finally:
            stopping = True
            with anyio.CancelScope(shield=True):
                await read_out.aclose()
                await write_in.aclose()
                await stop()
            tasks.cancel_scope.cancel()


@functools.cache
def _bounded_body(base: type) -> type:
    """A response body class that fails once ``max_bytes`` come without a blank line.

    Returns:
        A subclass of ``base`` (the client library's ``AsyncByteStream``, which its client
        checks a body is).
    """

    class BoundedBody(base):
        def __init__(self, body: Any, max_bytes: int, where: str, on_failure: Any) -> None:
            self._body = body
            self._max = max_bytes
            self._where = where
            self._on_failure = on_failure

        async def __aiter__(self) -> AsyncIterator[bytes]:
            since = 0  # bytes since the last blank line (the end of a server-sent event)
            async for chunk in self._body:
                cut = max(chunk.rfind(b"\n\n"), chunk.rfind(b"\r\n\r\n"))
                since = len(chunk) - cut if cut >= 0 else since + len(chunk)
                if since > self._max:
                    error = too_large(self._where, self._max, "an HTTP response")
                    if self._on_failure is not None:
                        self._on_failure(error)
                    raise error
                yield chunk

        async def aclose(self) -> None:
            await self._body.aclose()

    return BoundedBody


class _BoundedTransport:
    """An HTTP client transport whose response bodies are bounded (``_bounded_body``)."""

    def __init__(self, inner: Any, body: type, max_bytes: int, where: str,
                 on_failure: Any) -> None:
        self._inner = inner
        self._body = body
        self._bound = (max_bytes, where, on_failure)

    async def handle_async_request(self, request: Any) -> Any:
        response = await self._inner.handle_async_request(request)
        response.stream = self._body(response.stream, *self._bound)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _BoundedTransport:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self._inner.__aexit__(*exc)


def bound_http_client(client: Any, max_bytes: int, where: str, on_failure: Any = None) -> Any:
    """``client`` (the SDK's ``httpx`` client) with its response bodies bounded.

    Args:
        client: an ``AsyncClient`` of ``httpx`` (or of the fork the SDK uses) not yet opened.
        max_bytes: the most bytes a body may carry without a blank line.
        where: the server, as messages name it.
        on_failure: called with the error (``McpMessageTooLarge``) when a body goes over
            the bound.

    Returns:
        ``client``, its transport wrapped (left as it is, unbounded, when the client has
        no ``_transport`` to wrap: an ``httpx`` of another shape).
    """
    inner = getattr(client, "_transport", None)
    library = sys.modules.get(type(client).__module__.split(".")[0])
    base = getattr(library, "AsyncByteStream", None)
    if inner is not None and hasattr(inner, "handle_async_request") and base is not None:
        client._transport = _BoundedTransport(inner, _bounded_body(base), max_bytes, where,
                                              on_failure)
    return client
