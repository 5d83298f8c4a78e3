"""A missing API key is named when the operator opens, not found out as a 401 per record.

The check runs once per resource environment (the agent's own and each internal
sub-agent's) before the first record; it names the environment variable and the resource.
An OpenAI-compatible connection to a local server needs no key.
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
from flink_agents_py.api import (
    Agent,
    AgentsError,
    ChatModelSetup,
    InputEvent,
    InternalSubagent,
    MissingApiKeyError,
    OutputEvent,
    ResourceDescriptor,
    ResourceError,
    ResourceType,
    action,
)
from flink_agents_py.integrations.chat_models import AnthropicChatModel, OpenAIChatModel
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import AgentCore

pytestmark = pytest.mark.timeout(60)

RAN: list[Any] = []


class Echo(Agent):
    @action(InputEvent)
    @staticmethod
    def on_input(event: InputEvent, ctx: Any) -> None:
        RAN.append(event.input)
        ctx.send_event(OutputEvent(output=event.input))


def with_connection(agent: Agent, descriptor: ResourceDescriptor, name: str = "llm") -> Agent:
    agent.add_resource(name, ResourceType.CHAT_MODEL_CONNECTION, descriptor)
    agent.add_resource("model", ResourceType.CHAT_MODEL,
                       ResourceDescriptor(ChatModelSetup, connection=name))
    return agent


def run(agent: Agent) -> Any:
    return AgentsExecutionEnvironment.local().from_list([{"key": "a"}]).apply(agent).run()


@pytest.fixture(autouse=True)
def _no_keys(monkeypatch: pytest.MonkeyPatch):
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "MY_LLM_KEY"):
        monkeypatch.delenv(var, raising=False)
    RAN.clear()


def test_missing_openai_key_fails_at_open_naming_variable_and_resource():
    agent = with_connection(Echo(), ResourceDescriptor(OpenAIChatModel, timeout_s=1))
    with pytest.raises(MissingApiKeyError) as e:
        run(agent)
    assert isinstance(e.value, AgentsError) and isinstance(e.value, ResourceError)
    assert "OPENAI_API_KEY" in str(e.value) and "'llm'" in str(e.value)
    assert e.value.env_var == "OPENAI_API_KEY" and e.value.resource == "llm"
    assert RAN == []  # before the first record


def test_custom_key_variable_of_a_remote_server_is_named():
    agent = with_connection(Echo(), ResourceDescriptor(
        OpenAIChatModel, base_url="https://llm.example.com/v1", api_key_env="MY_LLM_KEY"))
    with pytest.raises(MissingApiKeyError, match=r"\$MY_LLM_KEY"):
        run(agent)


@pytest.mark.parametrize("url", ["http://127.0.0.1:8080/v1", "http://localhost:8000/v1",
                                 "http://[::1]:8000/v1", "http://10.1.2.3:8000/v1"])
def test_local_openai_compatible_server_needs_no_key(url: str):
    agent = with_connection(Echo(), ResourceDescriptor(OpenAIChatModel, base_url=url))
    result = run(agent)
    assert result.errors == [] and result.outputs == [{"key": "a"}]


def test_key_requirement_can_be_set_explicitly(monkeypatch: pytest.MonkeyPatch):
    local_but_keyed = ResourceDescriptor(OpenAIChatModel, base_url="http://127.0.0.1:1/v1",
                                         api_key_required=True)
    with pytest.raises(MissingApiKeyError):
        run(with_connection(Echo(), local_but_keyed))
    remote_open = ResourceDescriptor(OpenAIChatModel, base_url="https://llm.example.com/v1",
                                     api_key_required=False)
    assert run(with_connection(Echo(), remote_open)).outputs == [{"key": "a"}]
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert run(with_connection(Echo(), ResourceDescriptor(OpenAIChatModel))).outputs == [
        {"key": "a"}]


def test_missing_anthropic_key_fails_at_open():
    agent = with_connection(Echo(), ResourceDescriptor(AnthropicChatModel))
    with pytest.raises(MissingApiKeyError, match=r"'llm'.*ANTHROPIC_API_KEY"):
        run(agent)


def test_core_open_checks_internal_subagents_too():
    child = with_connection(Echo(), ResourceDescriptor(OpenAIChatModel), name="child_llm")
    agent = Echo().add_resource("advisor", ResourceType.AGENT, ResourceDescriptor(
        InternalSubagent, agent=child, description="advice"))
    core = AgentCore(AgentPlan.from_agent(agent))
    try:
        with pytest.raises(MissingApiKeyError, match=r"sub-agent 'advisor'.*'child_llm'"):
            core.open()
    finally:
        core.close()


# A user's agent whose OpenAI connection has no key in the environment; each test appends
# how it runs the agent.
ASK_AGENT = textwrap.dedent("""\
    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.api import (Agent, ChatMessage, ChatModelSetup, InputEvent,
                                     OutputEvent, ResourceDescriptor, ResourceType, action)
    from flink_agents_py.integrations.chat_models import OpenAIChatModel


    class Ask(Agent):
        @action(InputEvent)
        @staticmethod
        async def on_input(event, ctx):
            r = await ctx.chat("model", [ChatMessage(content=event.input["q"])])
            ctx.send_event(OutputEvent(output=r.message.content))


    agent = Ask()
    agent.add_resource("openai", ResourceType.CHAT_MODEL_CONNECTION,
                       ResourceDescriptor(OpenAIChatModel, timeout_s=2))
    agent.add_resource("model", ResourceType.CHAT_MODEL,
                       ResourceDescriptor(ChatModelSetup, connection="openai"))
    records = [{"key": str(i), "q": "hi"} for i in range(3)]
    """)


def _run_without_key(tmp_path: Path, script: str, runner: str) -> subprocess.CompletedProcess:
    (tmp_path / script).write_text(ASK_AGENT + textwrap.dedent(runner))
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "OPENAI_API_KEY", "OPENAI_BASE_URL")}
    return subprocess.run([sys.executable, script], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=180)


def test_user_script_without_key_stops_with_one_clear_error(tmp_path: Path):
    proc = _run_without_key(tmp_path, "ask.py", """\
        print(AgentsExecutionEnvironment.local().from_list(records).apply(agent).collect())
        """)
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("flink_agents_py.api._errors.MissingApiKeyError:") or \
        last.startswith("MissingApiKeyError:"), last
    assert "OPENAI_API_KEY" in last and "'openai'" in last


@pytest.mark.flink
def test_flink_job_without_key_stops_before_submission(tmp_path: Path):
    """On a MiniCluster the workers share the driver's environment: the missing key is named
    before the job is submitted, as one line, not as a Java trace from the operator's open."""
    proc = _run_without_key(tmp_path, "ask_flink.py", """\
        from flink_agents_py.flink import create_stream_environment

        env = create_stream_environment()
        ds = env.from_collection(records)
        job = (AgentsExecutionEnvironment.flink(env)
               .from_datastream(ds, key_selector=lambda r: r["key"]).apply(agent))
        print("SUBMITTING")
        with job.to_datastream().execute_and_collect("ask") as outputs:
            print(list(outputs))
        """)
    assert proc.returncode != 0
    assert "SUBMITTING" not in proc.stdout
    last = proc.stderr.strip().splitlines()[-1]
    assert "MissingApiKeyError" in last and "OPENAI_API_KEY" in last and "'openai'" in last, last
