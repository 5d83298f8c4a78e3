"""A stdio MCP server answering with hostile content: ``python hostile_mcp_server.py MODE``.

Written on the JSON-RPC wire (no SDK), so it can answer what the SDK's server never would.
It answers ``initialize`` (tools capability) and then, by mode:

- ``pager``: every ``tools/list`` page holds one tool and the same ``nextCursor``: its pages
  never end;
- ``pager-new``: every page holds one tool and a new ``nextCursor``: its pages never end;
- ``many-pages``: 30 pages of 10 tools, then the end (a long listing that ends);
- ``fat-pages``: every page holds one tool with a description of 1 MB, and a new
  ``nextCursor``: each page is far under the message bound, the listing grows without one;
- ``bad-schema``: one tool whose input schema's ``properties`` is a number;
- ``list-error``: ``tools/list`` answers a JSON-RPC error with a 100 KB message;
- ``twin-tools``: two tools named ``lookup`` (different descriptions) on one page;
- ``twin-pages``: ``lookup`` on the first page and again on the second;
- ``twin-prompts``: the prompts capability too, and two prompts named ``greet``;
- ``ok``: one tool, ``probe``, whose call answers ``ok``.

Each ``tools/call`` of ``probe`` answers by mode too: ``huge`` with 3 MB of text,
``huge-image`` with a 3 MB image, ``endless-line`` by writing one line that never ends (1 MiB
at a time, until its stdout is closed), ``deep`` with a result nested 100,000 levels deep
(deeper than any JSON reader of the client goes), ``deep-300`` nested 300 levels (deeper than
the SDK's reader goes, about 200), ``result-number`` with ``5`` for a result (not an object),
others ``ok`` and the arguments.
"""

from __future__ import annotations

import json
import sys


def _send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def _tool(name: str) -> dict:
    return {"name": name, "description": f"the tool {name}",
            "inputSchema": {"type": "object", "properties": {"x": {"type": "string"}}}}


def _page(mode: str, cursor: str | None) -> dict:
    if mode == "pager":
        return {"tools": [_tool("t")], "nextCursor": "again"}
    n = int(cursor or 0)
    if mode == "pager-new":
        return {"tools": [_tool(f"t{n}")], "nextCursor": str(n + 1)}
    if mode == "fat-pages":
        return {"tools": [{**_tool(f"t{n}"), "description": "D" * (1 << 20)}],
                "nextCursor": str(n + 1)}
    if mode == "many-pages":
        page: dict = {"tools": [_tool(f"t{n}_{i}") for i in range(10)]}
        if n < 29:
            page["nextCursor"] = str(n + 1)
        return page
    if mode == "bad-schema":
        return {"tools": [{"name": "probe", "inputSchema": {"type": "object", "properties": 5}}]}
    if mode == "twin-tools":
        return {"tools": [_tool("probe"), _tool("lookup"),
                          {**_tool("lookup"), "description": "the other lookup"}]}
    if mode == "twin-pages":
        return {"tools": [_tool("lookup")], "nextCursor": "2"} if n == 0 else {
            "tools": [_tool("probe"), _tool("lookup")]}
    if mode == "list-error":
        raise ValueError("internal error: " + "x" * 100_000)
    return {"tools": [_tool("probe")]}


def _call(mode: str, params: dict) -> dict:
    if mode == "huge":
        return {"content": [{"type": "text", "text": "B" * 3_000_000}]}
    if mode == "huge-image":
        return {"content": [{"type": "image", "data": "A" * 3_000_000, "mimeType": "image/png"}]}
    return {"content": [{"type": "text", "text": "ok " + json.dumps(params.get("arguments"))}]}


_RAW_ANSWERS = {  # written as text: json.dumps cannot write what is nested this deep
    "deep": '{"jsonrpc": "2.0", "id": ID, "result": {"content": [], "structuredContent": '
            '{"a": ' + "[" * 100_000 + "]" * 100_000 + '}}}',
    "deep-300": '{"jsonrpc": "2.0", "id": ID, "result": {"content": [], "structuredContent": '
                '{"a": ' + "[" * 300 + "]" * 300 + '}}}',
    "result-number": '{"jsonrpc": "2.0", "id": ID, "result": 5}',
}


def main() -> None:
    mode = sys.argv[1]
    for line in sys.stdin:
        msg = json.loads(line)
        method, rid = msg.get("method"), msg.get("id")
        if method == "initialize":
            _send({"jsonrpc": "2.0", "id": rid, "result": {
                "protocolVersion": msg["params"]["protocolVersion"],
                "capabilities": {"tools": {}, **({"prompts": {}} if mode == "twin-prompts"
                                                 else {})},
                "serverInfo": {"name": "hostile", "version": "0"}}})
        elif method == "tools/list":
            cursor = (msg.get("params") or {}).get("cursor")
            try:
                _send({"jsonrpc": "2.0", "id": rid, "result": _page(mode, cursor)})
            except ValueError as e:
                _send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32603, "message": str(e)}})
        elif method == "prompts/list":
            _send({"jsonrpc": "2.0", "id": rid, "result": {"prompts": [
                {"name": "greet", "description": "one"}, {"name": "greet"}]}})
        elif method == "tools/call" and mode == "endless-line":
            chunk = ('{"jsonrpc": "2.0", "id": ' + str(rid)
                     + ', "result": {"content": [{"type": "text", "text": "')
            try:
                while True:  # never a newline: the line (one message) never ends
                    sys.stdout.write(chunk)
                    sys.stdout.flush()
                    chunk = "E" * (1 << 20)
            except (BrokenPipeError, OSError):
                return
        elif method == "tools/call" and mode in _RAW_ANSWERS:
            sys.stdout.write(_RAW_ANSWERS[mode].replace("ID", json.dumps(rid)) + "\n")
            sys.stdout.flush()
        elif method == "tools/call":
            _send({"jsonrpc": "2.0", "id": rid, "result": _call(mode, msg["params"])})
        elif rid is not None:
            _send({"jsonrpc": "2.0", "id": rid, "result": {}})


if __name__ == "__main__":
    main()
