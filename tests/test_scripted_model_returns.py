"""What a scripted model's function may return, and scripted models shipped by pickling.

``model_from_function`` and the function turns of ``model_from_turns`` answer with what a turn
may be (text, JSON, a message, a response, tool calls); anything else, ``None`` included,
fails the chat with a ``TypeError`` naming the function. The models pickle (cloudpickle for a
lambda), so an instance registered with ``add_resource`` runs on the Flink runner too.
"""

from __future__ import annotations

import json
import os
import pathlib
import pickle
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from support.asker_agents import asker, price_of

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    ChatMessage,
    ChatResponse,
    MessageRole,
)
from flink_agents_py.testing import (
    CallCounter,
    ScriptedChatModel,
    ScriptedRequest,
    model_from_function,
    model_from_turns,
    tool_call,
    tool_calls,
)

pytestmark = pytest.mark.timeout(120)

ROOT = pathlib.Path(__file__).resolve().parents[1]
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
PYTHON = str(VENV_PYTHON if VENV_PYTHON.exists() else pathlib.Path(sys.executable))

ACCEPTED = ("a str, a JSON dict or list (sent as JSON text), a ChatMessage, a ChatResponse, "
            "a ToolCall or a list of ToolCall")


def run_shop(connection: Any, counter: CallCounter | None = None):
    """Ask about a kiwi with the ``price_of`` tool (wrapped by ``counter``)."""
    tool = counter.wrap(price_of) if counter is not None else price_of
    return (AgentsExecutionEnvironment.local()
            .from_list([{"key": "a", "q": "price of a kiwi?"}]).apply(asker(connection, [tool]))
            .run())


def price_answer(request: ScriptedRequest) -> str:
    return "kiwi costs " + str(json.loads(request.tool_results[0].content)["price"])


# A module-level script function (plain pickle ships it by reference).
def answer_by_tool(request: ScriptedRequest) -> Any:
    if not request.tool_results:
        return tool_call("price_of", item="kiwi")
    return price_answer(request)


def forgot_return(request: ScriptedRequest) -> Any:
    if not request.tool_results:
        return tool_call("price_of", item="kiwi")
    "kiwi costs " + request.tool_results[0].content  # noqa: B018 - the missing ``return``


# -- what a function returns -------------------------------------------------------------------

@pytest.mark.parametrize("first_turn", [
    pytest.param(tool_call("price_of", item="kiwi"), id="ToolCall"),
    pytest.param([tool_call("price_of", item="kiwi")], id="list of ToolCall"),
    pytest.param(tool_calls(tool_call("price_of", item="kiwi")), id="ChatMessage"),
])
def test_a_function_returning_tool_calls_makes_the_tool_round(first_turn):
    counter = CallCounter()
    model = model_from_function(
        lambda r: price_answer(r) if r.tool_results else first_turn)
    res = run_shop(model, counter)
    assert res.errors == []
    assert res.outputs == [{"key": "a", "answer": "kiwi costs 4"}]
    assert counter["price_of"] == 1
    assert model.calls == 2


def test_a_function_returning_two_tool_calls_runs_both_tools():
    counter = CallCounter()
    model = model_from_function(lambda r: (
        "total " + str(sum(json.loads(m.content)["price"] for m in r.tool_results))
        if r.tool_results else
        [tool_call("price_of", "c1", item="kiwi"), tool_call("price_of", "c2", item="fig")]))
    res = run_shop(model, counter)
    assert res.outputs == [{"key": "a", "answer": "total 7"}]
    assert counter["price_of"] == 2


@pytest.mark.parametrize(("value", "content"), [
    pytest.param("plain text", "plain text", id="str"),
    pytest.param({"price": 4}, '{"price":4}', id="dict"),
    pytest.param([1, "two"], '[1,"two"]', id="JSON list"),
    pytest.param([], "[]", id="empty list"),
    pytest.param(ChatMessage(role=MessageRole.ASSISTANT, content="a message"), "a message",
                 id="ChatMessage"),
    pytest.param(ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT,
                                                  content="a response")), "a response",
                 id="ChatResponse"),
])
def test_a_function_answers_with_what_a_turn_may_be(value, content):
    res = run_shop(model_from_function(lambda r: value))
    assert res.errors == []
    assert res.outputs == [{"key": "a", "answer": content}]


