"""A user's agent for the cluster operations tests (``tests/test_cluster_ops.py``).

Copied with ``ops_main.py`` into a temporary directory outside the repository and shipped to
the cluster with ``flink run -pyfs``. Everything the workers need travels in the plan (the
resource descriptors and the pickled observer), not in files next to this module: in thread
mode a TaskManager keeps one Python interpreter for its lifetime, so a module imported by one
job is the module every later job on that TaskManager gets, and the folder it was shipped in
is deleted when that job ends.

- ``Ops(log_dir, latency_s)`` (the agent): for each input, submits the ``helper`` sub-agent,
  then awaits a chat with ``main_model`` while the sub-agent's own chat runs, then awaits the
  sub-agent; emits one output with the input's ``seq`` and a per-key counter kept in
  short-term memory.
- ``Helper(log_dir, latency_s)`` (an internal sub-agent): one chat with ``helper_model``.
- ``SlowModel``: a scripted chat model that sleeps ``latency_s``, then waits while the file
  ``<log_dir>/hold`` exists (so a test can freeze every run mid-call before it stops the job;
  at most ``HOLD_MAX_S``), appends ``<tag> <pid> <start> <end> <this module's file>`` to
  ``calls.log`` (one line per execution: the counter of calls outside the job) and answers
  with the tag ``<<key/seq/kind>>`` of the request.
- ``CallLog(log_dir)``: an observer appending ``<tag> <time> <call id>`` to ``recorded.log``
  when the outcome of a call answered by the model is recorded in keyed state.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import time
from collections.abc import Sequence
from typing import Any

from flink_agents_py.api import (
    Agent,
    ChatMessage,
    ChatModelSetup,
    ChatResponse,
    InputEvent,
    InternalSubagent,
    MessageRole,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    TokenUsage,
    action,
)
from flink_agents_py.integrations.chat_models import ScriptedChatModel
from flink_agents_py.runtime import Observer

TAG = re.compile(r"<<([^<>]+)>>")
HOLD_MAX_S = 120.0


def _append(log_dir: str, name: str, line: str) -> None:
    with open(os.path.join(log_dir, name), "a", encoding="utf-8") as f:
        f.write(line + "\n")


class SlowModel(ScriptedChatModel):
    """A model call that takes ``latency_s`` (or longer, on hold) and is counted in a file.

    Attributes:
        log_dir: where ``calls.log`` and the ``hold`` file are.
        latency_s: how long each call takes, in seconds.
    """

    log_dir: str = ""
    latency_s: float = 1.0

    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        """Wait, count the execution, answer with the request's tag."""
        text = next((m.content for m in reversed(messages) if m.role == MessageRole.USER), "")
        found = TAG.search(text)
        tag = found.group(1) if found else "?"
        start = time.time()
        time.sleep(self.latency_s)
        hold = pathlib.Path(self.log_dir) / "hold"
        deadline = time.monotonic() + HOLD_MAX_S
        while hold.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        _append(self.log_dir, "calls.log",
                f"{tag} {os.getpid()} {start:.3f} {time.time():.3f} {__file__}")
        return ChatResponse(
            message=ChatMessage(role=MessageRole.ASSISTANT, content=f"done <<{tag}>>"),
            model="slow", usage=TokenUsage(input_tokens=len(text.split()), output_tokens=2))


class CallLog(Observer):
    """Logs each recorded model answer's tag with the time it was recorded.

    Args:
        log_dir: where ``recorded.log`` is written.
    """

    def __init__(self, log_dir: str) -> None:
        self.log_dir = log_dir

    def call_finished(self, key: Any, call_id: str, ok: bool, result: Any) -> None:
        """Append ``<tag> <time> <call id>`` to ``recorded.log`` for each tag in the outcome."""
        text = result if isinstance(result, str) else json.dumps(result, default=str)
        for tag in TAG.findall(text):
            if tag.count("/") == 2:
                _append(self.log_dir, "recorded.log", f"{tag} {time.time():.3f} {call_id}")


def _add_model(agent: Agent, name: str, log_dir: str, latency_s: float) -> None:
    agent.add_resource(f"{name}_connection", ResourceType.CHAT_MODEL_CONNECTION,
                       ResourceDescriptor(SlowModel, log_dir=log_dir, latency_s=latency_s))
    agent.add_resource(name, ResourceType.CHAT_MODEL,
                       ResourceDescriptor(ChatModelSetup, connection=f"{name}_connection"))


class Helper(Agent):
    """The sub-agent: one chat with its own model."""

    def __init__(self, log_dir: str, latency_s: float) -> None:
        super().__init__()
        _add_model(self, "helper_model", log_dir, latency_s)

    @action(InputEvent)
    @staticmethod
    async def check(event: InputEvent, ctx: RunnerContext) -> None:
        """Ask ``helper_model`` about the input; emit its answer."""
        reply = await ctx.chat("helper_model", [ChatMessage(
            content=f"check <<{event.input['key']}/{event.input['seq']}/helper>>")])
        ctx.send_event(OutputEvent(output=reply.message.content))


class Ops(Agent):
    """The agent: a sub-agent and a chat in flight at once, then one output per input."""

    def __init__(self, log_dir: str, latency_s: float) -> None:
        super().__init__()
        _add_model(self, "main_model", log_dir, latency_s)
        self.add_resource("helper", ResourceType.AGENT, ResourceDescriptor(
            InternalSubagent, agent=Helper(log_dir, latency_s), description="Checks one input."))

    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        """Delegate to ``helper`` and chat with ``main_model`` meanwhile; emit both answers."""
        key, seq = event.input["key"], event.input["seq"]
        n = (ctx.short_term_memory.get("n") or 0) + 1
        ctx.short_term_memory.set("n", n)
        helper = await ctx.submit_subagent("helper", {"key": key, "seq": seq})
        reply = await ctx.chat("main_model", [ChatMessage(content=f"answer <<{key}/{seq}/main>>")])
        checked = await helper
        ctx.send_event(OutputEvent(output={
            "key": key, "seq": seq, "n": n, "reply": reply.message.content,
            "helper": checked.result if checked.success else checked.error_message}))
