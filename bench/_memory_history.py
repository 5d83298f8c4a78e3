"""What a conversation history in short-term memory costs an action, by its length.

    python -m bench._memory_history [--sizes 10,200,2000] [--shapes list,fields,small,none]
                                    [--records 600] [--keys 10] [--repeats 3]

Each key's short-term memory holds a history of N small messages (``{"role", "content"}``,
about 50 bytes of JSON each), put in its keyed state before the run; each record runs one
action of ``HistoryAgent``, which appends one message and keeps the last N. The agent runs
in ``AgentOperator`` driven by ``bench._op_harness``'s fake TaskManager, so a record's figure
holds what Flink's thread mode pays for memory: the memory's JSON read from keyed state, the
action's reads and writes, its commit and the state's flush (the JSON written back).

Shapes (how the action appends):

- ``list``: ``h = memory.get("history"); h.append(m); memory.set("history", h[-N:])``, the
  ReAct agent's way: what it reads and writes is the whole history, so its cost grows with N
  whatever memory does (the value read is a copy, the value written is checked and copied).
- ``fields``: ``memory.set("history.m<i>", m)`` and ``memory.delete("history.m<i - N>")``,
  with a counter beside (``get``/``set("count")``): what it reads and writes is small.
- ``small``: only the counter's ``get`` and ``set``, beside the history of N messages.
- ``none``: no memory used (the floor: the operator's own cost per record).

With ``--host core`` the runtime's core runs it on in-memory key state (the local runner's),
so the keyed state's JSON is neither read nor written: memory's own cost.

Printed: the operator thread's CPU (``time.thread_time``) per record, least of ``--repeats``
runs, and the same less the ``none`` row (the memory's share). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action

__all__ = ["HistoryAgent", "main"]


def message(n: int) -> dict[str, Any]:
    """The ``n``-th message of a key's history (about 50 bytes of JSON)."""
    return {"role": "user" if n % 2 == 0 else "assistant", "content": f"message {n} of it"}


class HistoryAgent(Agent):
    """Appends one message per record to the key's history in short-term memory."""

    @action(InputEvent)
    @staticmethod
    def append(event: InputEvent, ctx: RunnerContext) -> None:
        record = event.input
        n, keep, shape = record["n"], record["keep"], record["shape"]
        memory = ctx.short_term_memory
        if shape == "list":
            history = memory.get("history") or []
            history.append(message(n))
            memory.set("history", history[-keep:])
        elif shape == "fields":
            count = memory.get("count", 0)
            memory.set(f"history.m{count}", message(count))
            if count >= keep:
                memory.delete(f"history.m{count - keep}")
            memory.set("count", count + 1)
        elif shape == "small":
            memory.set("count", memory.get("count", 0) + 1)
        ctx.send_event(OutputEvent(output=n))


def _stored(shape: str, size: int) -> str:
    """A key's short-term memory holding ``size`` messages, as keyed state holds it."""
    from flink_agents_py.runtime import dumps_json

    if shape == "fields":
        tree: dict[str, Any] = {
            "history": {f"m{i}": message(i) for i in range(size)},
            "count": size,
        }
    else:
        tree = {"history": [message(i) for i in range(size)], "count": size}
    return dumps_json(tree, sort_keys=False).decode()


def run_core(shape: str, size: int, records: int, keys: int) -> float:
    """``run_once`` on the runtime's core with in-memory key state (the local runner's).

    The keyed state's JSON is neither read nor written: what is left is memory's own cost.

    Returns:
        The CPU per record, in microseconds.
    """
    from flink_agents_py.plan import AgentPlan
    from flink_agents_py.runtime import AgentCore, loads_json
    from flink_agents_py.runtime.recorder._state import InMemoryKeyState

    core = AgentCore(AgentPlan.from_agent(HistoryAgent()))
    core.open()
    states = {}
    stored = _stored(shape, size)
    for i in range(keys):
        states[f"k{i}"] = state = InMemoryKeyState()
        state.memory = loads_json(stored)
    outs = 0
    t0 = time.thread_time()
    for i in range(records):
        name = f"k{i % keys}"
        record = {"n": size + i, "keep": size, "shape": shape}
        outs += len(core.on_input(name, record, states[name]).outputs)
    cpu = time.thread_time() - t0
    core.close()
    if outs != records:
        raise RuntimeError(f"{shape}/{size}: {outs} outputs for {records} records")
    return cpu / records * 1e6


def run_once(shape: str, size: int, records: int, keys: int) -> float:
    """One run of ``records`` records over ``keys`` keys.

    Returns:
        The operator thread's CPU per record, in microseconds.
    """
    from flink_agents_py.flink._operator import AgentOperator
    from flink_agents_py.plan import AgentPlan

    from ._op_harness import FakeHost, _drive

    plan = AgentPlan.from_json(AgentPlan.from_agent(HistoryAgent()).to_json())  # as on Flink
    op = AgentOperator(plan, max_in_flight=256, metrics=False)
    host = FakeHost()
    op.open(host)
    stored = _stored(shape, size)
    names = [f"k{i}" for i in range(keys)]
    for name in names:  # each key's history, as a checkpoint would hold it
        host.states["agent-memory"].by_key[name] = stored
    batch = [
        (names[i % keys], {"key": names[i % keys], "n": size + i, "keep": size, "shape": shape})
        for i in range(records)
    ]
    t0 = time.thread_time()
    outs = _drive(op, host, batch, records)
    cpu = time.thread_time() - t0
    op.close()
    if len(outs) != records:
        raise RuntimeError(f"{shape}/{size}: {len(outs)} outputs for {records} records")
    if shape != "none":  # the history kept its length: the bench measured what it says
        from flink_agents_py.runtime import loads_json

        tree = loads_json(host.states["agent-memory"].by_key[names[0]])
        if len(tree["history"]) != size:
            raise RuntimeError(f"{shape}/{size}: the history holds {len(tree['history'])}")
    return cpu / records * 1e6


def main(argv: list[str] | None = None) -> int:
    """Print the CPU per record of each shape and size (see the module docstring).

    Returns:
        0.
    """
    ap = argparse.ArgumentParser(prog="python -m bench._memory_history")
    ap.add_argument("--sizes", default="10,200,2000")
    ap.add_argument("--shapes", default="list,fields,small,none")
    ap.add_argument("--records", type=int, default=600)
    ap.add_argument("--keys", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument(
        "--host",
        choices=("operator", "core"),
        default="operator",
        help="operator: AgentOperator on the fake TaskManager (keyed state as JSON text); "
        "core: the runtime's core on in-memory state (no JSON read or written)",
    )
    args = ap.parse_args(argv)
    run = run_once if args.host == "operator" else run_core
    sizes = [int(s) for s in args.sizes.split(",")]
    shapes = args.shapes.split(",")
    floor = None
    if "none" in shapes:
        floor = min(run("none", 0, args.records, args.keys) for _ in range(args.repeats))
        print(f"none: {floor:8.1f} us per record (the operator's own)")
    for shape in (s for s in shapes if s != "none"):
        for size in sizes:
            best = min(run(shape, size, args.records, args.keys) for _ in range(args.repeats))
            extra = f", memory {best - floor:8.1f} us" if floor is not None else ""
            print(f"{shape:>6} N={size:<5}: {best:8.1f} us per record{extra}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
