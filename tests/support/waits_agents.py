"""Agents that wait for outside events and timers (local and MiniCluster tests of waits).

Importable by Flink workers. The record names a directory (``dir``): each call of ``note``
appends ``note <key>`` to ``<dir>/calls.log`` and writes ``<dir>/waiting-<key>`` (what an
outside-event source waits for before sending), so a test counts executions across
re-entries and restores.
"""

from __future__ import annotations

import os
from typing import Any

from flink_agents_py.api import (
    Agent,
    InputEvent,
    OutputEvent,
    RunnerContext,
    WaitTimeoutError,
    action,
    tool,
)
from support.crash import append_line


def note(d: str, key: str) -> str:
    """A durable call made before the wait: logged, and marks the key as waiting."""
    if d:
        append_line(d, "calls.log", f"note {key}")
        with open(os.path.join(d, f"waiting-{key}"), "w") as f:
            f.write("1")
    return f"noted {key}"


def mark_done(d: str, key: str, what: str) -> None:
    """A durable call after the wait: ``<dir>/done-<key>`` holds what the wait gave."""
    if d:
        with open(os.path.join(d, f"done-{key}"), "w") as f:
            f.write(what)


class Approver(Agent):
    """Notes the request, waits for ``go-<key>`` (timeout from the record), outputs the result."""

    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        rec: dict[str, Any] = event.input
        d = rec.get("dir", "")
        # the wait opens first (at the end of this step), so it is open once ``note`` has
        # marked the key waiting: an event sent on that mark never arrives too early
        waiter = ctx.wait_for(f"go-{ctx.key}", timeout_s=rec.get("timeout_s"))
        noted = await ctx.durable_execute_async(note, d, str(ctx.key))
        try:
            got = await waiter
            outcome = {"approved": got}
        except WaitTimeoutError as e:
            outcome = {"timed_out": str(e), "correlation_id": e.correlation_id}
        await ctx.durable_execute_async(mark_done, d, str(ctx.key), str(sorted(outcome)))
        ctx.send_event(
            OutputEvent(output={"key": ctx.key, "n": rec.get("n"), "noted": noted, **outcome})
        )


class Sleeper(Agent):
    """Sleeps ``sleep_s`` seconds, then outputs."""

    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        rec: dict[str, Any] = event.input
        sleep = ctx.sleep(rec["sleep_s"])
        await ctx.durable_execute_async(note, rec.get("dir", ""), str(ctx.key))
        await sleep
        await ctx.durable_execute_async(mark_done, rec.get("dir", ""), str(ctx.key), "slept")
        ctx.send_event(OutputEvent(output={"key": ctx.key, "slept": rec["sleep_s"]}))


class BadWaits(Agent):
    """Waits wrongly, as the record says: an empty id, a '#' id, a bad timeout, a bad sleep."""

    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        how = event.input["how"]
        if how == "empty":
            await ctx.wait_for("")
        elif how == "hash":
            await ctx.wait_for("#x")
        elif how == "timeout":
            await ctx.wait_for("x", timeout_s=-1)
        elif how == "huge":
            await ctx.wait_for("x", timeout_s=1e12)
        elif how == "sleep":
            await ctx.sleep(float("nan"))
        elif how == "twice":
            first = ctx.wait_for("same", timeout_s=1)
            second = ctx.wait_for("same", timeout_s=1)
            await first
            await second


# -- the MiniCluster scenario: crash while runs wait, then answer them -----------------------
WAITING_KEYS = ("a", "b", "c", "d", "e")


def request_of(d: str, n: int) -> dict[str, Any]:
    """Record ``n`` of the paced main input: the four requests first, then pads."""
    if n < len(WAITING_KEYS):
        key = WAITING_KEYS[n]
        if key == "e":
            return {"key": key, "dir": d, "n": n, "sleep_s": 4}
        return {"key": key, "dir": d, "n": n, "timeout_s": 3 if key == "b" else None}
    return {"key": "pad", "pad": True}


