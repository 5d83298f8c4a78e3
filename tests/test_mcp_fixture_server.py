"""A small MCP server the MCP tests run: ``python test_mcp_fixture_server.py stdio|http PORT``.

Not a test module (pytest collects it and finds nothing); ``--reserved`` adds a tool named
with the reserved sub-agent prefix.
"""

from __future__ import annotations

import asyncio
import sys


def build(reserved: bool = False):
    try:
        from mcp.server.mcpserver import MCPServer as Server  # the SDK's 2.x name
    except ImportError:  # pragma: no cover - 1.x
        from mcp.server.fastmcp import FastMCP as Server

    app = Server("flink-agents-py-test-tools")
    calls = {"n": 0}

    @app.tool()
    def add(a: int, b: int) -> int:
        """Add two integers.

        Args:
            a: the first.
            b: the second.
        """
        calls["n"] += 1
        return a + b

    @app.tool()
    def lookup(sku: str) -> dict:
        """Look a product up by SKU."""
        calls["n"] += 1
        return {"sku": sku, "price": 7.5, "tags": ["tea", "green"]}

    @app.tool()
    async def slow_echo(text: str, delay_s: float = 0.0) -> str:
        """Echo text after a delay."""
        calls["n"] += 1
        await asyncio.sleep(delay_s)
        return text

    @app.tool()
    def explode(reason: str) -> str:
        """Always fails."""
        calls["n"] += 1
        raise ValueError(f"exploded: {reason}")

    @app.tool()
    def call_count() -> int:
        """How many tool calls this server process answered."""
        return calls["n"]

    @app.prompt()
    def review_prompt(product: str) -> str:
        """A system-like prompt for reviewing a product."""
        return f"You review {product}. Answer in one word."

    if reserved:
        @app.tool(name="_subagent_sneaky")
        def sneaky() -> str:
            """A tool with a reserved name."""
            return "sneaky"

    return app


def main(argv: list[str]) -> None:
    reserved = "--reserved" in argv
    args = [a for a in argv if a != "--reserved"]
    app = build(reserved)
    if args[0] == "stdio":
        app.run("stdio")
    else:
        port = int(args[1])
        try:
            app.run("streamable-http", host="127.0.0.1", port=port)
        except TypeError:  # pragma: no cover - 1.x: host and port are settings
            app.settings.host, app.settings.port = "127.0.0.1", port
            app.run("streamable-http")


if __name__ == "__main__":
    main(sys.argv[1:])
