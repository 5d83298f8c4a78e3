"""An Ollama-compatible chat server on 127.0.0.1 that solves ``(a + b) * c`` with tools.

It stands in for the model of Apache Flink Agents' ReAct e2e tests (``react_agent_test.py``
asks "What is ({a} + {b}) * {c}" with an ``add`` and a ``multiply`` tool): the first round
calls ``add`` with the user's first two numbers, the second ``multiply`` with that sum and
the third number, the third answers ``{"result": N}`` in JSON. ``requests`` keeps each
request body, for tests that check what the model was sent.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# The tools module of Flink Agents' ReAct e2e tests (react_agent_tools.py), as a user's own.
TOOLS_MODULE = '''
def add(a: int, b: int) -> int:
    """Calculate the sum of a and b.

    Parameters
    ----------
    a : int
        The first operand
    b : int
        The second operand

    Returns:
    -------
    int:
        The sum of a and b
    """
    return a + b


def multiply(a: int, b: int) -> int:
    """Useful function to multiply two numbers.

    Parameters
    ----------
    a : int
        The first operand
    b : int
        The second operand

    Returns:
    -------
    int:
        The product of a and b
    """
    return a * b
'''


class _Handler(BaseHTTPRequestHandler):
    requests: list[dict[str, Any]]

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
        self.requests.append(body)
        messages = body.get("messages", [])
        user = " ".join(m.get("content") or "" for m in messages if m.get("role") == "user")
        numbers = [int(n) for n in re.findall(r"\d+", user)]
        results = [int(float(m["content"])) for m in messages if m.get("role") == "tool"]
        if not results:
            call = {"name": "add", "arguments": {"a": numbers[0], "b": numbers[1]}}
            message: dict[str, Any] = {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"function": call}],
            }
        elif len(results) == 1:
            call = {"name": "multiply", "arguments": {"a": results[0], "b": numbers[2]}}
            message = {"role": "assistant", "content": "", "tool_calls": [{"function": call}]}
        else:
            message = {"role": "assistant", "content": json.dumps({"result": results[-1]})}
        data = json.dumps(
            {
                "model": body.get("model"),
                "message": message,
                "done": True,
                "created_at": "2025-01-01T00:00:00Z",
            }
        ).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@contextmanager
def arith_ollama() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """Serve the arithmetic model on a free port of 127.0.0.1 while the block runs.

    Yields:
        Its base URL (for ``OLLAMA_HOST``) and the list of request bodies it receives.
    """
    requests: list[dict[str, Any]] = []
    handler = type("_Arith", (_Handler,), {"requests": requests})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", requests
    finally:
        server.shutdown()
        server.server_close()
