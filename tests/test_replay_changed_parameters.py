"""Parameters added, removed or re-defaulted between a snapshot and its restore, for every
kind of recorded call: durable functions, tools (a Python function's, a schema-described
tool's such as an MCP tool), sub-agents.

A call that leaves a parameter to its default passes the arguments recorded whatever that
default is now, so its digest cannot tell. Before, only a durable function's changed default
was compared; a tool's or a sub-agent's replayed its recorded outcome without a word, and so
did a function that gained a parameter with a default (the call now runs with it) or lost
one the recorded call had left to its default. Now each is the ``arguments changed`` warning
naming the call and the parameter (a finding of ``check_upgrade_safety``), and a
``ReplayDivergenceError`` in strict mode. Nothing runs again.
"""

from __future__ import annotations

import json
import logging
import os
import pathlib
import subprocess
import sys
import textwrap
import threading
from typing import Any, ClassVar

import pytest

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    ChatMessage,
    ChatModelSetup,
    InputEvent,
    InternalSubagent,
    OutputEvent,
    Resource,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    ToolMetadata,
    action,
)
from flink_agents_py.testing import (
    CallCounter,
    check_upgrade_safety,
    model_from_function,
    tool_call,
    tool_calls,
)

pytestmark = pytest.mark.timeout(120)

RAN = CallCounter()
GATE = threading.Event()
"""Held while the snapshot is taken: the call after the compared one waits on it."""


def hold() -> str:
    assert GATE.wait(10), "never released"
    return "held"


# -- durable functions: a parameter added or removed with its default ----------------------
def price_v1(item: str, currency: str = "USD") -> str:
    RAN.count(item)
    return f"{item}:{currency}"


def price_v2_added(item: str, currency: str = "USD", region: str = "eu") -> str:
    RAN.count(item)
    return f"{item}:{currency}:{region}"


def price_v2_removed(item: str) -> str:
    RAN.count(item)
    return f"{item}:EUR"


for _f in (price_v1, price_v2_added, price_v2_removed):  # one function, three versions
    _f.__name__ = _f.__qualname__ = "price"
PRICE: list[Any] = [price_v1]