def test_a_function_turn_returning_a_tool_call_makes_the_tool_round():
    counter = CallCounter()
    model = model_from_turns([lambda r: tool_call("price_of", item="kiwi"), price_answer])
    res = run_shop(model, counter)
    assert res.errors == []
    assert res.outputs == [{"key": "a", "answer": "kiwi costs 4"}]
    assert counter["price_of"] == 1


def test_a_function_returning_none_fails_the_chat_naming_it():
    res = run_shop(model_from_function(forgot_return))
    assert res.outputs == []
    [error] = res.errors
    assert error.message == ("TypeError: the script function forgot_return returned None "
                             f"(a missing return?): it must return {ACCEPTED}")


def test_a_function_turn_returning_none_fails_the_chat_naming_it_and_its_turn():
    model = model_from_turns([tool_call("price_of", item="kiwi"), forgot_return])
    [error] = run_shop(model).errors
    assert error.message.startswith(
        "TypeError: the script function forgot_return (turns[1]) returned None")


@pytest.mark.parametrize(("value", "type_name"), [
    pytest.param(42, "int", id="int"),
    pytest.param(("a", "b"), "tuple", id="tuple"),
    pytest.param(ScriptedRequest(messages=[]), "ScriptedRequest", id="other object"),
])
def test_a_function_returning_another_type_fails_the_chat_naming_it_and_the_type(value,
                                                                                  type_name):
    def answer(request: ScriptedRequest) -> Any:
        return value

    [error] = run_shop(model_from_function(answer)).errors
    assert error.message == (
        "TypeError: the script function test_a_function_returning_another_type_fails_the_chat"
        f"_naming_it_and_the_type.<locals>.answer returned a {type_name}: it must return "
        f"{ACCEPTED}")


def test_a_list_mixing_tool_calls_and_other_values_fails_naming_it():
    model = model_from_turns([lambda r: [tool_call("price_of", item="kiwi"), "and text"]])
    [error] = run_shop(model).errors
    assert error.message.startswith("TypeError: the script function ")
    assert "(turns[0]) returned a list that is not JSON" in error.message
    assert error.message.endswith(f"it must return {ACCEPTED}")


def test_a_function_in_a_descriptor_answers_the_same_way():
    model = ScriptedChatModel(function=f"{__name__}:answer_by_tool")
    res = run_shop(model)
    assert res.outputs == [{"key": "a", "answer": "kiwi costs 4"}]


# -- pickling ----------------------------------------------------------------------------------

def played(model: ScriptedChatModel) -> ScriptedChatModel:
    """``model`` after answering one request."""
    model.chat([ChatMessage(content="price of a kiwi?")])
    return model


def test_a_model_from_a_module_level_function_pickles_with_its_counts():
    model = played(model_from_function(answer_by_tool))
    copy = pickle.loads(pickle.dumps(model))
    assert copy.calls == 1
    assert [r.last_user_text for r in copy.requests] == ["price of a kiwi?"]
    res = run_shop(copy)
    assert res.outputs == [{"key": "a", "answer": "kiwi costs 4"}]
    assert copy.calls == 3
    assert model.calls == 1  # the original is its own instance
    copy.reset()  # the new lock works
    assert copy.calls == 0


def test_a_model_from_turns_pickles():
    model = played(model_from_turns([tool_call("price_of", item="kiwi"), price_answer]))
    copy = pickle.loads(pickle.dumps(model))
    assert copy.calls == 1
    assert run_shop(copy).outputs == [{"key": "a", "answer": "kiwi costs 4"}]


def test_models_with_lambdas_and_closures_pickle_with_cloudpickle():
    cloudpickle = pytest.importorskip("cloudpickle")
    unit = "EUR"
    by_function = played(model_from_function(
        lambda r: f"{price_answer(r)} {unit}" if r.tool_results
        else tool_call("price_of", item="kiwi")))
    by_turns = played(model_from_turns([
        lambda r: tool_call("price_of", item="kiwi"), lambda r: f"{price_answer(r)} {unit}"]))
    for model in (by_function, by_turns):
        copy = cloudpickle.loads(cloudpickle.dumps(model))
        assert copy.calls == 1
        assert run_shop(copy).outputs == [{"key": "a", "answer": "kiwi costs 4 EUR"}]


