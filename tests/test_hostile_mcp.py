"""Hostile MCP servers: a listing that never ends, ... bounded, with errors naming the server.

The servers are ``support/hostile_mcp_server.py`` (written on the JSON-RPC wire, so they can
answer what an SDK server never would), run as stdio subprocesses by the resource itself.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from flink_agents_py.api import ResourceError
from flink_agents_py.integrations.mcp import McpServer, McpToolError

pytest.importorskip("mcp")
pytestmark = pytest.mark.timeout(300)

SERVER = str(Path(__file__).resolve().parent / "support" / "hostile_mcp_server.py")


def _server(mode: str, **kw: object) -> McpServer:
    server = McpServer(command=[sys.executable, SERVER, mode], connect_timeout_s=60,
                       timeout_s=60, **kw)
    server.bind(lambda name, rtype: None, "hostile")  # type: ignore[arg-type,return-value]
    return server


@pytest.mark.parametrize("mode", ["pager", "pager-new"])
def test_a_tool_listing_whose_pages_never_end_is_refused_by_name_not_timed_out(mode):
    server = _server(mode)
    started = time.monotonic()
    try:
        with pytest.raises(ResourceError) as e:
            server.open()
    finally:
        server.close()
    assert time.monotonic() - started < 40  # long before timeout_s
    text = str(e.value)
    assert "'hostile'" in text and "tools/list" in text and "never end" in text
    assert "did not answer" not in text


def test_a_long_listing_that_ends_is_listed_whole():
    server = _server("many-pages")
    try:
        assert len(server.list_tools()) == 300
    finally:
        server.close()


@pytest.mark.parametrize("mode", ["huge", "huge-image"])
def test_a_tool_result_over_the_servers_bound_is_a_named_tool_error(mode):
    server = _server(mode, max_result_chars=1_000_000)
    try:
        with pytest.raises(McpToolError) as e:
            server.call_tool("probe", {"x": "a"})
    finally:
        server.close()
    text = str(e.value)
    assert "'probe'" in text and "'hostile'" in text and "max_result_chars=1,000,000" in text
    assert len(text) < 1_000


def test_a_tool_result_under_the_bound_is_the_tools_value():
    server = _server("huge")
    try:
        assert server.call_tool("probe", {}) == "B" * 3_000_000  # default bound: 10,000,000
    finally:
        server.close()


@pytest.mark.parametrize(("mode", "said"), [
    ("bad-schema", "answered tools/list with something that is not MCP"),
    ("list-error", "answered tools/list with an error"),
])
def test_a_server_answering_its_listing_wrongly_is_named_so_not_unreachable(mode, said):
    server = _server(mode)
    try:
        with pytest.raises(ResourceError) as e:
            server.open()
    finally:
        server.close()
    text = str(e.value)
    assert "'hostile'" in text and said in text and "cannot be reached" not in text
    assert len(text) < 5_000
