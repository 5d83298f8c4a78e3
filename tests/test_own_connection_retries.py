"""A ``ProviderError`` with a 5xx status from a connection of one's own is retried.

``ProviderError(message, status_code=503)`` was classified ``unavailable`` (so a setup's
``fallbacks`` took over) but was not retryable unless ``retryable=True`` was passed too: a
setup with ``error_policy="retry"`` failed at the first 503 of a connection of one's own,
while the built-in connections' 503s were retried.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from flink_agents_py.api import ProviderError

ROOT = Path(__file__).resolve().parents[1]
VENV_PY = ROOT / ".venv" / "bin" / "python"
PYTHON = VENV_PY if VENV_PY.exists() else Path(sys.executable)

pytestmark = pytest.mark.timeout(300)

MODULE = textwrap.dedent('''
    import json
    from collections.abc import Sequence
    from typing import Any

    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.api import (Agent, ChatMessage, ChatModelConnection, ChatModelSetup,
                                     ChatResponse, ChatResponseError, InputEvent, MessageRole,
                                     OutputEvent, ProviderError, ResourceDescriptor,
                                     ResourceType, action)

    CALLS = []


    class Flaky(ChatModelConnection):
        """A provider of one's own: 503 twice, then an answer."""

        def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
            CALLS.append(1)
            if len(CALLS) <= 2:
                raise ProviderError("overloaded", status_code=503)
            return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content="ok"))


    class Asker(Agent):
        @action(InputEvent)
        @staticmethod
        async def ask(event, ctx):
            try:
                r = await ctx.chat("m", [ChatMessage(content="hi")])
            except ChatResponseError as e:
                ctx.send_event(OutputEvent(output={"error": str(e)}))
                return
            ctx.send_event(OutputEvent(output={"answer": r.message.content,
                                               "retries": r.metadata.get("retries")}))


    agent = Asker()
    agent.add_resource("c", ResourceType.CHAT_MODEL_CONNECTION, ResourceDescriptor(Flaky))
    agent.add_resource("m", ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="c", error_policy="retry", retry_initial_backoff_s=0.01,
        retry_max_backoff_s=0.02))
    out = AgentsExecutionEnvironment.local().from_list([{"key": "k"}]).apply(agent).collect()
    print(json.dumps({"out": out, "calls": len(CALLS)}))
''')


def test_a_503_of_ones_own_connection_is_retried_by_the_retry_policy(tmp_path: Path) -> None:
    (tmp_path / "asker.py").write_text(MODULE)
    proc = subprocess.run([str(PYTHON), "asker.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=250, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result == {"out": [{"answer": "ok", "retries": 2}], "calls": 3}, result


@pytest.mark.parametrize(("status", "retryable"), [
    (None, False), (400, False), (404, False), (408, True), (429, True), (500, True),
    (503, True), (529, True)])
def test_retryable_follows_the_status_unless_given(status: int | None, retryable: bool) -> None:
    assert ProviderError("x", status_code=status).retryable is retryable
    assert ProviderError("x", status_code=status, retryable=not retryable).retryable \
        is (not retryable)
    # a used-up quota is never retried, whatever else is said
    assert ProviderError("x", status_code=429, quota_exhausted=True).retryable is False
