"""An action's view of memory shares what it did not write with the committed tree.

Before, an action's first write to short-term (or sensory) memory deep-copied the key's whole
committed tree into its view, and a read copied its value by a walk in Python: an action that
wrote one counter beside a history of 2,000 messages paid for copying the history (about
1.1 ms a record in ``bench._memory_history``). Now the view is a root of its own over the
committed nodes, a write copies the nodes on its path only, a commit replaces the nodes on
its paths instead of changing them, and a value read is copied through its JSON text. The
cost tests count Python calls (exact, unlike time): they failed before, the call count grew
with the history. The others pin what must not change with the sharing: an action reads its
writes, others see them at commit only, a view keeps what it saw at its first write, undo
entries keep the values they replaced, and no value handed to an action is stored memory.
"""

from __future__ import annotations

import copy
import gc
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import AgentCore
from flink_agents_py.runtime._spend import drop_ended_spends
from flink_agents_py.runtime.context._memory import (
    ActionMemory,
    apply_merges,
    apply_writes,
    priors,
)
from flink_agents_py.runtime.recorder._state import InMemoryKeyState, RunState

REPO = Path(__file__).resolve().parents[1]
STM = "short_term_memory"


def _history(n: int) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": f"message {i}", "meta": {"seen": [i, {"at": [i]}]}}
        for i in range(n)
    ]


def _calls(fn: Any) -> int:
    """Python calls (functions and built-ins) ``fn()`` makes."""
    count = 0

    def profile(frame: Any, event: str, arg: Any) -> None:
        nonlocal count
        if event in ("call", "c_call"):
            count += 1

    # a collection during ``fn`` runs finalizers and gc callbacks left by earlier tests,
    # counted as ``fn``'s calls (seen once in a run of several test files): none runs here
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
        if enabled:
            gc.enable()
    return count


def _action_cost(size: int, act: Any) -> int:
    tree = {"history": _history(size), "count": 0, "user": {"profile": {"name": "ann"}}}
    act(tree)  # paths and references cached, as after a job's first records
    return _calls(lambda: act(tree))


def _small_writes(tree: dict[str, Any]) -> None:
    memory = ActionMemory(tree, STM)
    memory.set("count", memory.get("count") + 1)
    memory.set("user.profile.name", "bob")
    memory.delete("user.profile.gone")
    assert memory.get("user.profile") == {"name": "bob"}
    apply_writes(tree, memory.writes)


def _history_read(tree: dict[str, Any]) -> None:
    memory = ActionMemory(tree, STM)
    memory.set("count", 1)
    assert len(memory.get("history")) == len(tree["history"])


def test_a_small_write_beside_a_long_history_costs_the_same_as_beside_a_short_one():
    assert _action_cost(2000, _small_writes) == _action_cost(10, _small_writes)


def test_reading_a_long_history_makes_no_call_per_message():
    assert _action_cost(2000, _history_read) == _action_cost(10, _history_read)


def test_writes_are_the_actions_own_until_committed():
    tree = {"user": {"profile": {"name": "ann", "tags": ["a"]}}, "history": _history(3)}
    before = copy.deepcopy(tree)
    mine = ActionMemory(tree, STM)
    mine.set("user.profile.name", "bob")
    mine.delete("user.profile.tags")
    mine.set("history", [*mine.get("history"), {"role": "assistant"}])
    assert mine.get("user.profile") == {"name": "bob"}
    assert len(mine.get("history")) == 4
    assert tree == before  # nothing committed yet, however deep the write
    other = ActionMemory(tree, STM)
    assert other.get("user.profile") == {"name": "ann", "tags": ["a"]}
    apply_writes(tree, mine.writes)
    assert tree["user"] == {"profile": {"name": "bob"}}
    assert tree["history"] == [*before["history"], {"role": "assistant"}]
    assert other.get("user.profile") == {"name": "bob"}  # read live before its first write


