"""Hostile model output and hostile tool results: bounded work, bounded text, named errors.

- A model answering a structured-output request with a huge value that does not follow the
  schema: the reason the model is told, and the chat's error, quote the value bounded (the
  validator's message repeats the whole value).
- A tool raising an exception with a huge message: the tool message the model reads (and the
  recorded tool result) carries the message cut, saying so.
"""

from __future__ import annotations

from typing import Any

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    ChatMessage,
    ChatModelSetup,
    ChatResponseError,
    InputEvent,
    MessageRole,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    action,
    register_secret,
)
from flink_agents_py.testing import (
    ScriptedRequest,
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
