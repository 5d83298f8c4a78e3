"""Wire rules the hosted-provider adapters share: tool names and call ids as providers take them.

OpenAI and Anthropic take tool names of 1 to 64 letters, digits, ``_`` and ``-`` only
(``^[a-zA-Z0-9_-]{1,64}$``) and refuse the whole request otherwise; tools are named by
their resources, and MCP servers name theirs freely (``github.create_issue``,
``admin/tools.list``: the MCP spec allows ``.`` and ``/``), as do users (``"price lookup"``).
``WireNames`` offers such a tool under a stand-in name and maps the model's calls back.

A conversation may carry tool call ids another provider made: the chat action's synthetic
ids for calls that came without one (Ollama's: ``<chat>#<round>.<index>``, with ``/``, ``#``
and ``.``), or a gateway's long ones, when a fallback setup of another provider takes over a
chat, or a history is sent on. Anthropic refuses an id that does not match
``^[a-zA-Z0-9_-]+$``, OpenAI one longer than 40 characters (400 either way, on every call of
the chat). Such an id is sent as a stable stand-in: made from the id alone, so a call and
its result always get the same one; an id the provider takes goes as it is. Mistral takes
only ids of exactly 9 letters and digits (``nine_char_id``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from typing import Any

from ...api import ChatResponse

__all__ = ["OPENAI_ID_CHARS", "UniqueCallIds", "WireNames", "anthropic_tool_choice", "named_as",
           "nine_char_id", "openai_reasoning", "openai_tool_choice", "reasoning_field",
           "reasoning_of", "reasoning_text", "wire_call_id"]

OPENAI_ID_CHARS = 40
"""The longest tool call id OpenAI's chat completions take."""

_SAFE = re.compile(r"[A-Za-z0-9_-]+")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def wire_call_id(call_id: str | None, max_chars: int = 64) -> str:
    """A tool call id as providers take it: letters, digits, ``_`` and ``-``, bounded.

    Args:
        call_id: the id the conversation holds (``None`` or ``""``: none).
        max_chars: the longest id the provider takes.

    Returns:
        ``call_id`` when it fits; else its safe characters (others as ``_``), cut to fit,
        with a digest of the whole id (so two ids never share a stand-in by being cut).
    """
    text = call_id or ""
    if len(text) <= max_chars and _SAFE.fullmatch(text):
        return text
    tag = _digest(text)
    safe = _UNSAFE.sub("_", text)[:max(0, max_chars - len(tag) - 1)]
    return f"{safe or 'call'}_{tag}"[-max_chars:]


_NINE = re.compile(r"[A-Za-z0-9]{9}")


def nine_char_id(call_id: str | None) -> str:
    """A tool call id as Mistral takes it: exactly 9 letters and digits.

    Args:
        call_id: the id the conversation holds (``None`` or ``""``: none).

    Returns:
        ``call_id`` when it is such an id; else 9 characters of a digest of it (the same
        for the same id: a call and its result keep one stand-in).
    """
    text = call_id or ""
    return text if _NINE.fullmatch(text) else _digest(text)[:9]


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]


class WireNames:
    """The names tools are offered under to a provider that takes ``^[a-zA-Z0-9_-]{1,64}$``.

    A name that fits is its own; another gets its safe characters (others as ``_``), cut to
    64 with a digest of the whole name when longer, or when that stand-in is taken (and
    then a digest of the name salted, when a tool's own name is that digest form: no two
    tools of a request ever share a name on the wire). One
    ``WireNames`` serves one request: the tools offered, the calls of the conversation,
    ``tool_choice``, and the calls of the answer (``ours``).

    Args:
        offered: the names of the tools offered, in order (those that fit are kept first).
    """

    def __init__(self, offered: Iterable[str]) -> None:
        self._to: dict[str, str] = {}
        self._back: dict[str, str] = {}
        names = list(dict.fromkeys(offered))
        for name in names:
            if len(name) <= 64 and _SAFE.fullmatch(name):
                self._to[name] = self._back[name] = name
        for name in names:
            self.wire(name)

    def wire(self, name: str) -> str:
        """The name ``name`` goes under (made on first use, then kept).

        Args:
            name: the tool's name (offered, or called earlier in the conversation).

        Returns:
            The name the provider sees.
        """
        known = self._to.get(name)
        if known is not None:
            return known
        safe = _UNSAFE.sub("_", name)
        wire = safe if safe and len(safe) <= 64 else ""
        salt = 0
        while not wire or wire in self._back:  # a name no other tool goes under: one
            # that fits may be this stand-in's digest form (another server's tool so named)
            wire = f"{safe[:51] or 'tool'}_{_digest(f'{salt}:{name}' if salt else name)}"
            salt += 1
        self._to[name], self._back[wire] = wire, name
        return wire

    def ours(self, wire: str) -> str:
        """The tool name the model meant by ``wire`` (itself when it was no stand-in).

        Args:
            wire: a name the provider's answer calls.

        Returns:
            The tool's own name.
        """
        return self._back.get(wire, wire)

    def restore(self, response: ChatResponse) -> ChatResponse:
        """``response`` with each tool call named by the tool's own name.

        Args:
            response: the provider's answer, its calls named as the provider saw the tools.

        Returns:
            The answer as the chat action reads it.
        """
        calls = response.message.tool_calls
        if all(self.ours(c.name) == c.name for c in calls):
            return response
        fixed = [c.model_copy(update={"name": self.ours(c.name)}) for c in calls]
        return response.model_copy(update={
            "message": response.message.model_copy(update={"tool_calls": fixed})})


