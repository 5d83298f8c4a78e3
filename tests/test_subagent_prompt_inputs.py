"""An internal sub-agent called with a pydantic model as its input (its ``input_type``).

Before, the call kept that model as it was in the invocation's sensory memory
(``_subagent.input``), which has no JSON form: while the child ran, the key's run state
could not be stored (a local snapshot, a checkpoint of keyed state) and failed with
``TypeError: Object of type Task is not JSON serializable``. And its chat prompts'
placeholders were left as literal text (``{review}``): only a ``dict`` input filled them,
though an object input's fields are documented to. Run as a user runs it: their module,
from a directory outside the repository, snapshotted at every crash point.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(180)

ROOT = Path(__file__).resolve().parents[1]

MODULE = textwrap.dedent('''
    from pydantic import BaseModel
    from flink_agents_py.api import (Agent, ChatMessage, ChatModelSetup, InputEvent,
                                     InternalSubagent, MessageRole, OutputEvent, Prompt,
                                     ResourceDescriptor, ResourceType, action)
    from flink_agents_py.testing import model_from_function

    class Task(BaseModel):
        review: str
        stars: int

    def echo(request):
        return " | ".join(m.content for m in request.messages)

    class Rater(Agent):
        @action(InputEvent)
        @staticmethod
        async def rate(event, ctx):
            answer = await ctx.chat("rater", [ChatMessage(role=MessageRole.USER, content="go")])
            ctx.send_event(OutputEvent(output=answer.content))

    class Caller(Agent):
        @action(InputEvent)
        @staticmethod
        async def go(event, ctx):
            task = Task(review=event.input["text"], stars=event.input["stars"])
            as_model = await (await ctx.submit_subagent("rater", task))
            as_dict = await (await ctx.submit_subagent("rater", task.model_dump()))
            ctx.send_event(OutputEvent(output={"model": as_model.result,
                                               "dict": as_dict.result}))

    def build():
        rater = Rater()
        rater.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, model_from_function(echo))
        rater.add_resource("ask", ResourceType.PROMPT,
                           Prompt.from_text("Rate '{review}' ({stars} stars)"))
        rater.add_resource("rater", ResourceType.CHAT_MODEL, ResourceDescriptor(
            ChatModelSetup, connection="conn", prompt="ask"))
        caller = Caller()
        caller.add_resource("rater", ResourceType.AGENT, ResourceDescriptor(
            InternalSubagent, agent=rater, description="Rates a review.",
            input_type="raters:Task"))
        return caller
''')

MAIN = textwrap.dedent('''
    import json
    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.testing import check_replay_safety
    import raters

    records = [{"key": "a", "text": "fits well", "stars": 5}]
    outs = AgentsExecutionEnvironment.local().from_list(records).apply(raters.build()).collect()
    report = check_replay_safety(raters.build(), records, other_process=False)
    print(json.dumps({"outputs": outs, "safe": report.ok, "report": str(report)}))
''')


@pytest.fixture(scope="module")
def user_run(tmp_path_factory):
    """The user's program run once: its outputs and its replay-safety report."""
    where = tmp_path_factory.mktemp("raters")
    (where / "raters.py").write_text(MODULE)
    (where / "main.py").write_text(MAIN)
    proc = subprocess.run([sys.executable, "main.py"], cwd=where, capture_output=True,
                          text=True, timeout=170, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_run_whose_child_got_a_pydantic_input_is_stored_and_restored(user_run):
    assert user_run["safe"], user_run["report"]  # snapshotted and restored at every point
    assert len(user_run["outputs"]) == 1


def test_a_pydantic_input_fills_the_childs_prompt_as_a_dict_does(user_run):
    # before: "Rate '{review}' ({stars} stars)" reached the model for the model input
    filled = ["Rate 'fits well' (5 stars) | go"]
    assert user_run["outputs"] == [{"model": filled, "dict": filled}]


def test_prompt_values_of_each_kind_of_input():
    import dataclasses

    from pydantic import BaseModel

    from flink_agents_py.api.internal import subagent_prompt_values

    class Inner(BaseModel):
        sku: str

    class Task(BaseModel):
        review: str
        item: Inner

    @dataclasses.dataclass
    class Plain:
        review: str

    assert subagent_prompt_values({"review": "x"}) == {"review": "x"}
    assert subagent_prompt_values(Task(review="x", item=Inner(sku="s"))) == {
        "review": "x", "item": {"sku": "s"}}  # nested as the same input given as a dict
    assert subagent_prompt_values(Plain(review="x")) == {"review": "x"}
    assert subagent_prompt_values(Plain) is None  # a class is no input
    assert subagent_prompt_values("text") is None
    assert subagent_prompt_values([1, 2]) is None


FLINK_MAIN = textwrap.dedent('''
    import json
    from pyflink.common import Types
    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.flink import create_stream_environment
    import raters

    env = create_stream_environment(parallelism=1)
    records = [{"key": f"k{i}", "text": f"t{i}", "stars": i} for i in range(3)]
    stream = env.from_collection([json.dumps(r) for r in records], type_info=Types.STRING()
                                 ).map(json.loads, output_type=Types.PICKLED_BYTE_ARRAY())
    job = AgentsExecutionEnvironment.flink(env).from_datastream(
        stream, key_selector=lambda r: r["key"])
    job.apply(raters.build())
    with job.to_datastream().execute_and_collect("raters") as outputs:
        print(json.dumps(sorted((o for o in outputs), key=json.dumps)))
''')


@pytest.mark.flink
def test_on_a_minicluster_a_pydantic_input_neither_fails_the_job_nor_its_prompt(tmp_path):
    # before: the job failed as the key's state was written (Task is not JSON serializable)
    pytest.importorskip("pyflink")
    import os

    (tmp_path / "raters.py").write_text(MODULE)
    (tmp_path / "main.py").write_text(FLINK_MAIN)
    proc = subprocess.run([sys.executable, "main.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=170, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    outputs = json.loads(proc.stdout.strip().splitlines()[-1])
    assert outputs == [{"model": [f"Rate 't{i}' ({i} stars) | go"],
                        "dict": [f"Rate 't{i}' ({i} stars) | go"]} for i in range(3)]


DATACLASS_MODULE = MODULE.replace(
    "from pydantic import BaseModel\n",
    "import dataclasses\nfrom pydantic import BaseModel\n\n"
    "@dataclasses.dataclass\nclass Plain:\n    review: str\n    stars: int\n",
).replace(
    "as_dict = await (await ctx.submit_subagent(\"rater\", task.model_dump()))",
    "as_dict = await (await ctx.submit_subagent(\"rater\", Plain(task.review, task.stars)))",
)


def test_a_dataclass_input_goes_as_its_fields_and_is_replay_safe(tmp_path):
    # before: submitting a dataclass instance (a type the docs take as input_type) failed the
    # call with "Plain ... has no JSON form (use a pydantic model)"
    assert "Plain(task.review" in DATACLASS_MODULE
    (tmp_path / "raters.py").write_text(DATACLASS_MODULE)
    (tmp_path / "main.py").write_text(MAIN)
    proc = subprocess.run([sys.executable, "main.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=170, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = json.loads(proc.stdout.strip().splitlines()[-1])
    assert run["safe"], run["report"]
    filled = ["Rate 'fits well' (5 stars) | go"]
    assert run["outputs"] == [{"model": filled, "dict": filled}]
