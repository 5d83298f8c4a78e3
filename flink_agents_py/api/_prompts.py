"""Prompts with ``{placeholders}``."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from pydantic import model_validator

from ._errors import UsageError
from ._messages import ChatMessage, MessageRole
from ._resources import Resource, ResourceType
from ._secrets import cut_masked

__all__ = ["Prompt", "fill_placeholders", "warn_unfilled", "warn_unfilled_in"]

# ``{name}``, with Python's conversion and format spec: ``{price:.2f}``, ``{name!r}``
_FIELD = r"\{([A-Za-z_][A-Za-z0-9_]*)(![rsa])?(:[^{}\s\"']*)?\}"
_PLACEHOLDER = re.compile(_FIELD)
# a template's brace tokens, in order: doubled braces, a placeholder, a lone brace
_BRACES = re.compile(r"\{\{|\}\}|" + _FIELD + r"|[{}]")
_CONVERSIONS: dict[str, Callable[[Any], str]] = {"!r": repr, "!s": str, "!a": ascii}
MAX_SPEC_NUMBER = 10_000
"""The largest width or precision a placeholder's format spec may ask for (``{x:>10000}``).

A template written from a record (``Prompt.from_text(record["template"])``) is data: a spec
of ``{x:>300000000}`` made a 300-million-character prompt (572 MiB at its peak), and a
larger one more, before any bound on what is sent to a model could apply."""
_SPEC_NUMBER = re.compile(r"\d+")


def _filled(m: re.Match[str], values: Mapping[str, Any]) -> str:
    """The text of placeholder ``m``: its value converted and formatted, or ``m`` itself."""
    name, conversion, spec = m.group(1), m.group(2), m.group(3)
    if name not in values:
        return m.group(0)
    value = values[name]
    if conversion is None and spec is None:
        return str(value)
    if conversion is not None:
        value = _CONVERSIONS[conversion](value)
    if spec and any(len(n) > 5 or int(n) > MAX_SPEC_NUMBER for n in _SPEC_NUMBER.findall(spec)):
        raise UsageError(f"prompt placeholder {cut_masked(m.group(0), 80)} asks for a width "
                         f"or precision over {MAX_SPEC_NUMBER:,} (MAX_SPEC_NUMBER): it is not "
                         f"filled, since its text alone could exhaust the memory")
    try:
        return format(value, spec[1:] if spec else "")
    except (TypeError, ValueError) as e:
        raise UsageError(f"prompt placeholder {m.group(0)} cannot format the "
                         f"{type(value).__name__} given for {name!r}: {e}") from None


def fill_placeholders(template: str, values: Mapping[str, Any]) -> str:
    """Replace each ``{name}`` in ``template`` with ``str(values[name])``.

    A placeholder may carry Python's conversion and format spec, as ``str.format`` (and so
    Apache Flink Agents' prompts) reads them: ``{price:.2f}``, ``{name!r}``, ``{n:>4}``.

    A placeholder no value fills stays as literal text, and values the template does not use
    are ignored (so a prompt and an input schema may drift apart without an error). Only
    ``{identifier}`` forms are placeholders; other braces (JSON examples) stay as they are.

    A template whose every brace is a placeholder or doubled is written in Python's format
    style, as Apache Flink Agents' prompts are (``{{`` and ``}}`` for literal braces): its
    doubled braces become single ones, and a ``{{name}}`` is the literal text ``{name}``.

    Args:
        template: the text with ``{name}`` placeholders.
        values: the values by placeholder name.

    Returns:
        The filled text.

    Raises:
        UsageError: when a placeholder's format spec asks for a width or precision over
            ``MAX_SPEC_NUMBER`` (10,000), or does not fit its value (``{n:.2f}``
            given a text), naming the placeholder.
    """
    tokens = list(_BRACES.finditer(template))
    if any(len(m.group(0)) == 1 for m in tokens):  # a lone brace: raw JSON, not format style

        return _PLACEHOLDER.sub(lambda m: _filled(m, values), template)
    out: list[str] = []
    end = 0
    for m in tokens:
        out.append(template[end:m.start()])
        out.append(m.group(0)[0] if m.group(1) is None else _filled(m, values))
        end = m.end()
    out.append(template[end:])
    return "".join(out)


_log = logging.getLogger("flink_agents_py.prompts")
_WARNED: set[tuple[str, tuple[str, ...]]] = set()


def warn_unfilled(setup: str, missing: Sequence[str], given: Mapping[str, Any]) -> None:
    """Log once per setup and names that a prompt's placeholders went to the model unfilled.

    A chat naming a setup whose prompt has ``{product}`` sent the text ``{product}`` to the
    model when the request gave no ``prompt_args`` (or misspelt the name), without a word.

    Args:
        setup: the chat model setup's name.
        missing: the placeholders no value filled.
        given: the values the request gave.
    """
    warn_unfilled_in(f"chat model setup {setup!r}", missing, given,
                     f"Pass them: ctx.chat({setup!r}, messages, prompt_args={{{missing[0]!r}: "
                     f"...}}), or a sub-agent's input field {missing[0]!r}")


def warn_unfilled_in(owner: str, missing: Sequence[str], given: Mapping[str, Any],
                     fix: str) -> None:
    """Log once per ``owner`` and names that its prompt's placeholders went unfilled.

    Args:
        owner: what holds the prompt (``chat model setup 'm'``, ``ReActAgent 'r'``).
        missing: the placeholders no value filled.
        given: the values given.
        fix: how to give them.
    """
    key = (owner, tuple(missing))
    if key in _WARNED or len(_WARNED) > 1000:
        return
    _WARNED.add(key)
    names = ", ".join("{" + n + "}" for n in missing)
    _log.warning("%s: no value for the prompt's placeholder(s) %s (values given: %s); they go "
                 "to the model as written. %s", owner, names, ", ".join(sorted(given)) or "none",
                 fix)


class Prompt(Resource, defer_build=True):
    """A prompt: either one text or a list of messages, each with ``{placeholders}``.

    Attributes:
        template: the text form (becomes one message of role ``role``). A list of messages
            given as ``template`` (Apache Flink Agents' ``LocalPrompt(template=[...])``) is
            the message-list form.
        messages: the message-list form.
        role: the role of the text form's message.
    """

    RESOURCE_TYPE: ClassVar[ResourceType] = ResourceType.PROMPT

    template: str | None = None
    messages: list[ChatMessage] | None = None
    role: MessageRole = MessageRole.SYSTEM

    @model_validator(mode="before")
    @classmethod
    def _messages_as_template(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("template"), (list, tuple)):
            if data.get("messages") is not None:
                raise ValueError("a prompt takes a list of messages as 'template' or as "
                                 "'messages', not both")
            data = {**data, "messages": data["template"], "template": None}
        return data

    @classmethod
    def from_text(cls, text: str, role: MessageRole = MessageRole.SYSTEM) -> Prompt:
        """Build a prompt from one text.

        Args:
            text: the text, with ``{placeholders}``.
            role: the role of its message.

        Returns:
            The prompt.
        """
        return cls(template=text, role=role)

    @classmethod
    def from_messages(cls, messages: Sequence[ChatMessage]) -> Prompt:
        """Build a prompt from a list of messages.

        Args:
            messages: the messages, with ``{placeholders}`` in their contents.

        Returns:
            The prompt.

        Raises:
            UsageError: for one message or one text instead of a list, naming the fix.
        """
        if isinstance(messages, (ChatMessage, str, dict)):
            kind = "one message" if not isinstance(messages, str) else "one text"
            raise UsageError(f"Prompt.from_messages takes a list of messages, got {kind}: "
                             f"pass from_messages([message])"
                             f"{' or Prompt.from_text(text)' if kind == 'one text' else ''}")
        return cls(messages=list(messages))

    def format_string(self, **values: Any) -> str:
        """Return the prompt as one text with placeholders filled.

        Args:
            **values: the values by placeholder name (unused ones are ignored, unfilled
                placeholders stay as they are).

        Returns:
            The text; a message-list prompt's messages one per line as ``role: content``
            (followed by the message's ``extra_args`` when it has some), as Apache Flink
            Agents writes them.
        """
        if self.template is not None:
            return fill_placeholders(self.template, values)
        return "\n".join(
            f"{getattr(m.role, 'value', m.role)}: {fill_placeholders(m.content, values)}"
            + (f"{m.extra_args}" if m.extra_args else "")
            for m in self.messages or [])

    def unfilled(self, values: Mapping[str, Any]) -> list[str]:
        """The placeholders of this prompt that ``values`` does not fill, in order, once each.

        Args:
            values: the values by placeholder name.

        Returns:
            Their names (a format-style template's ``{{name}}`` is literal text, not one).
        """
        texts = [self.template] if self.template is not None else [
            m.content for m in self.messages or []]
        found: dict[str, None] = {}
        for text in texts:
            tokens = list(_BRACES.finditer(text))
            raw = any(len(m.group(0)) == 1 for m in tokens)
            for m in (_PLACEHOLDER.finditer(text) if raw else tokens):
                if m.group(1) is not None and m.group(1) not in values:
                    found[m.group(1)] = None
        return list(found)

    def format_messages(self, role: MessageRole | str | None = None,
                        **values: Any) -> list[ChatMessage]:
        """Return the prompt as messages with placeholders filled.

        Args:
            role: the role of the text form's message for this call (Flink Agents'
                ``format_messages(role=MessageRole.USER, ...)``); default: the prompt's
                ``role``. The message form keeps its messages' roles.
            **values: the values by placeholder name (unused ones are ignored, unfilled
                placeholders stay as they are).

        Returns:
            The messages.
        """
        if self.template is not None:
            return [ChatMessage(role=self.role if role is None else MessageRole(role),
                                content=fill_placeholders(self.template, values))]
        return [
            m.model_copy(update={"content": fill_placeholders(m.content, values)})
            for m in self.messages or []
        ]
