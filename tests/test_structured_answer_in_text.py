"""A structured answer written inside other text is read; NaN and Infinity never are.

(And a reasoning model's ``<think>...</think>`` before the answer, braces in it, is skipped.)

Models (small local ones above all) write "Sure! Here is the rating: ```json {...} ```
Hope it helps." or a note after the object. The chat action took only a bare answer or one
wrapped in nothing but a fence: both answers were refused, the model asked again with
"the answer is not JSON", and the chat failed though it held exactly one valid object
(LangChain's JSON parser and instructor's markdown mode read such a block). The same rule
already read tool call arguments so (``one_json_object``). Its decoder took ``NaN`` and
``Infinity``, which have no JSON form: a structured answer holding one then failed the
chat with a ``SerializationError`` when its response was recorded, instead of being sent
back to the model; tool call arguments holding one reached the tool.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from flink_agents_py.integrations.chat_models._answers import tool_arguments

ROOT = Path(__file__).resolve().parents[1]
VENV_PY = ROOT / ".venv" / "bin" / "python"
PYTHON = VENV_PY if VENV_PY.exists() else Path(sys.executable)

pytestmark = pytest.mark.timeout(300)

MODULE = textwrap.dedent('''
    import json

    from pydantic import BaseModel

    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.api import (Agent, ChatMessage, ChatModelSetup, ChatResponseError,
                                     InputEvent, OutputEvent, ResourceDescriptor, ResourceType,
                                     action)
    from flink_agents_py.testing import model_from_function

    ANSWERS = {
        "fenced in prose":
            'Sure! Here is the rating:\\n```json\\n{"score": 3}\\n```\\nHope it helps.',
        "note after": '{"score": 3} (3 because the battery is weak)',
        "two objects": 'Either {"score": 3} or {"score": 4}',
        "nan": 'Here: {"score": NaN}',
        "thought first": '<think>They want {score}; maybe {"score": 5}?</think>\\n{"score": 4}',
    }


    class Rating(BaseModel):
        score: float


    def answer(request):
        asked_again = any("cannot be used" in m.content for m in request.messages)
        return '{"score": 2}' if asked_again else ANSWERS[request.messages[0].content]


    class Rater(Agent):
        @action(InputEvent)
        @staticmethod
        async def rate(event, ctx):
            try:
                r = await ctx.chat("m", [ChatMessage(content=event.input["case"])],
                                   output_schema=Rating)
            except ChatResponseError as e:
                ctx.send_event(OutputEvent(output={"case": event.input["case"], "error": str(e)}))
                return
            ctx.send_event(OutputEvent(output={
                "case": event.input["case"], "score": r.structured.score,
                "output_retries": r.metadata.get("output_retries", 0)}))


    agent = Rater()
    agent.add_resource("c", ResourceType.CHAT_MODEL_CONNECTION, model_from_function(answer))
    agent.add_resource("m", ResourceType.CHAT_MODEL, ResourceDescriptor(ChatModelSetup,
                                                                        connection="c"))
    out = AgentsExecutionEnvironment.local().from_list(
        [{"key": c, "case": c} for c in ANSWERS]).apply(agent).collect()
    print(json.dumps(sorted(out, key=lambda o: o["case"])))
''')


def test_one_json_object_among_text_is_the_structured_answer(tmp_path: Path) -> None:
    (tmp_path / "rater.py").write_text(MODULE)
    proc = subprocess.run([str(PYTHON), "rater.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=250, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert proc.returncode == 0, proc.stderr
    out = {o.pop("case"): o for o in json.loads(proc.stdout.strip().splitlines()[-1])}
    assert out["fenced in prose"] == {"score": 3, "output_retries": 0}
    assert out["note after"] == {"score": 3, "output_retries": 0}
    # a reasoning model's thoughts (its server's parser off) are not the answer
    assert out["thought first"] == {"score": 4, "output_retries": 0}
    # which object was meant is not sure, and NaN is no JSON: the model is asked again
    assert out["two objects"] == {"score": 2, "output_retries": 1}
    assert out["nan"] == {"score": 2, "output_retries": 1}, out["nan"]


@pytest.mark.parametrize("raw", ['{"x": NaN}', '{"x": Infinity}', 'Calling: {"x": -Infinity}'])
def test_tool_arguments_holding_nan_are_unreadable_not_given_to_the_tool(raw: str) -> None:
    from flink_agents_py.api.internal import UNREADABLE_ARGUMENTS

    args = tool_arguments(raw, 0, "t")  # a provider's wire arguments
    assert UNREADABLE_ARGUMENTS in args, args
    assert not any(isinstance(v, float) and not math.isfinite(v) for v in args.values())
