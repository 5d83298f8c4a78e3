"""What a ``tools/call`` returns, as the tool's value for the model, and its errors.

A result's text is a server's: an error's text is clipped as the agent's tool results are
(``runtime``'s ``clip``: masked, then cut around a marker), a result over the server's
``max_result_chars`` is refused, and an answer the SDK refused is named field by field.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import orjson
from pydantic import ValidationError

from ...api import AgentsError, ChatMessage, MessageRole, ResourceError, mask_secrets
from ...api.internal import (
    cut_masked,
    has_known_secret,
    mask_known,
    mask_known_value,
    scrub_exception,
)
from ._session import Connection, wire

if TYPE_CHECKING:
    from ._server import McpServer

__all__ = ["McpToolError", "tool_errors"]


class McpToolError(AgentsError):
    """An MCP tool answered with ``isError`` (the message is the tool's own text)."""


def _short(text: str, limit: int = 2_000) -> str:
    """A server's text for a message: masked, then cut to ``limit`` characters, saying so."""
    text = mask_secrets(text)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}[... {len(text) - limit:,} more characters]"


def _clip(text: str, limit: int | None = None) -> str:
    """``text`` cut as the agent's tool results are (``runtime``'s ``clip``: masked, marked).

    Returns:
        The text, or its start and end around a ``[... N of M characters cut ...]`` marker.
    """
    from ...runtime.internal import clip

    return clip(text) if limit is None else clip(text, limit)


def _not_mcp(error: ValidationError) -> str:
    """What a server's answer the SDK refused got wrong: each field and why (no URLs)."""
    problems = [f"{'.'.join(map(str, e['loc'])) or 'result'}: {e['msg']}"
                f" (got {mask_secrets(str(e.get('input')))[:100]!r})"
                for e in error.errors(include_url=False)[:5]]
    return _clip("; ".join(problems), 1_000)


def _bounded(result: Any, tool: str, server: McpServer, kind: str = "tool") -> Any:
    """``result`` of ``tool``, when its JSON form is at most ``max_result_chars`` long.

    Args:
        result: what the server answered.
        tool: the tool's (or prompt's) name.
        server: the server.
        kind: ``"tool"`` (a ``tools/call``) or ``"prompt"`` (a ``prompts/get``).

    Returns:
        The result.

    Raises:
        McpToolError: naming the tool, the server and the bound, when it is longer (the
            model reads it; the result is not recorded); for a prompt, a ``ResourceError``.
    """
    limit = server.max_result_chars
    if limit is None:
        return result
    size = len(orjson.dumps(wire(result)))
    if size > limit:
        error = McpToolError if kind == "tool" else ResourceError
        raise error(f"MCP {kind} {cut_masked(tool, 100)!r} of {server.where} returned "
                    f"{size:,} characters, more than max_result_chars={limit:,}")
    return result


def _tool_value(result: Any, output_schema: dict[str, Any] | None = None) -> Any:
    """A ``tools/call`` result as the tool's return value for the model.

    - ``structuredContent`` when the server gives it; a tool whose output schema is only
      ``{"result": ...}`` (how FastMCP/MCPServer wrap a tool returning a non-object) gets it
      unwrapped;
    - else, content blocks that are all text: one text that is a JSON object or array is
      parsed (servers return dicts as JSON text), any other text is returned as it is, and
      several texts are joined by newlines;
    - else the blocks as wire dicts (images, resources...).

    Args:
        result: the ``tools/call`` result.
        output_schema: the tool's output schema, if it declares one.

    Returns:
        The tool's value.

    Raises:
        McpToolError: when the result has ``isError`` set (its text is the message).
    """
    data = wire(result)
    blocks = data.get("content") or []
    texts = [b.get("text", "") for b in blocks if b.get("type") == "text"]
    if data.get("isError"):
        raise McpToolError(_error_text(data))
    structured = data.get("structuredContent")
    if structured is not None:
        props = (output_schema or {}).get("properties")
        if (isinstance(structured, dict) and list(structured) == ["result"]
                and isinstance(props, dict) and list(props) == ["result"]):
            return structured["result"]
        return structured
    if len(texts) != len(blocks):
        return blocks
    if len(texts) == 1 and texts[0].lstrip()[:1] in ("{", "["):
        try:
            return orjson.loads(texts[0])
        except orjson.JSONDecodeError:
            pass
    return "\n".join(texts)


def _tool_items(result: Any) -> list[Any]:
    """A ``tools/call`` result as Apache Flink Agents' ``MCPTool.call`` gives it.

    Args:
        result: the ``tools/call`` result.

    Returns:
        One item per content block: a text block's text, any other block as its wire dict.

    Raises:
        McpToolError: when the result has ``isError`` set (its text is the message).
    """
    data = wire(result)
    if data.get("isError"):
        raise McpToolError(_error_text(data))
    return [b.get("text", "") if b.get("type") == "text" else b
            for b in data.get("content") or []]


