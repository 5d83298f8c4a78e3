"""The skill sandbox's precondition for tests: bubblewrap can run here.

``require_bubblewrap()`` skips the calling test, naming why, where bubblewrap is missing or
user namespaces are refused; under CI (``CI`` set to anything but ``false``/``0``) it fails
instead: CI installs bubblewrap (``.ci/run``) and the sandbox tests must run there.
"""

from __future__ import annotations

import os

import pytest

from flink_agents_py.skills import bubblewrap_problem


def require_bubblewrap() -> None:
    """Skip (or, under CI, fail) the calling test when the skill sandbox cannot run here."""
    problem = bubblewrap_problem()
    if problem is None:
        return
    if os.environ.get("CI", "").lower() not in ("", "0", "false"):
        pytest.fail(f"CI must run the skill sandbox tests: {problem}")
    pytest.skip(f"the skill sandbox cannot run here: {problem}")
