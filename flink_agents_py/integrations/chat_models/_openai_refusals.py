"""Requests OpenAI-compatible servers refuse, and the form each is sent again in.

- OpenAI's reasoning models (o1, o3, o4-mini, the GPT-5 family) refuse ``max_tokens``
  (``Unsupported parameter: 'max_tokens' ... Use 'max_completion_tokens' instead``) and
  sampling parameters (``Unsupported value: 'temperature' does not support 0.2 with this
  model``; ``top_p``, penalties, ``logprobs``...). For a model named so, ``max_tokens`` goes
  as ``max_completion_tokens`` and those parameters are left out from the first request;
  for any other (an Azure deployment named freely, a gateway's alias), a 400 naming one
  such parameter sends the request again without it, and the connection leaves it out
  for that model from then on (Azure's older API versions word it ``Unrecognized request
  argument supplied: max_completion_tokens``: the limit goes as ``max_tokens`` then).
- DashScope's and ModelScope's Qwen3 models think by default, and refuse to in a request
  that is not streamed (``parameter.enable_thinking must be set to false for non-streaming
  calls``): the request goes again with ``enable_thinking: false``, and so from then on for
  that model.
- An assistant message holding tool calls and no text goes with ``content: null``, as
  OpenAI documents; a server that refuses ``null`` there (Ollama's ``/v1``: ``invalid
  message content type: <nil>``; llama-cpp-python's server, with a 500 quoting its
  validator's ``Input should be a valid string``; older llama.cpp servers; Mistral's
  validator) gets it again with ``""``, and so from then on.
- ``o1-mini`` and ``o1-preview`` refuse ``system`` messages (``Unsupported value:
  'messages[0].role' does not support 'system' with this model``): a model named so gets
  them as ``user`` messages from the first request; any other model (an Azure deployment
  of one, a gateway's alias) whose 400 says so gets the request again that way, and so from
  then on. (Later reasoning models take ``system``: OpenAI reads it as ``developer``.)
- Mistral takes tool call ids of exactly 9 letters and digits only (``Tool call id was ...
  but must be a-z, A-Z, 0-9, with a length of 9``; its API and vLLM serving its models with
  ``mistral_common``), where OpenAI's are ``call_...``: a connection to ``api.mistral.ai``
  sends every id as a 9-character stand-in from the first request (``_wire.nine_char_id``:
  made from the id alone, so a call and its result keep one stand-in); a server whose 400
  says so gets the request again that way, and so from then on for the model.
- Qwen's chat templates (Qwen2.5 on, through vLLM, llama.cpp's ``--jinja``, LM Studio)
  take one ``system`` message, the first, and refuse any other (``System message must be
  at the beginning.``: vllm #41114, llama.cpp #20733 and #27367, a 400 or a 500): a setup's
  prompt beside a system message of the chat's own, or one in the middle of a conversation,
  failed every call. The request goes again with its system messages joined, in order,
  into one at the start (as Anthropic's ``system`` takes them), and so from then on.
- Gemini's OpenAI-compatible API wants the tool's ``name`` on each ``tool`` message, which
  OpenAI documents no such field for (``function_response.name: Name cannot be empty``:
  NousResearch/hermes-agent #19728, vectorize-io/hindsight #187, ollama #14214): every tool
  round failed. A connection to ``*.googleapis.com`` names them from the first request;
  another server whose 400 says so gets the request again that way, and so from then on.
"""

from __future__ import annotations

import re
from typing import Any

from ._wire import nine_char_id

__all__ = ["REASONING_UNSUPPORTED", "call_ids_refused", "calls_content_refused",
           "is_reasoning_model", "refused_option", "refuses_system", "system_refused",
           "thinking_refused", "with_empty_calls_content", "with_nine_char_ids",
           "with_system_as_user", "without_options", "later_systems_refused",
           "with_one_system", "tool_names_refused", "with_tool_names"]

_NO_SYSTEM = re.compile(r"^(?:[\w.-]+/)?o1-(?:mini|preview)(?:$|[-.:_@])", re.IGNORECASE)
_SYSTEM_REFUSED = re.compile(r"role\W*\s*does not support '(?:system|developer)'"
                             r"|'?(?:system|developer)'? (?:role|messages?) (?:is|are) not "
                             r"supported", re.IGNORECASE)
_LATER_SYSTEMS_REFUSED = re.compile(r"system message (?:must|should) be at the beginning"
                                   r"|system message must be (?:the )?first", re.IGNORECASE)
_NAMES_WANTED = re.compile(r"function_response\.name|tool message must have a .?name",
                           re.IGNORECASE)
_IDS_REFUSED = re.compile(r"tool call id\b.*\blength of 9|tool call id\b.*\bof length 9",
                          re.IGNORECASE | re.DOTALL)
_REASONING = re.compile(r"^(?:[\w.-]+/)?(?:o[1-9]|gpt-5)(?:$|[-.:_@])", re.IGNORECASE)

