"""The built-in actions every plan carries.

``chat_model_action`` answers a ``ChatRequestEvent``: it asks the named chat model setup, and
when the model calls tools it sends a ``ToolRequestEvent``; on the ``ToolResponseEvent`` it
adds the results to the conversation and asks again, up to the setup's ``max_tool_rounds``;
then it sends one ``ChatResponseEvent`` for the original request (with ``error`` set when the
chat failed). Each model call (``_model_calls.call_model``: flow control, the setup's
``error_policy`` (fail, retry with backoff, ignore) and its fallback models, all inside one
durable call); a final answer for an ``output_schema`` is validated and,
when invalid, sent back once with the validation errors. ``tool_call_action`` runs every
call of a ``ToolRequestEvent`` concurrently (all started before any is awaited) and answers
with one result per call id.

The conversation of an open chat lives in the run's sensory memory under ``_chat``.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Awaitable, Sequence
from typing import TYPE_CHECKING, Any

from ..api import (
    RESERVED_TOOL_PREFIX,
    AgentsError,
    ApprovalRequest,
    ChatMessage,
    ChatModelSetup,
    ChatRequestEvent,
    ChatResponse,
    ChatResponseEvent,
    FunctionTool,
    MessageRole,
    ReplayDivergenceError,
    ResourceType,
    ToolCall,
    ToolRequestEvent,
    ToolResponseEvent,
    ToolResult,
    WaitTimeoutError,
)
from ..api.internal import described, subagent_prompt_values
from ._budgets import budgeted_call, fallback_guard, fallback_spends
from ._chat_steps import (
    CORRECTION,
    answer_event,
    fills_prompt,
    model_call_json,
    own_budget,
    quote,
    recorded,
    structured,
    with_call_ids,
)
from ._failures import TOOL_FAILURES, clip, error_text, failure_text, unless_cancelled
from ._model_calls import _backoff as _backoff  # noqa: F401 - where tests look for it
from ._model_calls import call_model as _model_call
from ._model_calls import paid_answer
from ._serde import to_plain_json
from ._spend import MEMORY_PREFIX, merged_spend, spend_key, stored_spend
from ._tool_results import (
    delegation_result,
    injected_call,
    refused,
    tool_message,
    unreadable_refusal,
    valid_texts,
)
from .context._memory import apply_merges, read_path
from .recorder._outcomes import fn_name
from .recorder._prestored import Prestored, prestore
from .recorder._state import CallKind
from .recorder._versioning import recorded_to_missing, started_tool_unfit
from .recorder._wait_calls import wait_call

if TYPE_CHECKING:
    from .recorder._execution import ActionExecution

__all__ = ["ChatCallFailed", "chat_model_action", "tool_call_action"]

_CHATS = "_chat.chats"
_BY_TOOL_REQUEST = "_chat.by_tool_request"


class ChatCallFailed(AgentsError):
    """A chat's model call failed after retries; the message says how many and why.

    (Raised by ``_model_calls``; defined here, where recorded failures name it.)
    """


_CALL_MODEL: list[str] = []
"""``fn_name`` of a chat's ``call_model``, once found (the same for every chat)."""


def _describe(error: BaseException) -> str:
    text = error_text(error)
    return text if isinstance(error, ChatCallFailed) else f"{type(error).__name__}: {text}"