class UniqueCallIds:
    """Tool call ids made unique over a conversation, as strict providers want them.

    Anthropic refuses a request in which two ``tool_use`` blocks share an id (``tool_use
    ids must be unique``: anthropics/claude-code #28515, ducks/claux #40), OpenAI one in
    which two tool messages answer one id (``Duplicate value for 'tool_call_id'``: agno
    #5116), Mistral counts calls and results (``Not the same number of function calls and
    responses``: NousResearch/hermes-agent #11722). A conversation holds such ids when a
    server numbers each round's calls from ``call_0``, a model repeats its own short ids
    (Mistral's small models, Kimi: can1357/oh-my-pi #2055), or writes the same id into every
    call it writes as text. A repeated id gets a stand-in made from it and its turn, and the
    results after that turn name the stand-in (a result whose id is used twice in one turn
    names them in turn). One ``UniqueCallIds`` serves one request.

    Args:
        max_chars: the longest id the provider takes.
    """

    def __init__(self, max_chars: int = 64) -> None:
        self._max = max_chars
        self._seen: set[str] = set()
        self._turn = 0
        self._this_turn: dict[str, list[str]] = {}

    def next_turn(self) -> None:
        """An assistant turn begins: the results that follow answer its calls."""
        self._turn += 1
        self._this_turn = {}

    def call(self, call_id: str) -> str:
        """The id a call goes with (``call_id`` unless already used in the request).

        Args:
            call_id: the call's id, as the provider takes it (``wire_call_id``).

        Returns:
            The id to send.
        """
        unique, n = call_id, 0
        while unique in self._seen:
            n += 1
            unique = wire_call_id(f"{call_id}#{self._turn}.{n}", self._max)
        self._seen.add(unique)
        self._this_turn.setdefault(call_id, []).append(unique)
        return unique

    def result(self, call_id: str) -> str:
        """The id a result goes with: its call's.

        Args:
            call_id: the id the result names, as the provider takes it (``wire_call_id``).

        Returns:
            The id to send.
        """
        given = self._this_turn.get(call_id)
        if not given:
            return call_id
        return given.pop(0) if len(given) > 1 else given[0]


def reasoning_of(text: Any, field: str | None = None) -> list[dict[str, Any]]:
    """A server's reasoning text as a message's ``reasoning`` (``[]`` when there is none).

    Args:
        text: what the server gave (OpenAI-compatible ``reasoning_content`` or
            ``reasoning``, Ollama's ``thinking``); anything but a non-empty string is none.
        field: the OpenAI-compatible message field it came in, kept to send it back in the
            same one, when it is not ``reasoning_content`` (``None``: that field, or
            Ollama's).

    Returns:
        ``[{"type": "reasoning", "text": text}]`` (with ``"field"`` when given), or ``[]``.
    """
    if not isinstance(text, str) or not text:
        return []
    return [{"type": "reasoning", "text": text, **({"field": field} if field else {})}]


