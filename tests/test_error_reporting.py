"""Failures show where they happened: tracebacks in error records, the event log and the logs.

Every failing piece of user code (an action, a tool, a chat model's script, an internal
sub-agent's action, a durable call replayed after a restore) must leave a traceback that
names the user's own file and line, bounded and redacted, in the ``ErrorRecord``, in the
event log record of the failing node (field ``traceback``) and in the log line.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from support.harness import KEY, call_of, new_core, poll_until, resume, snapshot_of
from support.probes import gate

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    ChatMessage,
    ChatModelSetup,
    InputEvent,
    InternalSubagent,
    MessageRole,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    SubagentResult,
    ToolCall,
    action,
    qualified_name,
)
from flink_agents_py.integrations.chat_models import ScriptedChatModel
from flink_agents_py.observability import EventLog, MemorySink
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import InMemoryKeyState

pytestmark = pytest.mark.timeout(60)

HERE = __file__


def _line_of(fn: Any, marker: str) -> int:
    """The line number of the first line of ``fn``'s source containing ``marker``."""
    import inspect

    lines, first = inspect.getsourcelines(fn)
    for i, text in enumerate(lines):
        if marker in text:
            return first + i
    raise AssertionError(f"{marker!r} not in {fn.__name__}")


def _frame(fn: Any, marker: str = "raise") -> str:
    """How a traceback names the line of ``fn`` holding ``marker``."""
    return f'File "{HERE}", line {_line_of(fn, marker)}, in {fn.__name__}'


def lookup(table: dict[str, Any], name: str) -> Any:
    return table[name]  # raise: KeyError('missing')


def explode(n: int) -> int:
    raise ValueError(f"cannot handle {n}")


def wait_gate() -> str:
    assert gate().wait(10)
    return "opened"


def local(agent: Agent, records: list[Any], **options: Any) -> Any:
    return AgentsExecutionEnvironment.local(**options).from_list(records).apply(agent).run()


def with_log(agent: Agent, records: list[Any]) -> tuple[Any, list[dict[str, Any]]]:
    sink = MemorySink()
    result = local(agent, records, event_log=EventLog(sink=sink))
    return result, sink.records


# -- an action raising ----------------------------------------------------------------------

class Failing(Agent):
    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: Any) -> None:
        lookup({}, event.input["name"])


def test_action_failure_carries_traceback_with_user_frames(caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.WARNING, logger="flink_agents_py.runtime")
    result, records = with_log(Failing(), [{"key": "a", "name": "missing"}])
    [err] = result.errors
    assert err.error_type == "KeyError" and err.message == "'missing'"
    tb = err.traceback
    assert tb is not None
    assert _frame(lookup, "table[name]") in tb
    assert _frame(Failing.on_input, "lookup(") in tb
    assert tb.rstrip().endswith("KeyError: 'missing'")
    [finished] = [r for r in records if r["kind"] == "action_finished"]
    assert finished["status"] == "failed"
    assert _frame(lookup, "table[name]") in finished["traceback"]
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "on_input failed" in logged and _frame(lookup, "table[name]") in logged


def test_repeated_failures_log_the_traceback_once(caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.DEBUG, logger="flink_agents_py.runtime")
    result = local(Failing(), [{"key": k, "name": "missing"} for k in "abc"])
    assert len(result.errors) == 3 and all(e.traceback for e in result.errors)
    failed = [r for r in caplog.records if "failed for key" in r.getMessage()]
    assert [r.levelno for r in failed] == [logging.WARNING] * 3
    where = _frame(lookup, "table[name]")
    assert [where in r.getMessage() for r in failed] == [True, False, False]
    debug = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG
             and r.getMessage().startswith("traceback of action")]
    assert len(debug) == 2 and all(where in m for m in debug)


def check_positive(n: int) -> None:
    if n < 0:
        raise ValueError(f"negative: {n}")


def check_small(n: int) -> None:
    if n > 9:
        raise ValueError(f"too big: {n}")


class TwoChecks(Agent):
    @action(InputEvent)
    @staticmethod
    def on_input(event: InputEvent, ctx: Any) -> None:
        check_positive(event.input["n"])
        check_small(event.input["n"])


