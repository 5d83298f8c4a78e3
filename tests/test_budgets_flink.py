"""Budgets and flow-control policies on a Flink MiniCluster at parallelism 2, and their metrics.

One user's job (their module and script in a temporary directory outside the repository,
run with this project's Python) serves every assertion below. It runs 110 chats at
parallelism 2 over four chat model setups, against fake OpenAI-compatible providers on
127.0.0.1 (``ThrottlingProvider``):

- ``agent_model``: an agent budget (``scope="agent"``) of 300 tokens, 15 per call, switching
  to the ``cheap`` setup when spent: each subtask holds 150 tokens, so exactly 20 of its 60
  chats are answered within the budget, whichever keys each subtask runs;
- ``hold_model``: a per-key budget of one call per 5 s window, ``on_exceeded="hold"``: each
  key's second chat is held until its window ends, then answered;
- ``fallback_model``: a connection to a provider serving 2 requests/s that fails throttled
  calls at once (``max_throttle_wait_s=0``): the setup's fallback ``cheap`` answers them;
- ``held_model``: a connection to a provider serving 3 requests/s with the default flow
  control: throttled calls are held and sent again, none fails.

While the job still runs (a second source never ends), the script reads the operator's
``flink_agents`` metrics from the JobManager's REST API, summed over both subtasks: the
cost spent by the price table, the agent budget left, the flow controllers' concurrency
limits and the throttled answers.
"""

from __future__ import annotations

import json
import pathlib
import socket
import textwrap
from collections import Counter

import pytest
from test_user_module_flink import outputs, run_user

pytest.importorskip("pyflink")

pytestmark = [pytest.mark.flink, pytest.mark.timeout(420)]

MY_AGENTS = '''
from flink_agents_py.api import (Agent, Budget, ChatMessage, ChatModelSetup, ChatRequestEvent,
                                 ChatResponseEvent, FlowControl, InputEvent, ModelPrice,
                                 OutputEvent, ResourceDescriptor, ResourceType, RunnerContext,
                                 action)
from flink_agents_py.integrations.chat_models import OpenAIChatModel


class Asker(Agent):
    @action(InputEvent)
    @staticmethod
    def ask(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(ChatRequestEvent(model=event.input["setup"],
                                        messages=[ChatMessage(content=str(event.input["n"]))]))

    @action(ChatResponseEvent)
    @staticmethod
    def answer(event: ChatResponseEvent, ctx: RunnerContext) -> None:
        r = event.response
        meta = r.metadata if r else {}
        budget = meta.get("budget") or {}
        ctx.send_event(OutputEvent(output={
            "key": ctx.key, "error": event.error, "content": r.message.content if r else None,
            "decision": budget.get("decision"), "scope": budget.get("scope"),
            "held_s": budget.get("held_s"), "model_setup": meta.get("model_setup"),
            "fallback_errors": meta.get("fallback_errors"),
            "throttled": meta.get("throttled", 0)}))


def asker(fast: str, slow: str, slower: str) -> Asker:
    agent = Asker()
    conn = ResourceType.CHAT_MODEL_CONNECTION
    agent.add_resource("fast", conn, ResourceDescriptor(OpenAIChatModel, base_url=fast))
    agent.add_resource("slow", conn, ResourceDescriptor(
        OpenAIChatModel, base_url=slow, flow_control=FlowControl(max_throttle_wait_s=0)))
    agent.add_resource("slower", conn, ResourceDescriptor(OpenAIChatModel, base_url=slower))
    model = ResourceType.CHAT_MODEL
    agent.add_resource("cheap", model, ResourceDescriptor(ChatModelSetup, connection="fast"))
    agent.add_resource("agent_model", model, ResourceDescriptor(
        ChatModelSetup, connection="fast", budget=Budget(
            max_tokens=300, scope="agent", on_exceeded="fallback", fallback="cheap",
            prices={"agent_model": ModelPrice(input_per_million=1000,
                                              output_per_million=2000)})))
    agent.add_resource("hold_model", model, ResourceDescriptor(
        ChatModelSetup, connection="fast",
        budget=Budget(max_tokens=15, window_s=5.0, on_exceeded="hold")))
    agent.add_resource("fallback_model", model, ResourceDescriptor(
        ChatModelSetup, connection="slow", fallbacks=["cheap"]))
    agent.add_resource("held_model", model, ResourceDescriptor(
        ChatModelSetup, connection="slower"))
    return agent
'''

