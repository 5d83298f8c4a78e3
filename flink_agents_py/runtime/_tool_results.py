"""Tool results: a tool's or sub-agent's outcome as a ``ToolResult``, and as the model reads it.

A tool's return value and a sub-agent's result are kept in their plain JSON form (the
recorded result); ``tool_message`` renders one for the chat's tool message.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter, ValidationError

from ..api import (
    MemoryObject,
    ResourceType,
    SerializationError,
    SubagentResult,
    SubagentSetup,
    ToolCall,
    ToolResult,
)
from ..api.internal import MESSAGE_MAX_CHARS, described, refuse_unreadable_arguments
from ._failures import clip
from ._serde import json_text, to_plain_json

if TYPE_CHECKING:
    from .recorder._execution import ActionExecution

__all__ = ["delegation_result", "injected_call", "refused", "tool_message", "unreadable_refusal",
           "valid_texts"]


_NOTE_LIKE = re.compile(r"(?:^|[\n\r\v\f\x1c-\x1e\x85\u2028\u2029])[\s\u200b-\u200d\u2060\ufeff]*"
                        r"error[\s\u200b-\u200d\u2060\ufeff]*:|\[\.\.\.", re.IGNORECASE)
"""What in a tool's text could read as the framework's note: a line starting ``Error:`` (how
a failure is worded; invisible characters around the word too), or ``[...`` (how ``clip``
and the MCP client mark what they cut)."""


def tool_message(result: ToolResult, text: bool, framed: bool = False) -> str:
    r"""What the model reads of a tool's (or sub-agent's, or MCP tool's) result.

    A ``str`` result is its text, as Flink Agents sends it; any other value its JSON text; a
    failure ``Error: <reason>``. A chat opened before text results went as their text
    (``text`` false: its stored state has no ``"tool_text"``) keeps sending every result as
    JSON text (a ``str`` quoted), so a run restored from that state asks its model what it
    asked, and recorded, before the upgrade.

    With ``framed`` (a chat opened since tool results are framed: ``"tool_frame"`` in its
    state) the framework's notes cannot be forged by what a tool returned: a text that
    could read as one (a line starting ``Error:``, any ``[...``) goes as its JSON string
    (quoted, its line breaks escaped), and ``[...`` in a result's JSON text is written
    ``\u005b...`` (the same value once decoded). So only a failure's message starts with
    ``Error: `` (Anthropic's connection flags those ``is_error``), and only the framework
    writes a ``[... N of M characters cut ...]`` marker.

    Returns:
        The tool message's content (not yet clipped).
    """
    if not result.ok:
        reason = result.error
        if framed and reason is not None and "[..." in reason:
            reason = _own_cut_kept(reason)
        return f"Error: {reason}"
    content = result.content
    if text and isinstance(content, str):
        if not framed or _NOTE_LIKE.search(content) is None:
            return content
    elif not framed:
        return json_text(content)
    rendered = json_text(content)
    return rendered.replace("[...", "\\u005b...") if "[..." in rendered else rendered


_CUT = re.compile(r"\[\.\.\. ([0-9,]+) of ([0-9,]+) characters cut \.\.\.\]")


def _own_cut_kept(reason: str) -> str:
    r"""A failure's ``reason`` with every ``[...`` the framework did not write escaped.

    ``refused`` and a raising tool's result ``clip`` the reason to ``MESSAGE_MAX_CHARS``:
    a cut reason is exactly that long plus its marker, which stands after the kept head
    and counts what was cut. That marker stays; any other ``[...`` (the tool's or a
    server's words) is written ``\u005b...``.

    Returns:
        The reason to send.
    """
    head = MESSAGE_MAX_CHARS - MESSAGE_MAX_CHARS // 4
    own = _CUT.match(reason, head)
    if own is not None and len(reason) == MESSAGE_MAX_CHARS + len(own.group()):
        cut, whole = (int(g.replace(",", "")) for g in own.groups())
        if cut == whole - MESSAGE_MAX_CHARS:
            return (reason[:head].replace("[...", "\\u005b...") + own.group()
                    + reason[own.end():].replace("[...", "\\u005b..."))
    return reason.replace("[...", "\\u005b...")


def refused(call: ToolCall, reason: str, traceback: str | None = None) -> ToolResult:
    return ToolResult(call_id=call.id, name=call.name, ok=False, error=clip(reason),
                      traceback=traceback)


def unreadable_refusal(call: ToolCall) -> ToolResult | None:
    """The refusal of a call whose arguments its connection could not read, if it is one.

    Such a call (``api.UNREADABLE_ARGUMENTS``: arguments that were not JSON, cut short, two
    objects) runs no tool, asks no approval and delegates to no sub-agent: the model is told
    why, and may call again.

    Args:
        call: the model's call.

    Returns:
        The failed result the model reads (``None``: the arguments were read).
    """
    try:
        refuse_unreadable_arguments(call.name, call.arguments)
    except ValueError as e:
        return refused(call, f"ValueError: {e}")
    return None


def delegation_result(ctx: ActionExecution, call: ToolCall, name: str,
                       result: SubagentResult) -> ToolResult:
    """A sub-agent's result as the model sees it: JSON content, or the reason it failed.

    A declared ``result_type()`` narrows the value (extra fields dropped). Whatever goes
    wrong here (a value that is not of the declared type, a type pydantic cannot build, a
    value nested deeper than pydantic or the interpreter can walk) is a failed delegation
    reported to the model with the reason, never a failure of the tool round.

    Returns:
        The tool result the model gets.
    """
    if not result.success:
        return refused(call, f"delegation to sub-agent {name!r} failed: {result.error_message}",
                       result.traceback)
    value = result.result
    try:
        setup = ctx.get_resource(name, ResourceType.AGENT)
        declared = setup.result_type() if isinstance(setup, SubagentSetup) else None
    except Exception as e:  # noqa: BLE001
        return refused(call, f"delegation to sub-agent {name!r} failed: cannot read its "
                             f"result type: {described(e)}")
    if declared is not None:
        type_name = getattr(declared, "__name__", repr(declared))
        try:
            adapter: TypeAdapter[Any] = TypeAdapter(declared)
        except Exception as e:  # noqa: BLE001 - a type pydantic cannot build
            return refused(call, f"delegation to sub-agent {name!r} failed: its result type "
                                 f"{type_name} cannot be used: {described(e)}")
        try:
            narrowed = adapter.validate_python(value)
        except ValidationError as e:
            return refused(call, f"sub-agent {name!r} returned a result that is not a "
                                 f"{type_name}: {e}")
        except (Exception, RecursionError) as e:  # noqa: BLE001 - e.g. nested too deep
            return refused(call, f"delegation to sub-agent {name!r} failed: its result "
                                 f"cannot be read as a {type_name}: {described(e)}")
        try:
            value = adapter.dump_python(narrowed, mode="json")
        except (Exception, RecursionError):  # noqa: BLE001 - deeper than pydantic's serializer
            value = narrowed  # goes: the walk below has no depth cap (it names where it stops)
    try:
        content = to_plain_json(value, f"result of sub-agent {name!r}")
    except SerializationError as e:
        return refused(call, f"delegation to sub-agent {name!r} failed: {e}")
    return ToolResult(call_id=call.id, name=call.name, ok=True, content=content)


def valid_texts(value: Any, depth: int = 0) -> Any:
    """``value`` with each lone surrogate of its texts replaced by U+FFFD.

    A tool's result may hold one (a file name ``os.listdir`` decoded with
    ``surrogateescape``); such text has no JSON form, so the call was the model's error.
    Strings in lists, tuples and dicts are replaced too (to 64 levels).

    Returns:
        The value (lists for tuples; other values as they are).
    """
    if type(value) is str:
        return value if value.isascii() else value.encode(
            "utf-16", "surrogatepass").decode("utf-16", "replace")
    if depth < 64 and isinstance(value, (list, tuple)):
        return [valid_texts(v, depth + 1) for v in value]
    if depth < 64 and isinstance(value, dict):
        return {valid_texts(k, depth + 1) if type(k) is str else k: valid_texts(v, depth + 1)
                for k, v in value.items()}  # (a tuple key stays a tuple: a list is no key)
    return value


def injected_call(ctx: ActionExecution, tool: Any,
                  call: ToolCall) -> tuple[ToolCall, ToolResult | None]:
    """``call`` with the arguments its tool has the runtime fill (Flink Agents' ``InjectedArg``).

    Each comes from the agent's configuration, or the key's sensory or short-term memory
    (a value, not an object), read in the tool round's action (so a replay reads it again),
    and wins over one the model gave.

    Args:
        ctx: the tool round's execution.
        tool: the tool resource (only a ``FunctionTool`` declares injected arguments).
        call: the model's call.

    Returns:
        ``(call with the values, None)``, or ``(call, refusal)`` naming what is missing.
    """
    injections = getattr(tool, "injections", None)
    wanted = injections() if callable(injections) else {}
    if not wanted:
        return call, None
    values: dict[str, Any] = {}
    for param, spec in wanted.items():
        source, key = spec.get("source", "sensory_memory"), spec.get("key") or param
        if source == "config":
            found = key in ctx.plan.config
            value = ctx.plan.config.get(key)
        else:
            memory = ctx.short_term_memory if source == "short_term_memory" else ctx.sensory_memory
            found = memory.is_exist(key)
            value = memory.get(key) if found else None
            if isinstance(value, MemoryObject):
                return call, refused(call, f"{source} path {key!r} injected into {param!r} of "
                                           f"tool {call.name!r} holds an object, not a value")
        if not found:
            return call, refused(call, f"no {source} value {key!r} to inject into {param!r} "
                                       f"of tool {call.name!r}")
        values[param] = value
    return call.model_copy(update={"arguments": {**call.arguments, **values}}), None