def test_the_same_error_type_from_another_place_logs_its_own_traceback(
        caplog: pytest.LogCaptureFixture):
    """A ValueError from a second line is not hidden behind the first one's."""
    caplog.set_level(logging.WARNING, logger="flink_agents_py.runtime")
    records = [{"key": "a", "n": -1}, {"key": "b", "n": 50}, {"key": "c", "n": 60}]
    result = local(TwoChecks(), records)
    assert [e.message for e in result.errors] == ["negative: -1", "too big: 50", "too big: 60"]
    failed = [r.getMessage() for r in caplog.records if "failed for key" in r.getMessage()]
    assert [_frame(check_positive, "raise ValueError") in m for m in failed] == \
        [True, False, False]
    assert [_frame(check_small, "raise ValueError") in m for m in failed] == \
        [False, True, False]


def test_traceback_is_bounded_and_redacted():
    class Deep(Agent):
        @action(InputEvent)
        @staticmethod
        def on_input(event: InputEvent, ctx: Any) -> None:
            def down(n: int) -> None:
                if n == 0:
                    raise RuntimeError("bad key sk-abcdefghijklmnopqrstuvwxyz0123 here")
                down(n - 1)

            down(300)

    result, records = with_log(Deep(), [{"key": "a"}])
    [err] = result.errors
    assert err.message == "bad key [REDACTED] here"
    tb = err.traceback
    assert "sk-abcdefghijklmnopqrstuvwxyz" not in tb and "[REDACTED]" in tb
    assert len(tb) <= 8000
    assert "frames omitted" in tb
    assert tb.rstrip().endswith("RuntimeError: bad key [REDACTED] here")
    assert 'in down\n' in tb  # the deepest user frames are kept
    [finished] = [r for r in records if r["kind"] == "action_finished"]
    assert "sk-abcdefghijklmnopqrstuvwxyz" not in finished["traceback"]


# -- a tool raising inside the built-in tool action ----------------------------------------

def tool_script(request: Any) -> Any:
    if request.tool_results:
        return ChatMessage(role=MessageRole.ASSISTANT, content=request.tool_results[0].content)
    return ChatMessage(role=MessageRole.ASSISTANT,
                       tool_calls=[ToolCall(id="t1", name="find", arguments={"name": "missing"})])


def find(name: str) -> str:
    """Find a thing.

    Args:
        name: what to find.
    """
    return {"present": "x"}[name]  # raise


class ToolUser(Agent):
    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: Any) -> None:
        response = await ctx.chat("model", [ChatMessage(role=MessageRole.USER, content="go")])
        ctx.send_event(OutputEvent(output=response.message.content))


def _with_model(agent: Agent, script: Any, tools: list[str] | None = None) -> Agent:
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION,
                       ResourceDescriptor(ScriptedChatModel, function=qualified_name(script)))
    agent.add_resource("model", ResourceType.CHAT_MODEL,
                       ResourceDescriptor(ChatModelSetup, connection="conn", tools=tools or []))
    return agent


def test_failing_tool_traceback_reaches_the_tool_call_record():
    agent = _with_model(ToolUser(), tool_script, ["find"]).add_resource(
        "find", ResourceType.TOOL, find)
    result, records = with_log(agent, [{"key": "a"}])
    assert result.errors == [] and result.outputs == ["Error: KeyError: 'missing'"]
    [tool_call] = [r for r in records if r["kind"] == "call_finished"
                   and r.get("call_kind") == "tool"]
    assert tool_call["tool_error"] == "KeyError: 'missing'"
    assert _frame(find, '{"present"') in tool_call["traceback"]


# -- a chat model script raising inside the chat action --------------------------------------

def broken_script(request: Any) -> Any:
    return {"n": int(request.last_user_text)}  # raise: ValueError


def test_failing_chat_model_script_traceback_reaches_the_caller_and_the_log():
    agent = _with_model(ToolUser(), broken_script)
    result, records = with_log(agent, [{"key": "a"}])
    [err] = result.errors
    assert err.error_type == "ChatResponseError"
    assert _frame(broken_script, "int(") in err.traceback  # the original failure
    assert _frame(ToolUser.on_input, "await ctx.chat") in err.traceback  # and where it surfaced
    [model_call] = [r for r in records if r["kind"] == "call_finished"
                    and r["parent"].endswith("/_chat_model_action")]
    assert model_call["status"] == "failed"
    assert _frame(broken_script, "int(") in model_call["traceback"]
    [answer] = [r for r in records if r["kind"] == "event" and r["type"] == "ChatResponseEvent"]
    assert _frame(broken_script, "int(") in answer["traceback"]


# -- an internal sub-agent's failing action ----------------------------------------------------

class Child(Agent):
    @action(InputEvent)
    @staticmethod
    def on_input(event: InputEvent, ctx: Any) -> None:
        explode(event.input["n"])


