"""An HTTP server on 127.0.0.1 for test doubles, served from a background thread.

``socketserver.TCPServer`` calls ``listen(request_queue_size)`` inside its constructor, with
the class's default backlog of 5; setting ``request_queue_size`` on an instance afterwards
changes nothing. A fake provider asked by many calls at once (two Flink subtasks, each with
calls in flight) then overflows the kernel's accept queue on a busy machine: the client's
connection is dropped or reset, and a test sees ``Connection error`` from a fake that never
saw the request. ``LocalHTTPServer`` sets the backlog on the class, before ``listen``.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["LocalHTTPServer"]


class LocalHTTPServer(ThreadingHTTPServer):
    """``with LocalHTTPServer(Handler) as srv:`` serves ``srv.url`` until the block ends.

    One thread per request (daemon threads: a hung request never blocks the test's exit) and
    a listen backlog of ``request_queue_size`` (1,024) connections waiting to be accepted.

    Args:
        handler: the request handler class (``http.server.BaseHTTPRequestHandler``).
        poll_s: how often, in seconds, the serving loop checks for ``shutdown``.

    Attributes:
        port: the port the kernel gave (``127.0.0.1``).
        url: ``http://127.0.0.1:<port>``.
    """

    daemon_threads = True
    request_queue_size = 1024

    def __init__(self, handler: type[BaseHTTPRequestHandler], poll_s: float = 0.05) -> None:
        super().__init__(("127.0.0.1", 0), handler)
        self.port = int(self.server_address[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self._serving = threading.Thread(target=self.serve_forever, args=(poll_s,),
                                         name=f"local-http-{self.port}", daemon=True)

    def __enter__(self) -> LocalHTTPServer:
        self._serving.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._serving.is_alive():
            self.shutdown()
        self.server_close()
