"""Durable calls at their edges, each from a user's script run in its own process.

Scenarios taken from bug reports of other durable-execution engines: a function whose
failure is a ``StopIteration`` (``next()`` on an empty iterator), durable calls made inside a
durable call's function, and exceptions whose attributes live outside their ``args``. Each
script runs the agent fault-free and restored at every point a checkpoint could be taken.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.timeout(180)


def run_script(tmp_path: pathlib.Path, body: str) -> dict:
    """Run ``body`` as ``tmp_path/user_job.py``; its last stdout line is JSON."""
    script = tmp_path / "user_job.py"
    script.write_text(textwrap.dedent(body))
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60, env={"PYTHONPATH": str(ROOT),
                                                       "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_function_raising_stop_iteration_fails_its_call_instead_of_hanging_it(tmp_path):
    # `next(x for x in items if ...)` with no match raises StopIteration in the worker
    # thread: asyncio cannot put it on a future, so the call never completed and the key
    # hung for ever (the script's own timeout would fire)
    out = run_script(tmp_path, """
        import json
        from flink_agents_py import AgentsExecutionEnvironment
        from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
        from flink_agents_py.testing import CallCounter, check_replay_safety

        CALLS = CallCounter()

        def first_match(items, want):
            CALLS.count("first_match")
            return next(i for i in items if i == want)

        class Finder(Agent):
            @action(InputEvent)
            @staticmethod
            async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
                try:
                    got = await ctx.durable_execute_async(first_match, [1, 2], event.input["want"])
                except RuntimeError as e:
                    got = f"{type(e).__name__}: {e} (from {type(e.__cause__).__name__})"
                ctx.send_event(OutputEvent(output={"key": ctx.key, "got": got}))

        records = [{"key": "a", "want": 3}, {"key": "b", "want": 2}]
        result = AgentsExecutionEnvironment.local().from_list(records).apply(Finder()).run()
        live = CALLS.total
        report = check_replay_safety(Finder(), records, reset=CALLS.reset, other_process=False)
        print(json.dumps({"outputs": sorted(result.outputs, key=lambda o: o["key"]),
                          "errors": len(result.errors), "calls": live, "ok": report.ok,
                          "table": report.table}))
    """)
    assert out["outputs"] == [
        {"key": "a", "got": "RuntimeError: generator raised StopIteration (from StopIteration)"},
        {"key": "b", "got": 2}]
    assert out["errors"] == 0 and out["calls"] == 2
    assert out["ok"], out["table"]


def test_durable_calls_inside_a_durable_calls_function_are_part_of_it(tmp_path):
    # a helper that makes durable calls, itself run through ctx.durable_execute(_async): its
    # inner calls took call identities a replay (which does not run the helper) never takes
    # again, so every later call of the action got the outcome recorded for the one before
    # it (a ReplayDivergenceError, or silently another call's result)
    out = run_script(tmp_path, """
        import json
        from flink_agents_py import AgentsExecutionEnvironment
        from flink_agents_py.api import (Agent, InputEvent, OutputEvent, RunnerContext,
                                         UsageError, action)
        from flink_agents_py.testing import CallCounter, check_replay_safety

        CALLS = CallCounter()

        def price(item):
            CALLS.count(f"price {item}")
            return len(item)

        class Shop(Agent):
            @action(InputEvent)
            @staticmethod
            async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
                def basket():  # sync, in the action's thread
                    CALLS.count("basket")
                    return ctx.durable_execute(price, "fig") + ctx.durable_execute(price, "kiwi")

                async def basket_async():  # async, on the I/O executor's loop
                    CALLS.count("basket_async")
                    return (await ctx.durable_execute_async(price, "lime")
                            + await ctx.durable_execute_async(price, "plum"))

                def shout():  # an event sent inside a durable call would not be sent again
                    try:
                        ctx.send_event(OutputEvent(output={"key": ctx.key}))
                    except UsageError as e:
                        return str(e)
                    return "sent"

                got = [ctx.durable_execute(basket), await ctx.durable_execute_async(basket)]
                got.append(await ctx.durable_execute_async(basket_async))
                got.append(await ctx.durable_execute_async(price, "apple"))
                got.append(ctx.durable_execute(price, "pear"))
                refused = await ctx.durable_execute_async(shout)
                ctx.send_event(OutputEvent(output={"key": ctx.key, "got": got,
                                                   "refused": refused}))

        records = [{"key": "a"}, {"key": "b"}]
        result = AgentsExecutionEnvironment.local().from_list(records).apply(Shop()).run()
        live = CALLS.as_dict()
        report = check_replay_safety(Shop(), records, reset=CALLS.reset, other_process=False)
        print(json.dumps({"outputs": result.outputs, "errors": [e.message for e in result.errors],
                          "calls": live, "ok": report.ok, "table": report.table}))
    """)
    assert out["errors"] == []
    [a, b] = sorted(out["outputs"], key=lambda o: o["key"])
    assert a["got"] == b["got"] == [7, 7, 8, 5, 4]
    assert a["refused"].startswith("ctx.send_event called inside the function of a durable call")
    assert "shout" in a["refused"]
    assert out["calls"]["basket"] == 4 and out["calls"]["price fig"] == 4
    assert out["calls"]["basket_async"] == 2 and out["calls"]["price plum"] == 2
    assert out["ok"], out["table"]


def test_a_base_exception_from_a_durable_function_fails_the_action_not_the_job(tmp_path):
    # an asyncio.CancelledError (an HTTP client's inner task cancelled) or a SystemExit from
    # a function on the I/O executor was thrown into the action as it was: past its `except
    # Exception`, out of the runner, stopping the job; a replay handed a DurableExecutionError
    out = run_script(tmp_path, """
        import asyncio, json
        from flink_agents_py import AgentsExecutionEnvironment
        from flink_agents_py.api import (Agent, DurableExecutionError, InputEvent, OutputEvent,
                                         RunnerContext, action)
        from flink_agents_py.testing import CallCounter, check_replay_safety

        CALLS = CallCounter()

        async def fetch(url):
            CALLS.count("fetch")
            raise asyncio.CancelledError(f"request to {url} cancelled")

        def leave(code):
            CALLS.count("leave")
            raise SystemExit(code)

        class Caller(Agent):
            @action(InputEvent)
            @staticmethod
            async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
                fn, arg = (fetch, "http://x") if event.input["how"] == "fetch" else (leave, 3)
                if event.input.get("catch"):
                    try:
                        await ctx.durable_execute_async(fn, arg)
                    except DurableExecutionError as e:
                        ctx.send_event(OutputEvent(output={"key": ctx.key, "caught": str(e),
                                                           "cause": type(e.__cause__).__name__}))
                    return
                await ctx.durable_execute_async(fn, arg)

        records = [{"key": "a", "how": "fetch"}, {"key": "b", "how": "leave"},
                   {"key": "c", "how": "fetch", "catch": True}, {"key": "a", "how": "leave"}]
        result = AgentsExecutionEnvironment.local().from_list(records).apply(Caller()).run()
        report = check_replay_safety(Caller(), records, reset=CALLS.reset, other_process=False)
        print(json.dumps({"outputs": result.outputs,
                          "errors": sorted((str(e.key), e.seq, e.error_type, e.message)
                                           for e in result.errors),
                          "ok": report.ok, "table": report.table}))
    """)
    cancelled = "recorded failure asyncio.exceptions:CancelledError: request to http://x cancelled"
    assert out["errors"] == [
        ["a", 0, "DurableExecutionError", cancelled],
        ["a", 1, "DurableExecutionError", "recorded failure builtins:SystemExit: 3"],
        ["b", 0, "DurableExecutionError", "recorded failure builtins:SystemExit: 3"]]
    assert out["outputs"] == [{"key": "c", "caught": cancelled, "cause": "CancelledError"}]
    assert out["ok"], out["table"]


def test_an_os_error_replays_with_its_errno_and_file_name(tmp_path):
    # OSError(errno, strerror, filename) keeps the file name outside its args: a replay
    # rebuilt it from its message, so e.errno was None and e.filename gone, and an action
    # branching on errno.ENOENT took the other branch after a restore
    out = run_script(tmp_path, """
        import errno, json
        from flink_agents_py import AgentsExecutionEnvironment
        from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
        from flink_agents_py.testing import CallCounter, check_replay_safety

        CALLS = CallCounter()

        def read(path):
            CALLS.count("read")
            if path.endswith(".py"):
                raise ModuleNotFoundError(f"No module named {path!r}", name=path, path="/lib")
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", path)

        class Reader(Agent):
            @action(InputEvent)
            @staticmethod
            async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
                try:
                    await ctx.durable_execute_async(read, event.input["path"])
                except OSError as e:
                    seen = {"missing": e.errno == errno.ENOENT, "errno": e.errno,
                            "file": e.filename, "str": str(e), "args": list(e.args)}
                except ImportError as e:
                    seen = {"name": e.name, "path": e.path, "str": str(e)}
                await ctx.durable_execute_async(CALLS.count, "after")
                ctx.send_event(OutputEvent(output={"key": ctx.key, **seen}))

        records = [{"key": "a", "path": "/data/in.txt"}, {"key": "b", "path": "mod.py"}]
        result = AgentsExecutionEnvironment.local().from_list(records).apply(Reader()).run()
        report = check_replay_safety(Reader(), records, reset=CALLS.reset, other_process=False)
        print(json.dumps({"outputs": sorted(result.outputs, key=lambda o: o["key"]),
                          "ok": report.ok, "table": report.table}))
    """)
    assert out["outputs"] == [
        {"key": "a", "missing": True, "errno": 2, "file": "/data/in.txt",
         "str": "[Errno 2] No such file or directory: '/data/in.txt'",
         "args": [2, "No such file or directory"]},
        {"key": "b", "name": "mod.py", "path": "/lib", "str": "No module named 'mod.py'"}]
    assert out["ok"], out["table"]


def test_an_exception_class_a_replay_cannot_import_is_handed_over_alike_live(tmp_path):
    # a class defined in a function cannot be imported by a replay, which rebuilt it as a
    # DurableExecutionError: `except Refused` matched live, and stopped matching after a
    # restore (the run failed where the fault-free one went on)
    out = run_script(tmp_path, """
        import json
        from flink_agents_py import AgentsExecutionEnvironment
        from flink_agents_py.api import (Agent, DurableExecutionError, InputEvent, OutputEvent,
                                         RunnerContext, action)
        from flink_agents_py.testing import CallCounter, check_replay_safety

        CALLS = CallCounter()

        def make_client():
            class Refused(Exception):
                pass

            def call(order):
                CALLS.count("call")
                raise Refused(f"order {order} refused")
            return call

        CALL = make_client()

        class Orders(Agent):
            @action(InputEvent)
            @staticmethod
            async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
                try:
                    await ctx.durable_execute_async(CALL, event.input["order"])
                except DurableExecutionError as e:  # its __cause__: Refused live
                    got = {"error": str(e)}
                await ctx.durable_execute_async(CALLS.count, "after")
                ctx.send_event(OutputEvent(output={"key": ctx.key, **got}))

        records = [{"key": "a", "order": 7}]
        result = AgentsExecutionEnvironment.local().from_list(records).apply(Orders()).run()
        report = check_replay_safety(Orders(), records, reset=CALLS.reset, other_process=False)
        print(json.dumps({"outputs": result.outputs, "errors": [e.message for e in result.errors],
                          "ok": report.ok, "table": report.table}))
    """)
    assert out["errors"] == []
    assert out["outputs"] == [{
        "key": "a",
        "error": "recorded failure __main__:make_client.<locals>.Refused: order 7 refused"}]
    assert out["ok"], out["table"]
