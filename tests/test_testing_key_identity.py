"""The replay-safety checker tells keys apart as the runtime does.

Python merges ``1``, ``True`` and ``1.0`` (and ``0``, ``False``, ``0.0``, ``-0.0``) in sets and
dicts; the runtime keeps them apart (``runtime.encode_key``). The checker's bookkeeping of
calls, outputs and errors is keyed by ``testing._runs.KeyId``, so two keys the runtime keeps
apart are never counted as one (a false "unexpected re-execution", or a real one hidden).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents_py.testing import check_replay_safety

pytestmark = pytest.mark.timeout(120)


def double(x: int) -> int:
    return 2 * x


class Keyed(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        out = await ctx.durable_execute_async(double, 1)
        ctx.send_event(OutputEvent(output={"key": repr(ctx.key), "out": out}))


@pytest.mark.parametrize("keys", [[1, True], [1, 1.0], [True, 1.0, 1], [0, False, 0.0, -0.0],
                                  [(1,), (True,)], ["a", "b"]])
def test_keys_the_runtime_keeps_apart_are_apart_in_the_checker(keys):
    report = check_replay_safety(Keyed(), [{"key": k} for k in keys], other_process=False)
    assert report.ok, str(report)
    assert report.keys == len(keys)


def test_key_ids_follow_the_runtimes_encoding():
    from flink_agents_py.testing._runs import KeyId

    assert KeyId(1) != KeyId(True) and KeyId(1) != KeyId(1.0) and KeyId(0.0) != KeyId(-0.0)
    assert KeyId([1, "a"]) == KeyId((1, "a"))  # a key back from JSON: lists are tuples
    assert KeyId(1) == KeyId(1) and len({KeyId(1), KeyId(True), KeyId(1.0)}) == 3
    assert repr(KeyId(True)) == "True" and repr(KeyId(-0.0)) == "-0.0"
    assert KeyId(float("nan")) == KeyId(float("nan"))  # a rejected key: by type and repr


def test_a_users_script_outside_the_repository(tmp_path):
    (tmp_path / "user_agents.py").write_text(textwrap.dedent("""\
        from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action

        def f(x):
            return x

        class A(Agent):
            @action(InputEvent)
            @staticmethod
            async def go(event: InputEvent, ctx: RunnerContext) -> None:
                await ctx.durable_execute_async(f, 1)
                ctx.send_event(OutputEvent(output={"key": repr(ctx.key)}))
        """))
    (tmp_path / "run.py").write_text(textwrap.dedent("""\
        from flink_agents_py.testing import check_replay_safety
        from user_agents import A

        for keys in ([1, True], [0.0, -0.0]):
            report = check_replay_safety(A(), [{"key": k} for k in keys])
            print(keys, "ok" if report.ok else str(report))
        """))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.run([sys.executable, "run.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=110)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["[1, True] ok", "[0.0, -0.0] ok"], proc.stdout
