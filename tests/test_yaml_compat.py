"""Flink Agents' YAML keys: their review-analysis YAML file loads and runs on the local runner."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from flink_agents_py.api import ResourceName
from flink_agents_py.yaml import YamlError, load_agents

pytestmark = pytest.mark.timeout(60)

EXAMPLES = Path(__file__).parent / "flink_agents_examples"

RUN = """\
import json
from pathlib import Path

from agents.custom_types_and_resources import ProductReview
from flink_agents_py.compat import AgentsExecutionEnvironment

env = AgentsExecutionEnvironment.get_execution_environment()
env.load_yaml(Path("yaml_review_analysis_agent.yaml"))
lines = Path("resources/product_review.txt").read_text().splitlines()
reviews = [ProductReview.model_validate_json(line) for line in lines]
out = env.from_list([{"key": r.id, "value": r} for r in reviews]).apply(
    "review_analysis_agent").to_list()
env.execute()
print(json.dumps([[key, res.model_dump()] for row in out for key, res in row.items()]))
"""


def test_their_yaml_file_runs_on_the_local_runner(tmp_path):
    # the user's way: their example folder copied outside the repository, their own script
    for item in ("agents", "resources", "offline_model.py", "yaml_review_analysis_agent.yaml"):
        src = EXAMPLES / item
        (shutil.copytree if src.is_dir() else shutil.copy)(src, tmp_path / item)
    (tmp_path / "run.py").write_text(RUN)
    done = subprocess.run([sys.executable, "run.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=50, check=False)
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout.strip().splitlines()[-1])
    n_reviews = len((tmp_path / "resources" / "product_review.txt").read_text().splitlines())
    assert len(rows) == n_reviews
    wet = [res for _, res in rows if res["reasons"] == ["shipping damage"]]
    assert wet and all(res["score"] == 1 for res in wet)
    # extract_reasoning took the <think> block out, so the answer parsed as JSON
    assert all(res["score"] in (1, 5) for _, res in rows)


def _load(tmp_path: Path, body: str) -> dict:
    path = tmp_path / "agents.yaml"
    path.write_text(textwrap.dedent(body))
    return load_agents(path)


AGENT = """\
agents:
  - name: a
    description: does things
    actions:
      - name: start
        function: support.yaml_helpers:start
        listen_to: {events}
    chat_model_connections:
      - name: conn
        clazz: {conn}
    chat_model_setups:
      - name: m
        clazz: ollama
        connection: conn
        model: qwen3:8b
        extract_reasoning: true
        {extra}
