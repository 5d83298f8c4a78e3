"""A stdio MCP server that misbehaves: ``python hanging_mcp_server.py PID_DIR MODE``.

It writes an empty ``<pid>.pid`` file into ``PID_DIR`` when it starts, so a test can count
the server processes a job started and check that each has ended. Modes:

- ``no-init``: never answers ``initialize``;
- ``no-list``: answers ``initialize``, never answers ``tools/list`` (or anything else);
- ``leak-env``: answers ``tools/list`` with an error quoting its ``$TOKEN`` variable;
- ``ok``: answers ``initialize`` and ``tools/list`` (no tools), and nothing else.

When its stdin closes it does not exit (as a stuck server would not) and it ignores SIGTERM:
only the client's kill ends it.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time


def main() -> None:
    pid_dir, mode = sys.argv[1], sys.argv[2]
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    with open(os.path.join(pid_dir, f"{os.getpid()}.pid"), "w"):
        pass
    for line in sys.stdin:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        method, rid = msg.get("method"), msg.get("id")
        reply = None
        if method == "initialize" and mode != "no-init":
            reply = {"jsonrpc": "2.0", "id": rid, "result": {
                "protocolVersion": msg["params"]["protocolVersion"],
                "capabilities": {"tools": {}}, "serverInfo": {"name": "hang", "version": "0"}}}
        elif method == "tools/list" and mode == "ok":
            reply = {"jsonrpc": "2.0", "id": rid, "result": {"tools": []}}
        elif method == "tools/list" and mode == "leak-env":
            reply = {"jsonrpc": "2.0", "id": rid, "error": {
                "code": -32603, "message": f"internal error: upstream refused token "
                                           f"{os.environ.get('TOKEN')}"}}
        if reply is not None:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()
    while True:  # stdin is closed: a stuck server lingers
        time.sleep(1)


if __name__ == "__main__":
    main()
