"""What the runtime's Python costs per record, counted in calls: the budget a chat keeps.

The operator's CPU per record is the runtime's Python (issue 31, part 4): hundreds of small
calls spread over the core, the recorder and the contexts, none of them a hotspot. Timing it
in a test is noise on a shared machine; the number of Python calls (functions and built-ins)
the host's thread makes per record is exact, so it is pinned here for the two records the
benchmark measures: an echo, and a chat through the built-in chat action (input -> action
-> chat model call on the I/O executor -> action -> output). A change that adds calls to
every record's path shows here; one that removes some lowers the budget.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

import flink_agents_py
from flink_agents_py.api import (
    Agent,
    ChatMessage,
    ChatModelConnection,
    ChatModelSetup,
    ChatRequestEvent,
    ChatResponse,
    ChatResponseEvent,
    InputEvent,
    MessageRole,
    OutputEvent,
    ResourceDescriptor,
    RunnerContext,
    action,
    chat_model_connection,
    chat_model_setup,
)
from flink_agents_py.observability import AgentMetrics
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import AgentCore
from flink_agents_py.runtime.recorder._state import InMemoryKeyState

pytestmark = pytest.mark.timeout(60)

CHAT_CALLS = 254
"""Python calls per chat on the host's thread, at most (487 when set, 605 the day before;
535 once each use of a context, memory or memory set checks that it is its own action's:
``runtime/context/_owner.py``, 13 checks a chat; 530 once a run's end no longer asks its
queue twice whether it is empty; 529 once a new input's run is read once; 531 measured
later; 530 once a freshly decoded flat record reaches its action with no second copy:
``on_input(..., fresh=True)``, as the Flink operator calls it; 2026-12-06: 497 once the
built-in chat action reads no memory for a setup that fills no prompt
(``_builtin_actions._fills_prompt``), its answer event is stored from the model call's
recorded result (``event_json(..., known)``), ``OutputEvent(output=x)`` is built without
pydantic's validation round trip (``api/_event_build.py``) and a call's outcome is recorded
without a second record; 487 once a new input's run is read once inline, a run's start and
its input's dispatch are one probe hook, ``send_event`` checks its own context inline, an
execution's memory clock is made with its first memory and an action returning at its
first step skips ``_end``; 481 once a run whose input triggers one action of the agent's own
starts it in one frame, ``runtime/core/_at_once.py``, handing over to the general code where
its action leaves the simple case; 406 with the chat path's cuts: the model call's digest
written from its messages directly and its answer's stored form made on the I/O thread,
``_chat_steps`` and ``recorder/_prestored.py``, the answer and request events built as
validation builds them; 2026-12-06: 360 once a memory operation's ownership check, its
view, its cached path, a scalar's JSON form and its one-name write run inline,
``ctx.sensory_memory`` hands over a memory it made already without a call, and a commit
skips the undo entries when no other action reads: ``runtime/context/_memory.py``,
``core/_completion.py``; 331 once a chat's request and answer events get their stored forms
written directly, ``_chat_request.request_json`` and ``answer_json``; 328 once the run's
one input action that used memory finishes in its straight line too, ``_at_once._finished``;
321 once the action a chat's answer triggers is dispatched, run and finished in the frame
that finished the chat, ``_at_once.dispatch_emitted``; 322 once a chat event's model call
keeps its setup's digest, ``recorder/_setup_shapes.setup_shape``, one call when cached;
309 once a user's request that is its action's last event starts the built-in chat action
in the frame that finished the sender, ``_at_once.dispatch_emitted``, with the copy of the
request made as its form was written, ``_chat_request.request_forms``; 2026-12-06 (afternoon):
265 once an action started in the frame of another's end keeps the stepping loop that frame
set, ``_at_once.start_at_once``, which finds a resolved action without a call; a context's
ownership checks compare the stepped id source with its execution's in one call,
``_action_context``, ``check_live``; ``ActionExecution.send_event`` tests an event's class once
per class, counts a chain's ``/`` only in an id that long and drops a built event's id from a
dict; the chat action looks at a request's setup type, invalid answers and retries only where
they may be missing, ``_builtin_actions.chat_model_action``; a durable call's plain function is
named inline, ``_executor.submit``; a memory path's parts and a write's reference are read from
their caches by subscript and a memory clock's usual tick runs inline, ``context/_memory.py``;
254 once a plain function's command is carried out without ``isinstance`` tests,
``_carry_out``, the core drains an action's commands and drops a finished one from its tables
without calls and closes no coroutine that returned, ``_core._drain``, ``_finish``,
``advance``, a durable call checks its context inline, ``ActionExecution._allocate``, and a
chat's answer reads its call's record inline, ``_chat_steps.recorded``; 253 once ``advance``
reads a key's run once, inline, when the input did not hand it over, ``_core.advance``)."""
WAIT_CALLS = 224
"""Python calls per record of a run that waits once for a ``durable_execute_async`` call on
the host's thread, at most (396 before the call's argument shape kept its function's
signature, its name and what it binds were found once a call, and the run's end stopped
looking for sub-agent handles and never-awaited calls one call at a time; 293 with
``OutputEvent(output=x)`` built without validation; 296 once a call record keeps the
defaults the call took, ``_call_changes.defaults_taken``, skipped for a function without
defaults; 290 with the echo path's cuts of 2026-12-06 listed under ``CHAT_CALLS``; 281
with the one-action run's straight line, ``_at_once``; 277 with the chat path's cuts; 251
with the memory cuts of 2026-12-06 listed under ``CHAT_CALLS``; 234 with the cuts of
2026-12-06 afternoon listed there; 223 with those after them)."""
ECHO_CALLS = 69
"""Python calls per echo record on the host's thread, at most (113 when set; 134 before;
109 once a run's end no longer asks its queue twice whether it is empty; 108 once a new
input's run is read once; 107 once a freshly decoded flat record reaches its action with no
second copy: ``on_input(..., fresh=True)``, as the Flink operator calls it; 101 once
``OutputEvent(output=x)`` is built without pydantic's validation round trip; 95 with the
cuts of 2026-12-06 listed under ``CHAT_CALLS``; 79 once a one-action run that returns at once
is dispatched, stepped and finished in one straight line, ``runtime/core/_at_once.py``;
74 with the cuts of 2026-12-06 afternoon listed under ``CHAT_CALLS``; 68 with those after them)."""