async def chat_model_action(event: Any, ctx: ActionExecution) -> None:
    """Drive one chat: model call, tool rounds, structured output, final ``ChatResponseEvent``.

    Each model call goes through the setup's error policy (``fail``/``retry``/``ignore``) in
    one durable call. A final answer for an ``output_schema`` is validated with
    ``jsonschema``; one that does not validate is sent back to the model with the reason, up
    to the setup's ``output_retries`` times, then the chat fails quoting every answer.

    Raises:
        ReplayDivergenceError: when a replay of the chat diverges from its records.
        RuntimeError: when the chat's state is missing from sensory memory.
    """
    first: list[ChatMessage] | None = None  # the first call's messages, validated already
    found: ChatModelSetup | None = None  # the chat's setup, when looked up already
    requested: Sequence[ChatMessage] = ()  # a request's messages (``history``)
    invalid: list[dict[str, str]]  # the answers that did not follow the schema, and why
    stored = not isinstance(event, ChatRequestEvent)  # else the chat is in sensory memory
    if not stored:
        chat_id = event.id
        try:
            setup = ctx.resources.get(event.model, ResourceType.CHAT_MODEL)  # (a setup: as is)
            if type(setup) is not ChatModelSetup:  # (else its view, ``get_resource``)
                setup = ctx.get_resource(event.model, ResourceType.CHAT_MODEL)
                assert isinstance(setup, ChatModelSetup)
            found = setup
            prompt_args = event.prompt_args
            if prompt_args is None and not fills_prompt(setup):  # (its ``build_messages``)
                messages = list(event.messages)
            else:
                if prompt_args is None:  # in an internal sub-agent: its input's fields
                    given = ctx.sensory.get("_subagent.input")  # (a dict: as is)
                    prompt_args = given if given is None or type(given) is dict \
                        else subagent_prompt_values(given)
                messages = setup.build_messages(event.messages, prompt_args)
        except Exception as e:  # noqa: BLE001 - a bad request fails the chat, not the job
            ctx.send_event(ChatResponseEvent(request_id=chat_id,
                                             error=clip(described(e)),
                                             traceback=failure_text(e)))
            return
        chat: dict[str, Any] = {
            "model": event.model,
            "messages": None,  # their JSON forms, made when the chat needs them (``history``)
            "output_schema": event.output_schema,
            "rounds": 0,
            "retries": 0,
            "invalid": (invalid := []),
            "tool_text": True,  # a tool's text result goes as its text (``tool_message``)
            "tool_frame": True,  # what a tool returned cannot read as the framework's notes
        }
        if prompt_args and setup.has_own_chat():  # its chat fills its prompt at each call
            chat["prompt_args"] = prompt_args
        requested = messages
        first = messages
        for m in messages:  # (inline: no call)
            if type(m) is not ChatMessage:
                first = None
                break
    elif isinstance(event, ToolResponseEvent):
        chat_id = ctx.sensory.get(f"{_BY_TOOL_REQUEST}.{event.request_id}")
        if chat_id is None:
            return  # a tool response of a chat this action does not drive
        ctx.sensory.delete(f"{_BY_TOOL_REQUEST}.{event.request_id}")
        chat = ctx.sensory.get(f"{_CHATS}.{chat_id}")
        model = ctx.get_resource(chat["model"], ResourceType.CHAT_MODEL)
        found = model if isinstance(model, ChatModelSetup) else None
        limit = found.max_tool_result_chars if found is not None else None
        for call_id, result in event.responses.items():
            content = tool_message(result, chat.get("tool_text", False),
                                   chat.get("tool_frame", False))
            if limit is not None:  # what a tool or a server returned: any size
                content = clip(content, limit)
            chat["messages"].append(ChatMessage(
                role=MessageRole.TOOL, content=content, tool_call_id=call_id, name=result.name
            ).model_dump(mode="json"))
        chat["rounds"] += 1
    else:
        return

    def history() -> list[dict[str, Any]]:
        """The chat's messages in their JSON form (made from the request's on first use)."""
        if chat["messages"] is None:
            chat["messages"] = [m.model_dump(mode="json") for m in requested]
        dumped: list[dict[str, Any]] = chat["messages"]
        return dumped

    if found is not None:  # (a setup: checked as found)
        setup = found
    else:
        setup = ctx.get_resource(chat["model"], ResourceType.CHAT_MODEL)
        assert isinstance(setup, ChatModelSetup)
    schema = chat["output_schema"]
    if stored:  # (a new chat's: made with it)
        invalid = chat.setdefault("invalid", [])

    async def call_model(messages: list[ChatMessage], output_schema: dict[str, Any] | None,
                         spent: dict[str, Any] | None = None,
                         others: dict[str, Any] | None = None) -> ChatResponse | Prestored:
        n = ctx.resources.parallelism
        guard = None if others is None else fallback_guard(chat["model"], ctx.key, others,
                                                           resolve, n)

        def ask(asked: ChatModelSetup) -> Awaitable[ChatResponse]:
            return _model_call(asked, messages, output_schema, resolve, chat.get("prompt_args"),
                               guard, estimate=setup.budget is not None or guard is not None)

        if setup.budget is None:  # the answer is checked once its spend is counted
            return prestore(paid_answer(await ask(setup)))  # (its stored form made here)
        return prestore(paid_answer(await budgeted_call(setup, ctx.key, spent, ask, resolve,
                                                        parallelism=n)))

    def resolve(name: str) -> ChatModelSetup:
        fallback = ctx.get_resource(name, ResourceType.CHAT_MODEL)
        if not isinstance(fallback, ChatModelSetup):
            raise TypeError(f"fallback {name!r} of chat model {chat['model']!r} is not a "
                            "chat model setup")
        return fallback

    # the key's spend through the setup (a sub-agent's setup too: its memory is per call),
    # in the entry of the plan declaring it (a setup a sub-agent names from an ancestor: the
    # ancestor's entry, as the ancestor's own chats through it)

    def entry_of(name: str) -> str:
        return spend_key(name, ctx.resources.owner(name, ResourceType.CHAT_MODEL).path)

    spend_entry = entry_of(chat["model"]) if setup.budget is not None else ""  # (read only then)

    def spends() -> dict[str, Any]:
        """The key's memory as a model call reads its spends (this action's calls counted).

        The spend of a call made earlier in this action (a structured answer asked again)
        is merged into the key's entry when the action ends; the next call is checked
        against it now, or it would go as if the earlier call had spent nothing.

        Returns:
            The key's short-term memory, with this action's merges applied to a copy.
        """
        memory = ctx.key_memory()
        if not ctx.key_merges:
            return memory
        tree = {**memory, MEMORY_PREFIX: copy.deepcopy(memory.get(MEMORY_PREFIX))}
        apply_merges(tree, ctx.key_merges)
        return tree

    def count(metadata: dict[str, Any]) -> None:
        """Add a call's spend (its ``budget`` metadata) to the key's entries as the action ends."""
        spent, own = metadata.get("budget"), metadata.get("fallback_budget")
        if setup.budget is not None and isinstance(spent, dict):  # counted as the action ends
            ctx.key_merges.append((spend_entry, functools.partial(merged_spend, setup.budget,
                                                                  info=spent)))
        fb = own_budget(resolve, own) if own is not None else None  # a fallback's own budget
        if fb is not None and isinstance(own, dict):
            ctx.key_merges.append((entry_of(own["setup"]), functools.partial(
                merged_spend, fb, info=own)))

    def fail(error: str, traceback: str | None = None) -> None:
        if stored:
            ctx.sensory.delete(f"{_CHATS}.{chat_id}")
        ctx.send_event(ChatResponseEvent(request_id=chat_id, error=clip(error),
                                         traceback=traceback))

    while True:
        messages = first if first is not None else [
            ChatMessage.model_validate(m) for m in history()]
        first = None
        try:
            args: tuple[Any, ...] = (messages, schema)
            memory = spends() if setup.fallbacks or setup.budget is not None else {}
            others = fallback_spends(setup, resolve, memory, ctx.key, entry_of) \
                if setup.fallbacks or setup.budget is not None else None
            if setup.budget is not None or others:  # the spends go in; the call's come out
                args = (messages, schema, None if setup.budget is None else stored_spend(
                    read_path(memory, spend_entry), chat["model"], ctx.key,
                    spend_entry), *((others,) if others else ()))
            if not _CALL_MODEL:
                _CALL_MODEL.append(fn_name(call_model))
            call = ctx.execute_as(  # (its digest from the JSON form made here, the same)
                CallKind.MODEL, chat["model"], call_model, args, name=_CALL_MODEL[0],
                args_json=model_call_json(messages, schema) if len(args) == 2 else None)
            outcome: ChatResponse = await call
            response = outcome
        except ReplayDivergenceError:
            raise
        except Exception as e:  # noqa: BLE001 - the model call failed: the policy decides
            count(getattr(e, "spend_metadata", None) or {})  # answered, then refused: paid
            if setup.error_policy != "ignore":
                fail(_describe(e) + (f" (asking again after {quote(invalid)})" if invalid else ""),
                     failure_text(e))
                return
            if stored:
                ctx.sensory.delete(f"{_CHATS}.{chat_id}")
            ctx.send_event(ChatResponseEvent(request_id=chat_id, response=ChatResponse(
                message=ChatMessage(role=MessageRole.ASSISTANT, content=""),
                metadata={"error_policy": "ignore", "ignored_error": clip(_describe(e))})))
            return
        if setup.budget is not None or setup.fallbacks:  # (a call only where spend is)
            count(response.metadata)
        if (retried := response.metadata) and "retries" in retried:  # (usually none)
            chat["retries"] = chat.get("retries", 0) + int(retried["retries"] or 0)
        elif stored and "retries" not in chat:  # (a chat stored before it was kept)
            chat["retries"] = 0
        problem: str | None = None
        try:
            asked = len(calls) if (calls := response.message.tool_calls) else 0
            if asked > setup.max_tool_calls:  # before any work per call
                raise RuntimeError(
                    f"chat {chat_id}: the model asked for {asked} tool calls in one message, "
                    f"more than max_tool_calls={setup.max_tool_calls} of chat model "
                    f"{chat['model']!r}; none was run")
            if asked:  # (tool calls: each with an id of its own)
                response = with_call_ids(response, chat_id, chat["rounds"])
            calls = response.message.tool_calls
            if calls and chat["rounds"] >= setup.max_tool_rounds:
                raise RuntimeError(
                    f"chat {chat_id} reached max_tool_rounds={setup.max_tool_rounds} of chat "
                    f"model {chat['model']!r} and the model still asks for tools"
                )
            if not calls and schema is not None:
                response, problem = structured(response, schema)
        except Exception as e:  # noqa: BLE001
            fail(described(e), failure_text(e))
            return
        if calls:
            history().append(response.message.model_dump(mode="json"))
            ctx.sensory.set(f"{_CHATS}.{chat_id}", chat)
            sent = ctx.send_event(ToolRequestEvent(model=chat["model"], tool_calls=list(calls)))
            ctx.sensory.set(f"{_BY_TOOL_REQUEST}.{sent.id}", chat_id)
            return
        if problem is None:
            if setup.error_policy == "retry" or invalid:  # (else nothing to add)
                metadata = dict(response.metadata)
                if setup.error_policy == "retry":
                    metadata["retries"] = chat["retries"]  # over every model call of the chat
                if invalid:
                    metadata["output_retries"] = len(invalid)
                if metadata != response.metadata:
                    response = response.model_copy(update={"metadata": metadata})
            if stored:
                ctx.sensory.delete(f"{_CHATS}.{chat_id}")
            ctx.send_event(answer_event(chat_id, response),
                           known=recorded(ctx, call) if response is outcome else None)
            return
        answer = response.message.content
        invalid.append({"answer": answer, "problem": problem})
        if len(invalid) > setup.output_retries:
            fail(f"StructuredOutputError: the model's answer does not follow the output schema "
                 f"after {len(invalid) - 1} retr{'y' if len(invalid) == 2 else 'ies'}: "
                 f"{quote(invalid)}")
            return
        history().append(ChatMessage(role=MessageRole.ASSISTANT,
                                     content=answer).model_dump(mode="json"))
        history().append(ChatMessage(role=MessageRole.USER, content=CORRECTION.format(
            problem=problem)).model_dump(mode="json"))


