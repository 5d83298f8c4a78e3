"""A model's tool call arguments are checked and converted by the tool's signature.

A model writes arguments as JSON: an object for a parameter annotated with a pydantic model,
numbers as text now and then. Before this fix the function got them as they were (a ``dict``
where it declared an ``Item``, ``"3"`` where it declared an ``int``), so the tool failed on
its own line or computed the wrong thing (``"1" + "2"`` is ``"12"``). Similar reports:
LangChain's and pydantic-ai's tool argument validation, Apache Flink Agents #284 (a
provider's tool call arguments in another form).
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

pytestmark = pytest.mark.timeout(180)

SCRIPT = textwrap.dedent('''
    import json, sys
    from pydantic import BaseModel
    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.api import (Agent, ChatMessage, ChatModelSetup, InputEvent,
                                     OutputEvent, ResourceDescriptor, ResourceType, action)
    from flink_agents_py.testing import model_from_function, tool_call, tool_calls


    class Item(BaseModel):
        name: str
        qty: int


    def order(item: Item, count: int, note: str = "none") -> dict:
        """Order an item.

        Args:
            item: what to order.
            count: how many of it.
            note: a note.
        """
        return {"item": type(item).__name__, "total": item.qty * count, "note": note}


    CALLS = {
        "coerced": {"item": {"name": "pen", "qty": "2"}, "count": "3", "note": 7},
        "wrong": {"item": {"name": "pen"}, "count": "many", "colour": "red"},
        "encoded": {"item": '{"name": "pen", "qty": 2}', "count": 3, "note": "[1]"},
    }


    def script(request):
        if not request.tool_results:
            return tool_calls(tool_call("order", "c1", **CALLS[request.last_user_text]))
        return request.tool_results[-1].content


    class Shop(Agent):
        @action(InputEvent)
        @staticmethod
        async def ask(event, ctx):
            reply = await ctx.chat("model", [ChatMessage(content=event.input["case"])])
            ctx.send_event(OutputEvent(output={"case": event.input["case"],
                                               "answer": reply.message.content}))


    agent = Shop()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, model_from_function(script))
    agent.add_resource("model", ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="conn", tools=["order"]))
    agent.add_resource("order", ResourceType.TOOL, order)
    outs = AgentsExecutionEnvironment.local().from_list(
        [{"key": c, "case": c} for c in CALLS]).apply(agent).collect()
    print(json.dumps(sorted(outs, key=lambda o: o["case"])))
''')


def test_tool_arguments_are_converted_to_the_declared_types_and_misfits_told_to_the_model(
        tmp_path: Path) -> None:
    (tmp_path / "shop.py").write_text(SCRIPT)
    proc = subprocess.run([str(PYTHON), "shop.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=150, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert proc.returncode == 0, proc.stderr
    coerced, encoded, wrong = json.loads(proc.stdout.strip().splitlines()[-1])
    # the pydantic parameter got an Item, "3" became 3, the number 7 became the text "7"
    assert json.loads(coerced["answer"]) == {"item": "Item", "total": 6, "note": "7"}
    # an object sent as its JSON text (providers encoding nested values twice: kimi-cli
    # #2513, #2572) is the object; JSON text for a str parameter stays text
    assert json.loads(encoded["answer"]) == {"item": "Item", "total": 6, "note": "[1]"}
    # what does not fit is the tool's error, naming the tool and each argument, for the model
    answer = wrong["answer"]
    assert answer.startswith("Error: ValueError: tool 'order' was called with arguments")
    assert "item.qty: Field required" in answer
    assert "count: Input should be a valid integer" in answer and "'many'" in answer
    assert "colour: Extra inputs are not permitted" in answer
