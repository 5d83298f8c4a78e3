"""Structured output: validation against the JSON Schema, one corrective retry, then failure.

Each provider's native mechanism (OpenAI ``response_format``, Ollama ``format``, Anthropic's
forced tool) is checked on the wire in ``test_providers.py``; here the chat action's side.
"""

from __future__ import annotations

import collections
import json
from typing import Any, Literal

import pytest
from pydantic import BaseModel, Field
from support.probes import store
from support.providers import only_answer, outputs_of, probe_agent, run_probe

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    ChatMessage,
    ChatModelConnection,
    ChatModelSetup,
    ChatResponse,
    ChatResponseError,
    InputEvent,
    MessageRole,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    ToolCall,
    action,
    qualified_name,
)
from flink_agents_py.integrations.chat_models import ScriptedChatModel
from flink_agents_py.testing import ScriptedRequest

pytestmark = pytest.mark.timeout(60)

SCHEMA = {
    "type": "object",
    "properties": {"score": {"type": "integer", "enum": [1, 2, 3, 4, 5]},
                   "reasons": {"type": "array", "items": {"type": "string"}, "maxItems": 2}},
    "required": ["score"],
}
def _requests() -> dict[str, list[ScriptedRequest]]:
    """The requests the scripted model got in this test, by label."""
    return store("requests", lambda: collections.defaultdict(list))


def _answers() -> dict[str, list[Any]]:
    """The answers still to give in this test, by label."""
    return store("answers", dict)


def scripted_answers(req: ScriptedRequest) -> Any:
    """Answers in turn from ``_answers()[label]`` (the label is the first user message)."""
    label = next(m.content for m in req.messages if m.role == MessageRole.USER)
    _requests()[label].append(req)
    return _answers()[label].pop(0)


def script(label: str, *answers: Any) -> ResourceDescriptor:
    _answers()[label] = list(answers)
    _requests().pop(label, None)
    return ResourceDescriptor(ScriptedChatModel, function=qualified_name(scripted_answers))


def ask(label: str, *answers: Any, schema: Any = SCHEMA, **setup: Any) -> dict[str, Any]:
    return only_answer(run_probe(probe_agent(script(label, *answers), **setup),
                                 [{"key": "k", "q": label, "schema": schema}]))


def test_a_valid_answer_is_the_structured_value():
    ans = ask("valid", '{"score": 4, "reasons": ["soft"]}')
    assert ans["error"] is None and ans["structured"] == {"score": 4, "reasons": ["soft"]}
    assert "output_retries" not in ans["metadata"]
    [req] = _requests()["valid"]
    assert req.output_schema == SCHEMA  # the connection is told the schema


def test_an_invalid_answer_is_retried_once_with_the_validation_error():
    ans = ask("retry", '{"score": 9, "reasons": ["a", "b", "c"]}', '{"score": 2}')
    assert ans["error"] is None and ans["structured"] == {"score": 2}
    assert ans["metadata"] == {"output_retries": 1}
    first, second = _requests()["retry"]
    bad, correction = second.messages[-2:]
    assert (bad.role, bad.content) == ("assistant", '{"score": 9, "reasons": ["a", "b", "c"]}')
    assert correction.role == "user"
    assert "at $.score: 9 is not one of [1, 2, 3, 4, 5]" in correction.content
    assert "at $.reasons: ['a', 'b', 'c'] is too long" in correction.content
    assert second.output_schema == SCHEMA


def test_an_answer_invalid_twice_fails_with_both_texts():
    ans = ask("twice", '{"score": 0}', "I think it is a 4")
    assert ans["content"] is None
    err = ans["error"]
    assert err.startswith("StructuredOutputError: the model's answer does not follow the output "
                          "schema after 1 retry")
    assert "answer 1: '{\"score\": 0}'" in err and "0 is not one of" in err
    assert "answer 2: 'I think it is a 4'" in err and "not JSON" in err
    assert len(_requests()["twice"]) == 2


def test_output_retries_zero_fails_at_once_and_two_allows_two():
    ans = ask("zero", '{"score": 0}', output_retries=0)
    assert "after 0 retries" in ans["error"] and len(_requests()["zero"]) == 1
    ans = ask("two", "nope", "still nope", '{"score": 5}', output_retries=2)
    assert ans["structured"] == {"score": 5} and ans["metadata"] == {"output_retries": 2}


