"""A Flink configuration file's ``agent:`` section is read within the YAML loader's budget.

``Configuration.load_yaml`` (``env.get_config(path)``, and the ``config.yaml`` of
``FLINK_CONF_DIR`` read when a ported program's environment starts) used ``yaml.safe_load``
and walked the section: 20 lines of aliases ("billion laughs", 4**17 leaves) kept it going
for ever. Now it is ``yaml.read_yaml``'s reading (at most 20,000 nodes once aliases are
expanded, 64 levels deep), a ``YamlError`` naming the file and the line; an ordinary
configuration loads as before.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from flink_agents_py.yaml import YamlError

pytestmark = pytest.mark.timeout(60)
ROOT = Path(__file__).resolve().parents[1]


def _bomb() -> str:
    lines = ["agent:", "  a0: &a0 {x: 1, y: 1, z: 1, w: 1}"]
    for i in range(1, 18):
        lines.append(f"  a{i}: &a{i} {{p: *a{i - 1}, q: *a{i - 1}, r: *a{i - 1}, s: *a{i - 1}}}")
    return "\n".join(lines) + "\n"


def test_an_alias_bomb_in_a_config_file_is_refused_naming_it(tmp_path):
    from flink_agents_py.compat import AgentsExecutionEnvironment

    path = tmp_path / "config.yaml"
    path.write_text(_bomb())
    env = AgentsExecutionEnvironment.get_execution_environment()
    with pytest.raises(YamlError, match=r"config\.yaml:\d+: .*more than 20000 nodes"):
        env.get_config(str(path))


def test_an_ordinary_config_file_still_sets_its_options(tmp_path):
    from flink_agents_py.compat import AgentConfigOptions, AgentsExecutionEnvironment

    path = tmp_path / "config.yaml"
    path.write_text("agent:\n  baseLogDir: logs\n  event-log:\n    level: VERBOSE\n")
    config = AgentsExecutionEnvironment.get_execution_environment().get_config(str(path))
    assert config.get(AgentConfigOptions.BASE_LOG_DIR) == "logs"


SCRIPT = """
    from flink_agents_py.compat import AgentsExecutionEnvironment

    try:
        AgentsExecutionEnvironment.get_execution_environment().get_config("conf/config.yaml")
        print("started")
    except Exception as e:
        print("refused:", type(e).__name__, str(e)[:300])
"""


def test_a_ported_program_reading_a_bombed_config_file_stops_at_once(tmp_path):
    assert ROOT not in tmp_path.resolve().parents
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "config.yaml").write_text(_bomb())
    (tmp_path / "main.py").write_text(textwrap.dedent(SCRIPT))
    proc = subprocess.run(
        [sys.executable, "main.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=50,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "refused: YamlError" in proc.stdout and "config.yaml" in proc.stdout, proc.stdout
