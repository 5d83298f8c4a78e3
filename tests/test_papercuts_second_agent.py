"""A user's second agent: sending what is no event, and a misspelt event keyword.

``ctx.send_event({"answer": 1})`` (or a plain pydantic model, an event class, an unawaited
coroutine) failed the action with "send_event takes an Event, got dict" and no way forward;
``OutputEvent(outptu=1)`` with pydantic's bare "Extra inputs are not permitted", and a
program's own event given ``scroe=1`` for its ``score`` field with "Field required" (the
misspelt keyword was kept as an attribute without a word). Each now says what to write.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    Event,
    InputEvent,
    OutputEvent,
    RunnerContext,
    action,
    tool,
)

ROOT = Path(__file__).resolve().parents[1]
VENV_PY = ROOT / ".venv" / "bin" / "python"
PYTHON = VENV_PY if VENV_PY.exists() else Path(sys.executable)

pytestmark = pytest.mark.timeout(120)


class Scored(Event):
    """A program's own event with a required field."""

    score: int
    note: str = ""


class Answer(BaseModel):
    """A plain pydantic model, no Event."""

    text: str


async def _make_event() -> OutputEvent:
    return OutputEvent(output=1)


SENT = {
    "dict": lambda: {"answer": 1},
    "model": lambda: Answer(text="hi"),
    "class": lambda: OutputEvent,
    "coroutine": _make_event,
    "text": lambda: "hi",
}


class Sender(Agent):
    """Sends what its record's ``send`` names."""

    @action(InputEvent)
    @staticmethod
    def send(event: InputEvent, ctx: RunnerContext) -> None:
        value = SENT[event.input["send"]]()
        try:
            ctx.send_event(value)
        finally:
            if hasattr(value, "close"):
                value.close()  # (the coroutine: not left unawaited)


