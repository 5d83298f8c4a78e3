"""Flink Agents' injected tool arguments (not offered): a ported program says so clearly.

Flink Agents' tool parameter injection e2e agent (and its checkpoint recovery agent) import
``InjectedArg`` and declare ``@tool(injected_args={...: InjectedArg.from_config(key)})``.
Ported with its imports changed, such a program stopped with ``ImportError: cannot import
name 'InjectedArg'`` (and ``@tool(injected_args=...)`` with a ``TypeError``), saying nothing
of the feature or where it is documented.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VENV_PY = ROOT / ".venv" / "bin" / "python"
PYTHON = VENV_PY if VENV_PY.exists() else Path(sys.executable)

pytestmark = pytest.mark.timeout(60)

AGENT = """
    from flink_agents_py.compat import (Agent, InjectedArg, ResourceDescriptor,
                                        chat_model_setup, tool)


    class ToolParameterInjectionAgent(Agent):
        @tool(injected_args={"tenant_id": InjectedArg.from_config("tenant_id")})
        @staticmethod
        def query_order(order_id: str, tenant_id: str) -> str:
            \"\"\"Query order in the current tenant.\"\"\"
            return f"checked:{tenant_id}:{order_id}"
"""

DECORATOR_ONLY = """
    from flink_agents_py.compat import tool

    TENANT = object()


    @tool(injected_args={"tenant_id": TENANT})
    def query_order(order_id: str, tenant_id: str) -> str:
        \"\"\"Query order in the current tenant.\"\"\"
        return f"checked:{tenant_id}:{order_id}"
"""


def _run(tmp_path: Path, script: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "prog.py").write_text(textwrap.dedent(script))
    environ = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([str(PYTHON), "prog.py"], cwd=tmp_path, env=environ,
                          capture_output=True, text=True, timeout=50)


@pytest.mark.parametrize(("script", "what"), [(AGENT, "InjectedArg.from_config"),
                                              (DECORATOR_ONLY, "@tool(injected_args=...)")])
def test_injected_tool_arguments_fail_naming_the_feature_and_the_names_page(
        tmp_path: Path, script: str, what: str) -> None:
    proc = _run(tmp_path, script)
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"NotImplementedError: {what}: "), proc.stderr
    assert "injected tool arguments" in last
    assert "functools.partial" in last
    assert "docs/reference/flink-agents-names.md" in last


def test_tool_without_injected_args_is_our_tool() -> None:
    from flink_agents_py.api import FunctionTool
    from flink_agents_py.compat import tool

    @tool(name="shout")
    def loud(text: str) -> str:
        """Shout.

        Args:
            text: what to shout.
        """
        return text.upper()

    assert isinstance(loud, FunctionTool) or callable(loud)
    assert tool(injected_args={}) is not None
