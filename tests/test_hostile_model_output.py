"""Hostile model output and hostile tool results: bounded work, bounded text, named errors.

- A model answering a structured-output request with a huge value that does not follow the
  schema: the reason the model is told, and the chat's error, quote the value bounded (the
  validator's message repeats the whole value).
- A tool raising an exception with a huge message: the tool message the model reads (and the
  recorded tool result) carries the message cut, saying so.
- A model asking for thousands of tool calls in one message: none runs; the chat ends with
  an error naming ``max_tool_calls`` and the count; other keys go on.
- An agent offering itself as an internal sub-agent (a cycle) is a plan error naming the
  cycle, not a ``RecursionError``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    ChatMessage,
    ChatModelSetup,
    ChatResponseError,
    InputEvent,
    InternalSubagent,
    MessageRole,
    OutputEvent,
    PlanError,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    action,
    register_secret,
)
from flink_agents_py.plan import AgentPlan
from flink_agents_py.testing import (
    CallCounter,
    ScriptedRequest,
    check_replay_safety,
    model_from_function,
    tool_call,
    tool_calls,
)

SCHEMA = {"type": "object", "properties": {"total": {"type": "integer"}}, "required": ["total"]}


class Asker(Agent):
    """One ``ctx.chat`` per input ``{"key", "q", "schema"?}``: outputs its answer or error."""

    @action(InputEvent)
    @staticmethod
    async def ask(event: InputEvent, ctx: RunnerContext) -> None:
        """Ask the model ``m``; output ``{"key", "content"}`` or ``{"key", "error"}``."""
        try:
            r = await ctx.chat("m", [ChatMessage(role=MessageRole.USER, content=event.input["q"])],
                               output_schema=event.input.get("schema"))
        except ChatResponseError as e:
            ctx.send_event(OutputEvent(output={"key": ctx.key, "error": str(e)}))
            return
        ctx.send_event(OutputEvent(output={"key": ctx.key, "content": r.message.content}))


def _agent(fn: Any, tools: dict[str, Any] | None = None, **setup: Any) -> Asker:
    agent = Asker()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, model_from_function(fn))
    agent.add_resource("m", ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="conn", tools=list(tools or {}), **setup))
    for name, fn_ in (tools or {}).items():
        agent.add_resource(name, ResourceType.TOOL, fn_)
    return agent


def _run(agent: Agent, records: list[dict[str, Any]]) -> Any:
    return AgentsExecutionEnvironment.local().from_list(records).apply(agent).run()


def _by_key(res: Any) -> dict[str, dict[str, Any]]:
    return {o["key"]: o for o in res.outputs}


def test_a_huge_answer_off_the_schema_is_quoted_bounded_to_the_model_and_in_the_error():
    seen: list[ScriptedRequest] = []
    huge = "A" * 1_000_000

    def fn(req: ScriptedRequest) -> Any:
        seen.append(req)
        return {"total": huge}

    res = _run(_agent(fn, output_retries=1), [{"key": "a", "q": "sum", "schema": SCHEMA}])
    assert res.errors == []
    error = _by_key(res)["a"]["error"]
    assert "StructuredOutputError" in error and "$.total" in error
    assert "is not of type 'integer'" in error
    assert len(error) < 5_000, len(error)
    correction = seen[1].messages[-1].content  # what the model was told on its retry
    assert correction.startswith("Your answer cannot be used") and "$.total" in correction
    assert len(correction) < 2_000, len(correction)


def _loud(x: int = 0) -> int:
    """Fail with a huge message.

    Args:
        x: ignored.
    """
    raise ValueError("E" * 1_000_000 + "THE-END")


def test_a_tool_failing_with_a_huge_message_is_reported_to_the_model_bounded():
    seen: list[ScriptedRequest] = []

    def fn(req: ScriptedRequest) -> Any:
        seen.append(req)
        if req.tool_results:
            return "done"
        return tool_calls(tool_call("_loud", "c1", x=1))

    res = _run(_agent(fn, {"_loud": _loud}), [{"key": "a", "q": "go"}])
    assert res.errors == [] and _by_key(res)["a"]["content"] == "done"
    [told] = seen[1].tool_results
    assert told.content.startswith("Error: ValueError: EEEE")
    assert len(told.content) < 10_000, len(told.content)
    assert "[... 996,019 of 1,000,019 characters cut ...]" in told.content  # and says so
    assert told.content.endswith("EEETHE-END")


def test_a_secret_across_the_cut_of_a_huge_tool_message_is_masked_whole(monkeypatch):
    secret = "cutsecret-" + "Q7" * 20
    register_secret(secret)
    seen: list[ScriptedRequest] = []

    def fn(req: ScriptedRequest) -> Any:
        seen.append(req)
        return "done" if req.tool_results else tool_calls(tool_call("_leaky", "c1"))

    def _leaky() -> int:
        """Fail quoting the secret where the message is cut."""
        raise ValueError("x" * (2970 - len("ValueError: ")) + secret + "y" * 100_000)

    res = _run(_agent(fn, {"_leaky": _leaky}), [{"key": "a", "q": "go"}])
    assert res.errors == []
    told = seen[1].tool_results[0].content
    assert "[REDACTED]" in told and "characters cut" in told
    assert "Q7Q7Q7" not in told


def test_thousands_of_tool_calls_in_one_message_run_none_and_fail_the_chat_by_name():
    counter = CallCounter()

    def echo(x: int = 0) -> int:
        """Echo.

        Args:
            x: a number.
        """
        counter.count("echo")
        return x

    def fn(req: ScriptedRequest) -> Any:
        if req.last_user_text == "fine":
            return "ok" if req.tool_results else tool_calls(tool_call("echo", "c1", x=1))
        return tool_calls(*[tool_call("echo", f"c{i}", x=i) for i in range(5_000)])

    res = _run(_agent(fn, {"echo": echo}), [{"key": "a", "q": "storm"}, {"key": "b", "q": "fine"}])
    assert res.errors == []
    got = _by_key(res)
    assert "max_tool_calls=64" in got["a"]["error"] and "5000 tool calls" in got["a"]["error"]
    assert got["b"]["content"] == "ok"
    assert counter["echo"] == 1  # key b's one call; none of the 5,000


def test_max_tool_calls_is_the_setups_and_at_most_that_many_run():
    def echo(x: int = 0) -> int:
        """Echo.

        Args:
            x: a number.
        """
        return x

    def fn(req: ScriptedRequest) -> Any:
        if req.tool_results:
            return json.dumps([m.content for m in req.tool_results])
        n = int(req.last_user_text)
        return tool_calls(*[tool_call("echo", f"c{i}", x=i) for i in range(n)])

    res = _run(_agent(fn, {"echo": echo}, max_tool_calls=3),
               [{"key": "a", "q": "3"}, {"key": "b", "q": "4"}])
    got = _by_key(res)
    assert json.loads(got["a"]["content"]) == ["0", "1", "2"]
    assert "max_tool_calls=3" in got["b"]["error"]
    with pytest.raises(ValueError, match="max_tool_calls"):
        ChatModelSetup(connection="c", max_tool_calls=0)


def _storm(req: ScriptedRequest) -> Any:
    if req.tool_results:
        return "ok"
    n = 2 if req.last_user_text == "two" else 3
    return tool_calls(*[tool_call("_twice", f"c{i}", x=i) for i in range(n)])


def _twice(x: int = 0) -> int:
    """Double.

    Args:
        x: a number.
    """
    return 2 * x


def test_a_refused_tool_storm_replays_the_same_after_a_crash_at_any_point():
    agent = _agent(_storm, {"_twice": _twice}, max_tool_calls=2)
    report = check_replay_safety(agent, [{"key": "a", "q": "three"}, {"key": "b", "q": "two"}],
                                 other_process=False)
    report.assert_ok()


def _self_model(req: ScriptedRequest) -> Any:
    return tool_calls(tool_call("_subagent_self", "c1", q="deeper"))


class Recursive(Asker):
    """An agent whose chat model offers the agent itself as a sub-agent."""

    def __init__(self) -> None:
        super().__init__()
        self.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION,
                          model_from_function(_self_model))
        self.add_resource("m", ResourceType.CHAT_MODEL, ResourceDescriptor(
            ChatModelSetup, connection="conn", subagents=["self"]))
        self.add_resource("self", ResourceType.AGENT, ResourceDescriptor(
            InternalSubagent, agent=f"{__name__}:Recursive", description="me",
            input_schema=json.dumps({"type": "object", "properties": {"q": {"type": "string"}}})))


def test_an_agent_that_is_its_own_sub_agent_is_a_plan_error_naming_the_cycle():
    with pytest.raises(PlanError) as e:
        AgentPlan.from_agent(Recursive())
    text = str(e.value)
    assert "'self'" in text and "Recursive" in text and "cycle" in text


def _flood(n: int = 0) -> str:
    """Return ``n`` characters.

    Args:
        n: how many.
    """
    return "F" * n + "END"


def test_a_huge_tool_result_reaches_the_model_cut_saying_so_and_the_bound_is_the_setups():
    seen: list[ScriptedRequest] = []

    def fn(req: ScriptedRequest) -> Any:
        seen.append(req)
        if req.tool_results:
            return "done"
        return tool_calls(tool_call("_flood", "c1", n=int(req.last_user_text)))

    res = _run(_agent(fn, {"_flood": _flood}), [{"key": "a", "q": "5000000"}])
    assert res.errors == [] and _by_key(res)["a"]["content"] == "done"
    told = seen[1].tool_results[0].content
    assert len(told) < 1_001_000 and told.startswith('FFFF') and told.endswith('FFEND')
    assert "of 5,000,003 characters cut" in told

    seen.clear()
    res = _run(_agent(fn, {"_flood": _flood}, max_tool_result_chars=None),
               [{"key": "a", "q": "200000"}])
    assert len(seen[1].tool_results[0].content) == 200_003  # no bound: the whole result
    seen.clear()
    res = _run(_agent(fn, {"_flood": _flood}, max_tool_result_chars=50),
               [{"key": "a", "q": "100"}])
    assert "[... 53 of 103 characters cut ...]" in seen[1].tool_results[0].content


@pytest.mark.parametrize(("raw", "kind"), [("[1, 2]", "a list"), ("5", "an int"),
                                           ('"x"', "a str")])
def test_tool_call_arguments_that_are_not_a_json_object_are_the_calls_error_by_name(
        monkeypatch, raw, kind):
    pytest.importorskip("openai")
    from support.providers import WireServer, openai_reply

    from flink_agents_py.integrations.chat_models import OpenAIChatModel

    monkeypatch.setenv("FAP_TEST_OPENAI_KEY", "sk-test-key-123456")
    counter = CallCounter()

    def echo(x: int = 0) -> int:
        """Echo.

        Args:
            x: a number.
        """
        counter.count("echo")
        return x

    def answer(req: dict) -> tuple[int, Any]:
        body = openai_reply(None, [("c1", "echo", {})])
        body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = raw
        return 200, body

    with WireServer(answer) as srv:
        agent = Asker()
        agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ResourceDescriptor(
            OpenAIChatModel, base_url=f"{srv.url}/v1", api_key_env="FAP_TEST_OPENAI_KEY",
            default_model="gpt-test"))
        agent.add_resource("m", ResourceType.CHAT_MODEL, ResourceDescriptor(
            ChatModelSetup, connection="conn", tools=["echo"]))
        agent.add_resource("echo", ResourceType.TOOL, echo)
        res = _run(agent, [{"key": "a", "q": "go"}])
        told = [m["content"] for m in srv.bodies("/chat/completions")[-1]["messages"]
                if m["role"] == "tool"]
    assert res.errors == []
    # the model is told, by the tool's name, each time it calls so (until max_tool_rounds)
    error = _by_key(res)["a"]["error"]
    assert "max_tool_rounds" in error, error
    assert f"tool 'echo' was called with arguments that are not a JSON object but {kind}" \
        in told[-1]
    assert counter.total == 0


RECURSIVE = {"$defs": {"n": {"anyOf": [{"type": "integer"}, {
    "type": "object", "properties": {"a": {"$ref": "#/$defs/n"}}}]}}, "$ref": "#/$defs/n"}


def _nested(depth: int) -> str:
    return '{"a": ' * depth + "1" + "}" * depth


@pytest.mark.parametrize("depth", [65, 900])
def test_a_structured_answer_nested_too_deep_is_refused_by_name_and_asked_again(depth):
    def fn(req: ScriptedRequest) -> Any:
        if req.messages[0].content == "again" and req.last_user_text.startswith("Your answer"):
            return {"a": {"a": 2}}
        return _nested(depth)

    res = _run(_agent(fn), [{"key": "a", "q": "again", "schema": RECURSIVE},
                            {"key": "b", "q": "never", "schema": RECURSIVE}])
    assert res.errors == []
    got = _by_key(res)
    assert json.loads(got["a"].get("content") or "null") == {"a": {"a": 2}}, got["a"]
    error = got["b"]["error"]
    assert "StructuredOutputError" in error and "nested deeper than 64 levels" in error


@pytest.mark.parametrize("depth", [65, 700, 5_000])
def test_tool_call_arguments_nested_too_deep_fail_the_chat_by_name(depth):
    counter = CallCounter()

    def echo(x: Any = 0) -> Any:
        """Echo.

        Args:
            x: anything.
        """
        counter.count("echo")
        return x

    def fn(req: ScriptedRequest) -> Any:
        if req.tool_results:
            return "done"
        x: Any = 1
        for _ in range(depth - 1):  # the arguments are one level: x one less
            x = {"a": x}
        return tool_calls(tool_call("echo", "c1", x=x))

    res = _run(_agent(fn, {"echo": echo}), [{"key": "a", "q": "go"}])
    assert res.errors == []
    error = _by_key(res)["a"]["error"]
    assert "tool call 0 ('echo') has arguments nested deeper than 64 levels" in error, error
    assert counter.total == 0
