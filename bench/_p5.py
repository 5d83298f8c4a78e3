"""P5 memory: what a key costs while its run is in flight, and what stays after it completes.

    python -m bench._p5 [--quick] [--out bench/results-p5.json]

``keys`` keys each start one run on an ``AgentCore`` (as the hosts do) and wait on a held
durable call; then the calls are released and every run completes. Measured with
``tracemalloc`` (Python allocations of the whole process: core, executor, state objects,
observers), relative to a baseline taken after the core opened:

- in flight: traced bytes per key while every key waits (live coroutines and contexts,
  the run state, the executor's queued calls);
- retained: traced bytes per key after every run completed and the core's live objects are
  gone: each key's short-term memory (about 180 B here) and the output the bench keeps, and
  besides, not per key, the tables that keep the size of their peak once emptied (the core's
  per-key dicts, the executor's inbox, asyncio's registry of live tasks, whose 64 KiB growth
  falls in the measured pass or not by timing: +-65 B a key at 1,000 keys between runs);
- keyed state: the JSON the Flink host would keep per key, mid-run (``RunState``) and after
  (short-term memory only; the run record is dropped).

Scenarios: ``calls`` (an action with 10 recorded durable calls of 100 B results before the
held one), and ``chat`` (a chat with a tool round whose tool call is held), each with the
metrics and event log observers off and on (the observers must forget a key's run when it
completes: their per-key tracking is checked to be empty at the end).

Not wired into ``python -m bench`` (``bench/__main__.py`` belongs to the suite's owner): to
add it, put ``"p5"`` in ``ALL``, ``config()["p5"] = config(quick)`` from here and
``"p5": bench_p5`` in ``runners``.
"""

from __future__ import annotations

import gc
import sys
import time
import tracemalloc
from typing import Any

import orjson

from flink_agents_py.api import (
    Agent,
    ChatMessage,
    ChatModelSetup,
    ChatRequestEvent,
    ChatResponseEvent,
    InputEvent,
    MessageRole,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    ToolCall,
    action,
)
from flink_agents_py.integrations.chat_models import ScriptedChatModel
from flink_agents_py.observability import EventLog, EventLogSink, HostObservability
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import AgentCore, InMemoryKeyState

from ._gate import Gate
from ._report import Table, standalone_main

__all__ = ["config", "bench_p5", "CallsAgent", "ChatToolAgent"]

HOLD = Gate()


async def step(i: int) -> dict[str, Any]:
    return {"i": i, "payload": "x" * 100}


async def held(n: int) -> int:
    await HOLD.wait()
    return n


class CallsAgent(Agent):
    """10 recorded durable calls, one held call, one short-term memory write, an output."""

    @action(InputEvent)
    @staticmethod
    async def work(event: InputEvent, ctx: RunnerContext) -> None:
        for i in range(10):
            await ctx.durable_execute_async(step, i)
        n = await ctx.durable_execute_async(held, event.input["n"])
        ctx.short_term_memory.set("last", n)
        ctx.send_event(OutputEvent(output={"n": n}))


async def lookup(q: str) -> dict[str, Any]:
    """Look ``q`` up (held until the benchmark releases it).

    Args:
        q: what to look for.
    """
    await held(0)
    return {"q": q, "found": True}


def chat_script(req: Any) -> Any:
    if not req.tool_results:
        return ChatMessage(role=MessageRole.ASSISTANT, tool_calls=[
            ToolCall(id="t1", name="lookup", arguments={"q": req.last_user_text})])
    return "answer: " + req.last_user_text


class ChatToolAgent(Agent):
    """A chat whose tool round is held; the answer becomes the output."""

    @action(InputEvent)
    @staticmethod
    def ask(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(ChatRequestEvent(model="m", messages=[
            ChatMessage(content=f"item {event.input['n']}")]))

    @action(ChatResponseEvent)
    @staticmethod
    def answer(event: ChatResponseEvent, ctx: RunnerContext) -> None:
        ctx.short_term_memory.set("last", event.response.message.content if event.response
                                  else None)
        ctx.send_event(OutputEvent(output={"error": event.error}))


def chat_tool_agent() -> Agent:
    agent = ChatToolAgent()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ResourceDescriptor(
        ScriptedChatModel, function="bench._p5:chat_script"))
    agent.add_resource("m", ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="conn", tools=["lookup"]))
    agent.add_resource("lookup", ResourceType.TOOL, lookup)
    return agent


class _NullSink(EventLogSink):
    """Takes the records and drops them (the event log's cost without the file)."""

    def write(self, record: dict[str, Any]) -> None:
        orjson.dumps(record, default=repr)


def config(quick: bool) -> dict[str, Any]:
    return {"keys": [1000] if quick else [1000, 10_000], "scenarios": ["calls", "chat"]}


def _waiting(state: InMemoryKeyState, scenario: str) -> bool:
    """Whether the key's run waits on its held call."""
    run = state.run
    if run is None:
        return False
    call = "10" if scenario == "calls" else "0"
    action = "work" if scenario == "calls" else "_tool_call_action"
    return any(r.action == action and call in r.calls and not r.calls[call].done
               for r in run.inflight.values())