def _run_user(tmp_path: Path, **modules: str) -> subprocess.CompletedProcess[str]:
    """Write ``modules`` (name -> source) into ``tmp_path`` and run its ``run.py`` there, as a
    user runs their own script from their own folder; asserts it exited 0."""
    for name, source in modules.items():
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
    done = subprocess.run([str(PYTHON), "run.py"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=100, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def test_sending_what_is_no_event_says_what_to_send_instead():
    records = [{"key": name, "send": name} for name in SENT]
    result = AgentsExecutionEnvironment.local().from_list(records).apply(Sender()).run()
    assert result.outputs == []
    said = {e.key: e.message for e in result.errors}
    assert all(e.error_type == "TypeError" for e in result.errors)
    assert said["dict"].startswith("send_event takes an Event, got dict: ")
    assert "send OutputEvent(output=...)" in said["dict"]
    assert "Event(type='name', attributes=...)" in said["dict"]
    assert "got Answer, a pydantic model that is no Event" in said["model"]
    assert "class Answer(Event)" in said["model"] and "@action(Answer)" in said["model"]
    assert "(the class OutputEvent itself): send an instance, OutputEvent(...)" in said["class"]
    assert "got coroutine: await it first" in said["coroutine"]
    assert said["text"] == (
        "send_event takes an Event, got str: for the agent's output send "
        "OutputEvent(output=...) with it"
    )


@pytest.mark.parametrize(
    ("build", "field", "says"),
    [
        (
            lambda: OutputEvent(outptu=1),
            "outptu",
            "Extra inputs are not permitted; did you mean 'output'?",
        ),
        (
            lambda: InputEvent(inptu={}),
            "inptu",
            "Extra inputs are not permitted; did you mean 'input'?",
        ),
        (
            lambda: OutputEvent(zzzzz=1),
            "zzzzz",
            "Extra inputs are not permitted (OutputEvent takes: attachments, attributes, output, "
            "type)",
        ),
        (
            lambda: Scored(scroe=1),
            "score",
            "Field required (given 'scroe', kept as an attribute: did you mean 'score'?)",
        ),
    ],
)
def test_a_misspelt_event_keyword_names_the_field_meant(build, field, says):
    with pytest.raises(ValidationError) as info:
        build()
    (error,) = info.value.errors()
    assert error["loc"] == (field,) and error["msg"] == says


def test_event_errors_without_a_near_name_are_pydantic_s_own():
    with pytest.raises(ValidationError) as info:
        Scored(score="x")
    assert info.value.errors()[0]["type"] == "int_parsing"
    with pytest.raises(ValidationError) as info:
        Scored(zzzz=1)
    assert info.value.errors()[0]["msg"] == "Field required"
    assert Scored(score=1, extra=2).attributes == {"extra": 2}  # an attribute still
    assert OutputEvent(output=1).output == 1


USER_AGENT = """
from pydantic import BaseModel
from flink_agents_py.api import Agent, Event, InputEvent, OutputEvent, RunnerContext, action


class Reply(BaseModel):
    text: str


class Scored(Event):
    score: int


class Bot(Agent):
    @action(InputEvent)
    @staticmethod
    def reply(event: InputEvent, ctx: RunnerContext) -> None:
        if event.input["how"] == "dict":
            ctx.send_event({"text": event.input["text"]})
        elif event.input["how"] == "model":
            ctx.send_event(Reply(text=event.input["text"]))
        elif event.input["how"] == "typo":
            ctx.send_event(Scored(scroe=3))
        else:
            ctx.send_event(OutputEvent(output=Reply(text=event.input["text"]).model_dump()))
"""

USER_RUN = """
import json
from flink_agents_py import AgentsExecutionEnvironment
from bot import Bot

records = [{"key": how, "how": how, "text": "hi"} for how in ("dict", "model", "typo", "ok")]
result = AgentsExecutionEnvironment.local().from_list(records).apply(Bot()).run()
print(json.dumps({"outputs": result.outputs,
                  "errors": {e.key: [e.error_type, " ".join(str(e).split())]
                             for e in result.errors}}))
"""


def test_a_users_module_from_its_own_directory(tmp_path: Path):
    done = _run_user(tmp_path, bot=USER_AGENT, run=USER_RUN)
    got = json.loads(done.stdout.splitlines()[-1])
    assert got["outputs"] == [{"text": "hi"}]  # the other records go on
    errors = got["errors"]
    assert errors["dict"][0] == "TypeError"
    assert "got dict: for the agent's output send OutputEvent(output=...)" in errors["dict"][1]
    assert "got Reply, a pydantic model that is no Event" in errors["model"][1]
    assert errors["typo"][0] == "ValidationError"
    assert "did you mean 'score'?" in errors["typo"][1]
    assert f"{tmp_path / 'bot.py'}:" in errors["dict"][1]  # the user's line


TOOLS_MODULE = '''
from flink_agents_py.api import Agent, InputEvent, action, tool


@tool
def weather(city, days: int) -> str:
    """The weather in a city."""
    return "sunny"


@tool
def convert(amount: float, currency: str = "EUR") -> float:
    """Convert an amount.

    Args:
        amout: how much.
        currency: the target currency.
    """
    return amount


@tool
def described(city: str) -> str:
    """The weather in a city.

    Args:
        city: the city's name.
    """
    return "sunny"


class Helper(Agent):
    weather = staticmethod(weather)
    convert = staticmethod(convert)
    described = staticmethod(described)

    @action(InputEvent)
    @staticmethod
    def go(event, ctx):
        pass
'''

TOOLS_RUN = """
import warnings
from flink_agents_py import AgentsExecutionEnvironment
from helper import Helper

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("default")
    for _ in range(2):  # warned once per function
        AgentsExecutionEnvironment.local().from_list([{"key": 1}]).apply(Helper()).run()
for w in caught:
    print(f"{w.category.__name__}|{w.filename}:{w.lineno}|{w.message}")
"""


def test_a_tool_leaving_the_model_guessing_is_warned_of_at_its_line(tmp_path: Path):
    done = _run_user(tmp_path, helper=TOOLS_MODULE, run=TOOLS_RUN)
    lines = [x.split("|") for x in done.stdout.splitlines() if x.startswith("ToolDoc")]
    helper = str(tmp_path / "helper.py")
    assert [(where, said) for _, where, said in lines] == [
        (
            f"{helper}:5",
            "tool 'weather' (weather): the model is told no type for city (any value passes): "
            "annotate it, e.g. city: str; the model is told only the name of city, days: "
            "describe each under Args: in the docstring ('city: what it is', indented)",
        ),
        (
            f"{helper}:11",
            "tool 'convert' (convert): its docstring describes 'amout', which is no parameter "
            "(did you mean 'amount'?): its text is dropped, the model never sees it; the model "
            "is told only the name of amount: describe it under Args: in the docstring "
            "('amount: what it is', indented)",
        ),
    ]


def test_a_tool_without_a_docstring_is_told_to_get_one_and_described_ones_are_quiet():
    from typing import Annotated

    from pydantic import Field

    from flink_agents_py.api import FunctionTool, ToolDocWarning

    def bare(a: int) -> int:
        return a

    def full(a: Annotated[int, "the count"], b: int = Field(1, description="the step")) -> int:
        """Add."""
        return a + b

    with pytest.warns(
        ToolDocWarning,
        match=r"told nothing of what it does: give it a "
        r"docstring.*only the name of a",
    ):
        FunctionTool.from_function(bare)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        FunctionTool.from_function(full)
        FunctionTool.from_function(tool(description="Add one.")(lambda_free))


def lambda_free(a: int) -> int:
    """Add one.

    Args:
        a: the number.
    """
    return a + 1


RETURNING_MODULE = """
from flink_agents_py.api import Agent, InputEvent, OutputEvent, action


class Short(Agent):
    pass


# a one-line action: the lambda returns what send_event gave back (the event it sent)
Short.reply = action(InputEvent)(lambda event, ctx: ctx.send_event(OutputEvent(output="a")))


class Tail(Agent):
    @action(InputEvent)
    @staticmethod
    async def reply(event, ctx):
        return ctx.send_event(OutputEvent(output="b"))


class Lost(Agent):
    @action(InputEvent)
    @staticmethod
    def reply(event, ctx):
        ctx.send_event(OutputEvent(output="c"))
        return OutputEvent(output="never sent")
"""

RETURNING_RUN = """
import warnings
from flink_agents_py import AgentsExecutionEnvironment
from agents import Lost, Short, Tail

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for agent in (Short(), Tail(), Lost()):
        result = AgentsExecutionEnvironment.local().from_list([{"key": 1}]).apply(agent).run()
        print("OUT", result.outputs, result.errors)
for w in caught:
    print(f"WARN|{w.category.__name__}|{w.message}")
"""


def test_an_action_returning_the_event_send_event_gave_back_is_not_warned_of(tmp_path: Path):
    done = _run_user(tmp_path, agents=RETURNING_MODULE, run=RETURNING_RUN)
    lines = done.stdout.splitlines()
    assert [x for x in lines if x.startswith("OUT")] == [
        "OUT ['a'] []",
        "OUT ['b'] []",
        "OUT ['c'] []",
    ]
    warned = [x.split("|")[1:] for x in lines if x.startswith("WARN")]
    assert warned == [
        [
            "ActionReturnWarning",
            "action 'reply' (Lost.reply) returned an OutputEvent, which is "
            "discarded: send it instead: ctx.send_event(OutputEvent(...))",
        ]
    ]


class Indexing(Agent):
    """Reads, writes or deletes memory by [key], as its record says."""

    @action(InputEvent)
    @staticmethod
    def go(event: InputEvent, ctx: RunnerContext) -> None:
        how = event.input["how"]
        if how == "set":
            ctx.short_term_memory["visits"] = 1
        elif how == "get":
            ctx.send_event(OutputEvent(output=ctx.sensory_memory["visits"]))
        elif how == "del":
            del ctx.short_term_memory["visits"]
        else:  # an object read from memory is a dict (a copy): [key] works on it
            ctx.short_term_memory.set("profile", {"visits": 1})
            profile = ctx.short_term_memory.get("profile")
            profile["visits"] += 1
            ctx.short_term_memory.set("profile", profile)
            ctx.send_event(OutputEvent(output=ctx.short_term_memory.get("profile.visits")))


def test_memory_used_by_key_says_to_use_its_path_methods():
    records = [{"key": how, "how": how} for how in ("set", "get", "del", "object")]
    result = AgentsExecutionEnvironment.local().from_list(records).apply(Indexing()).run()
    assert result.outputs == [2]
    said = {e.key: (e.error_type, e.message) for e in result.errors}
    assert said == {
        "set": (
            "TypeError",
            "ctx.short_term_memory is read and written by dotted path, not "
            "by [key]: write ctx.short_term_memory.set('visits', value) (the change is "
            "kept when the action completes)",
        ),
        "get": (
            "TypeError",
            "ctx.sensory_memory is read and written by dotted path, not by "
            "[key]: write ctx.sensory_memory.get('visits')",
        ),
        "del": (
            "TypeError",
            "ctx.short_term_memory is read and written by dotted path, not "
            "by [key]: write ctx.short_term_memory.delete('visits')",
        ),
    }


def _five() -> int:
    return 5


class Stored(Event):
    """Sent once the value is stored."""

    value: int


class SideBySide(Agent):
    """Two actions on one event: the second reads before the first has written."""

    @action(InputEvent)
    @staticmethod
    async def store(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.short_term_memory.set("x", await ctx.durable_execute_async(_five))

    @action(InputEvent)
    @staticmethod
    def read(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output=["read", ctx.short_term_memory.get("x")]))


class Chained(Agent):
    """The documented fix: the first action sends an event the second listens to."""

    @action(InputEvent)
    @staticmethod
    async def store(event: InputEvent, ctx: RunnerContext) -> None:
        value = await ctx.durable_execute_async(_five)
        ctx.short_term_memory.set("x", value)
        ctx.send_event(Stored(value=value))

    @action(Stored)
    @staticmethod
    def read(event: Stored, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output=["read", ctx.short_term_memory.get("x")]))


def test_two_actions_on_one_event_see_each_other_s_writes_only_when_chained():
    env = AgentsExecutionEnvironment.local()
    assert env.from_list([{"key": 1}]).apply(SideBySide()).run().outputs == [["read", None]]
    env = AgentsExecutionEnvironment.local()
    assert env.from_list([{"key": 1}]).apply(Chained()).run().outputs == [["read", 5]]


FETCH_MODULE = """
from flink_agents_py.api import (Agent, ChatModelSetup, InputEvent, OutputEvent,
                                 ResourceDescriptor, action, chat_model_connection,
                                 chat_model_setup)
from flink_agents_py.integrations.chat_models import ScriptedChatModel


def answer(request):
    return "hi"


class Fetcher(Agent):
    @chat_model_connection
    @staticmethod
    def conn():
        return ResourceDescriptor(ScriptedChatModel, function="fetcher:answer")

    @chat_model_setup
    @staticmethod
    def assistant():
        return ResourceDescriptor(ChatModelSetup, connection="conn")

    @action(InputEvent)
    @staticmethod
    def go(event, ctx):
        ctx.get_resource(event.input["name"])
        ctx.send_event(OutputEvent(output="fetched"))
"""

FETCH_RUN = """
import json
from flink_agents_py import AgentsExecutionEnvironment
from fetcher import Fetcher

records = [{"key": n, "name": n} for n in ("assistant", "conn", "asistant", "zzzz")]
result = AgentsExecutionEnvironment.local().from_list(records).apply(Fetcher()).run()
print(json.dumps({e.key: [e.error_type, e.message] for e in result.errors}))
"""


def test_get_resource_without_a_type_names_the_type_the_name_is_declared_as(tmp_path: Path):
    done = _run_user(tmp_path, fetcher=FETCH_MODULE, run=FETCH_RUN)
    said = json.loads(done.stdout.splitlines()[-1])
    assert said == {
        "assistant": [
            "TypeError",
            "get_resource('assistant') needs the resource's type: "
            "'assistant' is declared as a chat_model resource: write "
            "get_resource('assistant', ResourceType.CHAT_MODEL)",
        ],
        "conn": [
            "TypeError",
            "get_resource('conn') needs the resource's type: 'conn' is "
            "declared as a chat_model_connection resource: write get_resource('conn', "
            "ResourceType.CHAT_MODEL_CONNECTION)",
        ],
        "asistant": [
            "TypeError",
            "get_resource('asistant') needs the resource's type, "
            "get_resource(name, ResourceType.X) (or type=ResourceType.X); no resource "
            "is named 'asistant' (did you mean 'assistant'?)",
        ],
        "zzzz": [
            "TypeError",
            "get_resource('zzzz') needs the resource's type, "
            "get_resource(name, ResourceType.X) (or type=ResourceType.X); no resource is "
            "named 'zzzz' (declared: assistant, conn)",
        ],
    }