def test_a_fenced_json_answer_is_accepted():
    ans = ask("fenced", '```json\n{"score": 3}\n```')
    assert ans["error"] is None and ans["structured"] == {"score": 3}


def test_the_retry_may_call_tools_before_answering():
    calls = ChatMessage(role=MessageRole.ASSISTANT, tool_calls=[
        ToolCall(id="t1", name="lookup", arguments={"sku": "x"})])
    res = run_probe(probe_agent(script("tools", "not json", calls, '{"score": 1}'),
                                tools=["lookup"], tool_fns=[lookup]),
                    [{"key": "k", "q": "tools", "schema": SCHEMA}])
    ans = only_answer(res)
    assert ans["structured"] == {"score": 1} and ans["metadata"] == {"output_retries": 1}
    assert len(outputs_of(res, "results")) == 1
    last = _requests()["tools"][-1]
    assert [m.role for m in last.messages] == ["user", "assistant", "user", "assistant", "tool"]


def lookup(sku: str) -> dict:
    """Look up a SKU."""
    return {"sku": sku}


class StructuredConnection(ChatModelConnection):
    """A provider with a native structured answer (like Anthropic's forced tool)."""

    def chat(self, messages, **kwargs) -> ChatResponse:
        n = sum(1 for m in messages if m.role == MessageRole.ASSISTANT)
        value = {"score": 7} if n == 0 else {"score": 5}
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT,
                                                content=json.dumps(value)), structured=value)


def test_a_providers_own_structured_value_is_validated_too():
    ans = only_answer(run_probe(probe_agent(ResourceDescriptor(StructuredConnection)),
                                [{"key": "k", "q": "x", "schema": SCHEMA}]))
    assert ans["structured"] == {"score": 5} and ans["metadata"] == {"output_retries": 1}


def test_a_schema_that_is_not_json_schema_fails_the_chat():
    ans = ask("badschema", '{"score": 1}', schema={"type": "objekt"})
    assert ans["content"] is None and "SchemaError" in ans["error"]


def test_no_schema_means_no_validation():
    ans = only_answer(run_probe(probe_agent(script("free", "anything")),
                                [{"key": "k", "q": "free"}]))
    assert ans["content"] == "anything" and ans["structured"] is None


# ------------------------------------------------------------------ a pydantic model, ctx.chat
class Rating(BaseModel):
    score: Literal[1, 2, 3, 4, 5]
    reasons: list[str] = Field(default_factory=list, max_length=2)


class TypedAsker(Agent):
    @action(InputEvent)
    @staticmethod
    async def ask(event: InputEvent, ctx: RunnerContext) -> None:
        try:
            r = await ctx.chat("model", [ChatMessage(content=event.input["q"])],
                               output_schema=Rating)
        except ChatResponseError as e:
            ctx.send_event(OutputEvent(output={"failed": e.reason}))
            return
        ctx.send_event(OutputEvent(output={
            "type": type(r.structured).__name__, "rating": r.structured.model_dump(),
            "metadata": r.metadata}))


def typed_run(label: str, *answers: Any) -> dict[str, Any]:
    agent = TypedAsker()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, script(label, *answers))
    agent.add_resource("model", ResourceType.CHAT_MODEL,
                       ResourceDescriptor(ChatModelSetup, connection="conn"))
    res = (AgentsExecutionEnvironment.local().from_list([{"key": "k", "q": label}])
           .apply(agent).run())
    assert res.errors == []
    [out] = res.outputs
    return out


def test_a_pydantic_model_schema_gives_a_validated_instance_after_a_retry():
    out = typed_run("typed", '{"score": 6}', '{"score": 4, "reasons": ["comfy"]}')
    assert out == {"type": "Rating", "rating": {"score": 4, "reasons": ["comfy"]},
                   "metadata": {"output_retries": 1}}
    first = _requests()["typed"][0]
    assert first.output_schema == Rating.model_json_schema()


def test_a_pydantic_model_schema_failing_twice_raises_with_both_texts():
    out = typed_run("typed2", '{"score": 6}', '{"reasons": []}')
    assert "answer 1: '{\"score\": 6}'" in out["failed"]
    assert "answer 2: '{\"reasons\": []}'" in out["failed"]
    assert "'score' is a required property" in out["failed"]
