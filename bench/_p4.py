"""P4 recovery: restoring in-flight runs from their keyed state, on the engine-neutral core.

    python -m bench._p4 [--quick] [--out bench/results-p4.json]

Each of ``keys`` keys runs one input whose action makes ``calls`` fast durable calls and
then waits on a held one. When every key waits there, each key's state is copied through
its JSON form (what Flink's keyed state keeps) -- the "checkpoint" -- and the core is
dropped (the "crash"). A new ``AgentCore`` then advances every key: each action is
re-entered, its ``calls`` recorded calls are replayed and the held call runs again.

The run up to the checkpoint gets one I/O slot per key (every key holds one call);
the restored core has ``max_in_flight`` slots. Measured: the state per key at the checkpoint,
the time to re-enter every key (advance until each waits on I/O again), the time from the
restore to the last output, and the same
work run fresh, without a crash. ``AgentMetrics`` counts replayed and executed calls, which
must be exactly ``keys * calls`` and ``keys``, with one output per key.

Not wired into ``python -m bench`` (``bench/__main__.py`` belongs to the suite's owner): to
add it, put ``"p4"`` in ``ALL``, ``config()["p4"] = config(quick)`` from here and
``"p4": bench_p4`` in ``runners``.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents_py.observability import AgentMetrics
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import AgentCore, InMemoryKeyState, RunState

from ._gate import Gate
from ._report import Table, standalone_main

__all__ = ["config", "bench_p4", "StepsAgent"]

HOLD = Gate()
"""Held calls wait on it (opened after the checkpoint, so the dropped core can stop)."""


async def step(i: int, payload: str) -> dict[str, Any]:
    """A fast durable call whose result carries ``payload`` (part of the recorded state)."""
    return {"i": i, "payload": payload}


async def held(n: int) -> int:
    """The call in flight at the checkpoint."""
    await HOLD.wait()
    return n


class StepsAgent(Agent):
    """``calls`` fast durable calls, then one held call, then an output."""

    @action(InputEvent)
    @staticmethod
    async def work(event: InputEvent, ctx: RunnerContext) -> None:
        total = 0
        for i in range(event.input["calls"]):
            r = await ctx.durable_execute_async(step, i, event.input["payload"])
            total += r["i"]
        n = await ctx.durable_execute_async(held, event.input["n"])
        ctx.send_event(OutputEvent(output={"n": n, "total": total}))


def config(quick: bool) -> dict[str, Any]:
    if quick:
        return {"keys": [1000], "calls": [1, 10], "payload_bytes": 100, "max_in_flight": 64}
    return {"keys": [1000, 10_000], "calls": [1, 10, 50], "payload_bytes": 100,
            "max_in_flight": 64}


def _records(keys: int, calls: int, payload: str) -> list[tuple[str, dict[str, Any]]]:
    return [(f"k{i}", {"n": i, "calls": calls, "payload": payload}) for i in range(keys)]


def _drain(core: AgentCore, states: dict[str, InMemoryKeyState], busy: set[str],
           outputs: list[Any], deadline_s: float = 120) -> None:
    """Advance keys as their I/O completes until none is busy."""
    end = time.monotonic() + deadline_s
    while busy:
        if time.monotonic() > end:
            raise RuntimeError(f"{len(busy)} keys still busy after {deadline_s} s")
        progressed = False
        for key in list(busy):
            if core.has_deliveries(key):
                res = core.advance(key, states[key])
                outputs.extend(res.outputs)
                if not res.busy:
                    busy.discard(key)
                progressed = True
        if not progressed:
            time.sleep(0.0005)


def _waiting_on_held(state: InMemoryKeyState, calls: int) -> bool:
    run = state.run
    if run is None or len(run.inflight) != 1:
        return False
    [rec] = run.inflight.values()
    held_rec = rec.calls.get(str(calls))
    return held_rec is not None and not held_rec.done


def _fresh(plan: AgentPlan, records: list[tuple[str, dict[str, Any]]], limit: int) -> float:
    HOLD.open()
    core = AgentCore(plan, max_in_flight=limit)
    core.open()
    states = {k: InMemoryKeyState() for k, _ in records}
    outputs: list[Any] = []
    busy: set[str] = set()
    t = time.perf_counter()
    try:
        for key, rec in records:
            res = core.on_input(key, rec, states[key])
            outputs.extend(res.outputs)
            if res.busy:
                busy.add(key)
        _drain(core, states, busy, outputs)
    finally:
        core.close()
    dt = time.perf_counter() - t
    if len(outputs) != len(records):
        raise RuntimeError(f"fresh run: {len(outputs)} outputs for {len(records)} keys")
    return dt


def measure(keys: int, calls: int, payload_bytes: int, limit: int) -> dict[str, Any]:
    plan = AgentPlan.from_agent(StepsAgent())
    records = _records(keys, calls, "x" * payload_bytes)

    # run to the checkpoint: every key waits on its held call (so each needs an I/O slot)
    HOLD.close()
    old = AgentCore(plan, max_in_flight=max(limit, keys))
    old.open()
    states = {k: InMemoryKeyState() for k, _ in records}
    try:
        busy: set[str] = set()
        for key, rec in records:
            if old.on_input(key, rec, states[key]).busy:
                busy.add(key)
        end = time.monotonic() + 120
        pending = {k for k in busy if not _waiting_on_held(states[k], calls)}
        while pending:
            if time.monotonic() > end:
                raise RuntimeError("the keys never all reached the held call")
            progressed = False
            for key in list(pending):
                if old.has_deliveries(key):
                    old.advance(key, states[key])
                    progressed = True
                    if _waiting_on_held(states[key], calls):
                        pending.discard(key)
            if not progressed:
                time.sleep(0.0005)
        runs = {k: states[k].run for k in busy}
        state_bytes = [len(r.model_dump_json()) for r in runs.values() if r is not None]
        snapshot = {}
        for key, run in runs.items():  # the checkpoint: state through its JSON form
            assert run is not None
            restored = InMemoryKeyState()
            restored.run = RunState.model_validate_json(run.model_dump_json())
            restored.memory = json.loads(json.dumps(states[key].memory))
            snapshot[key] = restored
    finally:
        HOLD.open()  # the crash: the old core and its in-flight calls are dropped
        old.close()

    metrics = AgentMetrics()
    new = AgentCore(plan, max_in_flight=limit, observer=metrics)
    new.open()
    outputs: list[Any] = []
    try:
        t = time.perf_counter()
        busy = set()
        for key, state in snapshot.items():  # re-enter every key
            res = new.advance(key, state)
            outputs.extend(res.outputs)
            if res.busy:
                busy.add(key)
        reentered = time.perf_counter() - t
        _drain(new, snapshot, busy, outputs)
        restore_s = time.perf_counter() - t
    finally:
        new.close()
    m = metrics.snapshot()
    fresh_s = _fresh(plan, records, limit)
    ok = (len(outputs) == keys and len({o["n"] for o in outputs}) == keys
          and m["durable_calls_replayed"] == keys * calls
          and m["durable_calls_executed"] == keys)
    return {
        "keys": keys, "calls": calls, "payload_bytes": payload_bytes,
        "state_bytes_per_key": sum(state_bytes) / len(state_bytes),
        "reenter_s": reentered, "reenter_us_per_key": reentered / keys * 1e6,
        "restore_s": restore_s, "fresh_s": fresh_s,
        "replayed_per_s": (keys * calls) / reentered if reentered else None,
        "replayed": m["durable_calls_replayed"], "executed": m["durable_calls_executed"],
        "reentered_actions": sum(m["actions_reentered"].values()),
        "outputs": len(outputs), "ok": ok,
    }


def bench_p4(cfg: dict[str, Any]) -> tuple[dict[str, Any], Table]:
    rows = []
    for keys in cfg["keys"]:
        for calls in cfg["calls"]:
            row = measure(keys, calls, cfg["payload_bytes"], cfg["max_in_flight"])
            rows.append(row)
            print(f"[bench p4] keys={keys} calls={calls}: re-enter {row['reenter_s']:.3f} s, "
                  f"restore {row['restore_s']:.3f} s, fresh {row['fresh_s']:.3f} s, "
                  f"ok={row['ok']}", file=sys.stderr, flush=True)
    table = Table(
        "P4 recovery: re-entering in-flight runs from keyed state (core, no Flink)",
        [("keys", "keys"), ("calls", "recorded calls/run"),
         ("state_bytes_per_key", "state B/key"), ("reenter_us_per_key", "re-enter us/key"),
         ("replayed_per_s", "replays/s"), ("reenter_s", "re-enter s"),
         ("restore_s", "restore to last out s"), ("fresh_s", "fresh run s"),
         ("replayed", "replayed"), ("executed", "executed"), ("ok", "exact")],
        rows,
        note=("checkpoint = every key's run waits on its held call after 'recorded calls' fast "
              "durable calls (each result carries {b} B); state copied through JSON. "
              "re-enter = advance every key on a new core until each waits on I/O again "
              "(actions rebuilt, recorded calls replayed); restore = to the last output; "
              "fresh = the same inputs run from scratch without a crash. exact = one output "
              "per key, replayed == keys * calls and executed == keys (AgentMetrics)."
              ).format(b=cfg["payload_bytes"]),
    )
    return {"config": cfg, "rows": rows, "note": table.note}, table


def main(argv: list[str] | None = None) -> int:
    return standalone_main("python -m bench._p4", bench_p4, config, __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
