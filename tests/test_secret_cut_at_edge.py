"""A known secret standing across the point where a message cuts what it quotes is masked.

Messages quote hostile text cut to a length: an MCP server's cursor, a model's answer, an
event's class tag from outside, a key, a call's result in a batch outcome's repr. Each is
masked again where it leaves (an error's text, a trace, a log line), but a secret cut in
two at the quote's end is no longer one the mask recognises, and its first part left with
the message. Each is now masked before it is cut (``api.internal.cut_masked``).
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from flink_agents_py.api import EventChainLimitError, ResourceError, register_secret
from flink_agents_py.api._batch_calls import Outcome
from flink_agents_py.api.internal import cut_masked, event_from_json
from flink_agents_py.integrations.mcp._session import list_all
from flink_agents_py.runtime._chat_steps import quote


@pytest.fixture()
def secret() -> str:
    """A registered secret, unique to the test (the registry is reset per module)."""
    value = f"Edge{uuid.uuid4().hex}"  # no pattern of a provider's key shape: known only
    register_secret(value)
    return value


def straddling(secret: str, limit: int) -> str:
    """Text whose cut at ``limit`` characters falls 12 characters into ``secret``."""
    filler = ("a word " * limit)[:limit - 13] + " "  # (no long run a pattern masks)
    return filler + secret + " and after"


def assert_no_part(secret: str, text: str) -> None:
    assert secret[:10] not in text, text  # what a cut before the mask would leave


def test_cut_masked_keeps_short_text_and_masks_long_text_before_its_cut(secret):
    assert cut_masked("short", 10) == "short"
    assert cut_masked(f"a {secret}", 100) == f"a {secret}"  # uncut: masked where it leaves
    cut = cut_masked(straddling(secret, 80), 80)
    assert len(cut) <= 80
    assert_no_part(secret, cut)


class _Pages:
    """An MCP session whose ``tools/list`` gives the same cursor on every page."""

    def __init__(self, cursor: str) -> None:
        self.cursor = cursor

    async def list_tools(self, **_: Any) -> dict[str, Any]:
        return {"tools": [], "nextCursor": self.cursor}


def test_an_mcp_servers_repeated_cursor_is_quoted_masked(secret):
    with pytest.raises(ResourceError) as raised:
        asyncio.run(list_all(_Pages(straddling(secret, 80)), "list_tools", "tools", "'srv'"))
    assert "gave the cursor" in str(raised.value)
    assert_no_part(secret, str(raised.value))


def test_a_models_invalid_answer_is_quoted_masked(secret):
    text = quote([{"answer": straddling(secret, 500), "problem": "not the schema"}])
    assert "not the schema" in text
    assert_no_part(secret, text)


def test_an_events_class_tag_from_outside_is_quoted_masked(secret):
    with pytest.raises(ValueError, match="names no Event subclass") as raised:
        event_from_json({"$class": straddling(secret, 200), "type": "x"})
    assert_no_part(secret, str(raised.value))


def test_a_batch_outcomes_repr_and_a_keys_quote_are_masked(secret):
    assert_no_part(secret, repr(Outcome.success(straddling(secret, 200))))
    error = EventChainLimitError("run/a/e1/b", key=straddling(secret, 80))
    assert "for key" in str(error)
    assert_no_part(secret, str(error))


def test_an_unreadable_inputs_shown_repr_is_masked(secret):
    """An input with no JSON form goes to the error output as its repr, cut to a length."""
    from flink_agents_py.runtime.core._results import SHOWN_INPUT_CHARS, shown_input

    class Opaque:
        def __repr__(self) -> str:
            return straddling(secret, SHOWN_INPUT_CHARS)

    shown = shown_input(Opaque())
    assert shown.endswith(" chars)")
    assert_no_part(secret, shown)
