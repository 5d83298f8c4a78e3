"""The package's warnings are readable when a program has not configured logging.

A program that never calls ``logging.basicConfig`` used to see the framework's warnings
through Python's last-resort handler: bare messages, no level, no logger name, mixed into
its own output. The package configures no root logging, but its own records now carry
``LEVEL logger:``; once the program configures logging, only its handlers show them (once).
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

AGENT = textwrap.dedent("""
    import logging
    import sys

    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.api import Agent, InputEvent, RunnerContext, action

    class Boom(Agent):
        @action(InputEvent)
        @staticmethod
        async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
            raise KeyError("missing")

    if __name__ == "__main__":
        if sys.argv[1:] == ["configured"]:
            logging.basicConfig(format="APP %(levelname)s [%(name)s] %(message)s")
        if sys.argv[1:] == ["off"]:
            logging.lastResort = None
        rows = AgentsExecutionEnvironment.local().from_list([{"key": "a"}]).apply(Boom())
        print("outputs:", rows.collect())
""")


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "boom_agent.py").write_text(AGENT)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "boom_agent.py", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120, check=True)


def _starts(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line and not line.startswith(" ")]


def test_unconfigured_logging_shows_level_and_logger_name(tmp_path):
    done = _run(tmp_path)
    assert done.stdout == "outputs: []\n"
    assert ("WARNING flink_agents_py.runtime: action r0/on_input failed for key 'a': "
            "KeyError: 'missing'") in done.stderr
    assert "WARNING flink_agents_py.errors: unread error record" in done.stderr
    # every line that is not a traceback's (indented or its header) says who wrote it
    bare = [line for line in _starts(done.stderr)
            if not line.startswith(("WARNING flink_agents_py.", "Traceback "))]
    assert bare == []


def test_a_program_that_configures_logging_sees_each_record_once_in_its_format(tmp_path):
    done = _run(tmp_path, "configured")
    assert done.stderr.count("failed for key 'a'") == 1
    assert "APP WARNING [flink_agents_py.runtime] action r0/on_input failed" in done.stderr
    assert "WARNING flink_agents_py.runtime:" not in done.stderr


def test_turning_the_last_resort_off_silences_the_package_too(tmp_path):
    assert "failed for key" not in _run(tmp_path, "off").stderr


def test_the_fallback_leaves_root_logging_unconfigured_and_defers_to_a_package_handler():
    import flink_agents_py  # noqa: F401 - installs the fallback

    assert not [h for h in logging.getLogger().handlers
                if type(h).__module__.startswith("flink_agents_py")]
    seen: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    logger = logging.getLogger("flink_agents_py.observability")
    keep, root = Keep(), logging.getLogger()
    saved = root.handlers[:]
    root.handlers.clear()  # as in a program (pytest's capture handler is on the root)
    logger.addHandler(keep)
    try:
        err = sys.stderr
        sys.stderr = captured = __import__("io").StringIO()
        try:
            logger.warning("hello")
        finally:
            sys.stderr = err
    finally:
        logger.removeHandler(keep)
        root.handlers[:] = saved
    assert seen == ["hello"]
    assert captured.getvalue() == ""


@pytest.mark.parametrize("level", [logging.INFO, logging.DEBUG])
def test_below_warning_is_not_written_unconfigured(level, capsys):
    import flink_agents_py  # noqa: F401

    root = logging.getLogger()
    saved = root.handlers[:]
    root.handlers.clear()
    logger = logging.getLogger("flink_agents_py.runtime")
    old = logger.level
    logger.setLevel(logging.DEBUG)
    try:
        logger.log(level, "quiet")
        logger.warning("loud")
    finally:
        logger.setLevel(old)
        root.handlers[:] = saved
    assert capsys.readouterr().err == "WARNING flink_agents_py.runtime: loud\n"
