"""Flow control and per-key budgets on a Flink MiniCluster, run the way a user runs a job.

A user's module (``my_agents.py``) and script (``main.py``) are written into a temporary
directory outside the repository and run with the venv's interpreter. The script starts the
throttling fake provider (``ThrottlingProvider``: HTTP on 127.0.0.1, 20 requests/s, 429 with
``Retry-After`` above) and runs 3 chats for each of 40 keys at parallelism 2 through
``OpenAIChatModel``; the setup's budget allows 2 chats per key (15 tokens each, 30 in all).
One job checks: every chat within budget answered (none failed because the provider
throttled), every third chat of a key failed with ``BudgetExceededError`` (per-key budgets
live in keyed state, wherever the key's subtask is), and the provider was not flooded.
"""

from __future__ import annotations

import json
import pathlib
import textwrap

import pytest
from test_user_module_flink import outputs, run_user

pytest.importorskip("pyflink")

MY_AGENTS = '''
from flink_agents_py.api import (Agent, Budget, ChatMessage, ChatModelSetup, ChatRequestEvent,
                                 ChatResponseEvent, InputEvent, OutputEvent, ResourceDescriptor,
                                 ResourceType, RunnerContext, action)
from flink_agents_py.integrations.chat_models import OpenAIChatModel


class Asker(Agent):
    @action(InputEvent)
    @staticmethod
    def ask(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(ChatRequestEvent(model="model",
                                        messages=[ChatMessage(content=str(event.input["n"]))]))

    @action(ChatResponseEvent)
    @staticmethod
    def answer(event: ChatResponseEvent, ctx: RunnerContext) -> None:
        r = event.response
        ctx.send_event(OutputEvent(output={
            "key": ctx.key, "error": event.error, "content": r.message.content if r else None,
            "decision": r.metadata["budget"]["decision"] if r else None}))


def asker(base_url: str) -> Asker:
    agent = Asker()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION,
                       ResourceDescriptor(OpenAIChatModel, base_url=base_url))
    agent.add_resource("model", ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="conn", error_policy="retry", budget=Budget(max_tokens=30)))
    return agent
'''

MAIN = '''
import json

from pyflink.common import Types, WatermarkStrategy
from pyflink.datastream.connectors.number_seq import NumberSequenceSource

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.flink import create_stream_environment
from flink_agents_py.testing import ThrottlingProvider
from my_agents import asker

KEYS, PER_KEY = 40, 3

with ThrottlingProvider(rate_per_s=20, latency_s=0.02) as fake:
    env = create_stream_environment(parallelism=2, restart_attempts=0)
    ds = env.from_source(NumberSequenceSource(0, KEYS * PER_KEY - 1),
                         WatermarkStrategy.no_watermarks(), "numbers").map(
        lambda i: {"key": "k%d" % (i % KEYS), "n": i}, output_type=Types.PICKLED_BYTE_ARRAY())
    agents = AgentsExecutionEnvironment.flink(env, max_in_flight=64)
    out = agents.from_datastream(ds).apply(asker(fake.base_url)).to_datastream()
    with out.execute_and_collect("flow-control") as results:
        for r in results:
            print("OUT " + json.dumps(r, sort_keys=True), flush=True)
    print("FAKE " + json.dumps({"served": fake.served, "throttled": fake.throttled}), flush=True)
'''


@pytest.mark.flink
def test_throttled_provider_and_per_key_budgets_at_parallelism_2(tmp_path: pathlib.Path):
    user = tmp_path / "user"
    user.mkdir()
    (user / "my_agents.py").write_text(textwrap.dedent(MY_AGENTS))
    (user / "main.py").write_text(textwrap.dedent(MAIN))
    res = run_user(["main.py"], cwd=user)
    rows = outputs(res)
    [fake] = [json.loads(line[5:]) for line in res.stdout.splitlines()
              if line.startswith("FAKE ")]
    assert len(rows) == 120
    answered = [r for r in rows if r["error"] is None]
    refused = [r for r in rows if r["error"] is not None]
    assert len(answered) == 80 and {r["decision"] for r in answered} == {"within"}
    assert all(r["content"].startswith("answer ") for r in answered)
    assert sorted(r["key"] for r in refused) == sorted(f"k{i}" for i in range(40))
    assert all(r["error"].startswith("BudgetExceededError: the budget of chat model 'model' "
                                     "for key ") for r in refused)
    assert fake["served"] == 80  # the refused chats never reached the provider
    print(f"\nMiniCluster: {fake['served']} served, {fake['throttled']} answered 429")
    # no retry storm: each 429 is waited out (its Retry-After), so throttled answers stay
    # fewer than served ones whatever the load; the share itself is the bench's flow row
    assert fake["throttled"] < fake["served"]
