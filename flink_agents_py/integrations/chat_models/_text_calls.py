"""Tool calls a model wrote as text in its answer's content, read as the calls they are.

A server turns a model's tool calls into structured ``tool_calls`` only when its parser
knows the model's format: vLLM without ``--enable-auto-tool-choice --tool-call-parser``
(vllm #17161), llama.cpp without ``--jinja``, LM Studio for Mistral models
(lmstudio-bug-tracker #797), Ollama's ``/v1`` and a model whose template Ollama cannot
parse (ollama #17274; NousResearch/hermes-agent #87900), the in-process llama.cpp with a
GGUF chat template. The call then comes back as the answer's text, with ``finish_reason:
"stop"``, and the chat ended with that text as its answer: no tool ran. The forms read:

- Hermes / Qwen / SmolLM: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``
  (one object or a list of them; the closing tag may be missing at the end);
- Qwen3-Coder and Qwen 3.5 on: ``<tool_call><function=name><parameter=key>value
  </parameter>...</function></tool_call>``, the wrapper tags sometimes left out (vLLM's
  ``qwen3_coder`` parser's form; ollama #12751, mlx-lm #1616); each value is read by the
  type the tool's schema gives its parameter: text stays text;
- Mistral: ``[TOOL_CALLS][{"name": ..., "arguments": {...}}]`` (tokenizer v3), and
  ``[TOOL_CALLS]name[ARGS]{...}`` (v11 on; ``[CALL_ID]id`` may come before ``[ARGS]``);
- Llama 3.1: ``<|python_tag|>{"name": ..., "parameters": {...}}`` (several separated by
  ``;``), Llama 4's ``<|python_start|>...<|python_end|>``, and ``<function=name>{...}
  </function>``;
- a bare JSON object (or several, or a list, in a markdown fence or not) that is the whole
  answer: Llama 3.2's ``{"name": ..., "parameters": {...}}``, Qwen 2.5 through Ollama's
  ``{"name": ..., "arguments": {...}}`` (Rapid-MLX #700, mistral-common #73), OpenAI's own
  ``{"type": "function", "function": {...}}``. Every key must be one of a call's (``name``,
  ``arguments``/``parameters``, ``type``, ``id``, ``function``), so prose holding
  ``{"name": "Alice"}`` stays text unless a tool is named ``Alice``;
- any of the JSON forms above in doubled braces, ``{{"name": ..., "arguments": {...}}}``
  (one or more extra closing braces), tagged or bare: Qwen 2.5's own GGUF chat template
  shows its models the call form with doubled braces (they sit in a Jinja string, printed
  as they are), and the small Qwen 2.5 models copy them, often without the ``<tool_call>``
  tags (the embedded default model, Qwen2.5-Coder-1.5B, wrote every call so: no tool ran).

A call is read only when it names a tool offered in the request; anything else (a name not
offered, the text around the calls) stays the answer's text as it was. A tagged call whose
JSON cannot be read but that names an offered tool is a call with unreadable arguments: the
tool refuses it, telling the model why (``_answers.tool_arguments``); so is one whose JSON
holds ``NaN`` or ``Infinity`` (no JSON form: it could not be recorded) or nests deeper than
the interpreter's stack (read by ``strict_json_at``, never a ``RecursionError``). Text inside
``<think>...</think>`` (a reasoning model's, its server's reasoning parser off) is never
read as calls. Calls read from text carry no ids (the chat action gives them unique ones)
unless the text names one; the answer's finish reason is ``tool_calls`` and its
``metadata["text_tool_calls"]`` says how many were read so.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ...api import ChatResponse, ToolCall
from ...api.internal import (
    UNREADABLE_ARGUMENTS,
    mask_secrets,
    refuse_truncated_calls,
    strict_json,
    strict_json_at,
)
from ._answers import tool_arguments

__all__ = ["calls_from_text"]

_CALL_KEYS = frozenset({"name", "arguments", "parameters", "type", "id", "function"})
_TAGGED = re.compile(
    r"<tool_call>(?P<hermes>.*?)(?:</tool_call>|\Z)"
    r"|<\|python_start\|>(?P<llama4>.*?)(?:<\|python_end\|>|\Z)"
    r"|<\|python_tag\|>(?P<llama3>.*?)(?:<\|eom_id\|>|<\|eot_id\|>|\Z)"
    r"|<function=(?P<fname>[^>\s]+)>(?P<fargs>.*?)(?:</function>|\Z)"
    r"|\[TOOL_CALLS\](?P<mistral>.*?)(?=\[TOOL_CALLS\]|</s>|\Z)",
    re.S)
_MISTRAL_NAMED = re.compile(
    r"\s*(?P<name>[^\s\[\]{}]+)\s*(?:\[CALL_ID\]\s*(?P<id>[^\s\[]+)\s*)?\[ARGS\](?P<args>.*)",
    re.S)
_FUNCTION = re.compile(r"<function=([^>\s]+)>(.*?)(?:</function>|\Z)", re.S)
_PARAMETER = re.compile(r"<parameter=([^>\s]+)>(.*?)(?:</parameter>|(?=<parameter=)|\Z)", re.S)
_JSON_KINDS: dict[str, tuple[type, ...]] = {
    "integer": (int,), "number": (int, float), "boolean": (bool,), "object": (dict,),
    "array": (list,), "null": (type(None),)}
_NAME = re.compile(r'"name"\s*:\s*"([^"\\]+)"')
_FENCE = re.compile(r"\A\s*```[A-Za-z]*\s*\n?(.*?)\n?\s*```\s*\Z", re.S)


def calls_from_text(response: ChatResponse, offered: Mapping[str, Any], *,
                    bare: bool = True) -> ChatResponse:
    """``response`` with the tool calls its text holds as its tool calls.

    Args:
        response: the provider's answer, read as it came.
        offered: the tools offered in the request, by the names the model saw: each one's
            parameters' JSON Schema (to read a parameter written as XML text by its type).
        bare: whether a whole answer of bare JSON naming a tool is read as calls (``False``
            when the request asked for structured output: such an answer may be it).

    Returns:
        ``response`` as it was when it holds structured calls already, no tool was offered,
        or its text holds no call of an offered tool; else with those calls, the text they
        were written in taken out of its content.

    Raises:
        ProviderError: when the answer was cut at its token limit (its calls' arguments
            may be incomplete; none may run), as for structured calls.
    """
    message = response.message
    if message.tool_calls or not offered or not message.content:
        return response
    names = dict(offered)
    content = message.content
    think_end = content.rfind("</think>")
    start = think_end + len("</think>") if think_end >= 0 else 0
    calls, rest = _tagged_calls(content, start, names)
    if not calls and bare:
        calls = _bare_calls(content[start:], names)
        rest = content[:start] if calls else content
    if not calls:
        return response
    refuse_truncated_calls(response.finish_reason, [c.name for c in calls])
    fixed = message.model_copy(update={"content": rest.strip(), "tool_calls": calls})
    return response.model_copy(update={
        "message": fixed, "finish_reason": "tool_calls",
        "metadata": {**response.metadata, "text_tool_calls": len(calls)}})


def _tagged_calls(content: str, start: int,
                  names: dict[str, Any]) -> tuple[list[ToolCall], str]:
    """The calls of the tagged segments after ``start``, and the text without them."""
    calls: list[ToolCall] = []
    kept: list[str] = [content[:start]]
    at = start
    for match in _TAGGED.finditer(content, start):
        found = _segment_calls(match, names, len(calls))
        kept.append(content[at:match.start()] if found else content[at:match.end()])
        at = match.end()
        calls.extend(found)
    kept.append(content[at:])
    return calls, "".join(kept)


def _segment_calls(match: re.Match[str], names: dict[str, Any], first: int) -> list[ToolCall]:
    """The calls of one tagged segment that name an offered tool."""
    if match.group("fname") is not None:
        name, body = match.group("fname"), match.group("fargs")
        if name not in names:
            return []
        if body.lstrip().startswith("<parameter="):
            return [_xml_call(name, body, names[name])]
        return [_call(name, body.strip() or None, None, first)]
    text = next(t for t in (match.group("hermes"), match.group("llama4"),
                            match.group("llama3"), match.group("mistral")) if t is not None)
    if text.lstrip().startswith("<function="):  # Qwen3-Coder's XML form
        return [_xml_call(m.group(1), m.group(2), names[m.group(1)])
                for m in _FUNCTION.finditer(text) if m.group(1) in names]
    if match.group("mistral") is not None:
        named = _MISTRAL_NAMED.match(text)
        if named is not None and not text.lstrip().startswith(("[", "{")):
            name = named.group("name")
            if name not in names:
                return []
            return [_call(name, named.group("args").strip() or None, named.group("id"), first)]
    objects, stop = _json_values(text)
    calls = [c for c in (_object_call(o, names, first + i, strict=False)
                         for i, o in enumerate(objects)) if c is not None]
    broken = text[stop:]
    named_tool = next((n for n in _NAME.findall(broken) if n in names), None)
    if named_tool is not None:  # JSON cut short or broken that names a tool: told the model
        calls.append(ToolCall(id="", name=named_tool, arguments={
            UNREADABLE_ARGUMENTS: f"the call written as text is not JSON: "
                                  f"{mask_secrets(broken.strip())[:300]!r}"}))
    return calls


def _bare_calls(text: str, names: dict[str, Any]) -> list[ToolCall]:
    """The calls of an answer that is nothing but call objects (all naming offered tools)."""
    fenced = _FENCE.match(text)
    body = (fenced.group(1) if fenced else text).strip()
    if not body.startswith(("{", "[")):
        return []
    objects, stop = _json_values(body)
    if stop < len(body) or not objects:
        return []
    calls = [_object_call(o, names, i, strict=True) for i, o in enumerate(objects)]
    return [c for c in calls if c is not None] if all(calls) else []


def _json_values(text: str) -> tuple[list[Any], int]:
    """The JSON values ``text`` holds one after another (a list's items each one).

    Values may be separated by whitespace, ``;`` or ``,``.

    Returns:
        The values, and where reading stopped (``len(text)``: all of it was read).
    """
    values: list[Any] = []
    at, end = 0, len(text)
    while True:
        while at < end and (text[at].isspace() or text[at] in ";,"):
            at += 1
        if at >= end:
            return values, end
        try:
            value, after = strict_json_at(text, at)
        except ValueError:
            doubled = _doubled_braces(text, at)
            if doubled is None:
                return values, at
            value, after = doubled
        at = after
        values.extend(value if isinstance(value, list) else [value])


def _doubled_braces(text: str, at: int) -> tuple[dict[str, Any], int] | None:
    """The object written in doubled braces at ``at`` (``{{...}}``), and where it ends.

    Qwen 2.5's chat template shows its models the call form as ``{{"name": ...}}``; they
    write their calls so, with one or more closing braces too many. Only an object is read,
    and the closing braces after it are taken as part of it.

    Returns:
        The object and the index after its extra closing braces; ``None`` when ``text``
        has no doubled opening brace at ``at`` or no JSON object after it.
    """
    if not text.startswith("{{", at):
        return None
    try:
        value, after = strict_json_at(text, at + 1)
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    while after < len(text) and text[after] == "}":
        after += 1
    return value, after


def _object_call(obj: Any, names: dict[str, Any], index: int, *,
                 strict: bool) -> ToolCall | None:
    """The call a decoded object stands for, if it names an offered tool.

    Args:
        obj: the object.
        names: the offered tools' names.
        index: the call's position in the answer.
        strict: whether every key must be one of a call's (a bare answer's objects).

    Returns:
        The call (``None``: the object is no call of an offered tool).
    """
    if not isinstance(obj, dict) or (strict and not set(obj) <= _CALL_KEYS):
        return None
    if strict and obj.get("type", "function") != "function":
        return None
    inner = obj.get("function")
    if isinstance(inner, dict):  # OpenAI's form: {"type": "function", "function": {...}}
        call_id = obj.get("id")
        obj = inner
        if strict and not set(obj) <= _CALL_KEYS:
            return None
    else:
        call_id = obj.get("id")
    name = obj.get("name")
    if not isinstance(name, str) or name not in names:
        return None
    raw = obj["arguments"] if "arguments" in obj else obj.get("parameters")
    return _call(name, raw, call_id, index)


def _xml_call(name: str, body: str, schema: Any) -> ToolCall:
    """A call written as ``<parameter=key>value</parameter>`` items (Qwen3-Coder's form).

    A value loses the one line break around it; a parameter the tool's schema types as
    ``string`` (or does not name) keeps its text; another is its JSON value when the text
    is one of that type, else its text (which the tool then refuses, telling the model).

    Returns:
        The call.
    """
    props = schema.get("properties") if isinstance(schema, dict) else None
    arguments: dict[str, Any] = {}
    for key, raw in _PARAMETER.findall(body):
        text = raw[1:] if raw.startswith("\n") else raw
        text = text[:-1] if text.endswith("\n") else text
        spec = props.get(key) if isinstance(props, dict) else None
        arguments[key] = _typed(text, spec.get("type") if isinstance(spec, dict) else None)
    return ToolCall(id="", name=name, arguments=arguments)


def _typed(text: str, kind: Any) -> Any:
    """``text`` as the JSON Schema type ``kind`` (one name or a list of names) reads it."""
    kinds = [kind] if isinstance(kind, str) else kind if isinstance(kind, list) else []
    wanted = tuple(t for k in kinds if k != "string" for t in _JSON_KINDS.get(k, ()))
    if not wanted:
        return text
    try:
        value = strict_json(text)
    except ValueError:  # (NaN, Infinity and a value too deep to read too: the text stays)
        return text
    if isinstance(value, bool) and bool not in wanted:
        return text
    return value if isinstance(value, wanted) else text


def _call(name: str, raw: Any, call_id: Any, index: int) -> ToolCall:
    """A call of ``name`` with arguments ``raw`` (JSON text, an object, ``None``)."""
    return ToolCall(id=call_id if isinstance(call_id, str) else "", name=name,
                    arguments=tool_arguments(raw, index, name))