def test_a_view_keeps_what_it_saw_at_its_first_write_while_others_commit_below_it():
    tree: dict[str, Any] = {"user": {"profile": {"name": "ann", "age": 1}}, "n": 0}
    first = ActionMemory(tree, STM)
    first.set("n", 1)  # its view: the tree as now, ``user`` shared with the committed tree
    second = ActionMemory(tree, STM)
    second.set("user.profile.age", 2)
    second.delete("user.profile.name")
    apply_writes(tree, second.writes)
    assert first.get("user.profile") == {"name": "ann", "age": 1}
    first.set("user.profile.city", "oslo")  # below a node it shares: copied, not changed
    assert tree == {"user": {"profile": {"age": 2}}, "n": 0}
    assert second.get("user.profile") == {"age": 2}
    apply_writes(tree, first.writes)  # its writes, on what is committed now
    assert tree == {"user": {"profile": {"age": 2, "city": "oslo"}}, "n": 1}


DEEP = {"a": [{"b": [1, {"c": [2, 3]}]}], "d": {"e": {"f": [4, [5, {"g": 6}]]}}}


def _spoil(value: Any) -> None:
    """Change ``value`` (a copy of ``DEEP``) at each depth."""
    value["a"][0]["b"][1]["c"].append(99)
    value["a"][0]["b"].insert(0, "x")
    value["d"]["e"]["f"][1][1]["g"] = 7
    value["d"]["e"]["f"][1].clear()
    value["d"]["new"] = 1


def test_values_read_or_written_are_never_stored_memory():
    tree: dict[str, Any] = {"kept": copy.deepcopy(DEEP), "list": [[1, [2, {"h": [3]}]]]}
    memory = ActionMemory(tree, STM)
    _spoil(memory.get("kept"))  # read before the first write (from the committed tree)
    memory.get("list")[0][1][1]["h"].append(4)
    written = copy.deepcopy(DEEP)
    memory.set("mine", written)
    _spoil(written)  # after the write
    _spoil(memory.get("kept"))  # read from the view
    _spoil(memory.get("mine"))
    memory.get("kept.d.e.f")[1].append("y")  # a list read below the root
    memory.get("list")[0][1][1]["h"].append(4)
    _spoil(memory.to_dict()["kept"])
    assert memory.get("kept") == DEEP
    assert memory.get("mine") == DEEP
    assert tree == {"kept": DEEP, "list": [[1, [2, {"h": [3]}]]]}
    apply_writes(tree, memory.writes)
    written["a"][0]["b"].clear()  # after the commit
    written["d"]["e"].clear()
    later = ActionMemory(tree, STM)
    _spoil(later.get("mine"))
    later.set("other", 1)
    _spoil(later.get("kept"))
    assert tree == {"kept": DEEP, "mine": DEEP, "list": [[1, [2, {"h": [3]}]]]}


class Note(BaseModel):
    text: str
    tags: list[str] = []


def test_models_stored_deep_are_rebuilt_each_read():
    tree: dict[str, Any] = {"history": _history(2)}
    memory = ActionMemory(tree, STM)
    memory.set("notes", {"list": [Note(text="a", tags=["x"])], "raw": b"\x00\x01"})
    got = memory.get("notes")
    assert got["list"] == [Note(text="a", tags=["x"])] and got["raw"] == b"\x00\x01"
    got["list"][0].tags.append("y")
    memory.set("plain", {"$model": "os:system", "data": {"x": 1}})  # a record's: stored escaped
    apply_writes(tree, memory.writes)
    later = ActionMemory(tree, STM)
    assert later.get("notes.list")[0].tags == ["x"]
    assert later.get("plain") == {"$model": "os:system", "data": {"x": 1}}
    assert later.to_dict()["notes"]["list"] == [Note(text="a", tags=["x"])]


def test_undo_entries_keep_the_values_they_replaced():
    tree: dict[str, Any] = {"user": {"profile": {"name": "ann"}}, "n": 0}
    first = ActionMemory(tree, STM)
    first.set("n", 1)  # shares ``user`` with the committed tree
    second = ActionMemory(tree, STM)
    second.set("user", {"profile": {"name": "bob"}})
    undo = priors(tree, second.writes)
    apply_writes(tree, second.writes)
    first.set("user.profile.name", "zed")  # below the node the undo entry holds
    third = ActionMemory(tree, STM)
    third.set("user.profile.name", "cy")
    apply_writes(tree, third.writes)
    apply_writes(tree, first.writes)
    assert undo == [[["user"], {"profile": {"name": "ann"}}]]
    assert tree == {"user": {"profile": {"name": "zed"}}, "n": 1}


