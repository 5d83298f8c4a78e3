"""Flink Agents' short-term memory TTL options: a program setting them (TTL off) runs.

Flink Agents' short-term memory TTL e2e test imports ``ShortTermMemoryTtlUpdate`` and
``ShortTermMemoryTtlVisibility`` and sets ``SHORT_TERM_MEMORY_STATE_TTL_UPDATE_TYPE`` /
``..._VISIBILITY`` beside ``SHORT_TERM_MEMORY_STATE_TTL_MS``. Ported with its imports
changed, it stopped on the import; now the options are taken (no effect: memory never
expires here) and a TTL above 0 stays a ``UsageError``.
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

PROGRAM = """
    import sys

    from flink_agents_py.compat import (
        Agent, AgentExecutionOptions, AgentsExecutionEnvironment, Event, InputEvent,
        OutputEvent, RunnerContext, ShortTermMemoryTtlUpdate, ShortTermMemoryTtlVisibility,
        action)


    class TtlAgent(Agent):
        @action(InputEvent.EVENT_TYPE)
        @staticmethod
        def input(event: Event, ctx: RunnerContext) -> None:
            key = InputEvent.from_event(event).input
            existing = ctx.short_term_memory.get(key)
            ctx.short_term_memory.set(key, (existing or 0) + 1)
            ctx.send_event(OutputEvent(output=f"{key}|{'NEW' if existing is None else 'EXISTING'}"))


    env = AgentsExecutionEnvironment.get_execution_environment()
    config = env.get_config()
    config.set(AgentExecutionOptions.SHORT_TERM_MEMORY_STATE_TTL_MS, int(sys.argv[1]))
    config.set(AgentExecutionOptions.SHORT_TERM_MEMORY_STATE_TTL_UPDATE_TYPE,
               ShortTermMemoryTtlUpdate.ON_CREATE_AND_WRITE)
    config.set(AgentExecutionOptions.SHORT_TERM_MEMORY_STATE_TTL_VISIBILITY,
               ShortTermMemoryTtlVisibility.NEVER_RETURN_EXPIRED)
    out = env.from_list([{"key": "k", "value": v} for v in ("event1", "event2", "event1")]
                        ).apply(TtlAgent()).to_list()
    env.execute()
    print([o["k"] for o in out])
"""


def _run(tmp_path: Path, ttl_ms: int) -> subprocess.CompletedProcess[str]:
    (tmp_path / "prog.py").write_text(textwrap.dedent(PROGRAM))
    return subprocess.run([str(PYTHON), "prog.py", str(ttl_ms)], cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=50)


def test_ttl_update_type_and_visibility_are_taken_with_ttl_disabled(tmp_path: Path) -> None:
    proc = _run(tmp_path, 0)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "['event1|NEW', 'event2|NEW', 'event1|EXISTING']"


def test_a_ttl_above_zero_is_still_refused_naming_the_option(tmp_path: Path) -> None:
    proc = _run(tmp_path, 1000)
    assert proc.returncode != 0
    assert "SHORT_TERM_MEMORY_STATE_TTL_MS" in proc.stderr
    assert "is not offered" in proc.stderr


def test_the_options_keys_and_defaults_are_flink_agents() -> None:
    from flink_agents_py.compat import (
        AgentExecutionOptions,
        ShortTermMemoryTtlUpdate,
        ShortTermMemoryTtlVisibility,
    )

    update = AgentExecutionOptions.SHORT_TERM_MEMORY_STATE_TTL_UPDATE_TYPE
    visibility = AgentExecutionOptions.SHORT_TERM_MEMORY_STATE_TTL_VISIBILITY
    assert update.get_key() == "short-term-memory.state-ttl.update-type"
    assert update.get_default_value() is ShortTermMemoryTtlUpdate.ON_READ_AND_WRITE
    assert visibility.get_key() == "short-term-memory.state-ttl.visibility"
    assert visibility.get_type() is ShortTermMemoryTtlVisibility