async def _run_tool(tool: FunctionTool, call: ToolCall) -> ToolResult:
    # its ``module:qualname`` is in every tool call's recorded digest: keep both
    try:
        value = valid_texts(await tool.acall(**call.arguments))
        content = to_plain_json(value, f"result of tool {call.name!r} (call {call.id})")
    except TOOL_FAILURES as e:  # the model is told, so it can correct the call
        unless_cancelled(e)
        return ToolResult(call_id=call.id, name=call.name, ok=False, traceback=failure_text(e),
                          error=clip(described(e)))
    return ToolResult(call_id=call.id, name=call.name, ok=True, content=content)


class _Held:
    """A tool call held for approval: the approval's wait, and the tool to run once approved."""

    __slots__ = ("approval", "tool")

    def __init__(self, approval: Any, tool: Any) -> None:
        self.approval, self.tool = approval, tool


def _approval(tool: Any) -> tuple[bool, float | None]:
    """Whether ``tool``'s calls are held for approval, and how long (see ``FunctionTool``)."""
    if isinstance(tool, FunctionTool):
        return tool.approval()
    return bool(getattr(tool, "requires_approval", False)), getattr(tool, "approval_timeout_s",
                                                                     None)


def _hold(ctx: ActionExecution, tool: Any, call: ToolCall, timeout_s: float | None) -> _Held:
    """Hold ``call``: open its approval wait, which announces an ``ApprovalRequest``."""

    def request(approval_id: str) -> dict[str, Any]:
        return ApprovalRequest(approval_id=approval_id, key=ctx.key, tool=call.name,
                               arguments=call.arguments, tool_call_id=call.id,
                               timeout_s=timeout_s).model_dump(mode="json")

    return _Held(wait_call(ctx, CallKind.APPROVAL, call.name, None, timeout_s, request), tool)


