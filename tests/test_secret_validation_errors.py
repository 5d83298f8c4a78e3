"""A pydantic ``ValidationError`` quoting a known key shows no part of it.

pydantic writes a long input it quotes cut to its first and last 24 characters
(``input_value='sk-live-abcdefghij...yyyy'``): masking that text afterwards found no whole
key, and 24 of its characters reached the error record, the failure log, a log record's
traceback, ``scrub_exception``'s result and the traceback of an exception nobody caught. The
error is now rebuilt from its whole inputs, masked, before its text is made.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

from pydantic import BaseModel, ValidationError

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent, InputEvent, RunnerContext, action, register_secret
from flink_agents_py.api.internal import scrub_exception

ROOT = Path(__file__).resolve().parents[1]


def _key() -> str:
    key = f"Vk{uuid.uuid4().hex}"
    register_secret(key)
    return key


def assert_no_piece(key: str, text: str, where: str) -> None:
    for i in range(len(key) - 7):
        assert key[i:i + 8] not in text, f"{key[i:i + 8]!r} of the key reached {where}"


class Settings(BaseModel):
    """A config an action checks."""

    retries: int


def _failing(key: str) -> ValidationError:
    try:
        Settings.model_validate({"retries": key + "y" * 100})
    except ValidationError as e:
        return e
    raise AssertionError("validated")


class Checker(Agent):
    """Checks a config holding the key; the check fails."""

    @action(InputEvent)
    @staticmethod
    def check(event: InputEvent, ctx: RunnerContext) -> None:
        """Validate the config the record names (it fails, quoting the key)."""
        Settings.model_validate({"retries": os.environ["VALIDATED_KEY"] + "y" * 100})


def test_a_failed_action_s_error_record_and_log_hold_no_part_of_the_key(monkeypatch, caplog):
    key = _key()
    monkeypatch.setenv("VALIDATED_KEY", key)
    job = AgentsExecutionEnvironment.local().from_list([{"key": "a"}]).apply(Checker())
    with caplog.at_level(logging.INFO):
        result = job.run()
    [error] = result.errors
    assert error.error_type == "ValidationError" and "[REDACTED]" in error.message
    for where, text in (("the message", error.message), ("the traceback", error.traceback),
                        ("the log", caplog.text)):
        assert_no_piece(key, text or "", where)


def test_scrub_exception_and_log_records_mask_it_in_a_chain(caplog):
    key = _key()
    try:
        try:
            raise _failing(key)
        except ValidationError as e:
            raise RuntimeError("loading the settings failed") from e
    except RuntimeError as e:
        logging.getLogger("user.app").error("failed", exc_info=True)
        scrubbed = scrub_exception(e)
    assert "[REDACTED]" in caplog.text and "loading the settings failed" in caplog.text
    assert_no_piece(key, caplog.text, "a log record's traceback")
    cause = scrubbed.__cause__
    assert isinstance(cause, ValidationError) and cause.errors()[0]["loc"] == ("retries",)
    assert_no_piece(key, str(cause), "the scrubbed cause")


def test_a_users_script_s_uncaught_validation_error_prints_no_part_of_the_key(tmp_path):
    key = f"Vk{uuid.uuid4().hex}"
    script = tmp_path / "settings_check.py"
    script.write_text(textwrap.dedent("""
        import os
        from pydantic import BaseModel
        from flink_agents_py.api import register_secret

        class Settings(BaseModel):
            retries: int

        register_secret(os.environ["MY_KEY"])
        Settings.model_validate({"retries": os.environ["MY_KEY"] + "y" * 100})
    """))
    env = {**os.environ, "MY_KEY": key, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 1 and "ValidationError" in done.stderr, done.stderr
    assert "[REDACTED]" in done.stderr
    assert_no_piece(key, done.stdout + done.stderr, "the script's output")
