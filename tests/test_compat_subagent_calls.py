"""Apache Flink Agents' newest sub-agent API, from programs ported with their imports changed.

Ported from apache/flink-agents (Apache-2.0), round 5 of the port:

- ``python/flink_agents/e2e_tests/e2e_tests_integration/external_subagent_agent.py`` and
  ``external_subagent_test.py`` (commit af9c77fac0af3862ad414bf70c4adad26f859133), with
  ``python/flink_agents/e2e_tests/resources/external_subagent_agent.yaml``: a setup
  subclassing ``SubagentSetup`` that implements ``as_async_callable`` with a
  ``BaseSubagentCallable``, registered as an *instance*, called from a sync action with
  ``setup.call(ctx, prompt, session_id)``, its failure read from ``Result``.
- ``python/flink_agents/e2e_tests/e2e_tests_integration/subagent_integration_agent.py``
  (commit 9efcd5cd83f8b93d18fd3f2965d5670385ebd64d): a ``DeferredSubagentSetup`` instance
  reading ``self.subagent_name``. Its action awaits ``reviewer.submit(ctx, prompt)`` once
  for the result; Flink Agents' later runtime (and ours) returns a handle from that await,
  so the port awaits the handle as Flink Agents' ReAct sub-agent e2e test does.

Before this port: ``BaseSubagentCallable``, ``DurableCallable``, ``Result`` were an
``ImportError``; ``SubagentSetup`` had no ``call`` (nor ``as_async_callable`` wiring), the
context no ``next_session_id`` / ``next_call_id``; a sub-agent setup instance given to
``add_resource`` was a ``PlanError`` ("must be registered by descriptor"); ``subagent_name``
was an ``AttributeError``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent, InputEvent, OutputEvent, ResourceType, RunnerContext, action
from flink_agents_py.compat import BaseSubagentCallable, DurableCallable, Result, SubagentSetup
from flink_agents_py.testing import check_replay_safety

ROOT = Path(__file__).resolve().parents[1]
VENV_PY = ROOT / ".venv" / "bin" / "python"
PYTHON = VENV_PY if VENV_PY.exists() else Path(sys.executable)

pytestmark = pytest.mark.timeout(120)

EXTERNAL_AGENT = """
    # Ported from apache/flink-agents python/flink_agents/e2e_tests/e2e_tests_integration/
    # external_subagent_agent.py (commit af9c77fac0af, Apache-2.0): only the imports changed.
    import time
    from typing import Any

    from pyflink.datastream import KeySelector

    from flink_agents_py.compat import Agent
    from flink_agents_py.compat import action
    from flink_agents_py.compat import Event, InputEvent, OutputEvent
    from flink_agents_py.compat import ResourceType
    from flink_agents_py.compat import RunnerContext
    from flink_agents_py.compat import (
        BaseSubagentCallable,
        DurableCallable,
        Result,
        SubagentSetup,
    )

    SUBAGENT_NAME = "ext-agent"
    CALLS = []


    class MockExternalSubagentSetup(SubagentSetup):
        endpoint_url: str
        fail_on_call: bool = False

        def as_async_callable(self, ctx: RunnerContext, prompt: Any,
                              session_id: str | None = None,
                              call_id: str | None = None) -> DurableCallable[Result]:
            if session_id is None:
                session_id = ctx.next_session_id()
            if call_id is None:
                call_id = ctx.next_call_id(session_id)
            setup = self

            class _HttpCall(BaseSubagentCallable):
                def call_internal(self) -> Any:
                    return setup._simulate_http_call(prompt)

            return _HttpCall(session_id, call_id)

        def _simulate_http_call(self, prompt: Any) -> list:
            CALLS.append(prompt)
            time.sleep(0.05)
            if self.fail_on_call:
                msg = f"endpoint {self.endpoint_url} is down"
                raise RuntimeError(msg)
            return [f"HTTP response for: {prompt} from {self.endpoint_url}"]


    def call_external(event: Event, ctx: RunnerContext) -> None:
        setup = ctx.get_resource(SUBAGENT_NAME, ResourceType.AGENT)
        prompt = InputEvent.from_event(event).input
        result = setup.call(ctx, prompt, f"session-{prompt}")
        if result.success:
            ctx.send_event(OutputEvent(output=result.result[0]))
        else:
            ctx.send_event(OutputEvent(output=f"error:{result.error_message}"))


    class ExternalSubagentAgent(Agent):
        @action(InputEvent.EVENT_TYPE)
        @staticmethod
        def call_external(event: Event, ctx: RunnerContext) -> None:
            call_external(event, ctx)


    class InputKeySelector(KeySelector):
        def get_key(self, value: Any) -> Any:
            return value