class Prices(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        got = await ctx.durable_execute_async(PRICE[0], "apple")
        ctx.send_event(OutputEvent(output=[got, await ctx.durable_execute_async(hold)]))


class StrictPrices(Prices):
    replay = "strict"


def _snapshot(agent: Agent, kind: str) -> dict[str, Any]:
    """The state once the first call of ``kind`` is recorded and a later call is held."""
    GATE.clear()
    RAN.reset()
    saved: list[dict[str, Any]] = []

    def at(job: Any) -> None:
        snap = job.snapshot()
        for entry in snap["keys"]:
            for rec in ((entry["run"] or {}).get("inflight") or {}).values():
                calls = rec.get("calls", {})
                mine = [c for c in calls.values() if c.get("kind") == kind and c.get("done")]
                if not saved and mine and any(not c.get("done") for c in calls.values()):
                    saved.append(json.loads(json.dumps(snap)))
        if saved:
            GATE.set()

    job = AgentsExecutionEnvironment.local().from_list([{"key": "k"}]).apply(agent)
    job.run(on_step=at)
    GATE.set()
    assert saved, "no point had the call recorded and a later one in flight"
    return saved[0]


def _restore(agent: Agent, snap: dict[str, Any], caplog: Any) -> Any:
    RAN.reset()
    caplog.clear()
    job = AgentsExecutionEnvironment.local().from_list([{"key": "k"}]).apply(agent)
    with caplog.at_level(logging.WARNING, logger="flink_agents_py"):
        return job.restore(snap).run()


@pytest.mark.parametrize(
    ("version", "said"),
    [
        (price_v2_added, "parameter 'region' added with a default"),
        (
            price_v2_removed,
            "parameter 'currency', which the recorded call left to its default, removed",
        ),
    ],
    ids=["added", "removed"],
)
@pytest.mark.parametrize("strict", [False, True], ids=["lenient", "strict"])
def test_a_function_parameter_added_or_removed_with_its_default_is_a_changed_call(
    version, said, strict, caplog
):
    agent = StrictPrices() if strict else Prices()
    PRICE[0] = price_v1
    try:
        snap = _snapshot(agent, "function")
        PRICE[0] = version
        result = _restore(agent, snap, caplog)
    finally:
        PRICE[0] = price_v1
    assert RAN["apple"] == 0  # replayed or refused: never run again
    if strict:
        assert result.outputs == []
        [error] = result.errors
        assert error.error_type == "ReplayDivergenceError" and error.key == "k"
        assert "r0/go/c0" in error.message and said in error.message
        assert "function call" in error.message and "price" in error.message
    else:
        assert result.errors == [] and result.outputs == [["apple:USD", "held"]]
        [warned] = [r.getMessage() for r in caplog.records if said in r.getMessage()]
        assert "r0/go/c0" in warned and "replays the outcome recorded" in warned


def test_a_function_left_as_it_was_replays_quietly(caplog):
    snap = _snapshot(StrictPrices(), "function")
    result = _restore(StrictPrices(), snap, caplog)
    assert result.errors == [] and result.outputs == [["apple:USD", "held"]]
    assert "arguments" not in caplog.text and RAN["apple"] == 0


# -- tools: a Python function's default, a schema-described tool's default -----------------
def price_of(item: str, currency: str = "USD") -> dict:
    """The price of an item.

    Args:
        item: the item's name.
        currency: the currency.
    """
    RAN.count("price_of")
    return {"item": item, "currency": currency}


def stock_of(item: str) -> dict:
    """The stock of an item.

    Args:
        item: the item's name.
    """
    assert GATE.wait(10), "never released"
    return {"item": item, "stock": 3}


class SchemaTool(Resource):
    """A tool described by a JSON Schema (as an MCP server's tool is), not a Python signature."""

    RESOURCE_TYPE: ClassVar[ResourceType] = ResourceType.TOOL
    currency: str = "USD"

    @property
    def metadata(self) -> ToolMetadata:
        return ToolMetadata(
            name="price_of",
            description="The price of an item.",
            parameters={
                "type": "object",
                "required": ["item"],
                "properties": {
                    "item": {"type": "string"},
                    "currency": {"type": "string", "default": self.currency},
                },
            },
        )

    async def acall(self, **arguments: Any) -> Any:
        RAN.count("price_of")
        return {"item": arguments["item"], "currency": arguments.get("currency", self.currency)}


def answer(request: Any) -> Any:
    if not request.tool_results:
        return tool_calls(
            tool_call("price_of", "t0", item="apple"), tool_call("stock_of", "t1", item="apple")
        )
    return " | ".join(m.content for m in request.tool_results)


class Shop(Agent):
    @action(InputEvent)
    @staticmethod
    async def ask(event: InputEvent, ctx: RunnerContext) -> None:
        reply = await ctx.chat("model", [ChatMessage(content="price of apple?")])
        ctx.send_event(OutputEvent(output=reply.message.content))


class StrictShop(Shop):
    replay = "strict"


def shop(tool: Any, strict: bool) -> Agent:
    agent = StrictShop() if strict else Shop()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, model_from_function(answer))
    agent.add_resource(
        "model",
        ResourceType.CHAT_MODEL,
        ResourceDescriptor(
            ChatModelSetup,
            connection="conn",
            tools=["price_of", "stock_of"],
            tool_dispatch="serial",
        ),
    )
    agent.add_resource("price_of", ResourceType.TOOL, tool)
    agent.add_resource("stock_of", ResourceType.TOOL, stock_of)
    return agent


