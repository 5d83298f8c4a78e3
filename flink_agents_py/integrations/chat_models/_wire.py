"""Wire rules the hosted-provider adapters share: tool call ids as each provider takes them.

A conversation may carry tool call ids another provider made: the chat action's synthetic
ids for calls that came without one (Ollama's: ``<chat>#<round>.<index>``, with ``/``, ``#``
and ``.``), or a gateway's long ones, when a fallback setup of another provider takes over a
chat, or a history is sent on. Anthropic refuses an id that does not match
``^[a-zA-Z0-9_-]+$``, OpenAI one longer than 40 characters (400 either way, on every call of
the chat). Such an id is sent as a stable stand-in: made from the id alone, so a call and
its result always get the same one; an id the provider takes goes as it is.
"""

from __future__ import annotations

import hashlib
import re

__all__ = ["OPENAI_ID_CHARS", "wire_call_id"]

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
    tag = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    safe = _UNSAFE.sub("_", text)[:max(0, max_chars - len(tag) - 1)]
    return f"{safe or 'call'}_{tag}"[-max_chars:]