async def _released(ctx: ActionExecution, call: ToolCall, held: _Held) -> ToolResult:
    """The held call's result: the tool's, once approved; else the refusal the model reads."""
    try:
        answer = await held.approval
    except WaitTimeoutError as e:
        return refused(call, f"the call of tool {call.name!r} was not approved: {e}")
    if answer is True or (isinstance(answer, dict) and answer.get("approved") is True):
        result: ToolResult = await ctx.execute_as(CallKind.TOOL, call.name, _run_tool,
                                                  (held.tool, call))
        return result
    reason = answer.get("reason") if isinstance(answer, dict) else None
    return refused(call, f"the call of tool {call.name!r} was rejected by its reviewer: "
                         f"{reason or 'no reason given'}")


class DelegationCancelled(AgentsError):
    """A sub-agent call made for a chat model was cancelled: the chat goes no further."""


def _tool_resource(setup: ChatModelSetup, called: str) -> str | None:
    """The ``TOOL`` resource of this setup a model's call names.

    The name each tool is offered under (its metadata's, as the model read it in the
    request) is looked up first: a function tool is offered under its function's name,
    which may be another resource's name (resource ``read_notes`` holding
    ``delete_notes``, resource ``delete_notes`` holding ``read_notes``), and a call of the
    offered ``read_notes`` must run the function offered so, not the resource so named.
    Then a resource's own name (one of the setup's tools, offered under another name: a
    call recorded before a deploy renamed the tool's function).

    Returns:
        The resource's name; ``None`` when the setup has no tool of that name.
    """
    offered = setup.callables()  # the tools' metadata first, in the order of setup.tools
    for i, name in enumerate(setup.tools):
        if offered[i].name == called:
            return name
    return called if called in setup.tools else None