def test_ended_spends_go_without_changing_the_level_a_view_shares():
    tree: dict[str, Any] = {
        "_budget": {
            "chat": {"input": 1, "ends": 1.0},
            "team": {"x": {"input": 2, "ends": 1.0}, "y": {"input": 3, "ends": None}},
            "empty": {},
        }
    }
    view = ActionMemory(tree, STM)
    view.set("n", 1)
    seen = copy.deepcopy(tree["_budget"])
    drop_ended_spends(tree, None)
    assert tree == {"_budget": {"team": {"y": {"input": 3, "ends": None}}}}
    assert view.get("_budget") == seen  # (deleted in place before: the view lost them)
    drop_ended_spends(tree, None)
    assert tree == {"_budget": {"team": {"y": {"input": 3, "ends": None}}}}


def test_a_merge_gets_a_copy_of_the_committed_value():
    tree: dict[str, Any] = {"_budget": {"s": {"input": 1}}}
    view = ActionMemory(tree, STM)
    view.set("n", 1)

    def merge(old: Any) -> Any:
        old["input"] += 5  # a merge that changes what it is given (``_spend._with_end``)
        return old

    apply_merges(tree, [("_budget.s", merge)])
    assert tree == {"_budget": {"s": {"input": 6}}}
    assert view.get("_budget.s") == {"input": 1}


PROGRAM = """
import json
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action


class Chat(Agent):
    @action(InputEvent)
    @staticmethod
    def remember(event: InputEvent, ctx: RunnerContext) -> None:
        memory = ctx.short_term_memory
        history = memory.get("history") or []
        message = {"role": "user", "content": event.input["text"], "meta": {"seen": [1]}}
        history.append(message)
        memory.set("history", history)
        message["meta"]["seen"].append(2)  # changes the caller's copy only
        history.append({"role": "junk"})
        read = memory.get("history")
        read[0]["meta"]["seen"].clear()
        memory.set("profile.visits", (memory.get("profile.visits") or 0) + 1)
        memory.get("profile")["visits"] = 100
        ctx.send_event(OutputEvent(output={"key": ctx.key, "seen": memory.get("history"),
                                           "visits": memory.get("profile.visits")}))


records = [{"key": k, "text": f"{k}{n}"} for n in range(3) for k in ("a", "b")]
result = AgentsExecutionEnvironment.local().from_list(records).apply(Chat()).run()
assert not result.errors, result.errors
print(json.dumps(result.outputs))
"""


def test_a_users_chat_history_is_kept_as_written(tmp_path):
    script = tmp_path / "chat_history.py"
    script.write_text(textwrap.dedent(PROGRAM))
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    outputs = json.loads(done.stdout.splitlines()[-1])
    last = {o["key"]: o for o in outputs}
    for key in ("a", "b"):
        assert last[key]["visits"] == 3
        assert last[key]["seen"] == [
            {"role": "user", "content": f"{key}{n}", "meta": {"seen": [1]}} for n in range(3)
        ]


async def _pause() -> None:
    return None


class Parallel(Agent):
    """Two actions of one input: ``write`` commits below ``user`` while ``read`` awaits."""

    @action(InputEvent)
    @staticmethod
    async def read(event: InputEvent, ctx: RunnerContext) -> None:
        memory = ctx.short_term_memory
        before = memory.get("user.profile", "unset")
        await ctx.durable_execute_async(_pause)
        memory.set("hist", [*(memory.get("hist") or []), {"r": "a", "deep": {"x": [1]}}])
        ctx.send_event(OutputEvent(output={"before": before, "after": memory.get("user")}))

    @action(InputEvent)
    @staticmethod
    def write(event: InputEvent, ctx: RunnerContext) -> None:
        memory = ctx.short_term_memory
        memory.set("user.profile.name", event.input["n"])
        memory.delete("user.profile.old")
        memory.set("user.tags", ["t", {"u": [event.input["n"]]}])


MEMORY = {"user": {"profile": {"name": "ann", "old": 1}}, "hist": [{"r": "s"}]}