"""

EXTERNAL_YAML = """
    agents:
      - name: external_subagent_yaml_agent
        description: E2E agent delegating to a YAML-declared external sub-agent.

        subagents:
          - name: ext-agent
            clazz: external_subagent_agent.MockExternalSubagentSetup
            endpoint_url: http://yaml-endpoint:8080

        actions:
          - name: call_external
            function: external_subagent_agent:call_external
            trigger_conditions: [input]
"""

LOCAL_MAIN = """
    import sys
    from flink_agents_py.compat import AgentsExecutionEnvironment, ResourceType
    from external_subagent_agent import (
        CALLS, SUBAGENT_NAME, ExternalSubagentAgent, MockExternalSubagentSetup)

    def run(agent_or_name, env):
        out = env.from_list([{"key": p, "value": p} for p in ("a", "b")]).apply(
            agent_or_name).to_list()
        env.execute()
        return out

    for fail in (False, True):
        agent = ExternalSubagentAgent()
        agent.add_resource(SUBAGENT_NAME, ResourceType.AGENT, MockExternalSubagentSetup(
            endpoint_url="http://down:8080" if fail else "http://ext:8080", fail_on_call=fail))
        for row in run(agent, AgentsExecutionEnvironment.get_execution_environment()):
            for key, value in row.items():
                print("RESULT", key, value.replace(chr(10), " | "))
    env = AgentsExecutionEnvironment.get_execution_environment()
    env.load_yaml("external_subagent_agent.yaml")
    for row in run("external_subagent_yaml_agent", env):
        for key, value in row.items():
            print("YAML", key, value)
    print("CALLS", CALLS)
"""


def _run(tmp_path: Path, files: dict[str, str], main: str) -> str:
    for name, text in files.items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    done = subprocess.run(
        [str(PYTHON), main],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=100,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_external_subagent_program_runs_as_ported(tmp_path):
    out = _run(
        tmp_path,
        {
            "external_subagent_agent.py": EXTERNAL_AGENT,
            "external_subagent_agent.yaml": EXTERNAL_YAML,
            "main.py": LOCAL_MAIN,
        },
        "main.py",
    )
    lines = out.splitlines()
    assert "RESULT a HTTP response for: a from http://ext:8080" in lines
    assert "RESULT b HTTP response for: b from http://ext:8080" in lines
    # a failing endpoint surfaces through Result (its traceback), not as a failed record
    failed = [line for line in lines if line.startswith("RESULT") and "error:" in line]
    assert len(failed) == 2
    assert all("RuntimeError: endpoint http://down:8080 is down" in line for line in failed)
    assert "YAML a HTTP response for: a from http://yaml-endpoint:8080" in lines
    assert "YAML b HTTP response for: b from http://yaml-endpoint:8080" in lines
    # one call per record and per run: 2 + 2 + 2
    assert "CALLS ['a', 'b', 'a', 'b', 'a', 'b']" in lines


DEFERRED_AGENT = """
    # Ported from apache/flink-agents python/flink_agents/e2e_tests/e2e_tests_integration/
    # subagent_integration_agent.py (commit 9efcd5cd83f8, Apache-2.0): the imports changed,
    # and the handle awaited (see this test module's docstring).
    from typing import Any

    from typing_extensions import override

    from flink_agents_py.compat import Agent
    from flink_agents_py.compat import action
    from flink_agents_py.compat import Event, InputEvent, OutputEvent
    from flink_agents_py.compat import EventType
    from flink_agents_py.compat import ResourceType
    from flink_agents_py.compat import RunnerContext
    from flink_agents_py.compat import SubagentResult
    from flink_agents_py.compat import (
        DeferredSubagentSetup,
        PreparedTriple,
    )


    class EchoSubagentSetup(DeferredSubagentSetup):
        @override
        def prepare(self, ctx: RunnerContext, prompt: Any, session_id: str,
                    call_id: str) -> PreparedTriple:
            name = self.subagent_name

            def call() -> SubagentResult:
                return SubagentResult.ok(f"reviewed[{name}]:{prompt}")

            return (f"{session_id}#{call_id}", call, None)


    class SubagentIntegrationAgent(Agent):
        @action(EventType.InputEvent)
        @staticmethod
        async def process(event: Event, ctx: RunnerContext) -> None:
            prompt = InputEvent.from_event(event).input
            reviewer = ctx.get_resource("reviewer", ResourceType.AGENT)
            future = await reviewer.submit(ctx, prompt)
            result = await future
            ctx.send_event(OutputEvent(output=result.result))


    def build_agent() -> Agent:
        agent = SubagentIntegrationAgent()
        agent.add_resource("reviewer", ResourceType.AGENT, EchoSubagentSetup())
        return agent