def _offered_tool_names(setup: ChatModelSetup) -> str:
    return ", ".join(c.name for c in setup.callables()[:len(setup.tools)]) or "none"


def _request_setup(ctx: ActionExecution, event: ToolRequestEvent) -> ChatModelSetup:
    """The setup whose tools a ``ToolRequestEvent`` calls.

    A chat's request names its setup. A request an action of the program sends itself, as
    Flink Agents' programs may, can name no chat model setup (Flink Agents' tool action
    finds each tool by name among the agent's tools, whatever ``model`` says): it gets a
    stand-in setup offering every ``TOOL`` resource of the agent, calls started at once.
    Before, every such request failed its record (``no chat_model resource named ...``).

    Returns:
        The named setup, or the stand-in.
    """
    owner = ctx.resources.owner(event.model, ResourceType.CHAT_MODEL)
    if event.model not in owner.names(ResourceType.CHAT_MODEL):  # nor by an ancestor
        stand_in = ChatModelSetup(connection="", tools=ctx.resources.names(ResourceType.TOOL))
        stand_in.bind(ctx.resources.get, f"(tools of the agent: {event.model!r} is no setup)")
        return stand_in
    setup = ctx.get_resource(event.model, ResourceType.CHAT_MODEL)
    assert isinstance(setup, ChatModelSetup)
    return setup


