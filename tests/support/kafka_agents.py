"""Helpers of the Kafka tests that Flink workers import: a counting model and a failpoint.

Importable by thread-mode workers (by reference). Everything a worker needs travels in the
agent's resource descriptor or the pickled failpoint, so no process-wide setting is needed.

- ``CountingChatModel``: the review job's scripted model that appends ``<idx> <attempt>`` to
  ``<dir>/calls.log`` for every request it receives (``idx`` is the ``[#idx]`` tag the test
  appends to each review text; ``attempt`` is 0 before the crash, 1 after). Slow on the first
  attempt so the crash finds the stream in the middle.
- ``CrashMidStream``: logs every recorded durable call with the last completed checkpoint, and
  crashes the job once when enough calls were recorded and two more checkpoints completed.
- ``StructuredOutput``: an agent whose outputs are pydantic models (``Verdict``).
"""

from __future__ import annotations

import decimal
import re
import time
from typing import Any

from pydantic import BaseModel

from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents_py.integrations.chat_models import ScriptedChatModel
from support.crash import CrashOnceBase, append_line, first_attempt, log_lines

_TAG = re.compile(r"\[#(\d+)\]")


class CountingChatModel(ScriptedChatModel):
    """``ScriptedChatModel`` that counts the requests it receives (see the module docstring).

    Attributes:
        log_dir: where ``calls.log`` and the crash marker are.
        slow_s: extra latency of each request before the crash.
    """

    log_dir: str
    slow_s: float = 0.0

    def chat(self, messages: Any, **kwargs: Any) -> Any:
        text = next((m.content for m in reversed(messages)
                     if getattr(m.role, "value", m.role) == "user"), "")
        m = _TAG.search(text)
        first = first_attempt(self.log_dir)
        append_line(self.log_dir, "calls.log", f"{m.group(1) if m else -1} {0 if first else 1}")
        if first and self.slow_s:
            time.sleep(self.slow_s)
        return super().chat(messages, **kwargs)


def read_calls(d: str) -> dict[int, list[int]]:
    """``{idx: [attempt, ...]}`` of the requests the model received."""
    out: dict[int, list[int]] = {}
    for idx, attempt in log_lines(d, "calls.log"):
        out.setdefault(int(idx), []).append(int(attempt))
    return out


def read_recorded(d: str) -> list[tuple[str, int, int]]:
    """``[(key, seq, completed checkpoint when recorded)]`` of the first attempt."""
    return [(key, int(call_id.split("/", 1)[0][1:]), int(ckpt))
            for key, call_id, ckpt in log_lines(d, "recorded.log")]


class CrashMidStream(CrashOnceBase):
    """Crash the job once, mid-stream, after checkpoints cover some recorded calls.

    Args:
        d: the test's directory (``checkpoints/``, ``recorded.log``, marker ``crashed`` holding
            the last completed checkpoint at the crash).
        min_calls: recorded calls needed before the crash.
        pace_s: how long each incoming record is held on the first attempt, in seconds.
    """

    def __init__(self, d: str, min_calls: int, pace_s: float = 0.003) -> None:
        super().__init__(d)
        self.min_calls = min_calls
        self.pace_s = pace_s
        self.n = 0
        self.first_ckpt: int | None = None

    def __call__(self, point: str, key: Any, info: dict[str, Any]) -> None:
        if not self.first_attempt():
            return
        if point == "element":
            # Hold each record a moment (first attempt only): back-pressure keeps the bounded
            # input open for a few seconds, so checkpoints complete while calls are recorded
            # (none can complete once the end-of-input drain runs), on an idle machine too.
            time.sleep(self.pace_s)
            return
        if point != "call_recorded":
            return
        ckpt = self.completed_checkpoint()
        append_line(self.d, "recorded.log", f"{key} {info['call_id']} {ckpt}")
        self.n += 1
        if self.first_ckpt is None:
            self.first_ckpt = ckpt
        if self.n >= self.min_calls and ckpt >= self.first_ckpt + 2:
            self.crash(str(ckpt),
                       f"injected crash after {self.n} recorded calls, checkpoint {ckpt}")


class Verdict(BaseModel):
    """A structured output: the record's key and an amount (a ``Decimal``: no plain JSON)."""

    key: str
    amount: decimal.Decimal
    note: str = ""


class StructuredOutput(Agent):
    """Outputs a ``Verdict`` (a pydantic model) per record: ``amount = n / 4``, ``note`` of
    ``"note"`` characters (a large output)."""

    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        """Send the record's verdict."""
        amount = decimal.Decimal(event.input["n"]) / 4
        note = "x" * event.input.get("note", 0)
        ctx.send_event(OutputEvent(output=Verdict(key=ctx.key, amount=amount, note=note)))
