"""A structured answer its pydantic output class refuses goes back to the model.

``ctx.chat(..., output_schema=Rating)`` (and a ``ReActAgent``'s output class) checked the
answer only against the class's JSON Schema; an answer that followed it but that the class
refused (a ``field_validator``, a ``date`` field given "yesterday") failed the caller's
await with pydantic's raw error, the model never told and ``output_retries`` unused, where
an answer breaking the JSON Schema was sent back with the reason (pydantic-ai and
instructor retry on the model class's validation errors too).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VENV_PY = ROOT / ".venv" / "bin" / "python"
PYTHON = VENV_PY if VENV_PY.exists() else Path(sys.executable)

pytestmark = pytest.mark.timeout(300)

MODULE = textwrap.dedent('''
    import datetime
    import json

    from pydantic import BaseModel, field_validator

    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.agents import ReActAgent
    from flink_agents_py.api import (Agent, ChatMessage, ChatModelSetup, ChatResponseError,
                                     InputEvent, OutputEvent, ResourceDescriptor, ResourceType,
                                     action)
    from flink_agents_py.testing import model_from_function


    class Rating(BaseModel):
        score: int
        when: datetime.date

        @field_validator("score")
        @classmethod
        def at_most_five(cls, v):
            if v > 5:
                raise ValueError("score must be at most 5")
            return v


    def answer(request):
        told = [m.content for m in request.messages if "cannot be used" in m.content]
        if "stubborn" in request.messages[0].content or not told:
            return {"score": 9, "when": "yesterday"}
        return {"score": 4, "when": "2024-01-02"}


    class Rater(Agent):
        @action(InputEvent)
        @staticmethod
        async def rate(event, ctx):
            try:
                r = await ctx.chat("m", [ChatMessage(content=event.input["text"])],
                                   output_schema=Rating)
            except ChatResponseError as e:
                ctx.send_event(OutputEvent(output={"error": str(e)}))
                return
            ctx.send_event(OutputEvent(output={
                "type": type(r.structured).__name__, "value": r.structured.model_dump(mode="json"),
                "output_retries": r.metadata.get("output_retries")}))


    def with_model(agent, connection):
        agent.add_resource("c", ResourceType.CHAT_MODEL_CONNECTION, connection)
        agent.add_resource("m", ResourceType.CHAT_MODEL, ResourceDescriptor(
            ChatModelSetup, connection="c"))
        return agent


    def rater():
        return with_model(Rater(), model_from_function(answer))


    def react():
        agent = ReActAgent(chat_model=ResourceDescriptor(ChatModelSetup, connection="c"),
                           prompt="rate {text}", output_schema=Rating)
        agent.add_resource("c", ResourceType.CHAT_MODEL_CONNECTION, model_from_function(answer))
        return agent


    if __name__ == "__main__":
        model = model_from_function(answer)
        out = AgentsExecutionEnvironment.local().from_list(
            [{"key": "a", "text": "good"}, {"key": "b", "text": "stubborn"}]
        ).apply(with_model(Rater(), model)).collect()
        told = [m.content for r in model.requests for m in r.messages
                if "cannot be used" in m.content]
        react_out = AgentsExecutionEnvironment.local().from_list(
            [{"key": "r", "text": "good"}]).apply(react()).collect()
        print(json.dumps({"out": out, "told": told,
                          "react": [o.model_dump(mode="json") for o in react_out]}))
''')


def test_an_answer_the_output_class_refuses_is_sent_back_to_the_model(tmp_path: Path) -> None:
    (tmp_path / "rating_agent.py").write_text(MODULE)
    proc = subprocess.run([str(PYTHON), "rating_agent.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=250, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    good, stubborn = sorted(result["out"], key=lambda o: "error" in o)
    assert good == {"type": "Rating", "value": {"score": 4, "when": "2024-01-02"},
                    "output_retries": 1}
    # the model read why: the class's own reasons, not only the JSON Schema's
    assert any("does not fit Rating" in t and "score must be at most 5" in t
               and "$.when" in t for t in result["told"]), result["told"]
    # an answer still refused fails the chat as a schema violation does, quoting both answers
    assert "StructuredOutputError" in stubborn["error"], stubborn
    assert "answer 2:" in stubborn["error"] and "score must be at most 5" in stubborn["error"]
    assert result["react"] == [{"score": 4, "when": "2024-01-02"}]


def test_the_corrected_answer_is_replay_safe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                             ) -> None:
    from flink_agents_py.testing import check_replay_safety

    (tmp_path / "rating_agent.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    import rating_agent  # type: ignore[import-not-found]

    report = check_replay_safety(rating_agent.rater(), [{"key": "a", "text": "good"}])
    assert report.ok, report
    assert (report.outputs, report.errors) == (1, 0), report
    assert report.elsewhere, report.other_process  # restored in another process too
