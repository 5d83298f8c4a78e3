"""Raw MCP servers for hostile-server tests: JSON-RPC lines over stdio, without the SDK.

``raw_server(body)`` is a script: a head defining ``send(message)``, ``answer(id, result)``
and ``serve(handle, capabilities)`` (which answers ``initialize`` and hands every other
request, ``handle(id, method, message)``, to the body), then ``body``, which defines
``handle`` and calls ``serve``. Notifications (no ``id``) are read and dropped.
"""

from __future__ import annotations

import textwrap

__all__ = ["raw_server"]

_HEAD = textwrap.dedent('''
    import json, os, sys

    def send(o):
        sys.stdout.write(json.dumps(o) + "\\n"); sys.stdout.flush()

    def answer(mid, result):
        send({"jsonrpc": "2.0", "id": mid, "result": result})

    def serve(handle, capabilities):
        for line in sys.stdin:
            m = json.loads(line)
            mid, method = m.get("id"), m.get("method")
            if mid is None:
                continue
            if method == "initialize":
                answer(mid, {"protocolVersion": m["params"]["protocolVersion"],
                             "capabilities": capabilities,
                             "serverInfo": {"name": "raw", "version": "1"}})
            else:
                handle(mid, method, m)
''')


def raw_server(body: str) -> str:
    """The text of a raw server script whose requests ``body`` handles (see the module)."""
    return _HEAD + textwrap.dedent(body)
