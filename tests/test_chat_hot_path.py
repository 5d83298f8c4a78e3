"""The chat path's shortcuts (fast JSON copy of models, memory copies, the chat action's first
call): what they skip must not change a stored form, a replay or what a user sees."""

from __future__ import annotations

import enum
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from typing import Any, ClassVar

import pydantic
import pytest

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    ChatMessage,
    ChatModelConnection,
    ChatModelSetup,
    ChatRequestEvent,
    ChatResponse,
    ChatResponseEvent,
    InputEvent,
    MemoryRef,
    MessageRole,
    OutputEvent,
    ResourceDescriptor,
    RunnerContext,
    SerializationError,
    ToolCall,
    action,
    chat_model_connection,
    chat_model_setup,
)
from flink_agents_py.api._messages import TokenUsage
from flink_agents_py.runtime._serde import (
    _walk,
    event_json,
    from_json_value,
    to_json_value,
    to_plain_json,
)
from flink_agents_py.runtime.context._memory import ActionMemory
from flink_agents_py.testing import check_replay_safety

pytestmark = pytest.mark.timeout(120)


class Color(enum.Enum):
    RED = "red"
    PAIR = (1, 2)


class Level(enum.IntEnum):
    ZERO = 0
    LOW = 1


class Aliased(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(populate_by_name=True, extra="allow")

    value: int = pydantic.Field(alias="v")
    color: Color = Color.RED
    nested: list[ChatMessage] = []


class Omitting(pydantic.BaseModel):
    """Fields left out of the JSON form while empty (``OMIT_EMPTY``), of every falsy kind."""

    __json_omit_empty__: ClassVar[tuple[str, ...]] = ("level", "note", "items", "score",
                                                      "color", "inner")
    level: Level = Level.ZERO
    note: str = ""
    items: list[int] = []
    score: float = 0.0
    color: Color | None = None
    inner: dict[str, Any] = {}
    kept: Level = Level.ZERO  # not left out: an enum member whose value is falsy
    anything: Any = None  # an enum member whose value is not plain JSON: its walk's form


def _response() -> ChatResponse:
    return ChatResponse(
        message=ChatMessage(role=MessageRole.ASSISTANT, content="hi", tool_calls=[
            ToolCall(id="t1", name="search", arguments={"q": "x", "n": [1, 2.5, None]})]),
        usage=TokenUsage(input_tokens=3, output_tokens=4), model="m",
        metadata={"raw": {"a": (1, "b")}, "level": Level.LOW, "color": Color.PAIR})


VALUES: list[Any] = [
    ChatRequestEvent(model="m", messages=[ChatMessage(content="q"), ChatMessage.system("s")],
                     prompt_args={"a": [1, {"b": None}]}, output_schema={"type": "object"}),
    ChatResponseEvent(request_id="r0/ask/e0", response=_response()),
    ChatResponseEvent(request_id="r0/ask/e0", error="boom"),
    _response(),
    [ChatMessage(content="a"), ChatMessage.assistant("b")],
    {"x": _response(), "y": [Aliased(v=1, extra_field=(1, 2))], "z": Color.RED},
    Aliased(v=2, nested=[ChatMessage(content="n")], more={"k": [Level.LOW]}),
    (1, "two", [3.5, True, None], {"k": (Color.RED,)}),
    [ChatMessage(content="a", reasoning=[{"type": "reasoning", "text": "why"}]),
     ChatMessage(content="a", reasoning=[])],
    Omitting(),
    Omitting(level=Level.LOW, note="n", items=[0], score=-0.5, color=Color.RED,
             inner={"a": Level.ZERO}, kept=Level.LOW, anything=Color.PAIR),
    {"m": [Omitting(color=Color.RED, inner={"$model": "x", "data": 1})]},
]


@pytest.mark.parametrize("tag", [True, False])
@pytest.mark.parametrize("value", VALUES, ids=lambda v: type(v).__name__)
def test_the_fast_copy_makes_exactly_the_full_walks_json_form(value, tag):
    """The shortcut and the full walk agree, for every model and container shape."""
    from flink_agents_py.runtime._serde import _fast_copy

    slow = _walk(value, "v", "$", set(), tag, in_model=False)
    assert _fast_copy(value, tag) == slow
    convert = to_json_value if tag else to_plain_json
    assert convert(value, "v") == slow
    if tag:  # and the stored form still rebuilds the same models
        assert from_json_value(slow) == from_json_value(convert(value, "v"))


def test_a_stored_chat_event_rebuilds_the_event_that_was_sent():
    event = ChatResponseEvent(request_id="r0/ask/e0", response=_response().model_copy(
        update={"metadata": {"raw": {"a": [1, "b"]}}}))
    data = event_json(event, "event")
    rebuilt = ChatResponseEvent.model_validate(data)
    assert rebuilt == event
    assert rebuilt.response is not None and rebuilt.response.message.tool_calls[0].arguments \
        == {"q": "x", "n": [1, 2.5, None]}


@pytest.mark.parametrize("bad, where", [
    ({"x": float("nan")}, "$.response.metadata.x"),
    ({"x": {1, 2}}, "$.response.metadata.x"),
    ({"x": {3: "three"}}, "$.response.metadata.x"),
])
def test_what_the_fast_copy_leaves_to_the_full_walk_is_refused_naming_the_path(bad, where):
    event = ChatResponseEvent(request_id="r", response=ChatResponse(
        message=ChatMessage(content="c"), metadata=bad))
    with pytest.raises(SerializationError, match=rf"sent: .* at {re.escape(where)}\b"):
        event_json(event, "sent")


def test_a_pydantic_leaf_value_takes_its_json_form_through_the_full_walk():
    import datetime

    when = datetime.datetime(2026, 12, 1, 12, 0, tzinfo=datetime.timezone.utc)
    event = ChatResponseEvent(request_id="r", response=ChatResponse(
        message=ChatMessage(content="c"), structured={"when": when}))
    assert event_json(event, "e")["response"]["structured"] == {"when": when.isoformat()
                                                                .replace("+00:00", "Z")}
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    with pytest.raises(SerializationError, match="cycle"):
        to_json_value({"a": cyclic}, "v")


def test_memory_reads_and_writes_are_copies():
    base = {"a": {"b": [1, {"c": 2}]}, "t": 1.5}
    mem = ActionMemory(base, "sensory_memory")
    got = mem.get("a")
    got["b"][1]["c"] = 99
    assert base["a"]["b"][1]["c"] == 2 and mem.get("a.b") == [1, {"c": 2}]
    value = {"list": [1, 2]}
    ref = mem.set("x", value)  # a reference as Flink Agents' ``MemoryRef.create`` makes it
    assert ref == MemoryRef.create("x", "dict") and ref.model_fields_set == {"path", "type_name"}
    assert mem.set("y.z", 2.5).type_name == "float" and mem.get("y.z") == 2.5
    value["list"].append(3)
    assert mem.get("x") == {"list": [1, 2]}
    mem.delete("a.b")
    assert base == {"a": {"b": [1, {"c": 2}]}, "t": 1.5}  # the committed tree is untouched
    assert mem.to_dict() == {"a": {}, "t": 1.5, "x": {"list": [1, 2]}, "y": {"z": 2.5}}


class EchoModel(ChatModelConnection):
    """Answers at once with the text of the conversation's last message, and what it saw."""

    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT,
                                                content=f"re: {messages[-1].content}"),
                            metadata={"types": [type(m).__name__ for m in messages],
                                      "roles": [str(m.role) for m in messages]})