class Parent(Agent):
    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: Any) -> None:
        handle = await ctx.submit_subagent("child", {"n": 7})
        result = await handle
        ctx.send_event(OutputEvent(output=result.model_dump()))


def test_subagent_failure_traceback_reaches_the_caller():
    agent = Parent().add_resource("child", ResourceType.AGENT, ResourceDescriptor(
        InternalSubagent, agent=Child(), description="fails"))
    result, records = with_log(agent, [{"key": "a"}])
    assert result.errors == []
    [out] = result.outputs
    sub = SubagentResult.model_validate(out)
    assert not sub.success and "ValueError: cannot handle 7" in sub.error_message
    assert _frame(explode) in sub.traceback
    assert _frame(Child.on_input, "explode(") in sub.traceback
    [call] = [r for r in records
              if r["kind"] == "call_finished" and r.get("call_kind") == "subagent"]
    assert call["success"] is False and _frame(explode) in call["traceback"]


# -- a durable call's recorded exception, replayed after a restore ---------------------------

class Replayer(Agent):
    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: Any) -> None:
        try:
            await ctx.durable_execute_async(explode, 3)
        except ValueError as e:
            failure = e
        await ctx.durable_execute_async(wait_gate)
        raise failure


@pytest.mark.parametrize("how", ["deepcopy", "json"])
def test_replayed_failure_keeps_the_original_traceback(how: str):
    plan = AgentPlan.from_agent(Replayer())
    core = new_core(plan)
    state = InMemoryKeyState()
    try:
        core.on_input(KEY, {"n": 3}, state)
        poll_until(core, state, lambda s: call_of(s, "on_input", 1) is not None)
        checkpoint = snapshot_of(state, how)
    finally:
        gate().set()
        core.close()
    recorded = call_of(checkpoint, "on_input", 0)
    assert recorded.ok is False and _frame(explode) in recorded.traceback
    _, errors, _ = resume(plan, checkpoint)
    [err] = errors
    assert err.error_type == "ValueError" and err.message == "cannot handle 3"
    assert _frame(explode) in err.traceback  # the original failure, from the record
    assert _frame(Replayer.on_input, "raise failure") in err.traceback


# -- as a user runs it: their own module, outside the repository ------------------------------

def test_user_module_failure_shows_file_and_line(tmp_path: Path):
    (tmp_path / "my_agent.py").write_text(textwrap.dedent("""\
        from flink_agents_py import AgentsExecutionEnvironment
        from flink_agents_py.api import Agent, InputEvent, action


        class Shop(Agent):
            @action(InputEvent)
            @staticmethod
            async def on_input(event, ctx):
                prices = {"apple": 1}
                return prices[event.input["item"]]


        if __name__ == "__main__":
            job = AgentsExecutionEnvironment.local().from_list(
                [{"key": "a", "item": "pear"}]).apply(Shop())
            for err in job.run().errors:
                print(err.traceback)
        """))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "my_agent.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert f'File "{tmp_path / "my_agent.py"}", line 10, in on_input' in proc.stdout
    assert "KeyError: 'pear'" in proc.stdout
    assert "action r0/on_input failed" in proc.stderr  # the log line, with the traceback
    assert "line 10, in on_input" in proc.stderr


# -- on the Flink runner: the error side output carries the traceback -----------------------

@pytest.mark.flink
@pytest.mark.timeout(300)
def test_flink_error_records_carry_the_traceback():
    pytest.importorskip("pyflink")
    from support import flink_agents_for_tests as fa

    from flink_agents_py.flink import create_stream_environment

    errors = [v for kind, v in fa.counter_job(create_stream_environment()) if kind == "err"]
    assert errors, "the counter job has failing records"
    source = fa.__file__.removesuffix("c")  # a .pyc path names its .py in tracebacks
    line = _line_of(fa.CounterAgent.start, 'raise ValueError(f"boom')
    for e in errors:
        assert f'File "{source}", line {line}, in start' in e["traceback"]
        assert e["traceback"].rstrip().endswith(e["message"])


def test_printing_an_error_record_gives_one_line_naming_key_position_and_error():
    result, _ = with_log(Failing(), [{"key": "a", "name": "missing"}])
    [err] = result.errors
    # before: pydantic's str, every field on one line, the traceback's text inside it
    assert str(err) == (f"key 'a', input 0, {err.execution_id}: KeyError: 'missing' "
                        f"(at {HERE}:{_line_of(lookup, 'raise')}, in lookup)")  # the user's line
    assert f"{err}" == str(err) and "\n" not in str(err)
    assert repr(err).startswith("ErrorRecord(key='a'")  # every field, as before
