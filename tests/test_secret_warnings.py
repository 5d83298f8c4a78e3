"""A known secret quoted in a warning reaches neither stderr nor the logs.

Log records, tracebacks and uncaught exceptions were masked, but a warning (an SDK's
``warnings.warn`` quoting the request URL it retried, ``?key=<api key>``; pydantic's
serialization warning quoting the value it met) was printed to stderr by Python's own
``warnings`` machinery, in clear. The text of a warning is now masked where Python formats it
(``warnings.formatwarning``), which is what stderr shows and what ``logging.captureWarnings``
logs.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap
import uuid

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]

USER_MODULE = '''
import json, logging, os, sys, warnings
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (Agent, InputEvent, OutputEvent, Resource, ResourceDescriptor,
                                 ResourceType, RunnerContext, action)


class Geocoder(Resource):
    """The user's own client of a service taking its key in the URL, as some SDKs do."""

    RESOURCE_TYPE = ResourceType.TOOL
    api_key_env: str = "GEO_API_KEY"

    def lookup(self, place):
        url = f"https://geo.example/v1?q={place}&key={os.environ[self.api_key_env]}"
        warnings.warn(f"retrying {url} (HTTP 503)", ResourceWarning, stacklevel=1)
        return {"place": place, "lat": 1.0}


class Geo(Agent):
    @action(InputEvent)
    @staticmethod
    async def ask(event: InputEvent, ctx: RunnerContext) -> None:
        geo = ctx.get_resource("geo", ResourceType.TOOL)
        found = await ctx.durable_execute_async(geo.lookup, event.input["place"])
        ctx.send_event(OutputEvent(output=found))


if __name__ == "__main__":
    warnings.simplefilter("always")
    if sys.argv[1] == "logging":
        logging.basicConfig(level=logging.WARNING)
        logging.captureWarnings(True)
    agent = Geo()
    agent.add_resource("geo", ResourceType.TOOL, ResourceDescriptor(Geocoder))
    out = (AgentsExecutionEnvironment.local().from_list([{"key": "k", "place": "Oslo"}])
           .apply(agent).collect())
    print(json.dumps(out))
'''


@pytest.mark.parametrize("shown", ["stderr", "logging"])
def test_a_users_sdk_warning_quoting_its_key_shows_it_masked(tmp_path, shown):
    home = tmp_path / "user"
    home.mkdir()
    (home / "geo.py").write_text(textwrap.dedent(USER_MODULE))
    key = f"geo-{uuid.uuid4().hex}"
    env = {**os.environ, "PYTHONPATH": str(REPO), "GEO_API_KEY": key}
    done = subprocess.run(
        [sys.executable, "geo.py", shown],
        cwd=home,
        env=env,
        capture_output=True,
        text=True,
        timeout=150,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert str(REPO) not in str(home)
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [{"place": "Oslo", "lat": 1.0}]
    assert (
        "ResourceWarning: retrying https://geo.example/v1?q=Oslo&key=[REDACTED]" in done.stderr
    ), done.stderr[-3000:]
    assert key not in done.stderr and key not in done.stdout


def test_a_warning_holding_no_secret_is_shown_as_python_shows_it(tmp_path):
    code = textwrap.dedent("""
        import warnings
        from flink_agents_py.api import register_secret
        register_secret("a-registered-secret-value")
        warnings.warn("plain text (1 < 2)", UserWarning)
    """)
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == "<string>:5: UserWarning: plain text (1 < 2)\n"