class ChatAgent(Agent):
    @chat_model_connection
    @staticmethod
    def conn() -> ResourceDescriptor:
        return ResourceDescriptor(EchoModel)

    @chat_model_setup
    @staticmethod
    def model() -> ResourceDescriptor:
        return ResourceDescriptor(ChatModelSetup, connection="conn")

    @action(InputEvent)
    @staticmethod
    def ask(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.sensory_memory.set("n", event.input["n"])
        ctx.send_event(ChatRequestEvent(model="model", messages=[
            ChatMessage.system("be brief"), ChatMessage(content=str(event.input["n"]))]))

    @action(ChatResponseEvent)
    @staticmethod
    def answer(event: ChatResponseEvent, ctx: RunnerContext) -> None:
        assert event.response is not None, event.error
        ctx.send_event(OutputEvent(output={
            "key": ctx.key, "n": ctx.sensory_memory.get("n"), "text": event.response.content,
            "seen": event.response.metadata, "chats": ctx.sensory_memory.get("_chat")}))


def test_chat_outputs_and_the_conversation_the_model_sees():
    records = [{"key": f"k{i % 3}", "n": i} for i in range(9)]
    res = (AgentsExecutionEnvironment.local().from_list(records, key_selector=lambda r: r["key"])
           .apply(ChatAgent()).run())
    assert not res.errors
    assert sorted(res.outputs, key=lambda o: o["n"]) == [
        {"key": f"k{i % 3}", "n": i, "text": f"re: {i}", "chats": None,
         "seen": {"types": ["ChatMessage", "ChatMessage"], "roles": ["system", "user"]}}
        for i in range(9)]


def test_the_chat_path_is_replay_safe_at_every_crash_point():
    report = check_replay_safety(ChatAgent(), [{"key": "a", "n": 1}, {"key": "b", "n": 2},
                                              {"key": "a", "n": 3}],
                                 key_selector=lambda r: r["key"])
    assert report.ok, report


USER_MODULE = '''
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (Agent, ChatMessage, ChatModelConnection, ChatModelSetup,
    ChatRequestEvent, ChatResponse, ChatResponseEvent, InputEvent, MessageRole, OutputEvent,
    ResourceDescriptor, RunnerContext, action, chat_model_connection, chat_model_setup)
from flink_agents_py.testing import check_replay_safety


class Model(ChatModelConnection):
    async def achat(self, messages, **kwargs):
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT,
                                                content=messages[-1].content.upper()))


class Shout(Agent):
    @chat_model_connection
    @staticmethod
    def conn():
        return ResourceDescriptor(Model)

    @chat_model_setup
    @staticmethod
    def model():
        return ResourceDescriptor(ChatModelSetup, connection="conn")

    @action(InputEvent)
    @staticmethod
    def ask(event, ctx):
        ctx.send_event(ChatRequestEvent(model="model", messages=[ChatMessage(content=event.input)]))

    @action(ChatResponseEvent)
    @staticmethod
    def answer(event, ctx):
        ctx.send_event(OutputEvent(output=event.response.content))


if __name__ == "__main__":
    res = AgentsExecutionEnvironment.local().from_list(["a", "b", "c"]).apply(Shout()).run()
    assert not res.errors, res.errors
    print(" ".join(sorted(res.outputs)))
    print(check_replay_safety(Shout(), ["x", "y"]).ok)
'''


def test_a_chat_agent_from_a_users_own_module(tmp_path):
    (tmp_path / "my_chat.py").write_text(textwrap.dedent(USER_MODULE))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "my_chat.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=100)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["A", "B", "C", "True"]


def test_stored_run_state_is_its_records_json_with_the_format_version_last():
    """``to_stored`` (msgspec) writes exactly what the records' ``to_builtins`` hold."""
    from flink_agents_py.runtime._serde import dumps, loads
    from flink_agents_py.runtime.recorder._state import (
        CallKind,
        CallRecord,
        InflightAction,
        Invocation,
        RunState,
    )

    run = RunState(seq=4, input={"key": "k", "n": [1, 2.5, None, True]}, sensory={"t": 1.5})
    run.inflight["r4/ask/e0/_chat_model_action"] = InflightAction(
        action="_chat_model_action", event=event_json(VALUES[0], "e"), scope="r4/x/c0",
        calls={"0": CallRecord(digest="d0", kind=CallKind.MODEL, target="m", done=True,
                               value=to_json_value(_response().model_copy(
                                   update={"metadata": {}}), "v")),
               "1": CallRecord(digest="d1", kind=CallKind.FUNCTION, target="mod:f", done=True,
                               ok=False, error_type="builtins:ValueError",
                               error_message="bad", error_args=["bad"],
                               error_attrs={"code": 3}, traceback="Traceback...")})
    run.invocations["r4/x/c0"] = Invocation(kind=CallKind.CHAT, name="m", caller="r4/x", ordinal=0,
                                            plan_path=["sub"], outputs=[{"a": "é"}],
                                            memory={"m": {"n": 1}})
    expected = {**run.to_builtins(), "v": 1}
    text = run.to_stored()
    assert text == dumps(expected, sort_keys=False).decode()
    assert loads(text) == expected
    assert RunState.from_stored(text) == run
    deep: Any = 1
    for _ in range(600):  # deeper than orjson goes (255): still stored as it was before
        deep = {"a": deep}
    assert loads(RunState(seq=0, input=deep).to_stored())["input"] == deep


class TwoReaders(ChatAgent):
    """Two actions take the chat's answer; the first one it reaches changes what it got."""

    @action(ChatResponseEvent)
    @staticmethod
    def answer(event: ChatResponseEvent, ctx: RunnerContext) -> None:
        assert event.response is not None, event.error
        seen = event.response.metadata["roles"]
        event.response.metadata["roles"] = ["changed"]  # its own event: nobody else sees it
        ctx.send_event(OutputEvent(output={"by": "answer", "roles": seen}))

    @action(ChatResponseEvent)
    @staticmethod
    def also(event: ChatResponseEvent, ctx: RunnerContext) -> None:
        assert event.response is not None, event.error
        ctx.send_event(OutputEvent(output={"by": "also", "roles": event.response.metadata["roles"],
                                           "text": event.response.content}))


def test_each_action_a_built_in_event_triggers_gets_its_own_copy():
    # the built-in chat action's answer goes to the first action as it is, the others get
    # their own copy, as after a restore: a change made by one is seen by no other
    res = (AgentsExecutionEnvironment.local().from_list([{"key": "a", "n": 1}],
                                                        key_selector=lambda r: r["key"])
           .apply(TwoReaders()).run())
    assert not res.errors, res.errors
    assert sorted(res.outputs, key=lambda o: o["by"]) == [
        {"by": "also", "roles": ["system", "user"], "text": "re: 1"},
        {"by": "answer", "roles": ["system", "user"]}]
    assert check_replay_safety(TwoReaders(), [{"key": "a", "n": 1}],
                               key_selector=lambda r: r["key"]).ok
