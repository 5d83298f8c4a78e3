"""Apache Flink Agents' async execution e2e program, ported by its imports, keyed by
``uuid.uuid4()``, run as a user runs it: a script in a folder outside the repository.

Flink Agents pickles whatever ``key_by`` returns; here the default key encoding gives a
``UUID`` a stable Flink key (``{"uuid": ...}``). Before, every record of this program was
refused for its key and the job ended with no output and no error. One more record makes an
action fail: the program never reads the error output (Flink Agents' API has none), so
``execute()`` logs it at WARNING as it comes and raises ``UnreadErrorsError`` at the end,
after the other records' outputs were printed (Flink Agents fails the job at such a record).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("pyflink")

ROOT = Path(__file__).resolve().parents[1]
VENV_PY = ROOT / ".venv" / "bin" / "python"
PYTHON = VENV_PY if VENV_PY.exists() else Path(sys.executable)

AGENT = '''
    import time
    import uuid
    from typing import Any, Dict, Sequence

    from flink_agents_py.compat import (
        Agent, BaseChatModelSetup, ChatMessage, ChatRequestEvent, ChatResponseEvent, Event,
        InputEvent, MessageRole, OutputEvent, ResourceDescriptor, RunnerContext, ToolType,
        action, chat_model_setup, tool)


    class SlowMockChatModel(BaseChatModelSetup):
        """Mock ChatModel with slow connection."""

        def open(self) -> None:
            """Do nothing."""

        @property
        def model_kwargs(self) -> Dict[str, Any]:
            return {}

        def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
            time.sleep(1)  # Simulate network delay
            if "sum" in messages[-1].content:
                input = messages[-1].content
                function = {"name": "add", "arguments": {"a": 1, "b": 2}}
                tool_call = {"id": uuid.uuid4(), "type": ToolType.FUNCTION,
                             "function": function}
                return ChatMessage(role=MessageRole.ASSISTANT, content=input,
                                   tool_calls=[tool_call])
            content = "\\n".join([message.content for message in messages])
            return ChatMessage(role=MessageRole.ASSISTANT, content=content)


    class AsyncTestAgent(Agent):
        """Agent for testing async execution."""

        @chat_model_setup
        @staticmethod
        def slow_chat_model() -> ResourceDescriptor:
            return ResourceDescriptor(
                clazz=f"{SlowMockChatModel.__module__}.{SlowMockChatModel.__name__}",
                connection="placement", tools=["add"])

        @tool
        @staticmethod
        def add(a: int, b: int) -> int:
            """Calculate the sum of a and b."""
            time.sleep(1)  # Simulate slow tool execution
            return a + b

        @action(InputEvent.EVENT_TYPE)
        @staticmethod
        def process_input(event: Event, ctx: RunnerContext) -> None:
            input = InputEvent.from_event(event).input
            if input == "explode":
                raise ValueError(f"cannot process {input!r} (key {ctx.key!r})")
            ctx.send_event(ChatRequestEvent(model="slow_chat_model", messages=[
                ChatMessage(role=MessageRole.USER, content=input, extra_args={"task": input})]))

        @action(ChatResponseEvent.EVENT_TYPE)
        @staticmethod
        def process_chat_response(event: Event, ctx: RunnerContext) -> None:
            input = ChatResponseEvent.from_event(event).response
            ctx.send_event(OutputEvent(output=f"{type(ctx.key).__name__}: {input.content!r}"))
'''

PROGRAM = '''
    import time
    import uuid

    from pyflink.datastream import StreamExecutionEnvironment

    from async_agent import AsyncTestAgent
    from flink_agents_py.compat import AgentsExecutionEnvironment

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)

    input_stream = env.from_collection(
        ["calculate the sum of 1 and 2" for _ in range(10)] + ["explode"])

    agents_env = AgentsExecutionEnvironment.get_execution_environment(env=env)
    output_datastream = (
        agents_env.from_datastream(input=input_stream, key_selector=lambda x: uuid.uuid4())
        .apply(AsyncTestAgent())
        .to_datastream()
    )

    output_datastream.print()

    start_time = time.time()
    try:
        agents_env.execute()
    finally:
        print(f"EXECUTION {time.time() - start_time:.1f}", flush=True)
'''


@pytest.mark.flink
@pytest.mark.timeout(600)
def test_the_async_e2e_program_keyed_by_uuid4_runs_and_its_failed_record_is_raised(tmp_path):
    assert ROOT not in tmp_path.resolve().parents
    (tmp_path / "async_agent.py").write_text(textwrap.dedent(AGENT))
    (tmp_path / "prog.py").write_text(textwrap.dedent(PROGRAM))
    env = {**{k: v for k, v in os.environ.items() if k != "FLINK_CONF_DIR"},
           "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([str(PYTHON), "prog.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=540)
    outputs = [line for line in proc.stdout.splitlines() if line.startswith("UUID: ")]
    assert len(outputs) == 10, (proc.stdout[-3000:], proc.stderr[-3000:])
    assert all("calculate the sum of 1 and 2" in o and "3" in o for o in outputs)
    # the failed record: logged as it came, then raised when the job ended
    assert proc.returncode == 1, proc.stderr[-3000:]
    warning = [line for line in proc.stderr.splitlines() if "unread error record" in line]
    assert len(warning) == 1, proc.stderr[-3000:]
    assert "key UUID('" in warning[0] and "ValueError: cannot process 'explode'" in warning[0]
    assert "UnreadErrorsError: 1 record(s) went to the agent's error output" in proc.stderr
    assert "EXECUTION " in proc.stdout  # (its time: the machine's load decides it here)
