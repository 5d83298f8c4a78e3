"""``flink_agents_py.testing``: scripted models, call counters; the local runner's snapshot and
restore; its progress bar."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.asker_agents import asker, price_of

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    InputEvent,
    OutputEvent,
    RunnerContext,
    action,
)
from flink_agents_py.testing import (
    CallCounter,
    ScriptedChatModel,
    ScriptedRequest,
    ScriptRule,
    model_from_function,
    model_from_turns,
    tool_call,
    tool_calls,
)

pytestmark = pytest.mark.timeout(60)

COUNTER = CallCounter()


def run(agent: Agent, records: list[Any], **env: Any):
    return AgentsExecutionEnvironment.local(**env).from_list(records).apply(agent).run()


def test_model_from_turns_plays_a_tool_round_per_conversation():
    COUNTER.reset()
    counted_price = COUNTER.wrap(price_of)
    model = model_from_turns([
        tool_call("price_of", item="apple"),                         # turn 1: call the tool
        lambda req: f"it costs {json.loads(req.tool_results[0].content)['price']}",  # turn 2
    ])
    res = run(asker(model, [counted_price]), [{"key": "a", "q": "apple?"},
                                               {"key": "b", "q": "and b?"}])
    assert res.errors == []
    assert sorted(o["answer"] for o in res.outputs) == ["it costs 5", "it costs 5"]
    assert COUNTER["price_of"] == 2 and COUNTER.total == 2  # the wrapper kept the tool's schema
    assert model.calls == 4
    first = model.requests[0]
    assert isinstance(first, ScriptedRequest) and [t.name for t in first.tools] == ["price_of"]
    assert first.tools[0].parameters["properties"]["item"]["type"] == "string"


def test_model_from_turns_fails_the_chat_past_its_last_turn_naming_it():
    res = run(asker(model_from_turns([tool_call("price_of", item="x")]), [price_of]),
              [{"key": "a", "q": "?"}])
    assert res.outputs == []
    [err] = res.errors
    assert "has 1 turns; this request is turn 2" in err.message


def test_model_from_turns_rejects_bad_turns_naming_their_position():
    with pytest.raises(TypeError, match="turn 1 is a int"):
        model_from_turns(["ok", 3])
    with pytest.raises(ValueError, match="at least one turn"):
        model_from_turns([])
    with pytest.raises(ValueError, match="must differ"):
        tool_calls(tool_call("a"), tool_call("a"))


def test_model_from_function_takes_a_closure_and_records_requests():
    seen: list[str] = []

    def answer(request: ScriptedRequest) -> Any:
        seen.append(request.last_user_text)
        return {"echo": request.last_user_text}  # a dict is sent as JSON text

    model = model_from_function(answer)
    res = run(asker(model), [{"key": "a", "q": "hello"}])
    assert res.outputs == [{"key": "a", "answer": '{"echo":"hello"}'}]
    assert seen == ["hello"] and model.calls == 1
    model.reset()
    assert model.calls == 0 and model.requests == []


def test_the_scripted_models_take_the_connections_fields_such_as_flow_control():
    # a flow control test with a lambda model needed a module-level function named in a
    # ResourceDescriptor: model_from_function took no connection fields
    from flink_agents_py.api import FlowControl

    flow = FlowControl(max_concurrency=1)
    by_fn = model_from_function(lambda request: "ok", flow_control=flow)
    by_turns = model_from_turns(["ok"], flow_control=flow)
    assert by_fn.flow_control == flow and by_turns.flow_control == flow
    res = run(asker(by_fn), [{"key": k, "q": "hi"} for k in "abc"])
    assert res.metrics["flow_concurrency_limit"] == {"m": 1}
    with pytest.raises(ValueError, match="flow_contrl"):
        model_from_function(lambda request: "ok", flow_contrl=flow)


def test_scripted_types_are_exported_where_users_look():
    from flink_agents_py.integrations import chat_models

    assert chat_models.ScriptedRequest is ScriptedRequest
    assert chat_models.ScriptedChatModel is ScriptedChatModel
    rules = ScriptedChatModel(rules=[ScriptRule(when="price", tool_calls=[tool_call("price_of",
                                                                                     item="kiwi")],
                                                reply="done")])
    res = run(asker(rules, [price_of]), [{"key": "a", "q": "price?"}])
    assert res.outputs == [{"key": "a", "answer": "done"}]


# -- snapshot and restore of the local runner -------------------------------------------------
class TwoCalls(Agent):
    """Two durable calls per record, then an output; counts runs in short-term memory."""

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        a = await ctx.durable_execute_async(COUNTER.wrap(price_of, "first"), event.input["item"])
        b = await ctx.durable_execute_async(COUNTER.wrap(price_of, "second"), event.input["item"])
        n = ctx.short_term_memory.get("n", 0) + 1
        ctx.short_term_memory.set("n", n)
        ctx.send_event(OutputEvent(output={"key": ctx.key, "n": n, "sum": a["price"] + b["price"]}))


RECORDS = [{"key": k, "item": i} for k, i in
           [("a", "kiwi"), ("b", "fig"), ("a", "banana"), ("c", "plum")]]


def test_snapshot_is_json_and_a_restored_job_finishes_without_repeating_recorded_calls():
    whole = run(TwoCalls(), RECORDS)
    env = AgentsExecutionEnvironment.local()
    for stop in range(1, whole.steps):
        first = env.from_list(RECORDS).apply(TwoCalls())
        cut = first.run(max_steps=stop)  # a crash after ``stop`` host callbacks
        assert not cut.completed and cut.steps == stop
        snap = json.loads(json.dumps(first.snapshot()))  # plain JSON data
        rest = env.from_list(RECORDS).apply(TwoCalls()).restore(snap).run()
        assert rest.completed
        assert sorted(map(json.dumps, cut.outputs + rest.outputs)) == \
            sorted(map(json.dumps, whole.outputs)), f"stopped after {stop} steps"
        # recorded outcomes replay; only the calls in flight at the cut execute again
        in_flight = sum(1 for k in snap["keys"] if k["run"]
                        for a in k["run"]["inflight"].values()
                        for c in a["calls"].values() if not c["done"])
        assert cut.counters["calls_executed"] + rest.counters.get("calls_executed", 0) == \
            whole.counters["calls_executed"] + in_flight, f"stopped after {stop} steps"


def test_on_step_sees_every_callback_and_restore_checks_its_input():
    steps: list[int] = []
    job = AgentsExecutionEnvironment.local().from_list(RECORDS).apply(TwoCalls())
    res = job.run(on_step=lambda j: steps.append(j.steps))
    assert steps == list(range(1, res.steps + 1))
    snap = job.snapshot()
    assert snap["position"] == len(RECORDS) and all(k["run"] is None for k in snap["keys"])
    assert {k["key"]: k["memory"] for k in snap["keys"]} == {"a": {"n": 2}, "b": {"n": 1},
                                                              "c": {"n": 1}}
    with pytest.raises(ValueError, match="not a local runner snapshot"):
        job.restore({"keys": []})
    with pytest.raises(ValueError, match=r"keys\[0\] lacks \['memory'"):
        job.restore({**snap, "keys": [{"key": "a", "run": None, "queue": [], "next_seq": 1}]})
    with pytest.raises(RuntimeError, match="has not run"):
        AgentsExecutionEnvironment.local().from_list(RECORDS).apply(TwoCalls()).snapshot()
    # fewer records than the snapshot's source had delivered: not the job's records (the
    # restore used to run quietly, the missing records neither run nor reported)
    fewer = AgentsExecutionEnvironment.local().from_list(RECORDS[:1]).apply(TwoCalls())
    with pytest.raises(ValueError, match=rf"delivered {len(RECORDS)} records.*has 1"):
        fewer.restore(snap)


# -- the progress bar ---------------------------------------------------------------------------
def test_progress_counts_input_records_done_of_total_leaving_out_control_records(capsys):
    records = [*RECORDS, {"kind": "end", "key": "a"}, {"kind": "end", "key": "b"}, 7]

    def key_of(r: Any) -> Any:
        return r["key"]  # the int record is rejected: done, with an error

    class Quiet(Agent):
        @action(InputEvent)
        @staticmethod
        async def go(event: InputEvent, ctx: RunnerContext) -> None:
            if event.input.get("kind") != "end":
                await ctx.durable_execute_async(price_of, event.input["item"])
                ctx.send_event(OutputEvent(output=1))

    res = AgentsExecutionEnvironment.local(progress=True).from_list(
        records, key_of, counted=lambda r: not (isinstance(r, dict) and "kind" in r)
    ).apply(Quiet()).run()
    assert len(res.outputs) == 4 and len(res.errors) == 1
    err = capsys.readouterr().err
    assert "5/5" in err  # 4 records and the rejected one; not the 2 markers
    assert "7/7" not in err and "outputs=4" in err and "errors=1" in err


# the blocks run by exec, in no importable module: restores in another process are skipped
@pytest.mark.filterwarnings("ignore:check_replay_safety")
def test_the_testing_and_replay_safety_guides_run_as_written():
    import pathlib
    import re

    docs = pathlib.Path(__file__).resolve().parents[1] / "docs" / "how-to"
    namespace: dict[str, Any] = {}
    ran = 0
    for page in ("testing.md", "replay-safety.md"):  # the second page uses the first's agent
        for i, block in enumerate(re.findall(r"```python\n(.*?)```", (docs / page).read_text(),
                                             flags=re.S)):
            exec(compile(block, f"{page} block {i}", "exec"), namespace)  # noqa: S102
            ran += 1
    assert ran == 11 and namespace["report"].ok


def test_progress_of_a_restored_job_starts_from_the_records_done(capsys):
    job = AgentsExecutionEnvironment.local().from_list(RECORDS).apply(TwoCalls())
    job.run(max_steps=3)
    snap = job.snapshot()
    capsys.readouterr()
    AgentsExecutionEnvironment.local(progress=True).from_list(RECORDS).apply(
        TwoCalls()).restore(snap).run()
    assert "4/4" in capsys.readouterr().err


def test_testing_helpers_import_without_pyflink():
    import subprocess
    import sys

    code = ("import sys; sys.modules['pyflink'] = None\n"
            "import flink_agents_py.testing as t\n"
            "print(sorted(m for m in sys.modules if m.startswith('pyflink') and sys.modules[m]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
