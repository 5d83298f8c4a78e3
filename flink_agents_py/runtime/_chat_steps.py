"""Parts of a chat's built-in action (``_builtin_actions.chat_model_action``).

Tool call ids, structured answers, the answer's stored form, and the JSON form of a model
call's arguments that its digest is made of.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson

from ..api import (
    Budget,
    ChatMessage,
    ChatModelSetup,
    ChatResponse,
    ChatResponseEvent,
    MessageRole,
    SerializationError,
    ToolCall,
)
from ..api.internal import EVENT_ID_SOURCE, SLOT_SETTERS, cut_masked, one_json_object
from ._failures import clip
from ._model_calls import MAX_ANSWER_DEPTH, class_problem, deeper_than
from ._schemas import schema_problems
from ._serde import MODEL_TAG, to_json_value
from .recorder._value_classes import value_classes

if TYPE_CHECKING:
    from .context._calls import DurableCall
    from .recorder._execution import ActionExecution

__all__ = [
    "CORRECTION",
    "answer_event",
    "fills_prompt",
    "model_call_json",
    "own_budget",
    "quote",
    "recorded",
    "structured",
    "with_call_ids",
]


def with_call_ids(response: ChatResponse, chat_id: str, round_no: int) -> ChatResponse:
    """Give id-less tool calls unique synthetic ids (``<chat>#<round>.<index>``)."""
    calls = response.message.tool_calls
    if not calls:  # (a final answer: nothing to look at)
        return response
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


def _schema_problem(value: Any, schema: dict[str, Any]) -> str | None:
    """Why ``value`` does not follow the JSON Schema ``schema``.

    Returns:
        The reason, or ``None`` when it does follow it.

    Raises:
        jsonschema.SchemaError: when ``schema`` itself is not a valid JSON Schema.
    """
    problems = schema_problems(value, schema)
    return None if problems is None else f"the answer does not follow the schema: {problems}"


def _answer_text(text: str) -> str:
    """The answer's text without a Markdown code fence around it, if it has one."""
    stripped = text.strip()
    if stripped.startswith("```") and stripped.endswith("```") and stripped.count("\n") >= 1:
        return stripped[stripped.index("\n") + 1 : -3].strip()
    return stripped


def structured(response: ChatResponse, schema: dict[str, Any]) -> tuple[ChatResponse, str | None]:
    """Validate a final answer against ``schema``: the response carrying the value, or why not."""
    value = response.structured
    if value is None:
        text = _answer_text(response.message.content)
        try:
            value = orjson.loads(text)
        except orjson.JSONDecodeError as e:
            value = one_json_object(text)  # one object with text around it (a fence, a note)
            if value is None:
                return response, f"the answer is not JSON ({clip(str(e), 300)})"
    if deeper_than(value, MAX_ANSWER_DEPTH):  # checked deterministically, never to the stack
        return response, f"the answer is nested deeper than {MAX_ANSWER_DEPTH} levels"
    problem = _schema_problem(value, schema) or class_problem(value, schema)
    if problem is not None:
        return response, problem
    return response.model_copy(update={"structured": value}), None


def quote(invalid: list[dict[str, str]]) -> str:
    return "; ".join(
        f"answer {i + 1}: {cut_masked(a['answer'], 500)!r} ({a['problem']})"
        for i, a in enumerate(invalid)
    )


CORRECTION = (
    "Your answer cannot be used: {problem}. Answer again with only a JSON value that "
    "follows the required JSON Schema."
)


def own_budget(resolve: Callable[[str], ChatModelSetup], info: Any) -> Budget | None:
    """The budget of the fallback whose ``metadata["fallback_budget"]`` is ``info``."""
    try:
        return resolve(info["setup"]).budget if isinstance(info, dict) else None
    except Exception:  # noqa: BLE001 - gone since the answer was recorded: nothing to count
        return None


def recorded(ctx: ActionExecution, call: DurableCall) -> dict[str, Any] | None:
    """The chat answer's JSON form as its model call just recorded it (``event_json``'s known).

    The answer unchanged is that record rebuilt (``store_outcome``), so the record is its JSON
    form too, and the answer's event is stored without a second copy of it.

    Returns:
        ``{"response": <its JSON form>}``; ``None`` on a replay (a record written by older
        code may lack fields the class has now) or when there is no such record.
    """
    rec = None if call.replayed else ctx._record.calls.get(str(call.ordinal))  # (record_of)
    stored: Any = rec.value if rec is not None and rec.done and rec.ok else None
    if type(stored) is dict and len(stored) == 2 and MODEL_TAG in stored and "data" in stored:
        return {"response": stored["data"]}  # (``is_tagged_model`` inline: no call)
    return None


def fills_prompt(setup: ChatModelSetup) -> bool:
    """Whether a chat through ``setup`` reads its request's prompt arguments at all.

    Only a prompt (``build_messages``, a subclass's own included) or a setup's own ``chat``
    fills placeholders: for any other the chat reads no memory for them, so its action uses
    no memory view (nothing to commit) and counts no memory operation (not in flight as a
    reader other actions' writes must be undone for, ``commit_memory``), and its
    ``build_messages`` (``ChatModelSetup``'s own) hands back the messages as they are.

    Returns:
        Whether it may read them (a sub-agent's input is then read from sensory memory).
    """
    return (
        bool(setup.prompt)
        or setup.has_own_chat()
        or type(setup).build_messages is not ChatModelSetup.build_messages
    )


_MESSAGE_TAG = f"{ChatMessage.__module__}:{ChatMessage.__qualname__}"
"""The ``$model`` tag ``to_json_value`` gives a ``ChatMessage``."""
_TEXT_OR_NONE = (str, type(None))
_WHERE = "arguments of a model call"


def model_call_json(messages: list[ChatMessage], schema: dict[str, Any] | None) -> list[Any] | None:
    """``to_json_value([messages, schema])``, made without the general walk where it can be.

    The digest of a chat's model call is made of its arguments' JSON form
    (``_outcomes.call_digest``). A message with no tool calls, no ``extra_args`` and no
    ``reasoning`` (a request's usual message) has a JSON form known from four of its fields,
    so it is written directly; any other message (and the schema) takes ``to_json_value``'s,
    as does one whose fields are not of the types validation gives them (a message built
    with ``ChatMessage.model_construct``: its role as text, say).
    The result is the same either way: a digest recorded by one path is found by the other
    (a replay after a restore, older code's records).

    Args:
        messages: the call's messages.
        schema: its output JSON Schema, if any.

    Returns:
        The JSON form; ``None`` when its text is not valid UTF-8 JSON (a lone surrogate):
        ``to_json_value`` then says what and where.

        ``None`` too when a message or the schema has no JSON form (``call_digest`` then
        says so, naming the call), or when the schema holds an enum member or a namedtuple
        (``value_classes``: the digest names their classes; it does not look into models).
    """
    forms: list[Any] = []
    for m in messages:
        values = m.__dict__
        if (
            type(m) is ChatMessage
            and values["role"].__class__ is MessageRole  # (``model_construct``: any value)
            and (calls := values["tool_calls"]).__class__ is list
            and not calls
            and (extra := values["extra_args"]).__class__ is dict
            and not extra
            and not values["reasoning"]
            and type(values["content"]) is str
            and type(values["tool_call_id"]) in _TEXT_OR_NONE
            and type(values["name"]) in _TEXT_OR_NONE
        ):  # its fields as ``_serde._fast_copy`` writes them (``reasoning`` left out empty)
            data = {
                "role": values["role"]._value_,  # (``.value`` without its descriptor)
                "content": values["content"],
                "tool_calls": [],
                "tool_call_id": values["tool_call_id"],
                "name": values["name"],
                "extra_args": {},
            }
            forms.append({MODEL_TAG: _MESSAGE_TAG, "data": data})
        else:
            try:
                forms.append(to_json_value(m, _WHERE))
            except SerializationError:
                return None
    if schema is not None and value_classes(schema):
        return None
    try:
        out = [forms, None if schema is None else to_json_value(schema, _WHERE)]
        orjson.dumps(out)  # what keyed state can hold (``to_json_value`` checks it as well)
    except (SerializationError, orjson.JSONEncodeError):
        return None
    return out


_ANSWER_FIELDS = (
    "id",
    "type",
    "attributes",
    "attachments",
    "request_id",
    "response",
    "error",
    "traceback",
)
_FAST_ANSWER = (
    SLOT_SETTERS is not None
    and tuple(ChatResponseEvent.model_fields) == _ANSWER_FIELDS
    and not ChatResponseEvent.__private_attributes__
    and ChatResponseEvent.__pydantic_post_init__ is None
)
"""Whether ``answer_event`` may build the event itself (pydantic lays it out as it knows)."""


def answer_event(request_id: str, response: ChatResponse) -> ChatResponseEvent:
    """``ChatResponseEvent(request_id=request_id, response=response)``, without validation.

    A chat's answer event is built once per chat, from values validation would keep as they
    are (a text id, a ``ChatResponse`` instance, which pydantic does not validate again): it
    is built as validation builds it (``Event.__init__``'s one-field path does so for an
    ``OutputEvent``; ``tests/test_chat_answer_event.py`` compares both, object for object).

    Args:
        request_id: the chat's request id.
        response: the chat's answer.

    Returns:
        The event (its id from the running action, as validation gives it).
    """
    if not _FAST_ANSWER or type(request_id) is not str or type(response) is not ChatResponse:
        return ChatResponseEvent(request_id=request_id, response=response)
    assert SLOT_SETTERS is not None
    set_dict, set_fields, set_extra, set_private = SLOT_SETTERS
    event = ChatResponseEvent.__new__(ChatResponseEvent)
    source = EVENT_ID_SOURCE.get()  # (``new_event_id`` inline)
    set_dict(
        event,
        {
            "id": source() if source is not None else "",
            "type": ChatResponseEvent.EVENT_TYPE,
            "attributes": {},
            "attachments": {},
            "request_id": request_id,
            "response": response,
            "error": None,
            "traceback": None,
        },
    )
    set_fields(event, {"request_id", "response", "type"})
    set_extra(event, None)
    set_private(event, None)
    return event