REASONING_UNSUPPORTED = ("temperature", "top_p", "presence_penalty", "frequency_penalty",
                         "logprobs", "top_logprobs", "logit_bias")
"""The parameters OpenAI's reasoning models refuse (besides ``max_tokens``)."""

_KEPT = frozenset({"model", "messages", "tools", "response_format", "extra_body",
                   "extra_headers", "extra_query"})
"""Fields never left out on a refusal: without them the request would mean another thing."""

_NAMED = re.compile(r"unsupported (?:parameter|value)s?:?\s*'([A-Za-z_][\w.]*)'"
                    r"|unrecognized request argument supplied:\s*'?([A-Za-z_]\w*)",
                    re.IGNORECASE)
_NULL_REFUSED = re.compile(r"content\b.*\b(?:null|nil|none|string|empty|missing|required)\b"
                           r"|\b(?:null|nil|none)\b.*\bcontent\b", re.IGNORECASE | re.DOTALL)


def is_reasoning_model(model: str) -> bool:
    """Whether ``model`` names one of OpenAI's reasoning models (``o3-mini``, ``gpt-5.1``...).

    Args:
        model: the model the request names (a gateway's ``openai/o3`` counts too).

    Returns:
        Whether the request should take that family's parameters.
    """
    return bool(_REASONING.match(model.strip()))


def _error_text(error: Any) -> str:
    return f"{getattr(error, 'message', '')} {getattr(error, 'body', '')}"


def refused_option(error: Any, request: dict[str, Any]) -> str | None:
    """The request's option a 400 refuses as unsupported by the model, if that is what it is.

    Read from the error's ``param`` (with ``code`` ``unsupported_parameter`` or
    ``unsupported_value``), else from the message (``Unsupported parameter: 'top_p'``).

    Args:
        error: the SDK's ``APIStatusError``.
        request: the request's fields.

    Returns:
        The option's name, when the request holds it and it may be left out (``None``: the
        refusal is of something else).
    """
    if getattr(error, "status_code", None) not in (400, 422):
        return None
    param, code = getattr(error, "param", None), str(getattr(error, "code", "") or "")
    name = param if isinstance(param, str) and code.startswith("unsupported") else None
    if name is None:
        found = _NAMED.search(_error_text(error))
        name = (found.group(1) or found.group(2)) if found else None
    if name is None or name in _KEPT or name not in request:
        return None
    return name


_TOKEN_LIMITS = {"max_tokens": "max_completion_tokens", "max_completion_tokens": "max_tokens"}


def without_options(request: dict[str, Any], names: set[str]) -> list[str]:
    """Leave ``names`` out of ``request``; a token limit goes under its other name.

    ``max_tokens`` goes as ``max_completion_tokens`` and the other way round (a server
    refusing ``max_completion_tokens``: Azure's older API versions, ``Unrecognized request
    argument supplied``), unless both are refused.

    Args:
        request: the request's fields (changed in place).
        names: the options the model refuses.

    Returns:
        The options left out (a renamed ``max_tokens`` is not one), in the request's order.
    """
    dropped = []
    for name in [n for n in request if n in names]:
        value = request.pop(name)
        other = _TOKEN_LIMITS.get(name)
        if other is not None and other not in names:  # the limit under its other name
            request.setdefault(other, value)
        else:
            dropped.append(name)
    return dropped


_THINKING_REFUSED = re.compile(r"enable_thinking must be set to false|enable thinking can not "
                               r"be support", re.IGNORECASE)


def thinking_refused(error: Any, request: dict[str, Any]) -> bool:
    """Whether a 400 says the model thinks only in streamed requests (Qwen3 on DashScope).

    Args:
        error: the SDK's ``APIStatusError``.
        request: the request's fields.

    Returns:
        Whether the request may go again with ``enable_thinking: false``.
    """
    return (getattr(error, "status_code", None) in (400, 422)
            and request.get("enable_thinking") is not False
            and bool(_THINKING_REFUSED.search(_error_text(error))))


def calls_content_refused(error: Any, request: dict[str, Any]) -> bool:
    """Whether a 400 refuses the ``null`` content of a tool-calls-only assistant message.

    Args:
        error: the SDK's ``APIStatusError``.
        request: the request's fields.

    Returns:
        Whether the request holds such a message and the error is about a message's content.
    """
    if getattr(error, "status_code", None) not in (400, 422, 500):  # llama-cpp-python: 500
        return False
    if not any(m.get("content") is None and m.get("tool_calls")
               for m in request.get("messages") or ()):
        return False
    text = _error_text(error)
    return "content_filter" not in text and bool(_NULL_REFUSED.search(text))


def with_empty_calls_content(request: dict[str, Any]) -> None:
    """Give every tool-calls-only assistant message of ``request`` ``content: ""`` (in place).

    Args:
        request: the request's fields.
    """
    request["messages"] = [{**m, "content": ""} if m.get("content") is None
                           and m.get("tool_calls") else m for m in request["messages"]]