ECHO_METRICS_CALLS = 77
"""... with ``AgentMetrics`` as the core's observer, pushing to a metric group in batches
(108 when set, 2026-12-06: five probe hooks a record, ``MetricsProbe``, and the push; 92
with the one-action run's straight line; 2026-12-06: 90.15 once such a run's action end,
outputs and run end reach the metrics in one hook, ``Probe.run_at_once``, with the clock
read twice a record instead of four times; 87.15 once a latency value's fold check takes one
from the distribution's ``room`` instead of calling ``len``, and the outputs are counted in
the hook's loop instead of by ``len``; 76.15 with the core's cuts of the 2026-12-06 afternoon
listed under ``CHAT_CALLS``)."""


CHAT_METRICS_CALLS = 281
"""... a chat with ``AgentMetrics`` as the core's observer, pushing to a metric group in
batches (set 2026-12-06 at 384: the probe's chat bookkeeping tests a built-in event type by
identity first; 390 before, when each chat event's type met ``BuiltinEventType.__eq__``, a
Python call, five times a chat, in the hooked-types lookup and the type tests; 336.15 once
the hooks after an action's end share its clock reading, ``Probe.reading``, six reads a chat
instead of twelve, an event's dispatch and the start of the one action it triggers at once
are one hook, ``Probe.event_triggered``, a key's track is a list literal instead of a
pooled ``_KeyTrack``, and the model label, the call's kind and the recorded result are read
with no ``getattr``, ``str.rfind``, ``dict.get`` or ``len`` call; 280.15 with the core's cuts
of the 2026-12-06 afternoon listed under ``CHAT_CALLS``)."""

class InstantModel(ChatModelConnection):
    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT,
                                                content=f"re: {messages[-1].content}"))


class Chat(Agent):
    """The benchmark's chat agent (``bench._agents.SlowChatAgent``) with an instant model."""

    @chat_model_connection
    @staticmethod
    def conn() -> ResourceDescriptor:
        return ResourceDescriptor(InstantModel)

    @chat_model_setup
    @staticmethod
    def model() -> ResourceDescriptor:
        return ResourceDescriptor(ChatModelSetup, connection="conn")

    @action(InputEvent)
    @staticmethod
    def ask(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.sensory_memory.set("t", event.input.get("t"))
        ctx.sensory_memory.set("n", event.input.get("n"))
        ctx.send_event(ChatRequestEvent(
            model="model", messages=[ChatMessage(content=str(event.input.get("n")))]))

    @action(ChatResponseEvent)
    @staticmethod
    def answer(event: ChatResponseEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output={
            "key": ctx.key, "t": ctx.sensory_memory.get("t"), "error": event.error,
            "n": ctx.sensory_memory.get("n"),
            "text": event.response.content if event.response else None}))


async def lookup(n: Any) -> str:
    """A durable call's function on the I/O executor (a module-level async function)."""
    return f"re: {n}"


class Wait(Agent):
    """One action that waits once: a durable call of a module-level function, then output."""

    @action(InputEvent)
    @staticmethod
    async def ask(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.sensory_memory.set("t", event.input.get("t"))
        answer = await ctx.durable_execute_async(lookup, event.input.get("n"))
        ctx.send_event(OutputEvent(output={
            "key": ctx.key, "t": ctx.sensory_memory.get("t"), "n": event.input.get("n"),
            "text": answer}))


class Echo(Agent):
    @action(InputEvent)
    @staticmethod
    async def echo(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output={"key": ctx.key, "echo": event.input}))


