"""The built-in actions every plan carries.

``chat_model_action`` answers a ``ChatRequestEvent``: it asks the named chat model setup, and
when the model calls tools it sends a ``ToolRequestEvent``; on the ``ToolResponseEvent`` it
adds the results to the conversation and asks again, up to the setup's ``max_tool_rounds``;
then it sends one ``ChatResponseEvent`` for the original request (with ``error`` set when the
chat failed). ``tool_call_action`` runs every call of a ``ToolRequestEvent`` concurrently (all
started before any is awaited) and answers with one result per call id.

The conversation of an open chat lives in the run's sensory memory under ``_chat``.
"""

from __future__ import annotations

from typing import Any

import orjson

from pydantic import TypeAdapter, ValidationError

from ..api import (
    RESERVED_TOOL_PREFIX,
    AgentsError,
    ChatMessage,
    ChatModelSetup,
    ChatRequestEvent,
    ChatResponse,
    ChatResponseEvent,
    FunctionTool,
    MessageRole,
    ResourceType,
    RunnerContext,
    SerializationError,
    SubagentResult,
    SubagentSetup,
    ToolCall,
    ToolRequestEvent,
    ToolResponseEvent,
    ToolResult,
)
from ._context import ActionContext
from ._serde import to_plain_json

__all__ = ["chat_model_action", "tool_call_action"]

_CHATS = "_chat.chats"
_BY_TOOL_REQUEST = "_chat.by_tool_request"


def _with_call_ids(response: ChatResponse, chat_id: str, round_no: int) -> ChatResponse:
    """Give id-less tool calls unique synthetic ids (``<chat>#<round>.<index>``)."""
    calls = response.message.tool_calls
    ids = [c.id for c in calls]
    if all(ids) and len(set(ids)) == len(ids):
        return response
    keep = {i for i in ids if i and ids.count(i) == 1}
    fixed = []
    for i, c in enumerate(calls):
        if c.id in keep:
            fixed.append(c)
            continue
        synthetic, n = f"{chat_id}#{round_no}.{i}", 0
        while synthetic in keep:
            n += 1
            synthetic = f"{chat_id}#{round_no}.{i}.{n}"
        keep.add(synthetic)
        fixed.append(ToolCall(id=synthetic, name=c.name, arguments=c.arguments))
    message = response.message.model_copy(update={"tool_calls": fixed})
    return response.model_copy(update={"message": message})


def _structured(response: ChatResponse, schema: dict[str, Any] | None) -> ChatResponse:
    if schema is None or response.structured is not None:
        return response
    try:
        value = orjson.loads(response.message.content)
    except orjson.JSONDecodeError as e:
        raise ValueError(f"the model's answer is not JSON ({e}): {response.message.content[:200]!r}") from e
    return response.model_copy(update={"structured": value})


async def chat_model_action(event: Any, ctx: RunnerContext) -> None:
    """Drive one chat: model call, tool rounds, final ``ChatResponseEvent``."""
    mem = ctx.sensory_memory
    if isinstance(event, ChatRequestEvent):
        chat_id = event.id
        try:
            setup = ctx.get_resource(event.model, ResourceType.CHAT_MODEL)
            assert isinstance(setup, ChatModelSetup)
            prompt_args = event.prompt_args
            if prompt_args is None:  # inside an internal sub-agent: the call's input fields
                given = mem.get("_subagent.input")
                prompt_args = given if isinstance(given, dict) else None
            messages = setup.build_messages(event.messages, prompt_args)
        except Exception as e:  # noqa: BLE001 - a bad request fails the chat, not the job
            ctx.send_event(ChatResponseEvent(request_id=chat_id, error=f"{type(e).__name__}: {e}"))
            return
        chat: dict[str, Any] = {
            "model": event.model,
            "messages": [m.model_dump(mode="json") for m in messages],
            "output_schema": event.output_schema,
            "rounds": 0,
        }
    elif isinstance(event, ToolResponseEvent):
        chat_id = mem.get(f"{_BY_TOOL_REQUEST}.{event.request_id}")
        if chat_id is None:
            return  # a tool response of a chat this action does not drive
        mem.delete(f"{_BY_TOOL_REQUEST}.{event.request_id}")
        chat = mem.get(f"{_CHATS}.{chat_id}")
        for call_id, result in event.responses.items():
            content = (orjson.dumps(result.content).decode() if result.ok
                       else f"Error: {result.error}")
            chat["messages"].append(ChatMessage(
                role=MessageRole.TOOL, content=content, tool_call_id=call_id, name=result.name
            ).model_dump(mode="json"))
        chat["rounds"] += 1
    else:
        return

    setup = ctx.get_resource(chat["model"], ResourceType.CHAT_MODEL)
    assert isinstance(setup, ChatModelSetup)
    messages = [ChatMessage.model_validate(m) for m in chat["messages"]]
    try:
        response: ChatResponse = await ctx.durable_execute_async(
            setup.achat, messages, output_schema=chat["output_schema"], with_prompt=False
        )
        response = _with_call_ids(response, chat_id, chat["rounds"])
        calls = response.message.tool_calls
        if calls and chat["rounds"] >= setup.max_tool_rounds:
            raise RuntimeError(
                f"chat {chat_id} reached max_tool_rounds={setup.max_tool_rounds} of chat model "
                f"{chat['model']!r} and the model still asks for tools"
            )
        if not calls:
            response = _structured(response, chat["output_schema"])
    except Exception as e:  # noqa: BLE001
        mem.delete(f"{_CHATS}.{chat_id}")
        ctx.send_event(ChatResponseEvent(request_id=chat_id, error=f"{type(e).__name__}: {e}"))
        return
    if calls:
        chat["messages"].append(response.message.model_dump(mode="json"))
        mem.set(f"{_CHATS}.{chat_id}", chat)
        sent = ctx.send_event(ToolRequestEvent(model=chat["model"], tool_calls=list(calls)))
        mem.set(f"{_BY_TOOL_REQUEST}.{sent.id}", chat_id)
        return
    mem.delete(f"{_CHATS}.{chat_id}")
    ctx.send_event(ChatResponseEvent(request_id=chat_id, response=response))


