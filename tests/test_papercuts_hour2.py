"""More second-hour papercuts: a user's own scripts, run from a temporary directory, where a
mistake was silent (or read wrong) and now says what it is and how to fix it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VENV_PY = ROOT / ".venv" / "bin" / "python"
PYTHON = VENV_PY if VENV_PY.exists() else Path(sys.executable)

pytestmark = pytest.mark.timeout(180)


def run_user_script(tmp_path: Path, files: dict[str, str], script: str = "main.py"
                    ) -> subprocess.CompletedProcess[str]:
    """Write ``files`` into ``tmp_path`` and run ``script`` there with the venv's Python."""
    for name, text in files.items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    return subprocess.run([str(PYTHON), script], cwd=tmp_path, capture_output=True, text=True,
                          timeout=150, env={"PYTHONPATH": f"{ROOT}:{tmp_path}", "PATH": ""})


# -- a misspelt prompt name was sent to the model as the system prompt -------------------------

ACTS = '''
from flink_agents_py.api import ChatMessage, OutputEvent


async def start(event, ctx):
    reply = await ctx.chat("review_model", [ChatMessage(content=event.input["text"])],
                           prompt_args={"product": "kettle"})
    ctx.send_event(OutputEvent(output=reply.message.content))


def script(request):
    return "system: " + request.messages[0].content
'''

AGENTS_YAML = '''
agents:
  - name: mine
    actions:
      - {name: start, function: "acts:start", on: [InputEvent]}
    chat_model_connections:
      - {name: conn, clazz: flink_agents_py.integrations.chat_models.ScriptedChatModel,
         function: "acts:script"}
    chat_model_setups:
      - {name: review_model, connection: conn, prompt: %s}
    prompts:
      - {name: review_prompt, text: "Review {product}."}
'''

RUN_YAML = '''
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import PlanError
from flink_agents_py.yaml import YamlError, load_agent

try:
    agent = load_agent("agents.yaml")
    print(AgentsExecutionEnvironment.local().from_list([{"key": "a", "text": "hi"}])
          .apply(agent).collect())
except YamlError as e:
    print("ERROR", e)
'''

RUN_PYTHON = '''
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (Agent, ChatModelSetup, InputEvent, PlanError, Prompt,
                                 ResourceDescriptor, ResourceType, action)
from flink_agents_py.testing import model_from_function
import acts


class Mine(Agent):
    start = action(InputEvent)(staticmethod(acts.start))


for prompt, declared in [("review_promt", True), ("review_prompt", False), ("sys", False)]:
    agent = Mine()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION,
                       model_from_function(acts.script))
    agent.add_resource("review_model", ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="conn", prompt=prompt))
    if declared:
        agent.add_resource("review_prompt", ResourceType.PROMPT,
                           Prompt.from_text("Review {product}."))
    try:
        print(AgentsExecutionEnvironment.local().from_list([{"key": "a", "text": "hi"}])
              .apply(agent).collect())
    except PlanError as e:
        print("ERROR", " ".join(str(e).split()))
'''


@pytest.mark.parametrize(("prompt", "expected"), [
    ("review_prompt", "[\'system: Review kettle.\']"),
    ("review_promt", "did you mean 'review_prompt'?"),
    ("'Be brief about {product}.'", "[\'system: Be brief about kettle.\']"),
])
def test_a_yaml_setup_naming_a_misspelt_prompt_is_refused_with_the_declared_name(
        tmp_path: Path, prompt: str, expected: str) -> None:
    proc = run_user_script(tmp_path, {"acts.py": ACTS, "agents.yaml": AGENTS_YAML % prompt,
                                      "main.py": RUN_YAML})
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.strip()
    assert expected in out, out
    if "ERROR" in out:  # where: the file, the agent's line, the setup and the wrong name
        assert "agents.yaml:" in out and "chat_model resource 'review_model'" in out
        assert "names prompt 'review_promt', which is not declared" in out