class GatedEvents:
    """Turns paced numbers into the outside events (a flat map): one event per number once
    the job was crashed, or once every request waits; at the last number, whatever is left,
    after waiting for that and for the runs that end by a timer (``TIMED_KEYS``), so the
    events input never ends before its events are out nor before those timers fired, however
    slowly a busy machine runs the job."""

    TIMED_KEYS = ("b", "e")  # b's wait times out after 3 s, e sleeps 4 s

    EVENTS = (
        {"key": "a", "correlation_id": "go-a", "payload": "yes"},
        {"key": "d", "correlation_id": "go-d", "payload": {"ok": 1}},
        {"key": "zz", "correlation_id": "go-zz", "payload": None},
        {"key": "a", "correlation_id": "go-a", "payload": "again"},
    )

    def __init__(self, d: str, last: int, after_crash: bool = True) -> None:
        self.d = d
        self.last = last
        self.after_crash = after_crash  # else: once every request waits
        self.sent = 0

    def _open(self) -> bool:
        from support.crash import first_attempt

        return not first_attempt(self.d) if self.after_crash else all_waiting(self.d)

    def _timers_fired(self) -> bool:
        return all(os.path.exists(os.path.join(self.d, f"done-{k}")) for k in self.TIMED_KEYS)

    def __call__(self, n: int) -> list[Any]:
        import time

        if n >= self.last:
            deadline = time.monotonic() + 120
            while not (self._open() and self._timers_fired()) and time.monotonic() < deadline:
                time.sleep(0.05)
            rest, self.sent = list(self.EVENTS[self.sent :]), len(self.EVENTS)
            return rest
        if self.sent >= len(self.EVENTS) or not self._open():
            return []
        self.sent += 1
        return [self.EVENTS[self.sent - 1]]


class PadAware(Approver):
    """``Approver`` (``Sleeper`` for a record with ``sleep_s``), which ignores pad records."""

    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        if event.input.get("pad"):
            return
        if "sleep_s" in event.input:
            await Sleeper.on_input(event, ctx)
            return
        await Approver.on_input(event, ctx)


def all_waiting(d: str) -> bool:
    """Whether every request noted its call (so its run waits)."""
    return all(os.path.exists(os.path.join(d, f"waiting-{k}")) for k in WAITING_KEYS)


class CrashWhileWaiting:
    """Crash once, at a pad record, after a checkpoint completed that holds all runs waiting."""

    def __init__(self, d: str) -> None:
        from support.crash import CrashOnceBase

        self.base = CrashOnceBase(d)
        self.d = d

    def __call__(self, point: str, key: Any, info: dict[str, Any]) -> None:
        base = self.base
        if point != "element" or not base.first_attempt() or not all_waiting(self.d):
            return
        base.note("waiting")
        if base.checkpointed_since(base.seen["waiting"]):
            base.crash("waiting", "injected crash while runs wait")


# -- a chat agent whose tool needs approval ----------------------------------------------------
def send_email(to: str, body: str) -> str:
    """Send an email (logged to ``<dir>/calls.log`` as ``email <to>``)."""
    d = os.environ.get("WAITS_TEST_DIR", "")
    if d:
        append_line(d, "calls.log", f"email {to}")
    return f"sent to {to}"


def email_script(request: Any) -> Any:
    """Scripted model: ask for one email to the user's address, then say what came back."""
    from flink_agents_py.api import ChatMessage, MessageRole, ToolCall

    results = request.tool_results
    if not results:
        to = request.messages[-1].content
        arguments = (
            {"__unreadable_arguments__": "are not JSON: '{\"to\": '"}  # as read
            if to == "garbled"
            else {"to": to, "body": "hello"}
        )
        return ChatMessage(
            role=MessageRole.ASSISTANT,
            tool_calls=[ToolCall(id="t1", name="send_email", arguments=arguments)],
        )
    return " | ".join(str(m.content) for m in results)


