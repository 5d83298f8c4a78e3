"""An MCP server's declared output schema is not evaluated in the job's process.

The MCP SDK checks each tool result against the ``outputSchema`` the server listed, with
``jsonschema``, in this process. A server declaring a ``pattern`` that backtracks
(``^(a+)+$``) and answering ``{"v": "aaa...a!"}`` made that check hold the interpreter's lock
for 2^n steps (``re`` never lets go of it): with 40 ``a`` about a day, during which no
thread of the job ran (the operator, other keys, the call's own ``timeout_s``). Now the SDK
is given no schema to check (the result is data for the model, as any tool result).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mcp")
pytestmark = pytest.mark.timeout(300)

ROOT = Path(__file__).resolve().parents[1]
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
PYTHON = str(VENV_PYTHON if VENV_PYTHON.exists() else Path(sys.executable))

SERVER = '''
import json, sys

def send(o):
    sys.stdout.write(json.dumps(o) + "\\n"); sys.stdout.flush()

for line in sys.stdin:
    m = json.loads(line)
    mid, method = m.get("id"), m.get("method")
    if mid is None:
        continue
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": mid, "result": {
            "protocolVersion": m["params"]["protocolVersion"], "capabilities": {"tools": {}},
            "serverInfo": {"name": "patterns", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": mid, "result": {"tools": [{
            "name": "slow", "inputSchema": {"type": "object"},
            "outputSchema": {"type": "object", "properties": {
                "v": {"type": "string", "pattern": "^(a+)+$"}}}}]}})
    else:
        v = "a" * int(sys.argv[1]) + "!"
        send({"jsonrpc": "2.0", "id": mid, "result": {
            "content": [{"type": "text", "text": json.dumps({"v": v})}],
            "structuredContent": {"v": v}}})
'''

USER_MODULE = '''
import json
import sys
import threading
import time

from flink_agents_py.integrations.mcp import McpServer

ticks = []


def tick():
    while True:
        ticks.append(time.monotonic())
        time.sleep(0.05)


server = McpServer(command=[sys.executable, "pattern_server.py", sys.argv[1]], timeout_s=10)
server.open()
threading.Thread(target=tick, daemon=True).start()
time.sleep(0.2)
start = time.monotonic()
value = server.call_tool("slow", {})
took = time.monotonic() - start
server.close()
stall = max(b - a for a, b in zip(ticks, ticks[1:]))
print(json.dumps({"value": value, "took": took, "stall": stall}))
'''


def test_a_backtracking_pattern_in_an_output_schema_stalls_nothing(tmp_path):
    """25 ``a``: about 4 s of the interpreter's lock held before (2^25 steps), 0 s now."""
    work = tmp_path / "user"
    work.mkdir()
    assert ROOT not in work.resolve().parents
    (work / "pattern_server.py").write_text(SERVER)
    (work / "my_tools.py").write_text(USER_MODULE)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # this tree's package, as installed
    proc = subprocess.run([PYTHON, "my_tools.py", "25"], cwd=work, env=env,
                          capture_output=True, text=True, timeout=240, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["value"] == {"v": "a" * 25 + "!"}  # the result is data, schema or not
    assert got["took"] < 1.5, got
    assert got["stall"] < 1.5, got  # the ticking thread was never held up