def test_a_python_setup_naming_an_undeclared_prompt_is_refused_a_literal_text_runs(
        tmp_path: Path) -> None:
    proc = run_user_script(tmp_path, {"acts.py": ACTS, "main.py": RUN_PYTHON})
    assert proc.returncode == 0, proc.stderr
    typo, undeclared, literal = proc.stdout.strip().splitlines()
    assert typo.startswith("ERROR") and "did you mean 'review_prompt'?" in typo
    assert undeclared.startswith("ERROR") and "(declared prompts: none)" in undeclared
    assert "declare it (@prompt, or add_resource('review_prompt', ResourceType.PROMPT" \
        in undeclared
    assert literal == "['system: sys']"  # one word, no underscore: still a literal text


# -- an action returning its output (no return annotation) lost it without a word --------------

RETURNS = '''
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent, InputEvent, OutputEvent, action


class Forgetful(Agent):
    @action(InputEvent)
    @staticmethod
    def answer(event, ctx):
        return OutputEvent(output={"key": ctx.key})

    @action(InputEvent)
    @staticmethod
    async def summary(event, ctx):
        return {"summary": "..."}

    @action(InputEvent)
    @staticmethod
    async def fine(event, ctx):
        ctx.send_event(OutputEvent(output=1))
        return None


records = [{"key": k} for k in "abc"]
print(AgentsExecutionEnvironment.local().from_list(records).apply(Forgetful()).collect())
'''


def test_an_action_returning_a_value_is_warned_about_once_at_its_definition(
        tmp_path: Path) -> None:
    proc = run_user_script(tmp_path, {"forgetful.py": RETURNS}, "forgetful.py")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "[1, 1, 1]"  # the outputs are unchanged
    warned = [line for line in proc.stderr.splitlines() if "ActionReturnWarning" in line]
    assert len(warned) == 2, proc.stderr  # once per action, not once per record
    sync, coro = sorted(warned, key=lambda line: "'summary'" in line)
    assert sync.startswith(f"{tmp_path / 'forgetful.py'}:7: ")  # the action's definition
    assert "action 'answer' (Forgetful.answer) returned an OutputEvent, which is discarded: " \
        "send it instead: ctx.send_event(OutputEvent(...))" in sync
    assert coro.startswith(f"{tmp_path / 'forgetful.py'}:12: ")
    assert "action 'summary' (Forgetful.summary) returned a dict, which is discarded" in coro
    assert "ctx.send_event(OutputEvent(output=...))" in coro


# -- set_config(max_tool_rounds=...) read as a bound, but no chat model setup reads it -----------

CONFIGURED = '''
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent, InputEvent, OutputEvent, action


class Bounded(Agent):
    @action(InputEvent)
    @staticmethod
    def answer(event, ctx):
        ctx.send_event(OutputEvent(output=ctx.config.get("max_tool_rounds")))


agent = Bounded()
agent.set_config(max_tool_rounds=2, team="reviews")
print(AgentsExecutionEnvironment.local().from_list([{"key": "a"}]).apply(agent).collect())
'''


def test_a_setup_field_in_the_agent_config_is_warned_about_naming_where_it_goes(
        tmp_path: Path) -> None:
    proc = run_user_script(tmp_path, {"bounded.py": CONFIGURED}, "bounded.py")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "[2]"  # still in ctx.config
    warned = [line for line in proc.stderr.splitlines() if "SetupConfigWarning" in line]
    assert len(warned) == 1, proc.stderr
    assert warned[0].startswith(f"{tmp_path / 'bounded.py'}:15: ")  # the apply(...) line
    assert "agent Bounded's configuration sets max_tool_rounds=2, which no chat model setup " \
        "reads" in warned[0]
    assert "ResourceDescriptor(ChatModelSetup, connection=..., max_tool_rounds=2)" in warned[0]
    assert "team" not in warned[0]