@pytest.mark.parametrize("tool", ["function", "schema"])
@pytest.mark.parametrize("strict", [False, True], ids=["lenient", "strict"])
def test_a_tools_changed_default_is_a_changed_call(tool, strict, caplog):
    old, new = (
        (price_of, price_of) if tool == "function" else (SchemaTool(), SchemaTool(currency="EUR"))
    )
    saved = price_of.__defaults__
    snap = _snapshot(shop(old, strict), "tool")
    try:
        if tool == "function":
            price_of.__defaults__ = ("EUR",)
        result = _restore(shop(new, strict), snap, caplog)
    finally:
        if tool == "function":
            price_of.__defaults__ = saved
    assert RAN["price_of"] == 0
    said = "default value of its parameter 'currency' changed"
    if strict:
        assert result.outputs == []
        errors = [e for e in result.errors if e.error_type == "ReplayDivergenceError"]
        [error] = [e for e in errors if "tool call 'price_of'" in e.message]
        assert "_tool_call_action/c0" in error.message
        assert said in error.message
        # the tool's declared default is also what the chat offered its model: the chat
        # (re-attached to) diverges too (test_upgrade_open_chats); a function's is not
        chat = [e for e in errors if e is not error]
        assert len(chat) == (1 if tool == "schema" else 0)
        assert all("chat call 'model'" in e.message and "sub-agents it offers" in e.message
                   for e in chat)
    else:
        assert result.errors == [] and '"currency":"USD"' in result.outputs[0]
        [warned] = [r.getMessage() for r in caplog.records if said in r.getMessage()]
        assert "_tool_call_action/c0" in warned and "price_of" in warned and "key 'k'" in warned


def test_a_tool_left_as_it_was_replays_quietly(caplog):
    snap = _snapshot(shop(SchemaTool(), True), "tool")
    result = _restore(shop(SchemaTool(), True), snap, caplog)
    assert result.errors == [] and '"currency":"USD"' in result.outputs[0]
    assert "arguments" not in caplog.text and RAN["price_of"] == 0


# -- sub-agents: the input schema's default --------------------------------------------------
class Helper(Agent):
    @action(InputEvent)
    @staticmethod
    def go(event: InputEvent, ctx: RunnerContext) -> None:
        RAN.count("helper")
        ctx.send_event(OutputEvent(output=dict(event.input)))


def schema(currency: str) -> str:
    return json.dumps(
        {
            "type": "object",
            "required": ["item"],
            "properties": {
                "item": {"type": "string"},
                "currency": {"type": "string", "default": currency},
            },
        }
    )