MAIN = '''
import json
import sys
import tempfile
import time
import urllib.parse
import urllib.request

from pyflink.common import Duration, Types, WatermarkStrategy
from pyflink.datastream.connectors.file_system import FileSource, StreamFormat
from pyflink.datastream.connectors.number_seq import NumberSequenceSource

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.flink import create_stream_environment
from flink_agents_py.testing import ThrottlingProvider
from my_agents import asker

PORT = int(sys.argv[1])
PLAN = ([("agent_model", "a%d" % (i % 30)) for i in range(60)]
        + [("hold_model", "h%d" % (i % 10)) for i in range(20)]
        + [("fallback_model", "f%d" % i) for i in range(20)]
        + [("held_model", "t%d" % i) for i in range(10)])


def record(i):
    setup, key = PLAN[i]
    return {"key": key, "setup": setup, "n": i}


def rest(path):
    with urllib.request.urlopen("http://127.0.0.1:%d%s" % (PORT, path), timeout=30) as resp:
        return json.loads(resp.read())


def agent_metrics(job):
    """Every flink_agents metric of the job, summed over subtasks: {name: value}."""
    out = {}
    for vertex in rest("/jobs/" + job)["vertices"]:
        base = "/jobs/%s/vertices/%s/subtasks/metrics" % (job, vertex["id"])
        ids = [m["id"] for m in rest(base) if ".flink_agents." in m["id"]]
        for at in range(0, len(ids), 20):  # a URL within the REST server's 4 KiB line
            query = urllib.parse.urlencode({"agg": "sum", "get": ",".join(ids[at:at + 20])})
            for m in rest(base + "?" + query):
                out[m["id"].split(".flink_agents.", 1)[1]] = float(m["sum"])
    return out


with ThrottlingProvider(rate_per_s=1000, latency_s=0.02) as fast, \\
        ThrottlingProvider(rate_per_s=2, rate_headers=False) as slow, \\
        ThrottlingProvider(rate_per_s=3, rate_headers=False) as slower:
    env = create_stream_environment(parallelism=2, restart_attempts=0,
                                    extra_config={"rest.bind-port": str(PORT)})
    pickled = Types.PICKLED_BYTE_ARRAY()
    numbers = env.from_source(NumberSequenceSource(0, len(PLAN) - 1),
                              WatermarkStrategy.no_watermarks(), "numbers").map(
        record, output_type=pickled)
    empty = tempfile.mkdtemp()  # a source that never ends: the job runs while metrics are read
    never = (FileSource.for_record_stream_format(StreamFormat.text_line_format(), empty)
             .monitor_continuously(Duration.of_seconds(1)).build())
    stream = numbers.union(env.from_source(never, WatermarkStrategy.no_watermarks(), "never")
                           .map(lambda s: None, output_type=pickled)
                           .filter(lambda r: r is not None))
    agents = AgentsExecutionEnvironment.flink(env, max_in_flight=64)
    out = agents.from_datastream(stream).apply(
        asker(fast.base_url, slow.base_url, slower.base_url)).to_datastream()
    seen, metrics, t0 = 0, {}, time.time()
    with out.execute_and_collect("budgets-flink") as results:
        for r in results:
            print("OUT " + json.dumps(r, sort_keys=True), flush=True)
            seen += 1
            if seen == len(PLAN):
                break
        outputs_at = time.time()
        job = [j for j in rest("/jobs/overview")["jobs"] if j["state"] == "RUNNING"][0]["jid"]
        deadline, last, stable = time.time() + 120, None, 0
        while time.time() < deadline:  # until two reads a push interval apart agree
            try:
                metrics = agent_metrics(job)
            except OSError:
                time.sleep(1.2)
                continue
            stable = stable + 1 if metrics == last and metrics else 0
            if stable >= 2 and metrics.get("runs_completed") == len(PLAN):
                break
            last = metrics
            time.sleep(1.2)
    print("TIMES %.1f s to the outputs, %.1f s to stable metrics" % (outputs_at - t0,
                                                                     time.time() - t0))
    print("METRICS " + json.dumps(metrics, sort_keys=True), flush=True)
    print("FAKES " + json.dumps({"slow": [slow.served, slow.throttled],
                                 "slower": [slower.served, slower.throttled]}), flush=True)
'''


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _line(stdout: str, prefix: str) -> dict:
    return json.loads(next(x for x in stdout.splitlines() if x.startswith(prefix))[len(prefix):])