"""

DEFERRED_MAIN = """
    from flink_agents_py.compat import AgentsExecutionEnvironment
    from subagent_integration_agent import build_agent

    env = AgentsExecutionEnvironment.get_execution_environment()
    out = env.from_list([{"key": "a", "value": "diff-1"}]).apply(build_agent()).to_list()
    env.execute()
    print("RESULT", out)
"""


def test_deferred_setup_instance_reads_its_subagent_name(tmp_path):
    out = _run(
        tmp_path,
        {"subagent_integration_agent.py": DEFERRED_AGENT, "main.py": DEFERRED_MAIN},
        "main.py",
    )
    assert "RESULT [{'a': 'reviewed[reviewer]:diff-1'}]" in out.splitlines()


# -- the contract, in this process ------------------------------------------------------

SEEN: list[tuple[str, str]] = []


class Recording(SubagentSetup):
    """Records the ids it is called with; answers with them."""

    def as_async_callable(
        self,
        ctx: RunnerContext,
        prompt: Any,
        session_id: str | None = None,
        call_id: str | None = None,
    ) -> DurableCallable[Result]:
        assert session_id is not None and call_id is not None  # ``call`` assigns them
        SEEN.append((session_id, call_id))

        class _Call(BaseSubagentCallable):
            def call_internal(self) -> Any:
                return {"prompt": prompt, "session": session_id, "call": call_id}

        return _Call(session_id, call_id)


class TwoCalls(Agent):
    """Calls the sub-agent in a new session, then twice in one session of its own."""

    @action(InputEvent)
    @staticmethod
    def go(event: InputEvent, ctx: RunnerContext) -> None:
        setup = ctx.get_resource("rec", ResourceType.AGENT)
        first = setup.call(ctx, event.input)
        second = setup.call(ctx, event.input, "mine")
        third = setup.call(ctx, event.input, "mine")
        assert isinstance(first, Result) and first.success and first.exception is None
        ctx.send_event(OutputEvent(output=[first.result, second.result, third.result]))


def _run_local(agent: Agent, records: list[Any]) -> Any:
    return AgentsExecutionEnvironment.local().from_list(records).apply(agent).run()


def _agent() -> Agent:
    agent = TwoCalls()
    agent.add_resource("rec", ResourceType.AGENT, Recording())
    return agent


def test_call_assigns_replay_stable_ids_per_execution():
    SEEN.clear()
    out = _run_local(_agent(), [{"key": "k", "value": "x"}, {"key": "k", "value": "y"}])
    assert not out.errors
    first, second = out.outputs
    # a new session per ``call`` without one; call ids count per session from 1
    assert first[0]["call"] == first[0]["session"] + "-1"
    assert [r["call"] for r in first[1:]] == ["mine-1", "mine-2"]
    # another execution (the key's next record) gets another session
    assert first[0]["session"] != second[0]["session"]
    # each call ran once per record, and a crash anywhere replays the recorded results
    assert len(SEEN) == 6
    check_replay_safety(_agent(), [{"key": "k", "value": "x"}], other_process=False).assert_ok()


def test_a_failed_call_is_a_result_and_a_model_can_delegate_to_the_setup():
    failed = Result.error(ValueError("no route"))
    assert not failed.success and "ValueError: no route" in (failed.error_message or "")
    assert isinstance(failed.exception, RuntimeError)
    assert Result.error("plain") == Result(success=False, error_message="plain")

    class Ask(Agent):
        @action(InputEvent)
        @staticmethod
        async def go(event: InputEvent, ctx: RunnerContext) -> None:
            handle = await ctx.submit_subagent("rec", event.input)
            result = await handle
            ctx.send_event(OutputEvent(output=result.result))

    agent = Ask()
    agent.add_resource("rec", ResourceType.AGENT, Recording())
    out = _run_local(agent, [{"key": "k", "value": "z"}])
    assert not out.errors, out.errors
    assert out.outputs[0]["prompt"] == {"key": "k", "value": "z"}


def test_next_call_id_refuses_a_session_that_is_no_text():
    class Bad(Agent):
        @action(InputEvent)
        @staticmethod
        def go(event: InputEvent, ctx: RunnerContext) -> None:
            ctx.next_call_id(None)  # type: ignore[arg-type]

    out = _run_local(Bad(), [{"key": "k", "value": 1}])
    assert len(out.errors) == 1
    assert "next_call_id takes the session id as a non-empty string" in out.errors[0].message


class _RecordingContext:
    """Flink Agents' fake context of its sub-agent API tests (``api/tests/
    subagent_test.py``): records the ids it hands out and the durable calls."""

    def __init__(self, session_id: str = "gen-session") -> None:
        self._session_id = session_id
        self.next_session_id_called = False
        self.next_call_id_calls: list[str] = []
        self.durable_execute_calls: list[tuple[Any, ...]] = []

    def next_session_id(self) -> str:
        self.next_session_id_called = True
        return self._session_id

    def next_call_id(self, session_id: str) -> str:
        self.next_call_id_calls.append(session_id)
        return f"{session_id}-{len(self.next_call_id_calls)}"

    def durable_execute(self, func: Any, *args: Any, reconciler: Any = None, **kwargs: Any) -> Any:
        self.durable_execute_calls.append((func, args, reconciler))
        return func(*args)


class EchoSetup(SubagentSetup):
    """Answers ``[prompt]``; assigns the ids it is not given, as Flink Agents' doubles do."""

    endpoint_url: str | None = None

    def as_async_callable(
        self,
        ctx: RunnerContext,
        prompt: Any,
        session_id: str | None = None,
        call_id: str | None = None,
    ) -> DurableCallable[Result]:
        if session_id is None:
            session_id = ctx.next_session_id()
        if call_id is None:
            call_id = ctx.next_call_id(session_id)

        class _Echo(BaseSubagentCallable):
            def call_internal(self) -> Any:
                return [prompt]

        return _Echo(session_id, call_id)