async def _run_tool(tool: FunctionTool, call: ToolCall) -> ToolResult:
    try:
        value = await tool.acall(**call.arguments)
        content = to_plain_json(value, f"result of tool {call.name!r} (call {call.id})")
    except Exception as e:  # noqa: BLE001 - the model is told, so it can correct the call
        return ToolResult(call_id=call.id, name=call.name, ok=False,
                          error=f"{type(e).__name__}: {e}")
    return ToolResult(call_id=call.id, name=call.name, ok=True, content=content)


def _refused(call: ToolCall, reason: str) -> ToolResult:
    return ToolResult(call_id=call.id, name=call.name, ok=False, error=reason)


class DelegationCancelled(AgentsError):
    """A sub-agent call made for a chat model was cancelled: the chat goes no further."""


def _delegation_result(ctx: RunnerContext, call: ToolCall, name: str,
                       result: SubagentResult) -> ToolResult:
    """A sub-agent's result as the model sees it: JSON content, or the reason it failed."""
    if not result.success:
        return _refused(call, f"delegation to sub-agent {name!r} failed: {result.error_message}")
    value = result.result
    setup = ctx.get_resource(name, ResourceType.AGENT)
    declared = setup.result_type() if isinstance(setup, SubagentSetup) else None
    if declared is not None:
        adapter = TypeAdapter(declared)
        try:
            value = adapter.dump_python(adapter.validate_python(value), mode="json")
        except ValidationError as e:
            return _refused(call, f"sub-agent {name!r} returned a result that is not a "
                                  f"{getattr(declared, '__name__', declared)}: {e}")
    try:
        content = to_plain_json(value, f"result of sub-agent {name!r}")
    except SerializationError as e:
        return _refused(call, f"delegation to sub-agent {name!r} failed: {e}")
    return ToolResult(call_id=call.id, name=call.name, ok=True, content=content)


async def tool_call_action(event: Any, ctx: RunnerContext) -> None:
    """Run the calls of a ``ToolRequestEvent``; answer with one result per call id.

    Callable names resolve to exactly one namespace: ``_subagent_<name>`` to the ``AGENT``
    resource ``<name>`` (if the chat model offers it), anything else to a ``TOOL``. Every
    sub-agent call is submitted before any call is awaited, whatever the dispatch mode;
    tool calls start at once (``concurrent``) or one after another (``serial``). Calls take
    their durable identities in request order either way. A failing tool or delegation
    becomes a tool message with the reason; a cancelled delegation cancels the sub-agent
    calls not yet awaited and ends the chat (no further model call).
    """
    if not isinstance(event, ToolRequestEvent):
        return
    setup = ctx.get_resource(event.model, ResourceType.CHAT_MODEL)
    assert isinstance(setup, ChatModelSetup)
    assert isinstance(ctx, ActionContext)
    serial = setup.tool_dispatch == "serial"
    slots: list[tuple[ToolCall, Any, str | None]] = []
    for call in event.tool_calls:
        if call.name.startswith(RESERVED_TOOL_PREFIX):
            name = call.name[len(RESERVED_TOOL_PREFIX):]
            if name not in setup.subagents:
                slots.append((call, _refused(call, (
                    f"no sub-agent named {name!r} is offered to this model; offered: "
                    f"{', '.join(setup.subagents) or 'none'}")), None))
                continue
            try:  # the model's arguments go to the sub-agent unchanged
                slots.append((call, await ctx.submit_subagent(name, call.arguments), name))
            except Exception as e:  # noqa: BLE001
                slots.append((call, _refused(call, f"delegation to sub-agent {name!r} "
                                                   f"failed: {type(e).__name__}: {e}"), None))
            continue
        if call.name not in setup.tools:
            slots.append((call, _refused(call, (
                f"no tool named {call.name!r}; available: {', '.join(setup.tools) or 'none'}")),
                None))
            continue
        tool = ctx.get_resource(call.name, ResourceType.TOOL)
        fut = ctx.lazy_execute_async(_run_tool, tool, call)
        if not serial:
            ctx.start_soon(fut)
        slots.append((call, fut, None))
    responses: dict[str, ToolResult] = {}
    for i, (call, slot, subagent) in enumerate(slots):
        if isinstance(slot, ToolResult):
            responses[call.id] = slot
        elif subagent is None:
            responses[call.id] = await slot
        else:
            try:
                result = await slot
            except Exception as e:  # noqa: BLE001 - e.g. a result with no JSON form
                responses[call.id] = _refused(call, f"delegation to sub-agent {subagent!r} "
                                                    f"failed: {type(e).__name__}: {e}")
                continue
            if result.cancelled:
                for _, other, name in slots[i + 1:]:
                    if name is not None:
                        await other.cancel()
                raise DelegationCancelled(f"delegation to sub-agent {subagent!r} was cancelled")
            responses[call.id] = _delegation_result(ctx, call, subagent, result)
    ctx.send_event(ToolResponseEvent(request_id=event.id, responses=responses))