def test_budgets_hold_and_fallback_policies_and_their_metrics_at_parallelism_2(
        tmp_path: pathlib.Path):
    user = tmp_path / "user"
    user.mkdir()
    (user / "my_agents.py").write_text(textwrap.dedent(MY_AGENTS))
    (user / "main.py").write_text(textwrap.dedent(MAIN))
    res = run_user(["main.py", str(_free_port())], cwd=user)
    rows = outputs(res)
    metrics, fakes = _line(res.stdout, "METRICS "), _line(res.stdout, "FAKES ")
    print("\n" + next(x for x in res.stdout.splitlines() if x.startswith("TIMES ")))
    print(f"metrics: { {k: v for k, v in metrics.items() if 'model.' in k} }")
    assert len(rows) == 110
    assert [r for r in rows if r["error"]] == []  # every chat answered, whatever the policy
    by_prefix: dict[str, list[dict]] = {}
    for r in rows:
        by_prefix.setdefault(r["key"][0], []).append(r)

    # an agent budget split over 2 subtasks: 150 tokens each, 15 a call -> 10 + 10 within
    agent = by_prefix["a"]
    assert Counter(r["decision"] for r in agent) == {"within": 20, "fallback": 40}
    assert {r["scope"] for r in agent} == {"agent"}
    assert {r["model_setup"] for r in agent if r["decision"] == "fallback"} == {"cheap"}

    # hold: each key's second chat waits for its window to end, then is answered
    for key in {r["key"] for r in by_prefix["h"]}:
        mine = sorted((r for r in by_prefix["h"] if r["key"] == key),
                      key=lambda r: r["decision"])
        assert [r["decision"] for r in mine] == ["held", "within"], key
        assert mine[0]["held_s"] > 0.2

    # a provider that throttles: its calls fail at once and the fallback setup answers
    passed = [r for r in by_prefix["f"] if r["model_setup"] == "cheap"]
    assert passed and fakes["slow"][1] >= len(passed)
    assert all("429" in r["fallback_errors"][0] for r in passed)
    assert all(r["model_setup"] is None for r in by_prefix["f"] if r not in passed)

    # held throttled calls: none failed, each throttled answer counted
    held = by_prefix["t"]
    throttled = sum(r["throttled"] for r in held)
    assert fakes["slower"] == [10, throttled] and throttled > 0

    # the operator's metrics, summed over both subtasks
    assert metrics["model.agent_model.cost_micros"] == 20 * 20_000  # (10*1000 + 5*2000)/1e6
    assert metrics["model.agent_model.budget_remaining_tokens"] == 0
    assert metrics["model.held_model.chat_calls_throttled"] == throttled
    assert metrics["model.agent_model.input_tokens"] == 60 * 10  # the fallback's count too
    for setup in ("agent_model", "hold_model", "fallback_model", "held_model"):
        assert metrics[f"model.{setup}.flow_concurrency_limit"] >= 1, setup