def test_the_contract_flink_agents_api_tests_pin():
    # adapted from apache/flink-agents python/flink_agents/api/tests/subagent_test.py
    # (Apache-2.0): registration, the ids ``call`` assigns, one durable call per ``call``
    agent = Agent()
    setup = EchoSetup()
    agent.add_resource("reviewer", ResourceType.AGENT, setup)
    assert agent.resources[ResourceType.AGENT]["reviewer"] is setup
    assert setup.resource_type() == ResourceType.AGENT

    ctx = _RecordingContext()
    result = setup.call(ctx, "hello", "explicit-sid")  # type: ignore[arg-type]
    assert ctx.next_session_id_called is False
    assert ctx.next_call_id_calls == ["explicit-sid"]
    assert len(ctx.durable_execute_calls) == 1
    assert result == Result(success=True, result=["hello"])

    ctx = _RecordingContext(session_id="minted")
    assert setup.call(ctx, "hi").result == ["hi"]  # type: ignore[arg-type]
    assert ctx.next_session_id_called is True and ctx.next_call_id_calls == ["minted"]

    callable_ = setup.as_async_callable(_RecordingContext(), "ping", "sid-1")  # type: ignore[arg-type]
    assert callable_.id == "sid-1#sid-1-1"
    assert callable_.call().result == ["ping"]
