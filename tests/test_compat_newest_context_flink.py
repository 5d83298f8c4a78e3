"""Apache Flink Agents' newest runner context on a MiniCluster: a dynamic event and a batch of
durable calls (``durable_execute_all_async``), in a program ported by its imports and run as a
user runs it, from a folder outside the repository (the local runner's are in
``test_compat_newest_context.py``)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("pyflink")

ROOT = Path(__file__).resolve().parents[1]
VENV_PY = ROOT / ".venv" / "bin" / "python"
PYTHON = VENV_PY if VENV_PY.exists() else Path(sys.executable)

AGENT = """
    from flink_agents_py.compat import (Agent, DurableCall, DynamicEvent, InputEvent,
                                        OutputEvent, RunnerContext, action)


    def price(item: str) -> int:
        return len(item) * 10


    def stock(item: str) -> int:
        raise LookupError(f"no stock service for {item}")


    class PricingAgent(Agent):
        @action(InputEvent)
        @staticmethod
        async def fan_out(event: InputEvent, ctx: RunnerContext):
            items = event.input.split(",")
            outcomes = await ctx.durable_execute_all_async(
                [DurableCall(id=f"price-{i}", func=price, args=(i,)) for i in items]
                + [DurableCall(id="stock", func=stock, kwargs={"item": items[0]})])
            ctx.send_event(identifier="Priced", items=items,
                           prices=[o.value for o in outcomes if o.error is None],
                           errors=[type(o.error).__name__ for o in outcomes if o.error])

        @action("Priced")
        @staticmethod
        def report(event: DynamicEvent, ctx: RunnerContext):
            ctx.send_event(OutputEvent(output=(
                f"PRICED {event.identifier} {isinstance(event, DynamicEvent)} "
                f"{'+'.join(event.items)}={sum(event.prices)} {event.errors}")))
"""

PROGRAM = """
    from pyflink.datastream import StreamExecutionEnvironment

    from pricing_agent import PricingAgent
    from flink_agents_py.compat import AgentsExecutionEnvironment

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    stream = env.from_collection(["ab,cde", "x"])
    agents_env = AgentsExecutionEnvironment.get_execution_environment(env=env)
    agents_env.from_datastream(input=stream, key_selector=lambda x: x) \\
        .apply(PricingAgent()).to_datastream().print()
    agents_env.execute()
"""


@pytest.mark.flink
@pytest.mark.timeout(600)
def test_a_dynamic_event_and_a_batch_run_on_a_minicluster(tmp_path):
    assert ROOT not in tmp_path.resolve().parents
    (tmp_path / "pricing_agent.py").write_text(textwrap.dedent(AGENT))
    (tmp_path / "prog.py").write_text(textwrap.dedent(PROGRAM))
    env = {
        **{k: v for k, v in os.environ.items() if k != "FLINK_CONF_DIR"},
        "PYTHONPATH": str(ROOT),
    }
    proc = subprocess.run(
        [str(PYTHON), "prog.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=540
    )
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    outputs = sorted(line for line in proc.stdout.splitlines() if "PRICED " in line)
    assert outputs == [
        "PRICED Priced True ab+cde=50 ['LookupError']",
        "PRICED Priced True x=10 ['LookupError']",
    ], proc.stdout[-3000:]