def openai_reasoning(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The reasoning of an OpenAI-compatible answer's message, as a message's ``reasoning``.

    DeepSeek, Kimi, DashScope and older vLLM name it ``reasoning_content``; vLLM since its
    rename (0.11; the old name removed in 2026), OpenRouter, Groq and Ollama's ``/v1``
    name it ``reasoning``.

    Args:
        message: the answer's ``message``.

    Returns:
        What ``reasoning_of`` makes of it, the field named when it is ``reasoning``.
    """
    found = reasoning_of(message.get("reasoning_content"))
    return found or reasoning_of(message.get("reasoning"), "reasoning")


def reasoning_text(reasoning: list[dict[str, Any]]) -> str | None:
    """The text of a message's ``reasoning`` items of the ``reasoning`` kind, to send back.

    Args:
        reasoning: the message's ``reasoning``.

    Returns:
        The text (``None``: none of that kind; Anthropic's blocks go to Anthropic only).
    """
    texts = [r["text"] for r in reasoning
             if r.get("type") == "reasoning" and isinstance(r.get("text"), str)]
    return "".join(texts) if texts else None


def reasoning_field(reasoning: list[dict[str, Any]]) -> str:
    """The OpenAI-compatible field a message's reasoning goes back in: the one it came in.

    Args:
        reasoning: the message's ``reasoning``.

    Returns:
        ``"reasoning"`` when the server sent it so, else ``"reasoning_content"``.
    """
    came = {r.get("field") for r in reasoning if r.get("type") == "reasoning"}
    return "reasoning" if came == {"reasoning"} else "reasoning_content"


def _chosen_name(choice: Any) -> str | None:
    """The tool a ``tool_choice`` names, in either provider's form (``None``: none named)."""
    if not isinstance(choice, dict):
        return None
    function = choice.get("function")
    name = function.get("name") if isinstance(function, dict) else choice.get("name")
    return name if isinstance(name, str) else None


def openai_tool_choice(request: dict[str, Any], names: WireNames) -> None:
    """Put the request's ``tool_choice`` in OpenAI's form, in place.

    Anthropic's forms are taken too (``"any"``, ``{"type": "any"}``, ``{"type": "tool",
    "name": ...}``), so a setup's options need not change with its connection. Without tools
    in the request, ``tool_choice`` and ``parallel_tool_calls`` are left out: OpenAI refuses
    them then ("only allowed when tools are specified").

    Args:
        request: the request's fields (``tools``, ``tool_choice``, ``parallel_tool_calls``).
        names: the names the request's tools go under.
    """
    if not request.get("tools"):
        request.pop("tool_choice", None)
        request.pop("parallel_tool_calls", None)
        return
    if "tool_choice" not in request:
        return
    choice = request["tool_choice"]
    named = _chosen_name(choice)
    kind = choice.get("type") if isinstance(choice, dict) else choice
    if named is not None:
        choice = {"type": "function", "function": {"name": names.wire(named)}}
    elif kind in ("any", "required"):
        choice = "required"
    elif kind in ("auto", "none"):
        choice = kind
    request["tool_choice"] = choice


def anthropic_tool_choice(request: dict[str, Any], names: WireNames) -> None:
    """Put the request's ``tool_choice`` in Anthropic's form, in place.

    OpenAI's forms are taken too (``"auto"``, ``"none"``, ``"required"``, ``{"type":
    "function", "function": {"name": ...}}``), and ``parallel_tool_calls=False`` becomes
    ``disable_parallel_tool_use``; Anthropic refuses both forms of OpenAI's. Without tools in
    the request, ``tool_choice`` is left out (refused then too).

    Args:
        request: the request's fields (``tools``, ``tool_choice``, ``parallel_tool_calls``).
        names: the names the request's tools go under.
    """
    parallel = request.pop("parallel_tool_calls", None)
    if not request.get("tools"):
        request.pop("tool_choice", None)
        return
    choice = request.get("tool_choice")
    named = _chosen_name(choice)
    kind = choice.get("type") if isinstance(choice, dict) else choice
    if named is not None:
        choice = {**(choice if isinstance(choice, dict) and kind == "tool" else {}),
                  "type": "tool", "name": names.wire(named)}
    elif kind in ("any", "required", "auto", "none"):
        choice = {**(choice if isinstance(choice, dict) else {}),
                  "type": "any" if kind == "required" else kind}
    if parallel is False and (choice is None or isinstance(choice, dict)):
        choice = {"type": "auto", **(choice or {})}
        if choice["type"] != "none":
            choice["disable_parallel_tool_use"] = True
    if choice is not None:
        request["tool_choice"] = choice


_OPTION_NAMES = {
    "openai": {"stop_sequences": "stop"},
    "anthropic": {"stop": "stop_sequences", "max_completion_tokens": "max_tokens"},
    "ollama": {"stop_sequences": "stop", "max_tokens": "num_predict",
               "max_completion_tokens": "num_predict"},
}
"""The generation options each provider names otherwise (a setup's options, in another's
names, go to any connection)."""


def named_as(provider: str, options: dict[str, Any]) -> dict[str, Any]:
    """A setup's generation options under the names ``provider`` takes.

    ``stop`` and ``stop_sequences``, ``max_tokens``, ``max_completion_tokens`` and
    ``num_predict`` are one option each under other names; a name the provider takes wins
    over another's. Anthropic takes stop sequences as a list of non-empty texts ("each stop
    sequence must be non-empty"); one text becomes a list of it.

    Answers are read whole: ``stream`` (false) is left out; true, it is refused before
    anything is sent (the SDKs would hand back a stream, read as no answer).

    Args:
        provider: ``"openai"``, ``"anthropic"`` or ``"ollama"``.
        options: the options (not changed).

    Returns:
        The options, renamed.

    Raises:
        ValueError: for ``stream=True``.
    """
    out = dict(options)
    if out.pop("stream", None):
        raise ValueError("the option stream=True is not offered: a chat reads each answer "
                         "whole (leave stream out of the setup's options)")
    for theirs, ours in _OPTION_NAMES[provider].items():
        if theirs in out:
            value = out.pop(theirs)
            out.setdefault(ours, value)
    stops = out.get("stop_sequences")
    if provider == "anthropic" and stops is not None:
        stops = [stops] if isinstance(stops, str) else list(stops)
        out["stop_sequences"] = [t for t in stops if isinstance(t, str) and t]
        if not out["stop_sequences"]:
            del out["stop_sequences"]
    return out
