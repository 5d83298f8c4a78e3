"""A tool's float parameter never receives ``NaN`` or an infinity from a model's call.

JSON has neither, but the tool's argument model was lax as pydantic is by default: a model
writing ``{"amount": "NaN"}`` (or ``"inf"``, ``"-Infinity"``, or ``"[1, NaN]"`` for a list
given as JSON text) had the function called with ``nan``. ``NaN`` passes every comparison
check a tool makes (``if amount > 100: refuse`` is ``False``), so a prompt injection paid
what the tool meant to refuse. Now each is an argument that does not fit, told to the model
(the function is not called); text nested too deeply is no ``RecursionError`` either.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from flink_agents_py.api import FunctionTool

pytestmark = pytest.mark.timeout(120)
ROOT = Path(__file__).resolve().parents[1]
PAID: list[float] = []


def pay(amount: float, parts: list[float] | None = None) -> str:
    """Pay an amount.

    Args:
        amount: how much (at most 100).
        parts: its parts.
    """
    if amount > 100:
        return "refused"
    PAID.append(amount)
    return f"paid {amount}"


@pytest.mark.parametrize(
    "arguments",
    [
        {"amount": "NaN"},
        {"amount": "nan"},
        {"amount": "inf"},
        {"amount": "-Infinity"},
        {"amount": 5, "parts": ["Infinity"]},
        {"amount": 5, "parts": "[1, NaN]"},
        {"amount": 5, "parts": "[1, 1e999]"},
        {"amount": 5, "parts": "[" * 5_000 + "]" * 5_000},
    ],
)
def test_a_float_argument_with_no_json_form_is_refused_before_the_function_runs(arguments):
    PAID.clear()
    with pytest.raises(
        ValueError,
        match=r"tool 'pay' was called with arguments that do not "
        r"fit its parameters",
    ):
        asyncio.run(FunctionTool.from_function(pay).acall(**arguments))
    assert PAID == []


def test_finite_numbers_still_fit():
    PAID.clear()
    tool = FunctionTool.from_function(pay)
    assert asyncio.run(tool.acall(amount="7.5", parts="[1, 2.5]")) == "paid 7.5"
    assert asyncio.run(tool.acall(amount=1e300)) == "refused"


SCRIPT = r'''
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (Agent, ChatMessage, ChatModelSetup, InputEvent, OutputEvent,
                                 ResourceDescriptor, ResourceType, ToolCall, action, tool)
from flink_agents_py.testing import model_from_function

PAID = []


def reply(request):
    if request.tool_results:
        return "told: " + str(request.tool_results[0].content)[:200]
    return ToolCall(id="c1", name="pay", arguments={"amount": "NaN"})


class Shop(Agent):
    @tool
    @staticmethod
    def pay(amount: float) -> str:
        """Pay an amount.

        Args:
            amount: how much (at most 100).
        """
        if amount > 100:
            return "refused"
        PAID.append(amount)
        return f"paid {amount}"

    @action(InputEvent)
    @staticmethod
    async def buy(event, ctx):
        answer = await ctx.chat("model", [ChatMessage(content="pay 1000")])
        ctx.send_event(OutputEvent(output=answer.content))


shop = Shop()
shop.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, model_from_function(reply))
shop.add_resource("model", ResourceType.CHAT_MODEL,
                  ResourceDescriptor(ChatModelSetup, connection="conn", tools=["pay"]))
result = AgentsExecutionEnvironment.local().from_list([{"key": "a"}]).apply(shop).run()
print("OUT", result.outputs)
print("PAID", PAID, "ERRORS", len(result.errors))
'''


def test_a_users_tool_is_not_called_with_nan_from_a_prompt_injected_call(tmp_path):
    assert ROOT not in tmp_path.resolve().parents
    (tmp_path / "shop.py").write_text(SCRIPT)
    proc = subprocess.run(
        [sys.executable, "shop.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=100,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "PAID [] ERRORS 0" in proc.stdout, proc.stdout
    assert "told: Error: " in proc.stdout and "finite number" in proc.stdout, proc.stdout
