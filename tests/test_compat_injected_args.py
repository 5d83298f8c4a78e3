"""Flink Agents' injected tool arguments (``InjectedArg``, ``@tool(injected_args=...)``).

Its tool parameter injection e2e agent (and its checkpoint recovery agent) declare
``@tool(injected_args={"tenant_id": InjectedArg.from_config("tenant_id")})``: the runtime
fills the parameter, the model never sees it. Before, every use raised a
``NotImplementedError`` (the feature was not offered), so such a program did not start.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VENV_PY = ROOT / ".venv" / "bin" / "python"
PYTHON = VENV_PY if VENV_PY.exists() else Path(sys.executable)

pytestmark = pytest.mark.timeout(60)

# Written as that e2e agent writes it: a connection of its own (Flink Agents' form) that
# fails if the injected parameter leaks into the tool schema, a setup subclass, the value
# from the environment's configuration; plus a memory-injected tool beside it.
AGENT = """
    import json
    from flink_agents_py.compat import Agent
    from flink_agents_py.compat import ChatMessage, MessageRole
    from flink_agents_py.compat import BaseChatModelConnection, BaseChatModelSetup
    from flink_agents_py.compat import action, chat_model_connection, chat_model_setup, tool
    from flink_agents_py.compat import ChatRequestEvent, ChatResponseEvent
    from flink_agents_py.compat import Event, InputEvent, OutputEvent
    from flink_agents_py.compat import ResourceDescriptor
    from flink_agents_py.compat import RunnerContext
    from flink_agents_py.compat import InjectedArg


    class ToolParameterInjectionAgent(Agent):
        @chat_model_connection
        @staticmethod
        def mock_connection() -> ResourceDescriptor:
            return ResourceDescriptor(
                clazz=f"{MockToolChatConnection.__module__}.{MockToolChatConnection.__name__}")

        @chat_model_setup
        @staticmethod
        def mock_model() -> ResourceDescriptor:
            return ResourceDescriptor(
                clazz=f"{MockToolChatModel.__module__}.{MockToolChatModel.__name__}",
                connection="mock_connection", model="mock", tools=["query_order", "whoami"])

        @tool(injected_args={"tenant_id": InjectedArg.from_config("tenant_id")})
        @staticmethod
        def query_order(order_id: str, tenant_id: str) -> str:
            \"\"\"Query order in the current tenant.

            Parameters
            ----------
            order_id : str
                The order id requested by the model.
            tenant_id : str
                The tenant id injected by runtime.
            \"\"\"
            return f"checked:{tenant_id}:{order_id}"

        @tool(injected_args={"caller": InjectedArg.from_short_term_memory("user.name"),
                             "mood": InjectedArg()})
        @staticmethod
        def whoami(greeting: str, caller: str, mood: str) -> str:
            \"\"\"Greet the caller.\"\"\"
            return f"{greeting} {caller} ({mood})"

        @action(InputEvent.EVENT_TYPE)
        @staticmethod
        def request_chat(event: Event, ctx: RunnerContext) -> None:
            order_id = str(InputEvent.from_event(event).input)
            ctx.short_term_memory.set("user.name", "ann-" + order_id)
            if order_id != "no-mood":
                ctx.sensory_memory.set("mood", "calm")
            ctx.send_event(ChatRequestEvent(
                model="mock_model", messages=[ChatMessage.of(MessageRole.USER, order_id)]))

        @action(ChatResponseEvent.EVENT_TYPE)
        @staticmethod
        def emit_result(event: Event, ctx: RunnerContext) -> None:
            response_event = ChatResponseEvent.from_event(event)
            ctx.send_event(OutputEvent(output=response_event.response.text))


    class MockToolChatConnection(BaseChatModelConnection):
        def chat(self, messages, tools=None, output_schema=None, **kwargs):
            last_message = messages[-1]
            if last_message.role == MessageRole.TOOL:
                return ChatMessage.of(MessageRole.ASSISTANT, " | ".join(
                    m.text for m in messages if m.role == MessageRole.TOOL))
            for candidate_tool in tools or []:
                schema = str(candidate_tool.metadata.get_parameters_dict())
                if "tenant_id" in schema or "caller" in schema or "mood" in schema:
                    raise RuntimeError("Injected argument leaked into tool schema.")
            order_id = str(last_message.text)
            return ChatMessage.of(MessageRole.ASSISTANT, "", tool_calls=[
                {"id": f"call-{order_id}", "type": "function",
                 "function": {"name": "query_order", "arguments": {"order_id": order_id}}},
                {"id": f"who-{order_id}", "type": "function",
                 "function": {"name": "whoami", "arguments": {"greeting": "hi"}}}])


    class MockToolChatModel(BaseChatModelSetup):
        @property
        def model_kwargs(self):
            return {}