"""


@pytest.mark.parametrize("events", ["[input]", "[InputEvent]", "input_event",
                                    "[flink_agents.api.events.event.InputEvent]"])
def test_listen_to_takes_their_event_names(tmp_path, events):
    agents = _load(tmp_path, AGENT.format(
        events=events, conn="flink_agents_py.testing.ScriptedChatModel", extra=""))
    triggers = {name: spec.triggers for name, _, spec in agents["a"].declared_actions()}
    assert triggers == {"start": ("InputEvent",)}


def test_short_provider_names_map_to_their_adapters(tmp_path):
    agents = _load(tmp_path, AGENT.format(events="[input]", conn="ollama", extra=""))
    classes = {name: d.clazz for _, name, d in agents["a"].declared_resources()}
    assert classes["conn"] == ResourceName.ChatModel.OLLAMA_CONNECTION
    assert classes["m"] == ResourceName.ChatModel.OLLAMA_SETUP


def test_unknown_event_name_and_argument_are_named_with_their_line(tmp_path):
    with pytest.raises(YamlError) as err:
        _load(tmp_path, AGENT.format(events="[chat_respnose]",
                                     conn="flink_agents_py.testing.ScriptedChatModel",
                                     extra="temprature: 0.1"))
    text = str(err.value)
    assert "'chat_respnose' names no known event type" in text
    assert "close to 'chat_response'" in text
    assert "unknown key 'temprature'" in text and "agents.yaml:17:" in text
    assert "listen_to[0]" in text and "agents.yaml:7:" in text


def test_the_json_schema_accepts_their_file():
    jsonschema = pytest.importorskip("jsonschema")
    yaml = pytest.importorskip("yaml")
    from flink_agents_py.yaml import SCHEMA_PATH
    schema = json.loads(SCHEMA_PATH.read_text())
    doc = yaml.safe_load((EXAMPLES / "yaml_review_analysis_agent.yaml").read_text())
    jsonschema.Draft7Validator(schema).validate(doc)
    doc["agents"][0]["chat_model_setups"][0]["clazz"] = "olama"  # neither short nor dotted
    assert not jsonschema.Draft7Validator(schema).is_valid(doc)


def test_on_and_listen_to_together_are_rejected(tmp_path):
    body = AGENT.format(events="[input]", conn="flink_agents_py.testing.ScriptedChatModel",
                        extra="").replace("listen_to: [input]", "listen_to: [input]\n"
                                          "        on: [InputEvent]")
    with pytest.raises(YamlError, match="not 'on' and 'listen_to'"):
        _load(tmp_path, body)


def test_load_yaml_takes_a_list_of_paths(tmp_path):
    # Flink Agents' env.load_yaml(paths): a path or a list of them
    (tmp_path / "shout.py").write_text(textwrap.dedent("""\
        from flink_agents_py.compat import InputEvent, OutputEvent

        def shout(event, ctx):
            ctx.send_event(OutputEvent(output=str(event.input).upper()))

        def whisper(event, ctx):
            ctx.send_event(OutputEvent(output=str(event.input).lower()))
        """))
    for name in ("shout", "whisper"):
        (tmp_path / f"{name}.yaml").write_text(textwrap.dedent(f"""\
            agents:
              - name: {name}er
                actions:
                  - name: {name}
                    function: "shout:{name}"
                    listen_to: [input]
            """))
    (tmp_path / "run.py").write_text(textwrap.dedent("""\
        import json
        from flink_agents_py.compat import AgentsExecutionEnvironment

        env = AgentsExecutionEnvironment.get_execution_environment()
        env.load_yaml(paths=["shout.yaml", "whisper.yaml"])
        outs = []
        for agent in ("shouter", "whisperer"):
            outs.append(env.from_list([{"key": "k", "value": "Hi"}]).apply(agent).to_list())
        env.execute()
        print(json.dumps(outs))
        """))
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run([sys.executable, "run.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=50, env={"PYTHONPATH": str(root), "PATH": ""})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == [[{"k": "HI"}], [{"k": "hi"}]]


USER_TYPE_MODULE = """\
from flink_agents_py.compat import Event, OutputEvent


def start(event, ctx):
    ctx.send_event(Event(type="order_paid", attributes={"order": event.input["order"]}))


def paid(event, ctx):
    ctx.send_event(OutputEvent(output={"paid": event.attributes["order"]}))
"""

USER_TYPE_YAML = """\
agents:
  - name: shop
    actions:
      - name: start
        function: shop_actions:start
        trigger_conditions: [input]
      - name: paid
        function: shop_actions:paid
        trigger_conditions: [order_paid]
"""

USER_TYPE_RUN = """\
import json
from flink_agents_py.compat import AgentsExecutionEnvironment

env = AgentsExecutionEnvironment.get_execution_environment()
env.load_yaml("shop.yaml")
out = env.from_list([{"key": "k1", "value": {"order": 7}}]).apply("shop").to_list()
env.execute()
print(json.dumps(out))
"""


def test_a_trigger_naming_a_type_of_the_programs_own_runs_its_action(tmp_path):
    # Flink Agents' loader passes an unknown trigger_conditions entry through as the event
    # type (aliases.resolve_event_type); ours refused 'order_paid' as "no known event type"
    (tmp_path / "shop_actions.py").write_text(USER_TYPE_MODULE)
    (tmp_path / "shop.yaml").write_text(USER_TYPE_YAML)
    (tmp_path / "run.py").write_text(USER_TYPE_RUN)
    done = subprocess.run([sys.executable, "run.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=50, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [{"k1": {"paid": 7}}]