def _calls(fn: Callable[[], Any]) -> int:
    """How many Python calls (functions and built-ins) ``fn`` makes on this thread."""
    n = 0

    def count(frame: Any, event: str, arg: Any) -> None:
        nonlocal n
        if event == "call" or event == "c_call":
            n += 1

    sys.setprofile(count)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return n


def _per_record(agent: Agent, keys: int = 40, metrics: bool = False) -> tuple[float, list[Any]]:
    """Calls per record of ``agent`` on the host's thread (after a warm-up), and the outputs.

    ``metrics``: with ``AgentMetrics`` as the core's observer, pushing to a metric group
    (``bench._op_harness.FakeMetricGroup``) in batches of 1,000 runs.
    """
    observer = None
    if metrics:
        from bench._op_harness import FakeMetricGroup

        observer = AgentMetrics(FakeMetricGroup(), flush_interval_s=3600)  # (by runs only)
    core = AgentCore(AgentPlan.from_agent(agent), max_in_flight=64, observer=observer)
    core.open()
    try:
        states: dict[str, InMemoryKeyState] = {}
        outputs: list[Any] = []

        def inputs(names: list[str]) -> None:
            for k in names:
                res = core.on_input(k, {"key": k, "n": k, "t": 1.5}, states[k], fresh=True)
                outputs.extend(res.outputs)

        def completions(names: list[str]) -> None:
            for k in names:
                res = core.advance(k, states[k])
                outputs.extend(res.outputs)

        total = 0
        for round_, names in enumerate((["w0", "w1"], [f"k{i}" for i in range(keys)])):
            states.update((k, InMemoryKeyState()) for k in names)
            n = _calls(lambda: inputs(names))  # noqa: B023 - called at once
            for k in names:  # the model calls, on the I/O executor's thread
                while states[k].run is not None and not core.has_deliveries(k):
                    core.wait_for(k, 5.0)
            n += _calls(lambda: completions(names))  # noqa: B023
            if round_:
                total = n
        return total / keys, outputs
    finally:
        core.close()


def _measured(kind: str, metrics: bool = False) -> tuple[float, int]:
    """Calls per record of ``kind`` and the outputs made, measured in a process of its own.

    The count depends on the process's state (a secret registered by an earlier test adds
    the masking check to every recorded result): a fresh interpreter runs this module.
    """
    root = Path(flink_agents_py.__file__).parents[1]  # the package this process tests
    code = (f"import sys; sys.path[:0] = [{str(root)!r}, {str(Path(__file__).parent)!r}]; "
            "import test_call_budget as m; "
            f"per, outs = m._per_record(m.{kind}(), metrics={metrics}); print(per, len(outs))")
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_TOKEN"))}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    per, n = proc.stdout.split()
    return float(per), int(n)


def test_the_measured_agents_answer_every_record():
    per_chat, outputs = _per_record(Chat())
    assert len(outputs) == 42 and all(o["error"] is None and o["text"] == f"re: {o['n']}"
                                      and o["t"] == 1.5 for o in outputs)
    assert len(_per_record(Echo())[1]) == 42
    per_wait, outputs = _per_record(Wait())
    assert len(outputs) == 42 and all(o["text"] == f"re: {o['n']}" and o["t"] == 1.5
                                      for o in outputs)


def test_a_chat_costs_the_host_thread_at_most_its_budget_of_python_calls():
    per_chat, outputs = _measured("Chat")
    assert outputs == 42
    assert per_chat <= CHAT_CALLS, f"{per_chat:.0f} Python calls per chat"


def test_an_echo_record_costs_the_host_thread_at_most_its_budget_of_python_calls():
    per_record, outputs = _measured("Echo")
    assert outputs == 42
    assert per_record <= ECHO_CALLS, f"{per_record:.0f} Python calls per echo record"


def test_an_echo_record_with_the_agent_metrics_on_costs_at_most_its_budget_of_python_calls():
    # the metrics' hooks (the core's probe) and their batched push to a metric group
    per_record, outputs = _measured("Echo", metrics=True)
    assert outputs == 42
    assert per_record <= ECHO_METRICS_CALLS, f"{per_record:.0f} Python calls per echo record"


def test_a_chat_with_the_agent_metrics_on_costs_at_most_its_budget_of_python_calls():
    # the metrics' chat bookkeeping (model labels, chat latency) on top of the chat's own
    per_chat, outputs = _measured("Chat", metrics=True)
    assert outputs == 42
    assert per_chat <= CHAT_METRICS_CALLS, f"{per_chat:.0f} Python calls per chat"


def test_a_run_that_waits_once_costs_the_host_thread_at_most_its_budget_of_python_calls():
    per_record, outputs = _measured("Wait")
    assert outputs == 42
    assert per_record <= WAIT_CALLS, f"{per_record:.0f} Python calls per record"