def refuses_system(model: str) -> bool:
    """Whether ``model`` names one of OpenAI's models refusing ``system`` messages.

    Args:
        model: the model the request names (``o1-mini``, ``o1-preview-2024-09-12``...).

    Returns:
        Whether its system messages should go as ``user`` messages from the first request.
    """
    return bool(_NO_SYSTEM.match(model.strip()))


def system_refused(error: Any, request: dict[str, Any]) -> bool:
    """Whether a 400 refuses the role of the request's ``system`` (or ``developer``) messages.

    Args:
        error: the SDK's ``APIStatusError``.
        request: the request's fields.

    Returns:
        Whether the request holds such a message and the error says its role is refused.
    """
    if getattr(error, "status_code", None) not in (400, 422):
        return False
    if not any(m.get("role") in ("system", "developer") for m in request.get("messages") or ()):
        return False
    return bool(_SYSTEM_REFUSED.search(_error_text(error)))


def with_system_as_user(request: dict[str, Any]) -> None:
    """Send every ``system`` (and ``developer``) message of ``request`` as a ``user`` one.

    Args:
        request: the request's fields (changed in place).
    """
    request["messages"] = [{**m, "role": "user"} if m.get("role") in ("system", "developer")
                           else m for m in request["messages"]]


def later_systems_refused(error: Any, request: dict[str, Any]) -> bool:
    """Whether a chat template refuses the request's system messages after the first.

    Args:
        error: the SDK's ``APIStatusError``.
        request: the request's fields.

    Returns:
        Whether the request holds a system message past the first place, or two, and the
        error says only one at the beginning is taken.
    """
    if getattr(error, "status_code", None) not in (400, 422, 500):
        return False
    roles = [m.get("role") for m in request.get("messages") or ()]
    if "system" not in roles[1:]:
        return False
    return bool(_LATER_SYSTEMS_REFUSED.search(_error_text(error)))


def with_one_system(request: dict[str, Any]) -> None:
    """Join the request's ``system`` messages, in order, into one at the start, in place.

    Args:
        request: the request's fields (changed in place).
    """
    messages = request["messages"]
    texts = [str(m.get("content") or "") for m in messages if m.get("role") == "system"]
    if len(texts) < 2 and (not messages or messages[0].get("role") == "system"):
        return
    rest = [m for m in messages if m.get("role") != "system"]
    joined = "\n\n".join(t for t in texts if t.strip())
    request["messages"] = [{"role": "system", "content": joined}, *rest]


def tool_names_refused(error: Any, request: dict[str, Any]) -> bool:
    """Whether a 400 wants the tool's name on the request's ``tool`` messages (Gemini).

    Args:
        error: the SDK's ``APIStatusError``.
        request: the request's fields.

    Returns:
        Whether the request holds a ``tool`` message without ``name`` and the error asks for
        one.
    """
    if getattr(error, "status_code", None) not in (400, 422):
        return False
    if all(m.get("name") for m in request.get("messages") or () if m.get("role") == "tool"):
        return False
    return bool(_NAMES_WANTED.search(_error_text(error)))


def with_tool_names(request: dict[str, Any]) -> None:
    """Name each ``tool`` message of ``request`` by the call it answers, in place.

    The name is the one the assistant's call has in the request (a stand-in, when the tool
    goes under one); a result whose call is not in the request keeps no name.

    Args:
        request: the request's fields (changed in place).
    """
    called: dict[Any, str] = {}
    out = []
    for m in request["messages"]:
        for c in m.get("tool_calls") or ():
            called[c.get("id")] = (c.get("function") or {}).get("name") or ""
        if m.get("role") == "tool" and not m.get("name") and called.get(m.get("tool_call_id")):
            m = {**m, "name": called[m.get("tool_call_id")]}
        out.append(m)
    request["messages"] = out


def call_ids_refused(error: Any, request: dict[str, Any]) -> bool:
    """Whether a 400 refuses the request's tool call ids for not being 9 letters and digits.

    Args:
        error: the SDK's ``APIStatusError``.
        request: the request's fields.

    Returns:
        Whether the request holds a tool call id of another form and the error names
        Mistral's rule.
    """
    if getattr(error, "status_code", None) not in (400, 422):
        return False
    ids = [i for m in request.get("messages") or ()
           for i in [m.get("tool_call_id"), *(c.get("id") for c in m.get("tool_calls") or ())]
           if i is not None]
    if all(nine_char_id(i) == i for i in ids):  # none, or all of Mistral's form already
        return False
    return bool(_IDS_REFUSED.search(_error_text(error)))


def with_nine_char_ids(request: dict[str, Any]) -> None:
    """Send every tool call id of ``request`` as 9 letters and digits (in place).

    Args:
        request: the request's fields (changed in place).
    """
    out = []
    for m in request["messages"]:
        m = dict(m)
        if m.get("tool_calls"):
            m["tool_calls"] = [{**c, "id": nine_char_id(c.get("id"))} for c in m["tool_calls"]]
        if m.get("tool_call_id") is not None:
            m["tool_call_id"] = nine_char_id(m["tool_call_id"])
        out.append(m)
    request["messages"] = out
