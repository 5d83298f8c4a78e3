"""A hostile MCP server's prompts are held to its tools' rules.

A ``prompts/get`` answered with an error quoting the secret the server was given, with
something that is not MCP, or with a huge prompt: the server's own exception (the SDK's
``MCPError``, or pydantic's ``ValidationError`` quoting the answer) reached the caller
with the secret in clear in its message and ``args``, naming neither the prompt nor the
server, and a 30 MB prompt was handed on whole (a tool's result is refused past the
server's ``max_result_chars``). Now each is a ``ResourceError`` naming the prompt and the
server, the secret masked in it and in its cause, and a prompt longer than
``max_result_chars`` is refused naming the bound.
"""

from __future__ import annotations

import sys
import traceback

import pytest
from support.raw_mcp import raw_server

from flink_agents_py.api import ResourceError
from flink_agents_py.integrations.mcp import McpServer

pytest.importorskip("mcp")
pytestmark = pytest.mark.timeout(120)

SECRET = "tok-PROMPT-SECRET-7c1f22a9"

SERVER = raw_server('''
    TOKEN = os.environ["TOKEN"]

    def handle(mid, method, m):
        if method == "tools/list":
            answer(mid, {"tools": []})
        elif method == "prompts/list":
            answer(mid, {"prompts": [{"name": n} for n in ("huge", "err", "bad", "fine")]})
        else:
            n = m["params"]["name"]
            text = {"huge": "P" * 200_000, "fine": "hello"}.get(n)
            if n == "err":
                send({"jsonrpc": "2.0", "id": mid, "error": {
                    "code": -32000, "message": "denied for token " + TOKEN}})
            elif n == "bad":
                answer(mid, {"messages": "no " + TOKEN})
            else:
                answer(mid, {"messages": [
                    {"role": "user", "content": {"type": "text", "text": text}}]})

    serve(handle, {"tools": {}, "prompts": {}})
''')



@pytest.fixture
def server(tmp_path, monkeypatch):
    script = tmp_path / "prompts_server.py"
    script.write_text(SERVER)
    monkeypatch.setenv("PROMPT_TOKEN", SECRET)
    srv = McpServer(command=[sys.executable, str(script)], secret_env={"TOKEN": "PROMPT_TOKEN"},
                    list_at_plan_build=False, max_result_chars=100_000)
    srv.open()
    yield srv
    srv.close()


def _shown(e: BaseException) -> str:
    return "".join(traceback.format_exception(e)) + repr(e.args) + repr(e.__cause__.args
                                                                         if e.__cause__ else ())


@pytest.mark.parametrize("prompt, why", [("err", "denied for token [REDACTED]"),
                                         ("bad", "not MCP")])
def test_a_prompt_the_server_fails_is_a_resource_error_naming_it_with_the_secret_masked(
        server, prompt, why):
    with pytest.raises(ResourceError) as err:
        server.get_prompt(prompt)
    assert f"MCP prompt {prompt!r}" in str(err.value) and why in str(err.value)
    assert SECRET not in _shown(err.value)


def test_a_prompt_over_max_result_chars_is_refused_naming_the_bound(server):
    with pytest.raises(ResourceError, match="max_result_chars=100,000"):
        server.get_prompt("huge")
    [message] = server.get_prompt("fine")  # the session goes on
    assert message.content == "hello"