def _error_text(data: dict[str, Any]) -> str:
    """What an ``isError`` result says, for the model, clipped.

    Its text blocks; else its ``structuredContent`` (a server may put the only error
    payload there, with no content block), else its other blocks (a resource, an image), as
    JSON.

    Returns:
        The text (a fixed sentence when the result says nothing at all).
    """
    blocks = data.get("content") or []
    text = "\n".join(b.get("text", "") for b in blocks if b.get("type") == "text")
    if not text.strip() and data.get("structuredContent") is not None:
        text = orjson.dumps(data["structuredContent"]).decode()
    elif not text.strip() and blocks:
        text = orjson.dumps(blocks).decode()
    return _clip(text) if text.strip() else "the MCP tool failed without saying why"


def _listed_masked(spec: dict[str, Any]) -> dict[str, Any]:
    """A listed tool or prompt with the known secrets masked in all but its name.

    Its description, input schema and arguments go to the model (as a tool's metadata, or
    with a prompt): a server quoting a secret it was given there (``secret_env``,
    ``secret_headers``) must not hand it on, as its tool results and stderr do not. The name
    is how the server is called, kept as it is.

    Returns:
        ``spec`` itself when no secret is known, else a masked copy.
    """
    masked: dict[str, Any] = mask_known_value(spec)
    if masked is not spec:
        masked["name"] = spec.get("name")
    return masked


def _by_name(tools: list[dict[str, Any]], prompts: list[dict[str, Any]], where: str
             ) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """A server's listed tools and prompts by name (masked as ``_listed_masked`` masks them).

    Args:
        tools: every item of its ``tools/list``, all pages.
        prompts: every item of its ``prompts/list``.
        where: the server, as a message names it.

    Returns:
        The tools by name, and the prompts by name.

    Raises:
        ResourceError: naming the server and the name, when two tools (or two prompts)
            share it: keeping either would hand the model's calls to a tool it was not
            told about; or when a name holds a known secret (a server quoting the token it
            was given there: the name goes to the model as it is).
    """
    named: tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]] = ({}, {})
    for kind, items, out in (("tool", tools, named[0]), ("prompt", prompts, named[1])):
        for item in items:
            name = item["name"]
            if has_known_secret(name):  # the name goes to the model as it is: refused
                raise ResourceError(
                    f"MCP server {where} advertises a {kind} whose name holds a secret it "
                    f"was given ({cut_masked(name, 100)!r}): its name would go to the model "
                    "in clear (a description, a schema or a result is masked, a name cannot "
                    "be); rename it on the server")
            if name in out:
                raise ResourceError(
                    f"MCP server {where} advertises two {kind}s named "
                    f"{cut_masked(name, 100)!r} in its "
                    f"{kind}s/list, and a {kind}'s name must be unique on its server: rename "
                    "one of them on the server")
            out[name] = _listed_masked(item)
    return named


def _prompt_messages(result: dict[str, Any]) -> list[ChatMessage]:
    """The messages of a ``prompts/get`` answer, the known secrets in their text masked.

    A server quoting a secret it was given in a prompt would otherwise hand it to the model.
    A block that is not text is its wire JSON.

    Returns:
        The messages (an ``assistant`` message keeps its role, any other is the user's).
    """
    messages = []
    for m in result.get("messages") or []:
        content = m.get("content") or {}
        text = (content.get("text", "") if content.get("type") == "text"
                else orjson.dumps(content).decode())
        role = MessageRole.ASSISTANT if m.get("role") == "assistant" else MessageRole.USER
        messages.append(ChatMessage(role=role, content=mask_known(text)))
    return messages


@contextlib.contextmanager
def tool_errors(tool: str, where: str, conn: Connection, kind: str = "tool") -> Iterator[None]:
    """Name the tool and the server in what a ``tools/call`` raises.

    Args:
        tool: the tool's name (quoted masked: ``cut_masked``).
        where: the server, as messages name it.
        conn: the session the call went through.
        kind: ``"tool"``, or ``"prompt"`` for a ``prompts/get`` (its errors are
            ``ResourceError``s, as a prompt the server lacks is).

    Raises:
        McpToolError: naming the tool and server, when the SDK refused the server's
            answer (what is wrong, clipped) or raised its own error ("Connection closed");
            for a prompt, a ``ResourceError``. The server's text is masked in it and in its
            cause.
        ConnectionError: why the transport ended the session, when it did (``McpServerExited``).
        TimeoutError: as it came (it names the server already).
    """
    named = f"MCP {kind} {cut_masked(tool, 100)!r}"
    error = McpToolError if kind == "tool" else ResourceError
    try:
        yield
    except ValidationError as e:
        raise error(f"{named} of {where} answered with a result that is not MCP: "
                    f"{_not_mcp(e)}") from scrub_exception(e)
    except TimeoutError:
        raise
    except Exception as e:
        conn.raise_failure(f"{named} failed: ")  # the session ended: say why
        if type(e).__name__ not in ("McpError", "MCPError"):  # (the SDK's, 1.x and 2.x)
            raise
        raise error(f"{named} of {where} failed: {_short(str(e))}") from scrub_exception(e)