"""

MAIN = """
    from flink_agents_py.compat import AgentsExecutionEnvironment
    from injection_agent import ToolParameterInjectionAgent

    env = AgentsExecutionEnvironment.get_execution_environment()
    env.get_config().set_str("tenant_id", "acme")
    out = env.from_list([{"key": "o1", "value": "o1"}, {"key": "o2", "value": "no-mood"}]
                        ).apply(ToolParameterInjectionAgent()).to_list()
    env.execute()
    print("RESULT", json.dumps(out))
"""


def test_the_tool_parameter_injection_agent_gets_its_values_from_config_and_memory(
        tmp_path: Path) -> None:
    (tmp_path / "injection_agent.py").write_text(textwrap.dedent(AGENT))
    (tmp_path / "main.py").write_text("import json\n" + textwrap.dedent(MAIN))
    proc = subprocess.run([str(PYTHON), "main.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=50, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))
    assert json.loads(line[7:]) == [
        {"o1": "checked:acme:o1 | hi ann-o1 (calm)"},
        # nothing in sensory memory at "mood": the call is refused, the model is told
        {"o2": "checked:acme:no-mood | Error: no sensory_memory value 'mood' to inject "
               "into 'mood' of tool 'whoami'"}]


def test_injected_args_naming_no_parameter_are_refused_where_declared() -> None:
    from flink_agents_py.compat import InjectedArg, tool

    with pytest.raises(ValueError, match="'tenant' is not a parameter"):
        @tool(injected_args={"tenant": InjectedArg.from_config("tenant_id")})
        def query_order(order_id: str, tenant_id: str) -> str:
            """Query."""
            return order_id
    assert InjectedArg(source="CONFIG").with_default_key("k").key == "k"


# Flink Agents' YAML form of the same agent: the tool's ``injected_args`` in the document
YAML = """
    agents:
      - name: yaml_tool_parameter_injection_agent
        description: YAML-driven agent with declarative tool parameter injection.
        chat_model_connections:
          - name: mock_connection
            clazz: injection_agent.MockToolChatConnection
        chat_model_setups:
          - name: mock_model
            clazz: injection_agent.MockToolChatModel
            connection: mock_connection
            model: mock
            tools: [query_order, whoami]
        tools:
          - name: query_order
            function: tools_module:query_order
            injected_args:
              tenant_id:
                source: CONFIG
                key: tenant_id
          - name: whoami
            function: tools_module:whoami
            injected_args:
              caller: {source: short_term_memory, key: user.name}
              mood: {}
        actions:
          - name: request_chat
            function: injection_agent:ToolParameterInjectionAgent.request_chat
            trigger_conditions: [input]
          - name: emit_result
            function: injection_agent:ToolParameterInjectionAgent.emit_result
            trigger_conditions: [chat_response]
"""

TOOLS_MODULE = """
    def query_order(order_id: str, tenant_id: str) -> str:
        \"\"\"Query order in the current tenant.\"\"\"
        return f"yaml:{tenant_id}:{order_id}"


    def whoami(greeting: str, caller: str, mood: str) -> str:
        \"\"\"Greet the caller.\"\"\"
        return f"{greeting} {caller} ({mood})"
"""

YAML_MAIN = """
    import json
    from flink_agents_py.compat import AgentsExecutionEnvironment

    env = AgentsExecutionEnvironment.get_execution_environment()
    env.get_config().set_str("tenant_id", "acme")
    env.load_yaml("agent.yaml")
    out = env.from_list([{"key": "o1", "value": "o1"}]).apply(
        "yaml_tool_parameter_injection_agent").to_list()
    env.execute()
    print("RESULT", json.dumps(out))
"""


def test_the_yaml_tool_parameter_injection_agent(tmp_path: Path) -> None:
    for name, text in {"injection_agent.py": AGENT, "tools_module.py": TOOLS_MODULE,
                       "agent.yaml": YAML, "main.py": YAML_MAIN}.items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    proc = subprocess.run([str(PYTHON), "main.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=50, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))
    assert json.loads(line[7:]) == [{"o1": "yaml:acme:o1 | hi ann-o1 (calm)"}]
