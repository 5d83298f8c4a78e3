"""Sub-agents as chat-model tools on a MiniCluster: one job, end to end.

The orchestrator's scripted model (``support.subagent_tool_agents.e2e_orchestrator``) asks, in one
batch, an internal sub-agent with its own chat model (``reviewer``), an external deferred
sub-agent (``catalog``) and a tool (``e2e_stock``), then answers from their three results.
Agents and scripts live in ``subagent_tool_agents`` because thread-mode workers import them
by reference.
"""

from __future__ import annotations

import pytest
from support import subagent_tool_agents as sa

pytestmark = [pytest.mark.flink, pytest.mark.timeout(300)]

RECORDS = [
    {"key": "k0", "review": "great shoe", "sku": "AB-1"},
    {"key": "k1", "review": "it broke", "sku": "XYZ"},
    {"key": "k2", "review": "great fit, great price", "sku": "LONG-SKU-9"},
    {"key": "k0", "review": "so so", "sku": "Q"},
]


def test_orchestrator_delegates_a_batch_and_answers_from_the_results():
    pytest.importorskip("pyflink")
    from pyflink.common import Types, WatermarkStrategy
    from pyflink.datastream.connectors.number_seq import NumberSequenceSource

    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.flink import create_stream_environment

    env = create_stream_environment(parallelism=2)
    pickled = Types.PICKLED_BYTE_ARRAY()
    records = RECORDS
    # one source subtask, so each key's records reach the agent operator in input order
    ds = (env.from_source(NumberSequenceSource(0, len(records) - 1),
                          WatermarkStrategy.no_watermarks(), "records").set_parallelism(1)
          .map(lambda n: records[n], output_type=pickled).set_parallelism(1))
    applied = (AgentsExecutionEnvironment.flink(env)
               .from_datastream(ds, key_selector=lambda r: r["key"])
               .apply(sa.build_e2e()))
    both = applied.to_datastream().map(lambda o: ("out", o), output_type=pickled).union(
        applied.errors_datastream().map(lambda e: ("err", e), output_type=pickled))
    with both.execute_and_collect("subagent-tools") as rows:
        rows = list(rows)

    assert [v for kind, v in rows if kind == "err"] == []
    outputs = [v for kind, v in rows if kind == "out"]
    expected = [
        {"key": "k0", "score": 5, "price": 42.5, "units": 4},
        {"key": "k1", "score": 2, "price": 42.5, "units": 3},
        {"key": "k2", "score": 5, "price": 42.5, "units": 10},
        {"key": "k0", "score": 2, "price": 42.5, "units": 1},
    ]
    assert sorted(outputs, key=repr) == sorted(expected, key=repr)
    # per key, in input order
    assert [o for o in outputs if o["key"] == "k0"] == [expected[0], expected[3]]