def make_mailer(timeout_s: float | None = 600) -> Agent:
    """An agent that asks its model to email ``record["to"]``; the tool needs approval."""
    from flink_agents_py.api import ChatMessage, FunctionTool, ResourceDescriptor, ResourceType
    from flink_agents_py.integrations.chat_models import ScriptedChatModel

    class Mailer(Agent):
        @action(InputEvent)
        @staticmethod
        async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
            response = await ctx.chat("m", [ChatMessage(content=event.input["to"])])
            ctx.send_event(OutputEvent(output={"key": ctx.key, "answer": response.message.content}))

    agent = Mailer()
    agent.add_resource(
        "conn",
        ResourceType.CHAT_MODEL_CONNECTION,
        ResourceDescriptor(ScriptedChatModel, function=f"{__name__}:email_script"),
    )
    agent.add_resource(
        "m",
        ResourceType.CHAT_MODEL,
        ResourceDescriptor(
            "flink_agents_py.api:ChatModelSetup", connection="conn", tools=["send_email"]
        ),
    )
    agent.add_resource(
        "send_email",
        ResourceType.TOOL,
        ResourceDescriptor(
            FunctionTool,
            func=f"{__name__}:send_email",
            requires_approval=True,
            approval_timeout_s=timeout_s,
        ),
    )
    return agent


def _held_send_email(to: str, body: str) -> str:
    """Send an email (held: ``@tool`` declares the approval, not its resource)."""
    return send_email(to, body)


held_send_email = tool(_held_send_email, requires_approval=True, approval_timeout_s=600)


def make_decorated_mailer() -> Agent:
    """``make_mailer``, its tool a plain ``FunctionTool`` descriptor of an ``@tool`` function."""
    from flink_agents_py.api import FunctionTool, ResourceDescriptor, ResourceType

    agent = make_mailer()
    agent.override_resource(
        "send_email",
        ResourceDescriptor(FunctionTool, func=f"{__name__}:_held_send_email", name="send_email"),
        ResourceType.TOOL,
    )
    return agent


# -- events that arrive before their wait opens ---------------------------------------------
class TwoSteps(Agent):
    """Waits for ``first-<key>``, then for ``second-<key>`` (the record's timeout, if any);
    ignores pad records."""

    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        rec: dict[str, Any] = event.input
        if rec.get("pad"):
            return
        first = ctx.wait_for(f"first-{ctx.key}", timeout_s=rec.get("timeout_s"))
        await ctx.durable_execute_async(note, rec.get("dir", ""), str(ctx.key))
        got: dict[str, Any] = {}
        for name, waiter in (("first", first), ("second", None)):
            try:
                got[name] = await (
                    waiter or ctx.wait_for(f"second-{ctx.key}", timeout_s=rec.get("timeout_s"))
                )
            except WaitTimeoutError:
                got[name] = "timeout"
        ctx.send_event(OutputEvent(output={"key": ctx.key, **got}))


def early_request_of(d: str, n: int) -> dict[str, Any]:
    """Record ``n`` of the paced main input of the early-events test: one request, then pads."""
    return {"key": "x", "dir": d} if n == 0 else {"key": "pad", "pad": True}


class EarlyEvents:
    """A flat map of paced numbers: once key ``x`` waits for its first event (or at the last
    number, after waiting for that), its second event, one it never waits for, and its first,
    in that order."""

    EVENTS = (
        {"key": "x", "correlation_id": "second-x", "payload": 2},
        {"key": "x", "correlation_id": "stray-x", "payload": None},
        {"key": "x", "correlation_id": "first-x", "payload": 1},
    )

    def __init__(self, d: str, last: int) -> None:
        self.d = d
        self.last = last
        self.sent = False

    def __call__(self, n: int) -> list[Any]:
        import time

        waiting = os.path.join(self.d, "waiting-x")
        if n >= self.last:
            deadline = time.monotonic() + 120
            while not os.path.exists(waiting) and time.monotonic() < deadline:
                time.sleep(0.05)
        if self.sent or not os.path.exists(waiting):
            return []
        self.sent = True
        return list(self.EVENTS)


class PerRecordApprover(Agent):
    """Waits for ``go-<n>`` (the record's ``n``: one id per record), outputs what came."""

    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        rec: dict[str, Any] = event.input
        waiter = ctx.wait_for(f"go-{rec['n']}", timeout_s=rec.get("timeout_s"))
        noted = await ctx.durable_execute_async(note, rec.get("dir", ""), str(ctx.key))
        try:
            outcome = {"approved": await waiter}
        except WaitTimeoutError as e:
            outcome = {"timed_out": str(e)}
        ctx.send_event(
            OutputEvent(output={"key": ctx.key, "n": rec["n"], "noted": noted, **outcome})
        )