def test_a_rules_model_pickles():
    model = played(ScriptedChatModel(default_reply="hello"))
    copy = pickle.loads(pickle.dumps(model))
    assert copy.calls == 1
    assert run_shop(copy).outputs == [{"key": "a", "answer": "hello"}]


# -- on Flink ----------------------------------------------------------------------------------

USER_AGENTS = '''
import json

from flink_agents_py.api import (Agent, ChatMessage, ChatModelSetup, InputEvent, OutputEvent,
                                 ResourceDescriptor, ResourceType, RunnerContext, action)
from flink_agents_py.testing import tool_call


def price_of(item: str) -> dict:
    """The price of an item.

    Args:
        item: the item's name.
    """
    return {"price": len(item)}


def answer(request):
    if not request.tool_results:
        return [tool_call("price_of", item=request.last_user_text)]
    return "function: " + str(json.loads(request.tool_results[0].content)["price"])


class Shop(Agent):
    @action(InputEvent)
    @staticmethod
    async def ask(event: InputEvent, ctx: RunnerContext) -> None:
        reply = await ctx.chat("model", [ChatMessage(content=event.input["q"])])
        ctx.send_event(OutputEvent(output={"key": ctx.key, "answer": reply.message.content}))


def shop(conn):
    agent = Shop()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, conn)
    agent.add_resource("model", ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="conn", tools=["price_of"]))
    agent.add_resource("price_of", ResourceType.TOOL, price_of)
    return agent
'''

USER_MAIN = '''
import json

from pyflink.common import Types, WatermarkStrategy
from pyflink.datastream.connectors.number_seq import NumberSequenceSource

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.flink import create_stream_environment
from flink_agents_py.testing import model_from_function, model_from_turns, tool_call
from shop_agents import answer, shop

if __name__ == "__main__":
    env = create_stream_environment(parallelism=1, restart_attempts=0)
    ds = env.from_source(NumberSequenceSource(0, 1), WatermarkStrategy.no_watermarks(), "n").map(
        lambda i: {"key": "k%d" % i, "q": ["kiwi", "fig"][i]},
        output_type=Types.PICKLED_BYTE_ARRAY())
    agents = AgentsExecutionEnvironment.flink(env)
    by_function = agents.from_datastream(ds).apply(
        shop(model_from_function(answer)), name="by-function")
    by_turns = agents.from_datastream(ds).apply(shop(model_from_turns([
        lambda r: tool_call("price_of", item=r.last_user_text),
        lambda r: "turns: " + str(json.loads(r.tool_results[0].content)["price"]),
    ])), name="by-turns")
    out = (by_function.to_datastream().union(by_turns.to_datastream())
           .union(by_function.errors_datastream(), by_turns.errors_datastream()))
    with out.execute_and_collect("scripted-models") as rows:
        for row in rows:
            print("OUT " + json.dumps(row, sort_keys=True, default=str), flush=True)
'''


@pytest.mark.flink
@pytest.mark.timeout(300)
def test_scripted_model_instances_run_on_the_flink_runner(tmp_path):
    pytest.importorskip("pyflink")
    user = tmp_path / "user"
    user.mkdir()
    assert ROOT not in user.resolve().parents
    (user / "shop_agents.py").write_text(textwrap.dedent(USER_AGENTS))
    (user / "main.py").write_text(textwrap.dedent(USER_MAIN))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "FLINK_CONF_DIR")}
    res = subprocess.run([PYTHON, "main.py"], cwd=user, env=env, capture_output=True,
                         text=True, timeout=280, check=False)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-6000:]
    rows = [json.loads(line[4:]) for line in res.stdout.splitlines() if line.startswith("OUT ")]
    answers = sorted((r.get("key"), r.get("answer")) for r in rows)
    assert answers == [("k0", "function: 4"), ("k0", "turns: 4"),
                       ("k1", "function: 3"), ("k1", "turns: 3")], rows
