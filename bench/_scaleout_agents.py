"""Agents, the model and the stamping functions of the scale-out job (``bench._scaleout_job``).

In a module of their own, not the job's ``__main__``, so the TaskManagers unpickle them by
reference. When the TaskManagers have ``SCALEOUT_TID_DIR`` in their environment, the
operator's thread and the I/O executor's loop thread write their native thread ids there, so
the driver can read their CPU from ``/proc/<pid>/task/<tid>/stat``.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from typing import Any

from bench._agents import SlowChatAgent, SlowChatModel
from flink_agents_py.api import (
    ChatMessage,
    ChatResponse,
    InputEvent,
    ResourceDescriptor,
    RunnerContext,
    action,
    chat_model_connection,
)

__all__ = [
    "HoldAgent", "ScaleChatModel", "SlowAgent", "StampIn", "StampOut", "TID_DIR_ENV", "key_of",
    "note_thread",
]

TID_DIR_ENV = "SCALEOUT_TID_DIR"
"""The TaskManagers' environment variable naming the folder for thread ids."""

_noted: set[tuple[str, int]] = set()


def note_thread(role: str) -> None:
    """Write ``$SCALEOUT_TID_DIR/<role>-<pid>-<native thread id>`` once per role and thread.

    Args:
        role: ``op`` (the operator's task thread) or ``io`` (the I/O executor's loop thread).
    """
    tid = threading.get_native_id()
    if (role, tid) in _noted:
        return
    _noted.add((role, tid))
    tid_dir = os.environ.get(TID_DIR_ENV)
    if not tid_dir:
        return
    try:
        path = os.path.join(tid_dir, f"{role}-{os.getpid()}-{tid}")
        with open(path, "w") as f:
            f.write(threading.current_thread().name)
    except OSError:
        pass


class ScaleChatModel(SlowChatModel):
    """``bench._agents.SlowChatModel`` that notes the I/O executor's loop thread."""

    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        """Note the thread, then answer as ``SlowChatModel`` (after ``latency_s`` s)."""
        note_thread("io")
        return await super().achat(messages, **kwargs)


class SlowAgent(SlowChatAgent):
    """``bench._agents.SlowChatAgent`` (input -> one 200 ms chat -> output with the input's
    stamp) on ``ScaleChatModel``, noting the operator's thread."""

    @chat_model_connection
    @staticmethod
    def slow_connection() -> ResourceDescriptor:
        return ResourceDescriptor(ScaleChatModel, latency_s=0.2)

    @action(InputEvent)
    @staticmethod
    def ask(event: InputEvent, ctx: RunnerContext) -> None:
        note_thread("op")  # actions run on the operator's thread
        SlowChatAgent.ask(event, ctx)


class HoldAgent(SlowAgent):
    """Like ``SlowAgent``, with a chat that takes 600 s: every run stays in flight."""

    @chat_model_connection
    @staticmethod
    def slow_connection() -> ResourceDescriptor:
        return ResourceDescriptor(ScaleChatModel, latency_s=600.0)


class StampIn:
    """``record -> record + {"t": now}`` (the input stamp, taken after parsing)."""

    def __call__(self, record: Any) -> Any:
        return {**record, "t": time.time()}


class StampOut:
    """An output -> ``{"key", "t_in", "t_out", "ok"}``; notes the operator's thread id."""

    def __call__(self, out: Any) -> Any:
        note_thread("op")
        if "echo" in out:
            return {"key": out["key"], "t_in": out["echo"]["t"], "t_out": time.time(), "ok": True}
        return {"key": out["key"], "t_in": out["t"], "t_out": time.time(),
                "ok": out.get("error") is None}


def key_of(record: Any) -> Any:
    """The record's ``"key"`` field."""
    return record["key"]
