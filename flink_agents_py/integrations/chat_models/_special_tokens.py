r"""Text that would become a control token of a local model, written so that it does not.

llama-cpp-python renders a conversation with the model's chat template and tokenizes the
prompt with its special tokens parsed (``special=True``): ``<|im_end|>`` written in a
message's text became the token that ends a turn, so a record, a tool's result or an MCP
server's tool description holding ``<|im_end|>\n<|im_start|>system\n...`` opened a system
turn of its own, and ``<tool_call>`` a call the model seemed to make. Each such text in what
the connection did not write itself (the contents of every message but the model's own,
and the tools' descriptions) gets a word joiner (U+2060) after its first character: the
model reads the same characters, tokenized as text.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["control_pattern", "defuse_request"]

_JOINER = "\u2060"


def control_pattern(llama: Any) -> re.Pattern[str] | None:
    """A regex of the texts the vocabulary of ``llama`` parses as control tokens.

    Control and user-defined tokens (the chat template's markers, ``<tool_call>``, ``</s>``)
    of at least two characters, longest first.

    Args:
        llama: a loaded ``llama_cpp.Llama``.

    Returns:
        The pattern (``None``: the vocabulary has none, or cannot be read).
    """
    try:
        import llama_cpp

        vocab = llama._model.vocab
        wanted = llama_cpp.LLAMA_TOKEN_ATTR_CONTROL | llama_cpp.LLAMA_TOKEN_ATTR_USER_DEFINED
        get_attr, text_of = llama_cpp.llama_vocab_get_attr, llama_cpp.llama_vocab_get_text
        texts = set()
        for token in range(llama.n_vocab()):
            if get_attr(vocab, token) & wanted:
                raw = text_of(vocab, token)
                text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
                if len(text) >= 2:
                    texts.add(text)
    except (ImportError, AttributeError):  # another llama-cpp-python: nothing to read
        return None
    if not texts:
        return None
    return re.compile("|".join(re.escape(t) for t in sorted(texts, key=len, reverse=True)))


def _defused(text: str, pattern: re.Pattern[str]) -> str:
    return pattern.sub(lambda m: m.group()[0] + _JOINER + m.group()[1:], text)


def defuse_request(kwargs: dict[str, Any], pattern: re.Pattern[str] | None) -> None:
    """Write the control tokens' texts in ``kwargs`` so that they stay text (in place).

    The contents of its messages (but the assistant's: the model's own turns) and its tools'
    descriptions.

    Args:
        kwargs: the ``create_chat_completion`` arguments (``messages`` of OpenAI's form).
        pattern: ``control_pattern`` of the model (``None``: nothing is changed).
    """
    if pattern is None:
        return
    for m in kwargs.get("messages") or ():
        content = m.get("content")
        if (
            m.get("role") != "assistant"
            and isinstance(content, str)
            and pattern.search(content) is not None
        ):
            m["content"] = _defused(content, pattern)
    for t in kwargs.get("tools") or ():
        function = t.get("function") or {}
        description = function.get("description")
        if isinstance(description, str) and pattern.search(description) is not None:
            function["description"] = _defused(description, pattern)
