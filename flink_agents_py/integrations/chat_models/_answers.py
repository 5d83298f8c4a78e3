"""Reading provider answers: tool call arguments, text with no UTF-8 form."""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any

from ...api import ProviderError, TokenUsage
from ...api.internal import (
    MAX_TOKEN_COUNT,
    UNREADABLE_ARGUMENTS,
    clip,
    cut_masked,
    mask_secrets,
    one_json_object,
    strict_json,
)

__all__ = ["answer_body", "not_finite", "reported_usage", "token_count", "tool_arguments",
           "valid_text"]

logger = logging.getLogger(__name__)


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    name = type(value).__name__
    return f"{'an' if name[:1] in 'aeiou' else 'a'} {name}"


def tool_arguments(raw: Any, index: int, name: Any) -> dict[str, Any]:
    """A provider's tool call arguments as the JSON object they must be.

    No arguments may come as ``""``, ``null`` (JSON text or ``None``): a tool called
    without arguments (its missing required ones are then the call's error, told to the
    model). Arguments encoded twice (a JSON string holding the object's JSON text, as some
    servers' tool parsers send them) are the object. Text holding one JSON object and
    something around it (a model wrapping it in a markdown fence, ```json ... ```, or
    writing a sentence after it) is that object.

    Arguments that are none of these (no JSON, an object cut short, two objects, a list, a
    number, an object holding ``NaN`` or ``Infinity``) do not fail the chat: they are
    ``{UNREADABLE_ARGUMENTS: what was wrong}``, which the tool refuses, telling the model
    why, so it can call it again.

    Args:
        raw: the arguments as the provider sent them: JSON text, or a decoded value.
        index: the call's position in the message.
        name: the tool's name, as the model wrote it.

    Returns:
        The arguments.
    """
    value = raw
    if isinstance(raw, str):
        try:
            value = valid_text(_json_value(raw)) if raw.strip() else None
        except ValueError:
            found = _one_object(raw)
            if found is None:
                return _unreadable(raw, "are not JSON (or hold more than one JSON object)",
                                   index, name)
            value = found
    if isinstance(value, str) and (value.lstrip().startswith("{") or value.strip() == "null"):
        try:  # encoded twice: the JSON text of the object's JSON text
            value = valid_text(_json_value(value))
        except ValueError:
            value = _one_object(value) or value  # a string that is no JSON text: refused below
    elif isinstance(value, str) and "{" in value:
        value = _one_object(value) or value  # a fenced object, encoded as a string
    if value is None:
        return {}
    if not isinstance(value, dict):
        return _unreadable(raw, f"are not a JSON object but {_kind(value)}", index, name)
    if not isinstance(raw, str) and not_finite(value):  # (JSON text: refused when read)
        return _unreadable(raw, "hold NaN or Infinity, which JSON has no form for", index,
                           name)
    return value