def _stored_mid_run() -> tuple[str, str]:
    """The run (``read`` awaiting, with its undo entries) and the memory, as stored."""
    core = AgentCore(AgentPlan.from_agent(Parallel()))
    core.open()
    try:
        state = InMemoryKeyState()
        state.memory = copy.deepcopy(MEMORY)
        core.on_input("k", {"n": "bob"}, state)
        assert state.run is not None
        return state.run.to_stored(), json.dumps(state.memory)
    finally:
        core.close()


# ``_stored_mid_run()`` as main's code (9f442dc, before the sharing) wrote it
MAIN_RUN = (
    '{"seq":0,"input":{"n":"bob"},"inflight":{"r0/read":{"action":"read","event":{"id":"r'
    '0","type":"InputEvent","attributes":{},"input":{"n":"bob"}},"calls":{"0":{"digest":"'
    '1f31fffe95f3ba90","kind":"function","target":"test_memory_shared_nodes:_pause","done'
    '":false,"ok":true,"value":null,"error_type":null,"error_message":null,"error_args":n'
    'ull,"error_attrs":null,"traceback":null,"callees":null,"shape":"4bb09a9dc3b3efe1/de8'
    'a4edc6913573b////."}},"memory_ops":1,"memory_undo":[[1,"short_term_memory",["user","'
    'profile","name"],"ann"],[1,"short_term_memory",["user","profile","old"],1],[1,"short'
    '_term_memory",["user","tags"]]],"siblings":["read","write"]}},"invocations":{},"sens'
    'ory":{},"waits":{},"siblings_kept":true,"ltm_done":[],"source":null,"calls_started":'
    '1,"parked":false,"v":1}'
)
MAIN_MEMORY = (
    '{"user": {"profile": {"name": "bob"}, "tags": ["t", {"u": ["bob"]}]}, "hist": [{"r": "s"}]}'
)


def _restored(run: str, memory: str) -> tuple[list[Any], dict[str, Any]]:
    core = AgentCore(AgentPlan.from_agent(Parallel()))
    core.open()
    try:
        state = InMemoryKeyState()
        state.run = RunState.from_stored(run)
        state.memory = json.loads(memory)
        outputs = list(core.advance("k", state).outputs)
        while state.run is not None:
            core.wait_for("k", 5.0)
            outputs += core.advance("k", state).outputs
        return outputs, state.memory
    finally:
        core.close()


def test_state_written_mid_run_by_the_code_before_restores_as_it_ran():
    assert _stored_mid_run() == (MAIN_RUN, MAIN_MEMORY)  # the stored format is unchanged
    outputs, memory = _restored(MAIN_RUN, MAIN_MEMORY)
    user = {"profile": {"name": "bob"}, "tags": ["t", {"u": ["bob"]}]}
    assert outputs == [{"before": {"name": "ann", "old": 1}, "after": user}]  # read as then
    assert memory == {"user": user, "hist": [{"r": "s"}, {"r": "a", "deep": {"x": [1]}}]}


def _listing(tree: dict[str, Any]) -> None:
    memory = ActionMemory(tree, STM)
    assert "history" in memory and memory.is_exist("user.profile.name")
    assert "history.0" not in memory and "a..b" not in memory and 3 not in memory
    assert memory.get_field_names() == ["count", "history", "user"]
    assert list(memory) == ["history", "count", "user"]


def test_asking_what_memory_holds_copies_none_of_it():
    assert _action_cost(2000, _listing) == _action_cost(10, _listing)


def test_asking_what_memory_holds_is_counted_once_each_and_hides_the_runtimes_entries():
    counted: list[str] = []

    def clock(name: str) -> list[list[Any]]:
        counted.append(name)
        return []

    tree = {"_budget": {"s": {"input": 1}}, "_flink_agents_py": {"epoch": 1}, "n": 1}
    memory = ActionMemory(tree, STM, clock)
    assert "_budget.s" in memory and "nothing" not in memory and "" not in memory
    assert memory.get_field_names() == ["n"] and list(memory) == ["n"]
    assert counted == [STM] * 5  # as ``get`` and ``to_dict`` count them
    sensory = ActionMemory({"_chat": {}, "_subagent": {}, "x": 1}, "sensory_memory")
    assert sensory.get_field_names() == ["x"] and "_chat" in sensory
