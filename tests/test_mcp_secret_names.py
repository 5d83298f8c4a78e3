"""An MCP server naming a tool or a prompt after the secret it was given is refused.

A server's tool descriptions, input schemas, prompt texts and results are masked (a server
quoting the token it was given hands it to nobody), but a tool's name was kept as the
server wrote it, since it is how the server is called: offered to the model, the name went
in clear to the model's provider with every chat request. A name holding a known secret is
now refused when the server opens, naming the server (as a reserved name is), and nothing
of it is offered.
"""

from __future__ import annotations

import sys

import pytest
from support.raw_mcp import raw_server

from flink_agents_py.api import ResourceError
from flink_agents_py.integrations.mcp import McpServer

pytest.importorskip("mcp")
pytestmark = pytest.mark.timeout(120)

SECRET = "tok-NAMED-SECRET-4d91ce07"

SERVER = raw_server('''
    TOKEN, KIND = os.environ["TOKEN"], sys.argv[1]

    def handle(mid, method, m):
        if method == "tools/list":
            name = "lookup_" + TOKEN if KIND == "tool" else "lookup"
            answer(mid, {"tools": [{"name": name, "inputSchema": {"type": "object"}}]})
        elif method == "prompts/list":
            name = "ask_" + TOKEN if KIND == "prompt" else "ask"
            answer(mid, {"prompts": [{"name": name}]})

    serve(handle, {"tools": {}, "prompts": {}})
''')



@pytest.mark.parametrize("kind", ["tool", "prompt"])
def test_a_name_holding_the_servers_secret_is_refused_when_it_opens(tmp_path, monkeypatch,
                                                                     kind):
    script = tmp_path / "named_server.py"
    script.write_text(SERVER)
    monkeypatch.setenv("NAMED_TOKEN", SECRET)
    srv = McpServer(command=[sys.executable, str(script), kind],
                    secret_env={"TOKEN": "NAMED_TOKEN"}, list_at_plan_build=False)
    with pytest.raises(ResourceError) as err:
        srv.open()
    assert f"advertises a {kind} whose name holds a secret" in str(err.value)
    assert SECRET not in str(err.value)


def test_a_server_naming_nothing_so_opens(tmp_path, monkeypatch):
    script = tmp_path / "named_server.py"
    script.write_text(SERVER)
    monkeypatch.setenv("NAMED_TOKEN", SECRET)
    srv = McpServer(command=[sys.executable, str(script), "none"],
                    secret_env={"TOKEN": "NAMED_TOKEN"}, list_at_plan_build=False)
    srv.open()
    try:
        assert [t.name for t in srv.list_tools()] == ["lookup"]
    finally:
        srv.close()
