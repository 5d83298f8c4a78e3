"""A known secret in an exception Python could not raise reaches stderr masked.

Uncaught exceptions (``sys.excepthook``, ``threading.excepthook``) were printed masked, but
Python prints a third report itself: "Exception ignored in ..." (``sys.unraisablehook``), for
an exception raised where nobody can catch it, a ``__del__`` above all (an SDK client closing
its session when it is collected, its error quoting the URL with the key), a weak reference's
callback, an async generator's clean-up. It reached stderr in clear. It is now printed as
Python prints it, masked.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap
import uuid

REPO = pathlib.Path(__file__).resolve().parents[1]

USER_MODULE = '''
import gc, json, os
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (Agent, InputEvent, OutputEvent, Resource, ResourceDescriptor,
                                 ResourceType, RunnerContext, action)


class Session:
    """An SDK's session: closing it at collection fails, quoting its URL."""

    def __init__(self, url):
        self.url = url

    def __del__(self):
        raise ConnectionResetError(f"closing {self.url}: connection reset")


class Search(Resource):
    RESOURCE_TYPE = ResourceType.TOOL
    api_key_env: str = "SEARCH_KEY"

    def find(self, q):
        session = Session(f"https://search.example/?key={os.environ[self.api_key_env]}")
        del session  # collected here: Python reports what __del__ raised
        return [q]


class Finder(Agent):
    @action(InputEvent)
    @staticmethod
    async def ask(event: InputEvent, ctx: RunnerContext) -> None:
        search = ctx.get_resource("search", ResourceType.TOOL)
        ctx.send_event(OutputEvent(output=await ctx.durable_execute_async(search.find, "x")))


if __name__ == "__main__":
    agent = Finder()
    agent.add_resource("search", ResourceType.TOOL, ResourceDescriptor(Search))
    out = (AgentsExecutionEnvironment.local().from_list([{"key": "k"}]).apply(agent)
           .collect())
    gc.collect()
    print(json.dumps(out))
'''


def test_a_users_sdk_failing_in_del_shows_its_key_masked(tmp_path):
    home = tmp_path / "user"
    home.mkdir()
    (home / "finder.py").write_text(textwrap.dedent(USER_MODULE))
    key = f"sk{uuid.uuid4().hex}"[:30]
    env = {**os.environ, "PYTHONPATH": str(REPO), "SEARCH_KEY": key}
    done = subprocess.run(
        [sys.executable, "finder.py"],
        cwd=home,
        env=env,
        capture_output=True,
        text=True,
        timeout=150,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert str(REPO) not in str(home)
    assert done.stdout.strip().splitlines()[-1] == '[["x"]]'
    assert "Exception ignored in: <function Session.__del__ at " in done.stderr, done.stderr
    assert (
        "ConnectionResetError: closing https://search.example/?key=[REDACTED]: "
        "connection reset" in done.stderr
    ), done.stderr
    assert key not in done.stderr


def test_an_unraisable_report_holding_no_secret_reads_as_pythons(tmp_path):
    code = textwrap.dedent("""
        import sys
        from flink_agents_py.api import register_secret
        register_secret("a-registered-secret-value")
        class A:
            def __del__(self):
                raise ValueError("plain")
        a = A()
        del a
        print(sys.unraisablehook is sys.__unraisablehook__)
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
    assert done.stdout == "False\n"
    lines = done.stderr.splitlines()
    assert lines[0].startswith("Exception ignored in: <function A.__del__ at 0x")
    assert lines[1:] == [
        "Traceback (most recent call last):",
        '  File "<string>", line 7, in __del__',
        "ValueError: plain",
    ]


def test_an_atexit_callback_failing_with_a_key_shows_it_masked(tmp_path):
    """A clean-up at exit (an SDK closing its pool) failing with the key in its message."""
    key = f"ax{uuid.uuid4().hex}"
    code = textwrap.dedent("""
        import atexit, os
        from flink_agents_py.api import secret_from_env
        secret_from_env("POOL_KEY")
        def close_pool():
            raise RuntimeError("pool " + os.environ["POOL_KEY"] + " did not close")
        atexit.register(close_pool)
    """)
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(REPO), "POOL_KEY": key},
    )
    assert "Exception ignored in atexit callback" in done.stderr, done.stderr
    assert "RuntimeError: pool [REDACTED] did not close" in done.stderr, done.stderr
    assert key not in done.stderr
