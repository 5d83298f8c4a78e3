"""Crash at every checkpoint the Flink host could take while Kafka records queue for one key.

The Flink host keeps a ``from_kafka`` record's place (topic, partition, offset) in the key's
queue entry (``MapState``) and then in its run (``RunState.source``). A checkpoint taken
between any two host callbacks, restored into a new operator core, must finish the key the
way the fault-free run did: the same outputs, the same error rows naming the same places,
every recorded durable call replayed (none executed again, none lost). The operator's own
key state runs over dict-backed stand-ins of Flink's state handles, stored through JSON as a
checkpoint is (``support.flink_state``); ``tests/test_kafka_keys_flink.py`` runs on Kafka.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from support.flink_state import FlinkKeyedState

from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import AgentCore

pytestmark = pytest.mark.timeout(120)

CALLS: Counter[int] = Counter()


def doubled(n: int) -> int:
    CALLS[n] += 1
    return 2 * n


class HalvesOdd(Agent):
    """Doubles ``n`` by a durable call, then outputs it; fails when ``n`` is odd."""

    @action(InputEvent)
    @staticmethod
    async def act(event: InputEvent, ctx: RunnerContext) -> None:
        n = event.input["n"]
        twice = await ctx.durable_execute_async(doubled, n)
        if n % 2:
            raise ValueError(f"odd {n}")
        ctx.send_event(OutputEvent(output={"n": n, "twice": twice}))


RECORDS = [({"n": n}, f"topic t partition 0 offset {n}" if n != 3 else None) for n in range(5)]
"""Record 3 comes from a source that names no place."""


def run(
    core: AgentCore,
    stored: FlinkKeyedState,
    records: list[tuple[Any, str | None]],
    snapshots: list[tuple[int, str, int, int]] | None = None,
) -> tuple[list[Any], list[Any]]:
    """Deliver ``records`` one callback each, then wake the key until it is done.

    ``snapshots`` gets, after every callback: the records delivered, the keyed state as
    JSON (a checkpoint there), and how many outputs and error rows were emitted so far.
    """
    outputs: list[Any] = []
    errors: list[Any] = []
    delivered = 0

    def keep(res: Any) -> None:
        outputs.extend(res.outputs)
        errors.extend((e.seq, e.error_type, e.message, e.source) for e in res.errors)
        if snapshots is not None:
            snapshots.append((delivered, json.dumps(stored.dump()), len(outputs), len(errors)))

    busy = True
    for record, source in records:
        res = core.on_input("k", record, stored.key_state(), source or "record", source)
        delivered += 1
        keep(res)
        busy = res.busy
    if not records:  # a restore after every record was delivered: the key goes on
        res = core.advance("k", stored.key_state())
        keep(res)
        busy = res.busy
    while busy or stored.key_state().queued():
        core.wait_for("k", 5.0)
        res = core.advance("k", stored.key_state())
        keep(res)
        busy = res.busy
    return outputs, errors


def fresh_core() -> AgentCore:
    core = AgentCore(AgentPlan.from_agent(HalvesOdd()))
    core.open()
    return core


def test_every_checkpoint_restores_with_the_fault_free_outputs_errors_and_places():
    CALLS.clear()
    snapshots: list[tuple[int, str, int, int]] = []
    core = fresh_core()
    try:
        want_out, want_err = run(core, FlinkKeyedState(), RECORDS, snapshots)
    finally:
        core.close()
    assert [e[3] for e in want_err] == ["topic t partition 0 offset 1", None]
    assert [o["n"] for o in want_out] == [0, 2, 4]
    assert any('"\\u001ftopic t' in text for _, text, _, _ in snapshots)  # marked entries
    assert len(snapshots) > len(RECORDS)
    for point, (delivered, text, n_out, n_err) in enumerate(snapshots):
        CALLS.clear()
        core = fresh_core()
        try:
            out, err = run(core, FlinkKeyedState(json.loads(text)), RECORDS[delivered:])
        finally:
            core.close()
        assert want_out[:n_out] + out == want_out, f"point {point}"
        assert want_err[:n_err] + err == want_err, f"point {point}"
        finished = {o["n"] for o in want_out[:n_out]} | {
            RECORDS[e[0]][0]["n"] for e in want_err[:n_err]
        }
        assert all(CALLS[n] == 0 for n in finished), f"point {point}: {CALLS}"
        assert all(c <= 1 for c in CALLS.values()), f"point {point}: {CALLS}"
