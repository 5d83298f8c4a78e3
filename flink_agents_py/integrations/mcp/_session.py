"""One MCP client session on a thread of its own, and the SDK's wire forms.

A session lives in one task of its own event loop (the SDK's anyio scopes must stay in one
task); other threads' calls are bridged onto that loop. Closing it, or failing to open it
(a server that never answers ``initialize`` within the connect timeout), cancels that task
through an anyio cancel scope, so the SDK's transport winds down as it is written to: a stdio
server's stdin is closed, and the server process (with its children) is terminated, then
killed, when it does not exit within the SDK's grace period. No server process outlives a
failed open, a timed-out open or a ``close``; the sessions still open when the interpreter
exits (a resource nobody closed) are closed then, by an ``atexit`` hook.

A stdio server's stderr is never this process's: it is a pipe whose lines a thread copies to
this process's stderr with the known secrets masked (``api.mask_secrets``), so a server that
prints the ``secret_env`` values it was given (a debug line, a crash dump of its
environment) leaves them nowhere.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import logging
import os
import select
import sys
import threading
import time
import weakref
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

import orjson

from ...api import ResourceError, mask_secrets
from ...api.internal import cut_masked
from ..chat_models._common import import_sdk
from ._bounded import bound_http_client, bounded_stdio_client

if TYPE_CHECKING:
    from ._server import McpServer

__all__ = ["Connection", "MAX_LISTED", "MAX_LISTED_BYTES", "MAX_LIST_PAGES", "list_all",
           "wire"]

log = logging.getLogger("flink_agents_py.mcp")


def wire(obj: Any) -> dict[str, Any]:
    """An SDK model as its wire dict (camelCase keys whatever the SDK's attribute names)."""
    if isinstance(obj, dict):
        return obj
    return obj.model_dump(mode="json", by_alias=True, exclude_none=True)


_MAX_LINE = 1 << 20
"""The most bytes of one stderr line a server's relay holds before it writes them out."""
HOLD_LAST_LINE_S = 0.2
"""How long a server's relay holds its last stderr line for the next one, to mask both
together (a secret written across two lines); then the line is written out alone."""


class _MaskedStderr:
    """A stdio server's stderr: a pipe relayed, line by line and masked, to ours.

    ``file`` (the pipe's write end) is what the server process gets as its stderr; a daemon
    thread reads the other end and writes each line to ``sys.stderr`` with the known secrets
    masked (a line is masked whole, and with the line after it: a secret the server wrote
    in several pieces, or wrapped over two lines, is found too; the last line waits
    ``HOLD_LAST_LINE_S`` for a next one). The thread ends when every holder of the write
    end (the server, its children, and this object until ``close``) has closed it.

    Args:
        label: names the thread.
    """

    def __init__(self, label: str) -> None:
        read, write = os.pipe()
        self.file = os.fdopen(write, "w")
        self._thread = threading.Thread(target=self._relay, args=(read,), daemon=True,
                                        name=f"mcp-{label}-stderr")
        self._thread.start()

    def close(self, timeout: float = 5.0) -> None:
        """Close this process's copy of the write end; wait for the rest to be relayed.

        Called once the server process ended: what it wrote is on stderr when this returns
        (unless a process it left behind still holds the pipe after ``timeout`` seconds).

        Args:
            timeout: the most to wait for the relay, in seconds.
        """
        self.file.close()
        self._thread.join(timeout)

    @staticmethod
    def _relay(fd: int) -> None:
        pending = b""  # read, after the last line break
        held = ""  # the last line, masked as far as it alone shows: written with the next
        with os.fdopen(fd, "rb", buffering=0) as pipe:
            while True:
                if held and not select.select([pipe], [], [], HOLD_LAST_LINE_S)[0]:
                    _write(held)  # no next line came
                    held = ""
                    continue
                chunk = pipe.read(1 << 16)
                if not chunk:
                    break
                pending += chunk
                end = pending.rfind(b"\n") + 1
                if not end and len(pending) > _MAX_LINE:
                    end = len(pending)
                if end:
                    text = mask_secrets(held + pending[:end].decode(errors="replace"))
                    pending = pending[end:]
                    cut = text.rfind("\n", 0, len(text) - 1) + 1  # the start of its last line
                    _write(text[:cut])
                    held = text[cut:]
        _write(mask_secrets(held + pending.decode(errors="replace")))


def _write(text: str) -> None:
    out = sys.stderr
    if out is None or not text:
        return
    try:
        out.write(text)
        out.flush()
    except (OSError, ValueError):  # our stderr is closed: the server's lines are dropped
        pass


class Connection:
    """One client session on its own thread and event loop.

    Args:
        server: the resource (its transport settings, ``where`` for messages).
        label: names the thread.
    """

    def __init__(self, server: McpServer, label: str) -> None:
        self._server = server
        self._label = label
        self._loop: asyncio.AbstractEventLoop | None = None
        self._scope: Any = None  # the anyio cancel scope around the session
        self._closing = False
        self._thread: threading.Thread | None = None
        self.session: Any = None
        self.init: dict[str, Any] = {}
        self.failure: ConnectionError | None = None  # why the transport ended the session

    def start(self, timeout: float) -> None:
        """Start the session and wait until it is initialized (it is closed at exit).

        Args:
            timeout: the most starting may take, in seconds.

        Raises:
            TimeoutError: when the server does not answer in time (the session is closed
                and its server process ended before this is raised).
            Exception: whatever starting raised (the session is closed first too).
        """
        ready: concurrent.futures.Future[None] = concurrent.futures.Future()
        _OPEN.add(self)
        self._thread = threading.Thread(target=self._run, args=(ready,), daemon=True,
                                        name=f"mcp-{self._label}")
        self._thread.start()
        try:
            ready.result(timeout)
        except concurrent.futures.TimeoutError:
            self.close()
            raise TimeoutError(f"no MCP session with {self._server.where} "
                               f"within {timeout:g} s") from None
        except BaseException:
            self.close()
            raise

    def _run(self, ready: concurrent.futures.Future[None]) -> None:
        try:
            asyncio.run(self._main(ready))
        except BaseException as e:  # noqa: BLE001 - reported to the starter, or logged
            if not ready.done():
                ready.set_exception(e if isinstance(e, Exception) else RuntimeError(str(e)))
            else:
                log.debug("MCP session with %s ended: %r", self._server.where, e)
        finally:
            self.session = None
            if not ready.done():
                ready.set_exception(ConnectionError(
                    f"the MCP session with {self._server.where} was closed while it started"))

    async def _main(self, ready: concurrent.futures.Future[None]) -> None:
        import_sdk("mcp", "mcp", "MCP servers")
        import anyio
        from mcp import ClientSession

        self._loop = asyncio.get_running_loop()
        with anyio.CancelScope() as scope:
            self._scope = scope
            if self._closing:  # closed before the loop ran
                scope.cancel()
            async with contextlib.AsyncExitStack() as stack:
                streams = await stack.enter_async_context(await self._transport(stack))
                session = await stack.enter_async_context(ClientSession(streams[0], streams[1]))
                self.init = wire(await session.initialize())
                self.session = session
                if not ready.done():
                    ready.set_result(None)
                await anyio.sleep_forever()

    async def _transport(self, stack: contextlib.AsyncExitStack) -> Any:
        srv = self._server
        if srv.command:
            errlog = _MaskedStderr(self._label)
            stack.callback(errlog.close)  # after the server process ended (the stack's last)
            if sys.platform != "win32":  # bounded messages (``_bounded``)
                return bounded_stdio_client(list(srv.command), srv.server_env(), srv.cwd,
                                            errlog.file, srv.max_message_bytes, srv.where,
                                            on_failure=self._failed)
            from mcp.client.stdio import StdioServerParameters, stdio_client

            params = StdioServerParameters(command=srv.command[0], args=list(srv.command[1:]),
                                           env=srv.server_env(), cwd=srv.cwd)
            return stdio_client(params, errlog=errlog.file)
        from mcp.client import streamable_http
        from mcp.shared._httpx_utils import create_mcp_http_client

        headers = srv.request_headers()

        def bounded_client(**kwargs: Any) -> Any:  # the SDK's client, its bodies bounded
            return bound_http_client(create_mcp_http_client(**kwargs), srv.max_message_bytes,
                                     srv.where, self._failed)

        connect = getattr(streamable_http, "streamable_http_client", None)
        if connect is None:  # the SDK's 1.x name, which takes the headers itself
            # the 1.x SDK's name: absent from the 2.x SDK whose types are checked here
            old = streamable_http.streamablehttp_client  # type: ignore[attr-defined]
            return old(srv.url, headers=headers, httpx_client_factory=bounded_client)
        client = await stack.enter_async_context(bounded_client(headers=headers))
        return connect(srv.url, http_client=client)

    @property
    def alive(self) -> bool:
        """Whether the session is initialized, not closed, and its transport did not end.

        A session whose transport ended (a stdio server exited or closed its stdout, a
        message over the bound) is not alive, even before its thread has wound down.
        """
        return (self.session is not None and self._thread is not None
                and self._thread.is_alive() and not self._closing and self.failure is None)

    def submit(
        self, fn: Callable[[Any], Coroutine[Any, Any, Any]]
    ) -> concurrent.futures.Future[Any]:
        """Run ``fn(session)`` on the session's loop.

        Returns:
            Its future.

        Raises:
            ConnectionError: when the session is closed.
        """
        if not self.alive or self._loop is None:
            raise ConnectionError(f"the MCP session with {self._server.where} is closed")
        session = self.session
        return asyncio.run_coroutine_threadsafe(fn(session), self._loop)

    def call(self, fn: Callable[[Any], Coroutine[Any, Any, Any]], timeout: float) -> Any:
        """``fn(session)``'s result, waiting at most ``timeout`` seconds.

        Returns:
            What ``fn`` returned.

        Raises:
            TimeoutError: when it takes longer (the request is cancelled).
            ConnectionError: when the session ended while the request waited (an
                ``McpMessageTooLarge`` when the transport ended it for a message too long, an
                ``McpServerExited`` when a stdio server exited).
        """
        fut = self.submit(fn)
        try:
            return fut.result(timeout)
        except concurrent.futures.TimeoutError:
            fut.cancel()
            raise TimeoutError(f"MCP server {self._server.where} did not answer "
                               f"within {timeout:g} s") from None
        except concurrent.futures.CancelledError:  # the session ended under the request
            self.raise_failure()
            raise ConnectionError(f"the MCP session with {self._server.where} ended while "
                                  "a request waited for its answer") from None
        except Exception:
            self.raise_failure()  # e.g. for the SDK's "Connection closed"
            raise

    def raise_failure(self, what: str = "") -> None:
        """Raise why the transport ended the session, if it did (else nothing).

        Args:
            what: the request, named before the reason (e.g. ``"MCP tool 'x': "``).

        Raises:
            McpMessageTooLarge: when the server wrote a message over its bound.
            McpServerExited: when a stdio server exited (or closed its stdout).
        """
        if self.failure is not None:
            raise type(self.failure)(f"{what}{self.failure}") from None

    def _failed(self, error: ConnectionError) -> None:
        """The transport's failure: kept for the requests it fails, and the session ended."""
        if self._closing:  # ending it anyway: nothing failed
            return
        self.failure = error
        log.error("%s", error)
        self._end_session()

    def close(self, timeout: float = 10.0) -> None:
        """End the session, and with it a stdio server's process (see the module docstring).

        Args:
            timeout: the most to wait for the session's thread to end, in seconds.
        """
        self._cancel()
        self._join(timeout)

    def _cancel(self) -> None:
        self._closing = True
        _OPEN.discard(self)
        self._end_session()

    def _end_session(self) -> None:
        loop, scope = self._loop, self._scope
        if loop is not None and scope is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop ended meanwhile
                loop.call_soon_threadsafe(scope.cancel)

    def _join(self, timeout: float) -> None:
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
            if thread.is_alive():
                log.warning("the MCP session with %s did not end within %g s",
                            self._server.where, timeout)


_OPEN: weakref.WeakSet[Connection] = weakref.WeakSet()


@atexit.register
def _close_open_sessions(timeout: float = 10.0) -> None:
    """Close every session still open (all at once), waiting at most ``timeout`` seconds."""
    sessions = list(_OPEN)
    for conn in sessions:
        conn._cancel()
    deadline = time.monotonic() + timeout
    for conn in sessions:
        conn._join(max(deadline - time.monotonic(), 0.0))


MAX_LIST_PAGES = 1_000
"""The most pages of one ``tools/list`` or ``prompts/list`` a server may answer with."""

MAX_LISTED = 10_000
"""The most tools (or prompts) one server may advertise."""

MAX_LISTED_BYTES = 64 << 20
"""The most bytes (JSON) all pages of one ``tools/list`` or ``prompts/list`` together may
hold: the items are kept (descriptions, input schemas) for as long as the server is open,
and 1,000 pages each near ``max_message_bytes`` (64 MiB) would be 64 GB."""


async def list_all(session: Any, method: str, key: str, where: str = "") -> list[dict[str, Any]]:
    """Every page of ``tools/list`` or ``prompts/list`` as wire dicts.

    The pages are bounded: a server answering with a cursor it gave before, more than
    ``MAX_LIST_PAGES`` pages or more than ``MAX_LISTED`` items (a listing that never ends) is
    refused at once, rather than listed until the request's timeout; so is a listing of
    more than ``MAX_LISTED_BYTES`` in all, however it ends.

    Args:
        session: the SDK's client session.
        method: the session's method (``list_tools`` or ``list_prompts``).
        key: the page's field holding the items (``tools`` or ``prompts``).
        where: the server, as a message names it.

    Returns:
        The items of every page.

    Raises:
        ResourceError: naming the server and the request, when its pages do not end.
    """
    items: list[dict[str, Any]] = []
    cursor: str | None = None
    seen: set[str] = set()
    request = f"{key}/list"
    pages = size = 0
    while True:
        pages += 1
        fn = getattr(session, method)
        if cursor is None:
            page = wire(await fn())
        else:
            from mcp import types

            try:
                page = wire(await fn(params=types.PaginatedRequestParams(cursor=cursor)))
            except TypeError:  # older SDKs take the cursor directly
                page = wire(await fn(cursor=cursor))
        items.extend(page.get(key) or [])
        size += len(orjson.dumps(page.get(key) or []))
        if size > MAX_LISTED_BYTES:  # ended or not: no more is kept
            raise ResourceError(f"the {request} of MCP server {where} holds more than "
                                f"{MAX_LISTED_BYTES:,} bytes (after {pages} pages, "
                                f"{len(items)} {key}): refused")
        cursor = page.get("nextCursor")
        if not cursor:
            if method == "list_tools":
                unvalidated(session)
            return items
        why = (f"it gave the cursor {cut_masked(cursor, 80)!r} again" if cursor in seen
               else f"more than {MAX_LIST_PAGES} pages" if pages >= MAX_LIST_PAGES
               else f"more than {MAX_LISTED} {key}" if len(items) > MAX_LISTED else None)
        if why is not None:
            raise ResourceError(f"the {request} pages of MCP server {where} never end: {why} "
                                f"(after {pages} pages, {len(items)} {key})")
        seen.add(cursor)


def unvalidated(session: Any) -> None:
    """Keep the SDK from checking tool results against the output schemas a server declares.

    The SDK (1.10+) keeps each listed tool's ``outputSchema`` and checks every result
    against it with ``jsonschema`` in this process: a server declaring a ``pattern`` that
    backtracks (``^(a+)+$``) and answering ``"aaa...a!"`` made one call hold the
    interpreter's lock for minutes to days (``re`` never lets go of it), stalling every
    thread of the job, its ``timeout_s`` included. A server's schema is its own word about
    its data; a result that does not match it is data all the same (the model reads it,
    as any tool result). The tools stay listed (``None``: no schema), so the SDK does not
    list them again to look for one. (The framework reads ``outputSchema`` from its own
    listing only to unwrap ``{"result": ...}``, with no pattern evaluated.)

    Args:
        session: the SDK's client session, after a complete ``tools/list``.
    """
    schemas = getattr(session, "_tool_output_schemas", None)
    if isinstance(schemas, dict):
        for name in list(schemas):
            schemas[name] = None
    validators = getattr(session, "_tool_output_validators", None)  # (2.x: compiled ones)
    if isinstance(validators, dict):
        validators.clear()