class Delegates(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        got = await (await ctx.submit_subagent("helper", {"item": "apple"}))
        ctx.send_event(OutputEvent(output=[got.result, await ctx.durable_execute_async(hold)]))


class StrictDelegates(Delegates):
    replay = "strict"


def delegates(currency: str, strict: bool) -> Agent:
    agent = StrictDelegates() if strict else Delegates()
    agent.add_resource(
        "helper",
        ResourceType.AGENT,
        ResourceDescriptor(
            InternalSubagent, agent=Helper(), description="helps", input_schema=schema(currency)
        ),
    )
    return agent


@pytest.mark.parametrize("strict", [False, True], ids=["lenient", "strict"])
def test_a_subagents_changed_input_default_is_a_changed_call(strict, caplog):
    snap = _snapshot(delegates("USD", strict), "subagent")
    result = _restore(delegates("EUR", strict), snap, caplog)
    assert RAN["helper"] == 0
    said = "default value of its parameter 'currency' changed"
    if strict:
        assert result.outputs == []
        [error] = result.errors
        assert error.error_type == "ReplayDivergenceError"
        assert "r0/go/c0" in error.message and "subagent call 'helper'" in error.message
        assert said in error.message
    else:
        assert result.errors == [] and len(result.outputs) == 1
        assert any(
            said in r.getMessage() and "r0/go/c0" in r.getMessage() for r in caplog.records
        ), caplog.text
    same = _restore(delegates("USD", True), snap, caplog)
    assert same.errors == [] and "arguments" not in caplog.text


def price_of_in_euros(item: str, currency: str = "EUR") -> dict:
    """The price of an item (the new code: another default).

    Args:
        item: the item's name.
        currency: the currency.
    """
    return {"item": item, "currency": currency}


price_of_in_euros.__name__ = price_of_in_euros.__qualname__ = "price_of"


@pytest.mark.parametrize("tool", ["function", "schema"])
def test_check_upgrade_safety_reports_a_tools_changed_default(tool):
    GATE.set()
    old, new = (
        (price_of, price_of_in_euros)
        if tool == "function"
        else (SchemaTool(), SchemaTool(currency="EUR"))
    )
    report = check_upgrade_safety(
        shop(old, False), shop(new, False), [{"key": "k"}], other_process=False
    )
    assert not report.ok
    assert any(
        "default value of its parameter 'currency' changed" in f and "price_of" in f
        for f in report.findings
    ), report.findings
    same = check_upgrade_safety(
        shop(SchemaTool(), False), shop(SchemaTool(), False), [{"key": "k"}], other_process=False
    )
    same.assert_ok()


# -- a user's module, in a temporary directory, a process per step -------------------------
ROOT = pathlib.Path(__file__).resolve().parents[1]
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
PYTHON = str(VENV_PYTHON if VENV_PYTHON.exists() else pathlib.Path(sys.executable))

TOOLS = '''
import os
import time


def price_of(item: str, currency: str = "{currency}") -> dict:
    """The price of an item.

    Args:
        item: the item's name.
        currency: the currency.
    """
    with open(os.environ["CALLS_LOG"], "a") as f:
        f.write(f"price_of {{item}}\\n")
    return {{"item": item, "currency": currency}}


def stock_of(item: str) -> dict:
    """The stock of an item.

    Args:
        item: the item's name.
    """
    time.sleep(0.3)
    return {{"item": item, "stock": 3}}
'''

USER_AGENT = """
from flink_agents_py.api import (Agent, ChatMessage, ChatModelSetup, InputEvent, OutputEvent,
                                 ResourceDescriptor, ResourceType, RunnerContext, action)
from flink_agents_py.testing import model_from_function, tool_call, tool_calls
from tools import price_of, stock_of


def answer(request):
    if not request.tool_results:
        return tool_calls(tool_call("price_of", "t0", item="apple"),
                          tool_call("stock_of", "t1", item="apple"))
    return " | ".join(m.content for m in request.tool_results)


class Shop(Agent):
    replay = {mode!r}

    @action(InputEvent)
    @staticmethod
    async def ask(event: InputEvent, ctx: RunnerContext) -> None:
        reply = await ctx.chat("model", [ChatMessage(content="price of apple?")])
        ctx.send_event(OutputEvent(output=reply.message.content))


def shop():
    agent = Shop()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, model_from_function(answer))
    agent.add_resource("model", ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="conn", tools=["price_of", "stock_of"],
        tool_dispatch="serial"))
    agent.add_resource("price_of", ResourceType.TOOL, price_of)
    agent.add_resource("stock_of", ResourceType.TOOL, stock_of)
    return agent
"""

USER_MAIN = """
import json
import logging
import sys

from flink_agents_py import AgentsExecutionEnvironment
from my_agent import shop

logging.basicConfig(level=logging.WARNING, format="LOG %(message)s")
job = AgentsExecutionEnvironment.local().from_list([{"key": "k"}]).apply(shop())
saved = []


def at(job):
    snap = job.snapshot()
    for entry in snap["keys"]:
        for rec in ((entry["run"] or {}).get("inflight") or {}).values():
            calls = rec.get("calls", {})
            tools = [c for c in calls.values() if c.get("kind") == "tool"]
            if not saved and any(c["done"] for c in tools) and any(not c["done"] for c in tools):
                saved.append(snap)


if sys.argv[1] == "snapshot":
    job.run(on_step=at)
    with open("snap.json", "w") as f:
        json.dump(saved[0], f)
else:
    with open("snap.json") as f:
        result = job.restore(json.load(f)).run()
    print("RESULT", json.dumps({"outputs": result.outputs,
                                "errors": [[e.error_type, e.key, e.message]
                                           for e in result.errors]}))
"""


def _user_step(d: pathlib.Path, step: str, currency: str, mode: str) -> str:
    (d / "tools.py").write_text(textwrap.dedent(TOOLS.format(currency=currency)))
    (d / "my_agent.py").write_text(textwrap.dedent(USER_AGENT.format(mode=mode)))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(PYTHONPATH=str(ROOT), CALLS_LOG=str(d / "calls.log"))  # this checkout's package
    proc = subprocess.run(
        [PYTHON, "main.py", step], cwd=d, env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout + proc.stderr


@pytest.mark.parametrize("mode", ["lenient", "strict"])
def test_a_users_tool_redeployed_with_another_default(tmp_path, mode):
    d = tmp_path / "user_project"
    d.mkdir()
    assert not str(d).startswith(str(ROOT))
    (d / "main.py").write_text(textwrap.dedent(USER_MAIN))
    _user_step(d, "snapshot", "USD", mode)
    said = _user_step(d, "restore", "EUR", mode)
    [line] = [x for x in said.splitlines() if x.startswith("RESULT ")]
    result = json.loads(line[len("RESULT ") :])
    assert (d / "calls.log").read_text().splitlines() == ["price_of apple"]  # never again
    if mode == "strict":
        assert result["outputs"] == []
        [message] = [m for t, _, m in result["errors"] if t == "ReplayDivergenceError"]
        assert "tool call 'price_of'" in message and "'currency'" in message
    else:
        assert result["errors"] == [] and '"currency":"USD"' in result["outputs"][0]
        assert "the default value of its parameter 'currency' changed" in said


# -- ctx.chat: its chat model setup's configuration ----------------------------------------
def polite(request: Any) -> str:
    return f"answer to {request.messages[0].content}"


class Asks(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        reply = await ctx.chat("model", [ChatMessage(content="price of apple?")])
        ctx.send_event(
            OutputEvent(output=[reply.message.content, await ctx.durable_execute_async(hold)])
        )


class StrictAsks(Asks):
    replay = "strict"


def asks(strict: bool, **setup: Any) -> Agent:
    agent = StrictAsks() if strict else Asks()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, model_from_function(polite))
    agent.add_resource(
        "model",
        ResourceType.CHAT_MODEL,
        ResourceDescriptor(ChatModelSetup, connection="conn", **setup),
    )
    return agent


@pytest.mark.parametrize(
    "change",
    [{"options": {"temperature": 0.9}}, {"prompt": "Answer in French."}],
    ids=["options", "prompt"],
)
@pytest.mark.parametrize("strict", [False, True], ids=["lenient", "strict"])
def test_a_chat_whose_setup_changed_is_a_changed_call(change, strict, caplog):
    snap = _snapshot(asks(strict), "chat")
    result = _restore(asks(strict, **change), snap, caplog)
    said = "the configuration of the chat model setup it asks changed"
    if strict:
        assert result.outputs == []
        [error] = [e for e in result.errors if e.error_type == "ReplayDivergenceError"]
        assert "r0/go/c0" in error.message and "chat call 'model'" in error.message
        assert said in error.message
    else:
        assert result.errors == []
        assert result.outputs == [["answer to price of apple?", "held"]]
        [warned] = [r.getMessage() for r in caplog.records if said in r.getMessage()]
        assert "r0/go/c0" in warned and "key 'k'" in warned


def test_a_chat_whose_setup_changed_only_in_its_retries_replays_quietly(caplog):
    snap = _snapshot(asks(True), "chat")
    result = _restore(asks(True, retry_max_attempts=5, error_policy="retry"), snap, caplog)
    assert result.errors == [] and len(result.outputs) == 1
    assert "arguments" not in caplog.text


def test_check_upgrade_safety_reports_a_chat_setups_changed_prompt():
    GATE.set()
    report = check_upgrade_safety(
        asks(False), asks(False, prompt="Answer in French."), [{"key": "k"}], other_process=False
    )
    assert any(
        "the configuration of the chat model setup it asks changed" in f for f in report.findings
    ), report.findings
    check_upgrade_safety(asks(False), asks(False), [{"key": "k"}], other_process=False).assert_ok()