def measure(scenario: str, keys: int, observe: bool) -> dict[str, Any]:
    agent = CallsAgent() if scenario == "calls" else chat_tool_agent()
    plan = AgentPlan.from_agent(agent)
    HOLD.close()
    obs = HostObservability(metrics=observe, event_log=EventLog(sink=_NullSink())
                            if observe else None) if observe else None
    core = AgentCore(plan, max_in_flight=keys, observer=obs.observer if obs else None)
    core.open()
    states = {f"k{i}": InMemoryKeyState() for i in range(keys)}
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        busy: set[str] = set()
        outputs: list[Any] = []
        for i, (key, state) in enumerate(states.items()):
            res = core.on_input(key, {"n": i}, state)
            outputs.extend(res.outputs)
            if res.busy:
                busy.add(key)
        end = time.monotonic() + 120
        pending = {k for k in busy if not _waiting(states[k], scenario)}
        while pending:
            if time.monotonic() > end:
                raise RuntimeError("the keys never all reached the held call")
            progressed = False
            for key in list(pending):
                if core.has_deliveries(key):
                    core.advance(key, states[key])
                    progressed = True
                    if _waiting(states[key], scenario):
                        pending.discard(key)
            if not progressed:
                time.sleep(0.001)
        gc.collect()
        in_flight = tracemalloc.get_traced_memory()[0] - base
        state_mid = sum(len(s.run.model_dump_json() if s.run else "")
                        + len(orjson.dumps(s.memory)) for s in states.values()) / keys
        HOLD.open()
        while busy:
            if time.monotonic() > end + 60:
                raise RuntimeError(f"{len(busy)} keys never completed")
            progressed = False
            for key in list(busy):
                if core.has_deliveries(key):
                    res = core.advance(key, states[key])
                    outputs.extend(res.outputs)
                    if not res.busy:
                        busy.discard(key)
                    progressed = True
            if not progressed:
                time.sleep(0.001)
        # the scripted model keeps every request it answered (a test double's call log,
        # ~8 KB per chat here): not the operator's, so it is not counted as retained
        for obj in gc.get_objects():
            if isinstance(obj, ScriptedChatModel):
                obj.reset()
        gc.collect()
        retained = tracemalloc.get_traced_memory()[0] - base
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
        HOLD.open()
        core.close()
    state_after = sum((0 if s.run is None else len(s.run.model_dump_json()))
                      + len(orjson.dumps(s.memory)) for s in states.values()) / keys
    leftover = 0
    if obs is not None:
        leftover = sum(len(o._keys) for o in (obs.metrics, obs.event_log) if o is not None)
        obs.close()
    return {
        "scenario": scenario, "observers": "metrics+log" if observe else "none", "keys": keys,
        "outputs": len(outputs), "in_flight_kb_per_key": in_flight / keys / 1024,
        "retained_b_per_key": retained / keys, "peak_kb_per_key": peak / keys / 1024,
        "state_b_per_key_mid": state_mid, "state_b_per_key_after": state_after,
        "observer_keys_left": leftover,
        "ok": len(outputs) == keys and leftover == 0 and all(s.run is None
                                                              for s in states.values()),
    }


def bench_p5(cfg: dict[str, Any]) -> tuple[dict[str, Any], Table]:
    rows = []
    for scenario in cfg["scenarios"]:
        for keys in cfg["keys"]:
            for observe in (False, True):
                row = measure(scenario, keys, observe)
                rows.append(row)
                print(f"[bench p5] {scenario} keys={keys} observers={row['observers']}: "
                      f"{row['in_flight_kb_per_key']:.1f} KiB/key in flight, "
                      f"{row['retained_b_per_key']:.0f} B/key retained, ok={row['ok']}",
                      file=sys.stderr, flush=True)
    table = Table(
        "P5 memory per key: in flight and after completion (core, tracemalloc)",
        [("scenario", "scenario"), ("observers", "observers"), ("keys", "keys"),
         ("in_flight_kb_per_key", "in flight KiB/key"), ("peak_kb_per_key", "peak KiB/key"),
         ("retained_b_per_key", "retained B/key"), ("state_b_per_key_mid", "state B/key mid"),
         ("state_b_per_key_after", "state B/key after"), ("ok", "bounded")],
        rows,
        note=("Python allocations traced after the core opened, every key's run waiting on a "
              "held call ('calls': 10 recorded 100 B results first; 'chat': a chat's tool call "
              "held) and after every run completed. state = the JSON the Flink host keeps per "
              "key (run record + short-term memory); after completion only the memory is "
              "left. observers = AgentMetrics + an event log into a sink that serializes and "
              "drops each record. bounded = one output per key, no run record left, and the "
              "observers hold no per-key tracking afterwards."),
    )
    return {"config": cfg, "rows": rows, "note": table.note}, table


def main(argv: list[str] | None = None) -> int:
    return standalone_main("python -m bench._p5", bench_p5, config, __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
