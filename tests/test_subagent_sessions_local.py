"""Sub-agent session ids on the local runner, run the way a user runs it.

A user's module (in a directory outside the repository) has an agent whose deferred
sub-agent posts to a remote that keeps its results by ``session_id#call_id`` (what the docs
recommend) and answers a key it has seen with the result it kept. Each local job is a new
job: before, every job's keys started at ``<key>/r0`` again, so the second job's calls got
the first job's answers (stale results, silently). A restore from a snapshot is the same job
and keeps the ids, so the remote dedupes the call in flight at the snapshot.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.timeout(120)

ROOT = pathlib.Path(__file__).resolve().parents[1]

MODULE = textwrap.dedent('''
    import json, pathlib, sys
    from flink_agents_py.api import (Agent, DeferredSubagentSetup, InputEvent, OutputEvent,
                                     ResourceDescriptor, ResourceType, RunnerContext,
                                     SubagentResult, action)
    from flink_agents_py.local import LocalExecutionEnvironment

    STORE = pathlib.Path(sys.argv[1])  # the remote's results, by session_id#call_id

    class Remote(DeferredSubagentSetup):
        def prepare(self, ctx, input, session_id, call_id):
            key = f"{session_id}#{call_id}"
            def call():
                kept = json.loads(STORE.read_text()) if STORE.exists() else {}
                if key not in kept:  # a new request: answer it and keep the answer
                    kept[key] = f"reviewed {input}"
                    STORE.write_text(json.dumps(kept))
                return SubagentResult.ok({"answer": kept[key], "key": key})
            return key, call, None

    class Parent(Agent):
        @action(InputEvent)
        async def go(event, ctx: RunnerContext):
            handle = await ctx.submit_subagent("remote", event.input)
            result = await handle
            ctx.send_event(OutputEvent(output=result.result))

    def job(records):
        parent = Parent()
        parent.add_resource("remote", ResourceType.AGENT, ResourceDescriptor(
            clazz="user_agents.Remote", description="Reviews remotely.",
            input_schema='{"type":"string"}'))
        env = LocalExecutionEnvironment()
        return env.from_list(records, key_selector=lambda r: "shop").apply(parent)

    if __name__ == "__main__":
        out = {}
        out["first"] = job(["apples"]).collect()
        out["second"] = job(["pears"]).collect()  # a new job, same key and run number
        stopped = job(["figs", "plums"])
        snaps = []
        stopped.run(on_step=lambda j: snaps.append(j.snapshot()), max_steps=1)
        restored = job(["figs", "plums"]).restore(snaps[0])
        out["restored"] = restored.collect()
        out["snapshot_lineage"] = snaps[0].get("lineage")
        print(json.dumps(out))
''')


def test_a_new_local_job_gets_new_session_ids_and_a_restore_keeps_them(tmp_path):
    user = tmp_path / "user"
    user.mkdir()
    (user / "user_agents.py").write_text(MODULE)
    store = tmp_path / "remote.json"
    run = subprocess.run([sys.executable, "user_agents.py", str(store)], cwd=user,
                         capture_output=True, text=True, timeout=100,
                         env={"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{user}:{ROOT}"})
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    [first], [second] = out["first"], out["second"]
    assert first["answer"] == "reviewed apples"
    assert second["answer"] == "reviewed pears"  # before: "reviewed apples", the old result
    assert first["key"] != second["key"]
    for o in (first, second):
        assert o["key"].startswith('"shop"/') and o["key"].endswith("/r0#r0/go/c0"), o
    restored = out["restored"]
    assert [o["answer"] for o in restored] == ["reviewed figs", "reviewed plums"]
    # the restored job is the snapshot's job: its keys' ids carry the snapshot's epoch
    epochs = {o["key"].split("/")[1] for o in restored}
    assert len(epochs) == 1
    kept = json.loads(store.read_text())
    assert len(kept) == 4  # one remote result per call: nothing answered twice or reused
    assert isinstance(out["snapshot_lineage"], str)
