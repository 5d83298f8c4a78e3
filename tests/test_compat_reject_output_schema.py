"""``_reject_unsupported_output_schema``: Flink Agents' scripted connections call it first."""

from __future__ import annotations

from typing import Any

import pytest

from flink_agents_py.compat import BaseChatModelConnection, ChatMessage, MessageRole


class _Echo(BaseChatModelConnection):
    def chat(self, messages: Any, tools: list | None = None, output_schema: Any = None,
             **kwargs: Any) -> ChatMessage:
        self._reject_unsupported_output_schema(output_schema)
        return ChatMessage.of(MessageRole.ASSISTANT, "ok")


def test_no_schema_passes_and_a_schema_names_the_connection() -> None:
    """Without a schema the chat goes on; with one the error names the class."""
    conn = _Echo()
    assert conn.chat([]).content == "ok"
    with pytest.raises(NotImplementedError, match=r"_Echo has no native structured output"):
        conn.chat([], output_schema={"type": "object"})