async def tool_call_action(event: Any, ctx: ActionExecution) -> None:
    """Run the calls of a ``ToolRequestEvent``; answer with one result per call id.

    Callable names resolve to exactly one namespace: ``_subagent_<name>`` to the ``AGENT``
    resource ``<name>`` (if the chat model offers it), anything else to a ``TOOL``. Every
    sub-agent call is submitted before any call is awaited, whatever the dispatch mode;
    tool calls start at once (``concurrent``) or one after another (``serial``). Calls take
    their durable identities in request order either way. A failing tool or delegation
    becomes a tool message with the reason; a cancelled delegation cancels the sub-agent
    calls not yet awaited and ends the chat (no further model call).

    Raises:
        DelegationCancelled: when a delegation was cancelled (the chat ends).
        ReplayDivergenceError: when a replay of the round diverges from its records.
    """
    if not isinstance(event, ToolRequestEvent):
        return
    setup = _request_setup(ctx, event)
    serial = setup.tool_dispatch == "serial"
    slots: list[tuple[ToolCall, Any, str | None]] = []
    unknown: set[str] = set()  # refused names (renamed or removed since a recorded call?)
    for call in event.tool_calls:
        unreadable = unreadable_refusal(call)  # arguments the connection could not read
        if unreadable is not None:
            slots.append((call, unreadable, None))
            continue
        if call.name.startswith(RESERVED_TOOL_PREFIX):
            name = call.name[len(RESERVED_TOOL_PREFIX):]
            if name not in setup.subagents:
                unknown.add(name)
                slots.append((call, refused(call, (
                    f"no sub-agent named {name!r} is offered to this model; offered: "
                    f"{', '.join(setup.subagents) or 'none'}")), None))
                continue
            try:  # the model's arguments go to the sub-agent unchanged
                slots.append((call, await ctx.submit_subagent(name, call.arguments,
                                                              check_input=True), name))
            except ReplayDivergenceError:
                raise
            except Exception as e:  # noqa: BLE001
                slots.append((call, refused(call, f"delegation to sub-agent {name!r} "
                                                  f"failed: {described(e)}"), None))
            continue
        resource = _tool_resource(setup, call.name)
        if resource is None:
            unknown.add(call.name)
            slots.append((call, refused(call, (
                f"no tool named {call.name!r}; available: {_offered_tool_names(setup)}")),
                None))
            continue
        tool = ctx.get_resource(resource, ResourceType.TOOL)
        call, refusal = injected_call(ctx, tool, call)  # Flink Agents' InjectedArg values
        if refusal is not None:
            slots.append((call, refusal, None))
            continue
        held, timeout_s = _approval(tool)
        if held:  # held until approved (``_waits``)
            slots.append((call, _hold(ctx, tool, call, timeout_s), None))
            continue
        started_tool_unfit(ctx, tool, call.name, call.arguments)  # its started call: kept
        fut = ctx.execute_as(CallKind.TOOL, call.name, _run_tool, (tool, call), lazy=True)
        if not serial:
            ctx.start_soon(fut)
        slots.append((call, fut, None))
    if unknown:  # a recorded call to a tool or sub-agent the new code lacks: not dropped
        recorded_to_missing(ctx, unknown, f"no tool or offered sub-agent named so (tools: "
                                          f"{', '.join(setup.tools) or 'none'}; sub-agents: "
                                          f"{', '.join(setup.subagents) or 'none'})")
    responses: dict[str, ToolResult] = {}
    for i, (call, slot, subagent) in enumerate(slots):
        if isinstance(slot, ToolResult):
            responses[call.id] = slot
        elif isinstance(slot, _Held):
            responses[call.id] = await _released(ctx, call, slot)
        elif subagent is None:
            responses[call.id] = await slot
        else:
            try:
                result = await slot
            except ReplayDivergenceError:
                raise
            except Exception as e:  # noqa: BLE001 - e.g. a result with no JSON form
                responses[call.id] = refused(call, f"delegation to sub-agent {subagent!r} "
                                                   f"failed: {described(e)}")
                continue
            if result.cancelled:
                for _, other, other_name in slots[i + 1:]:
                    if other_name is not None:
                        await other.cancel()
                raise DelegationCancelled(f"delegation to sub-agent {subagent!r} was cancelled")
            responses[call.id] = delegation_result(ctx, call, subagent, result)
    ctx.send_event(ToolResponseEvent(request_id=event.id, responses=responses))