def not_finite(value: Any) -> bool:
    """Whether ``value`` holds a float that is ``NaN`` or infinite (walked without recursion).

    The SDKs read a body with Python's ``json`` module, which takes ``NaN`` and
    ``Infinity``: arguments (or an Anthropic structured answer) holding one have no JSON
    form, and failed the chat when its answer was recorded instead of being refused as
    unreadable (or asked again).

    Args:
        value: a decoded JSON value.

    Returns:
        ``True`` when one is found.
    """
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float):
            if not math.isfinite(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return False


def reported_usage(input_tokens: Any, output_tokens: Any,
                   cached_input: int = 0) -> TokenUsage | None:
    """The token usage an answer reports, or ``None`` when it reports none it can count.

    Servers leave usage out (``"usage": null``, no ``usage``, Ollama's counts missing:
    gateways, some OpenAI-compatible and Ollama-compatible servers). Read as 0 and 0, such
    an answer spent nothing, so a budget was never reached; ``None`` has the chat action
    estimate it instead (``runtime._spend.estimated_usage``). A count the answer does give
    is kept, the other as 0.

    A count is read as a number of tokens: a whole number, a number with a fraction
    (rounded up: a gateway averaging, a provider billing part of a token), the text of
    a number (``"12"``). A count that is no number (``NaN``, which Python's ``json``
    reads, ``"abc"``, a list, ``true``) makes the whole usage unknown (``None``, so the
    chat estimates it, and logged): before, such an answer failed the chat after the
    provider had answered (and billed) it, a budget counted nothing, and every retry
    paid again.

    Args:
        input_tokens: the answer's input (prompt) token count (``None``: not given).
        output_tokens: the answer's output (completion) token count (``None``: not given).
        cached_input: input tokens the answer counts apart (Anthropic's prompt cache),
            added to the input count (a count of its own when the input count is not given).

    Returns:
        The usage, or ``None`` when neither count is given, or one cannot be read.
    """
    counts = []
    for name, value in (("input", input_tokens), ("output", output_tokens)):
        try:
            counts.append(token_count(value))
        except ValueError:
            logger.warning("the answer's %s token count %s is no number of tokens: its usage "
                           "is estimated", name, clip(repr(value), 100))
            return None
    if cached_input:
        counts[0] = (counts[0] or 0) + cached_input
    if counts[0] is None and counts[1] is None:
        return None
    return TokenUsage(input_tokens=counts[0] or 0, output_tokens=counts[1] or 0)


def token_count(value: Any) -> int | None:
    """A token count as an answer gives it, as a whole number of tokens.

    Args:
        value: the count (``None``: not given).

    Returns:
        The count (a fraction rounded up; beyond ``MAX_TOKEN_COUNT``, infinite too, that
        bound), or ``None`` when not given.

    Raises:
        ValueError: when it is no number: ``NaN``, a bool, text that is no number, a list.
    """
    if value is None:
        return None
    if isinstance(value, str):
        value = float(value.strip())  # (ValueError when no number)
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or (isinstance(value, float) and math.isnan(value)):
        raise ValueError(f"not a number of tokens: {clip(repr(value), 100)}")
    # a count beyond 2^53 either way (inf too) is that bound: keyed state holds 64 bits
    bounded = max(-MAX_TOKEN_COUNT, min(MAX_TOKEN_COUNT, value))
    return bounded if isinstance(bounded, int) else math.ceil(bounded)


def _unreadable(raw: Any, problem: str, index: int, name: Any) -> dict[str, Any]:
    """The arguments of a call whose arguments could not be read: what was wrong."""
    logger.warning("tool call %d (%r) has arguments that %s", index, cut_masked(str(name), 100),
                   problem)
    return {UNREADABLE_ARGUMENTS: f"{problem}: {cut_masked(str(raw), 300)!r}"}


def _one_object(text: str) -> dict[str, Any] | None:
    """The one JSON object ``text`` holds, with text around it (``api``'s rule)."""
    value = one_json_object(text)
    return None if value is None else dict(valid_text(value))


def _json_value(text: str) -> Any:
    """Decode JSON text (with the standard library's decoder what orjson refuses).

    Returns:
        The value; a string of it may hold a lone surrogate (``valid_text`` replaces it).

    Raises:
        ValueError: when ``text`` is not JSON.
    """
    import orjson

    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return strict_json(text)  # takes an escaped lone surrogate, which orjson refuses


def _valid(text: str) -> str:
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate; a pair split in two becomes its character
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def valid_text(value: Any) -> Any:
    r"""``value`` with every lone surrogate of its strings replaced by U+FFFD, in place.

    A provider's JSON may escape half of a character (``"\ud83d"``: an emoji cut at the
    token limit, a tokenizer's stray piece); decoded, such a string has no UTF-8 form, so
    the answer could not be recorded, nor sent back in the next request. A UTF-8 decoder
    replaces bytes it cannot decode with U+FFFD; so does this, for what the JSON decoder let
    through. Walked without recursion (a tool's input may nest deeply).

    Args:
        value: a decoded JSON value (its dicts and lists are changed in place).

    Returns:
        The value (a string: a new one when it was replaced).
    """
    if isinstance(value, str):
        return _valid(value)
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key in list(item):
                child = item[key]
                if isinstance(key, str) and _valid(key) is not key:
                    del item[key]
                    key = _valid(key)
                if isinstance(child, str):
                    item[key] = _valid(child)
                else:
                    item[key] = child
                    stack.append(child)
        elif isinstance(item, list):
            for i, child in enumerate(item):
                if isinstance(child, str):
                    item[i] = _valid(child)
                else:
                    stack.append(child)
    return value


def answer_body(answer: Any, named: str) -> dict[str, Any]:
    """A provider's answer as its JSON object, whatever the SDK made of the body.

    An SDK hands back the body's text when it is no JSON (a server answering a request for
    one answer with a stream, ``text/event-stream``, or a page that is not of this API):
    that is a ``ProviderError`` naming the provider and quoting the start of the text,
    never a bare ``ValueError`` of ``dict()``.

    Args:
        answer: what the SDK returned (a pydantic model, a mapping, or text).
        named: the call and where it went, for the error (``chat completion (OpenAI...)``).

    Returns:
        The answer's fields.

    Raises:
        ProviderError: (not retryable: the same request gets the same kind of body) when
            the answer is no JSON object.
    """
    if hasattr(answer, "model_dump"):
        dumped: dict[str, Any] = answer.model_dump(warnings=False)  # (unknown blocks: quiet)
        return dumped
    if isinstance(answer, Mapping):
        return dict(answer)
    shown = clip(mask_secrets(str(answer)), 300)
    raise ProviderError(f"unexpected {named} body: not a JSON object but "
                        f"{_kind(answer)} {shown!r} (a streamed answer, text/event-stream, "
                        f"to a request for one answer, or a server of another API at this "
                        f"URL)", retryable=False)
