"""Tools written in forms a model's call did not reach, and results whose error hid the cause.

Before this fix: a tool with positional-only parameters (``def area(w, h, /)``) failed every
call (``TypeError: got some positional-only arguments passed as keyword arguments``: a
model names every argument); an ``async def`` behind a plain decorator (``functools.wraps``
in a sync wrapper) returned its coroutine, never run, and the model read that it had no
JSON form; a result with a tuple key (``{(1, 2): 3}``) failed with ``TypeError: unhashable
type: 'list'`` instead of naming the key; a tool raising an exception whose ``__str__``
fails failed the whole chat instead of telling the model. Similar reports: LangChain's and
the OpenAI Agents SDK's decorated async tools, pydantic-ai's positional-only parameters.
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
    import functools
    import json

    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.api import (Agent, ChatMessage, ChatModelSetup, InputEvent,
                                     OutputEvent, ResourceDescriptor, ResourceType, action)
    from flink_agents_py.testing import model_from_function, tool_call, tool_calls

    RAN = []


    def area(w: int, h: int = 2, /, unit: str = "m") -> str:
        """Area of a rectangle."""
        return f"{w * h}{unit}"


    def logged(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            return fn(*args, **kwargs)
        return wrapper


    @logged
    async def lookup(code: str) -> dict:
        """Look a code up."""
        RAN.append(code)
        return {"code": code, "found": True}


    def pairs() -> dict:
        """Pairs."""
        return {(1, 2): 3}


    class Unprintable(Exception):
        def __str__(self):
            raise RuntimeError("no text")


    def flaky() -> str:
        """Fails with an exception that has no text."""
        raise Unprintable()


    CALLS = {
        "flaky": ("flaky", {}),
        "area": ("area", {"w": 3, "h": 4, "unit": "cm"}),
        "area_default": ("area", {"w": 3}),
        "lookup": ("lookup", {"code": "x1"}),
        "pairs": ("pairs", {}),
    }


    def script(request):
        if not request.tool_results:
            name, args = CALLS[request.last_user_text]
            return tool_calls(tool_call(name, "c1", **args))
        return request.tool_results[-1].content


    class Calc(Agent):
        @action(InputEvent)
        @staticmethod
        async def ask(event, ctx):
            reply = await ctx.chat("model", [ChatMessage(content=event.input["case"])])
            ctx.send_event(OutputEvent(output={"case": event.input["case"],
                                               "answer": reply.message.content}))


    agent = Calc()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, model_from_function(script))
    agent.add_resource("model", ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="conn", tools=["area", "lookup", "pairs", "flaky"]))
    for fn in (area, lookup, pairs, flaky):
        agent.add_resource(fn.__name__, ResourceType.TOOL, fn)
    outs = AgentsExecutionEnvironment.local().from_list(
        [{"key": c, "case": c} for c in CALLS]).apply(agent).collect()
    print(json.dumps({"answers": {o["case"]: o.get("answer", o) for o in outs},
                      "lookups": RAN}))
''')


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    home = tmp_path_factory.mktemp("user_tool_forms")
    (home / "calc.py").write_text(SCRIPT)
    proc = subprocess.run([str(PYTHON), "-W", "error::RuntimeWarning", "calc.py"], cwd=home,
                          capture_output=True, text=True, timeout=150,
                          env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert proc.returncode == 0, proc.stderr
    assert "never awaited" not in proc.stderr
    result: dict = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def test_positional_only_parameters_are_passed_by_position(run: dict) -> None:
    assert run["answers"]["area"] == "12cm"
    assert run["answers"]["area_default"] == "6m"  # h left out: its default


def test_an_async_tool_behind_a_sync_decorator_is_awaited(run: dict) -> None:
    assert json.loads(run["answers"]["lookup"]) == {"code": "x1", "found": True}
    assert run["lookups"] == ["x1"]


def test_a_result_with_a_tuple_key_is_refused_naming_the_key(run: dict) -> None:
    answer = run["answers"]["pairs"]
    assert answer.startswith("Error: SerializationError: result of tool 'pairs'"), answer
    assert "(1, 2)" in answer and "not a string" in answer


def test_a_tool_error_without_text_is_still_told_to_the_model(run: dict) -> None:
    assert run["answers"]["flaky"] == ("Error: Unprintable: <str() of the exception failed: "
                                       "RuntimeError>")
