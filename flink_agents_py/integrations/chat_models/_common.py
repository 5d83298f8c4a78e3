"""What the provider adapters share: optional SDK imports, per-loop clients, error mapping."""

from __future__ import annotations

import asyncio
import copy
import datetime
import email.utils
import importlib
import inspect
import ipaddress
import math
import os
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ...api import (
    ChatMessage,
    ChatResponse,
    FlowControl,
    MissingApiKeyError,
    ProviderError,
    RateLimitInfo,
    mask_secrets,
    secret_from_env,
)
from ...api.internal import (
    close_loop_clients,
    register_header_secret,
    register_loop_owner,
    scrub_exception,
)

__all__ = ["HTTP_FLOW_CONTROL", "answer_error", "import_sdk", "FreshOnUnpickle", "LoopBoundClient",
           "LoopBoundSdkConnection",
           "header_number", "header_retry_after", "header_values", "is_local_url", "provider_error",
           "server_now",
           "not_found_hint", "require_api_key", "retry_after_s", "retryable_status", "run_sync",
           "secret_env_values", "url_path", "with_extra_body"]

_RETRYABLE_STATUS = frozenset({408, 429})

HTTP_FLOW_CONTROL = FlowControl(initial_concurrency=8)
"""The flow control of connections to rate-limited HTTP providers (OpenAI, Anthropic): a
slow start from 8 calls in flight (doubling per round trip), so a burst of queued calls
does not all meet a limit at once."""


def import_sdk(module: str, extra: str, what: str) -> Any:
    """Import a provider SDK installed by an optional extra.

    Args:
        module: the SDK's module (``openai``, ``ollama``, ``anthropic``, ``mcp``).
        extra: the extra of this package that installs it.
        what: the feature that needs it, for the message.

    Returns:
        The imported module.

    Raises:
        ImportError: naming the extra to install (``pip install 'flink-agents-py[<extra>]'``).
    """
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ImportError(
            f"{what} needs the {module!r} package, which is not installed: "
            f"pip install 'flink-agents-py[{extra}]'"
        ) from scrub_exception(e)


def is_local_url(url: str | None) -> bool:
    """Whether ``url`` points at this machine or a private network.

    ``localhost``, loopback, private and link-local addresses, and single-label host names
    (a container's service name, ``http://vllm:8000``) count as local: servers there are
    usually run without keys (llama.cpp, vLLM, Ollama).

    Args:
        url: the server's URL, or ``None``.

    Returns:
        Whether the server counts as local.
    """
    if not url:
        return False
    try:
        host = urlsplit(url if "//" in url else f"//{url}").hostname or ""
    except ValueError:
        return False
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return bool(host) and "." not in host
    return ip.is_loopback or ip.is_private or ip.is_link_local


def require_api_key(connection: Any, env_var: str, provider: str, hint: str = "") -> str:
    """The API key in ``$env_var``, registered as a secret (masked wherever text leaves).

    Args:
        connection: the connection resource (its registered name goes into the message).
        env_var: the environment variable that holds the key.
        provider: the provider's name, for the message.
        hint: a sentence appended to the message (e.g. how to go without a key).

    Returns:
        The key.

    Raises:
        MissingApiKeyError: when the variable is unset or empty.
    """
    key = secret_from_env(env_var)
    if key:
        return key
    name = getattr(connection, "resource_name", "") or ""
    which = f"{type(connection).__name__} resource {name!r}" if name else type(connection).__name__
    raise MissingApiKeyError(
        f"{which} needs an API key ({provider}), but the environment variable ${env_var} is not "
        f"set (or is empty): set it where the operator runs (on every Flink worker), or set "
        f"api_key_env to the variable that holds the key{hint}",
        env_var=env_var, resource=name)


def secret_env_values(owner: Any, names: Mapping[str, str] | None, what: str) -> dict[str, str]:
    """Secrets taken from environment variables, each registered (``api.register_secret``).

    Used for the headers a connection marks secret (``secret_headers``) and an MCP server's
    secret environment entries (``secret_env``): the plan holds the variables' names only.

    Args:
        owner: the resource (its class and registered name go into the message).
        names: ``{name: environment variable}`` (a header, a server's variable...).
        what: what a name is, for the message (``"header"``).

    Returns:
        ``{name: value}``.

    Raises:
        MissingApiKeyError: naming the variable, the entry and the resource, when a variable
            is unset or empty.
    """
    out: dict[str, str] = {}
    for name, env_var in (names or {}).items():
        value = os.environ.get(env_var) or None
        register_header_secret(value, f"${env_var}")
        if value is None:
            resource = getattr(owner, "resource_name", "") or ""
            which = (f"{type(owner).__name__} resource {resource!r}" if resource
                     else type(owner).__name__)
            raise MissingApiKeyError(
                f"{which} takes its {what} {name!r} from the environment variable ${env_var}, "
                "which is not set (or is empty): set it where the operator runs (on every "
                "Flink worker)", env_var=env_var, resource=resource)
        out[name] = value
    return out


def not_found_hint(status: int | None, url: Any, advice: str = "") -> str:
    """What to add to a 404's message: where the request went, and what may be wrong.

    A base URL of the wrong depth is the usual 404 (an OpenAI-compatible server's without
    ``/v1``; Anthropic's or Ollama's with a path their clients add themselves).

    Args:
        status: the answer's HTTP status (nothing is added unless it is 404).
        url: the URL the request went to (``None``: unknown).
        advice: what the adapter makes of the URL (``""``: nothing).

    Returns:
        The text to append (``""``: none).
    """
    if status != 404 or url is None:
        return ""
    return f" (POST {url}{'; ' + advice if advice else ''})"


def unanswered_hint(error: BaseException, url: Any = None) -> str:
    """Where a request that got no answer (refused, timed out) went: `` (POST <url>)``.

    Before, such a chat failed with the SDK's words alone ("APIConnectionError: Connection
    error."), which name no server: the reader could not tell which base URL was wrong.

    Args:
        error: the SDK's or httpx's error (its ``request.url``, when it has one).
        url: the URL to name when the error holds none (the connection's base URL).

    Returns:
        The text to append (``""``: no URL known).
    """
    try:
        url = error.request.url  # type: ignore[attr-defined]  # (httpx raises when unset)
    except Exception:  # noqa: BLE001, S110 - no request on the error: keep the given URL
        pass
    return f" (POST {url})" if url else ""


def url_path(url: Any) -> str:
    """The path of ``url`` (``""`` for none, or a URL that cannot be read)."""
    try:
        return urlsplit(str(url or "")).path
    except ValueError:
        return ""


def retryable_status(status: int | None) -> bool:
    """Whether an HTTP status is worth retrying: 408, 429 and every 5xx (no other 4xx)."""
    return status is not None and (status in _RETRYABLE_STATUS or status >= 500)


class LoopBoundClient:
    """One SDK client per running event loop.

    Async SDK clients hold connection pools bound to the loop that first used them; a
    connection may be used from more than one loop (the I/O executor's, a test's
    ``asyncio.run``), so each loop gets its own client, dropped with its loop.
    """

    def __init__(self, factory: Callable[[], Any]) -> None:
        self._factory = factory
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = (
            weakref.WeakKeyDictionary())
        self._lock = threading.Lock()
        register_loop_owner(self)

    def get(self) -> Any:
        """The client of the running loop (created on first use)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            client = self._clients.get(loop)
            if client is None:
                client = self._clients[loop] = self._factory()
            return client

    def clear(self) -> None:
        """Forget every client (a loop's host closes its client first, ``aclose_loop``)."""
        with self._lock:
            self._clients = weakref.WeakKeyDictionary()

    async def aclose_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        """Close and forget the client of ``loop`` (awaited on it, before it closes)."""
        with self._lock:
            client = self._clients.pop(loop, None)
        if client is None:
            return
        close = getattr(client, "close", None) or getattr(client, "aclose", None)
        if close is not None:
            done = close()
            if inspect.isawaitable(done):
                await done


class LoopBoundSdkConnection:
    """Mixin for chat model connections that talk through an async SDK client.

    Clients are made on first use, one per event loop (``LoopBoundClient``), by what the
    class's ``_client_factory`` returns (it imports the SDK and checks the configuration);
    ``close`` drops them and ``chat`` is the blocking form of the class's ``achat``.

    The class declares ``_clients: LoopBoundClient | None = PrivateAttr(default=None)``: a
    pydantic private attribute, which a plain mixin cannot declare for it.
    """

    if TYPE_CHECKING:
        _clients: LoopBoundClient | None

    def _client_factory(self) -> Callable[[], Any]:
        """Return what makes one SDK client; called once, when the first client is needed.

        Raises:
            NotImplementedError: always here; each provider connection implements it.
        """
        raise NotImplementedError(f"{type(self).__name__} does not implement _client_factory")

    def _client(self) -> Any:
        if self._clients is None:
            self._clients = LoopBoundClient(self._client_factory())
        return self._clients.get()

    def close(self) -> None:
        """Drop the clients."""
        if self._clients is not None:
            self._clients.clear()

    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        """Blocking form of ``achat`` (not from inside a running event loop)."""
        return run_sync(self.achat(messages, **kwargs))  # type: ignore[attr-defined]


def run_sync(coro: Any) -> Any:
    """Run ``coro`` to completion from synchronous code (no loop may be running here).

    Args:
        coro: the coroutine.

    Returns:
        What the coroutine returned.

    Raises:
        RuntimeError: when called from inside a running event loop (use ``achat`` there).
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_then_close_clients(coro))
    coro.close()
    raise RuntimeError("chat() was called inside a running event loop; await achat() instead")


async def _then_close_clients(coro: Any) -> Any:
    try:
        return await coro
    finally:
        await close_loop_clients()  # the loop closes with asyncio.run: its clients first


def provider_error(message: str, status: int | None, cause: BaseException | None = None,
                   rate_limit: RateLimitInfo | None = None,
                   answered: bool = False, quota_exhausted: bool = False) -> ProviderError:
    """A ``ProviderError`` whose ``retryable`` follows the HTTP status.

    Args:
        message: the error's message.
        status: the HTTP status; ``None`` for timeouts and connection failures (retryable).
        cause: unused; the caller raises the error ``from`` its cause.
        rate_limit: what the answer's headers said about the provider's limits.
        answered: whether the provider answered (then no status is no timeout: not
            retryable).
        quota_exhausted: a 429 saying the account's quota is used up (not retryable).

    Returns:
        The error, to raise.
    """
    return ProviderError(message, status_code=status,
                         retryable=(status is None and not answered) or retryable_status(status),
                         rate_limit=None if rate_limit is None or rate_limit.is_empty()
                         else rate_limit, quota_exhausted=quota_exhausted)


_ERROR_TYPES = {"rate_limit_error": 429, "rate_limit_exceeded": 429, "overloaded_error": 529,
                "api_error": 500, "server_error": 500, "timeout_error": 504,
                "invalid_request_error": 400, "authentication_error": 401,
                "permission_error": 403, "not_found_error": 404, "request_too_large": 413}
"""The HTTP status an error body's ``type`` (or textual ``code``) stands for (Anthropic's and
OpenAI's error types)."""


def answer_error(body: Any, what: str,
                 rate_limit: RateLimitInfo | None = None) -> ProviderError | None:
    """The error a provider put in the body of a successful (200) answer, if it did.

    Gateways and compatible servers (OpenRouter, LiteLLM proxies, a load balancer in front
    of vLLM) answer 200 with ``{"error": {"message", "code", "type"}}`` (Anthropic's form:
    ``{"type": "error", "error": {...}}``; vLLM's: ``{"object": "error", "message", "code"}``)
    when the model failed after the answer began. Its status is the error's numeric
    ``code`` (a 4xx or 5xx), else what its ``type`` stands for (``rate_limit_error``: 429,
    ``overloaded_error``: 529...); one naming neither has no status and is not retried.

    Args:
        body: the answer's body, decoded.
        what: what failed, for the message (``"chat completion failed"``).
        rate_limit: what the answer's headers said about the provider's limits.

    Returns:
        The error, to raise (``None``: the body holds no error).
    """
    if not isinstance(body, dict):
        return None
    error = body.get("error")
    if not error and body.get("type") != "error" and body.get("object") != "error":
        return None
    detail = error if isinstance(error, dict) else {"message": error}
    status: int | None = None
    for code in (detail.get("code"), body.get("code"), detail.get("status")):
        text = str(code).strip() if isinstance(code, (int, str)) else ""
        if text.isdigit() and 400 <= int(text) <= 599:
            status = int(text)
            break
    if status is None:
        for kind in (detail.get("type"), detail.get("code")):
            if isinstance(kind, str) and kind in _ERROR_TYPES:
                status = _ERROR_TYPES[kind]
                break
    message = detail.get("message") or body.get("message") or detail.get("type") or error
    return provider_error(f"{what}: the provider answered with an error: "
                          f"{mask_secrets(str(message))[:500]}",
                          status, rate_limit=rate_limit, answered=True)


def retry_after_s(value: str | None, now: float | None = None) -> float | None:
    """Read an HTTP ``Retry-After`` value: delay seconds, or an HTTP date (RFC 9110).

    A header sent twice (a gateway adding its own) reaches us joined, ``"5, 7"`` or two
    dates: the longest wait of the values read is taken.

    Args:
        value: the header's value (``None``: absent).
        now: the current time as a Unix timestamp (taken when not given).

    Returns:
        The seconds to wait (0 for a date in the past), or ``None`` when absent or unreadable.
    """
    if value is None or not value.strip():
        return None
    if "," not in value:
        return _one_retry_after(value.strip(), now)
    pieces, found, i = value.split(","), [], 0
    while i < len(pieces):  # an HTTP date has a comma of its own: "Sun, 06 Nov 1994 ..."
        one = _one_retry_after(pieces[i].strip(), now)
        if one is None and i + 1 < len(pieces):
            one = _one_retry_after(f"{pieces[i]},{pieces[i + 1]}".strip(), now)
            i += one is not None
        if one is not None:
            found.append(one)
        i += 1
    return max(found) if found else None


def _one_retry_after(text: str, now: float | None) -> float | None:
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=datetime.timezone.utc)
        seconds = when.timestamp() - (time.time() if now is None else now)
    if not math.isfinite(seconds):  # NaN, infinities
        return None
    return max(0.0, seconds)


def header_values(value: Any) -> list[str]:
    """A header's values: one, or those of a header sent more than once, joined by commas.

    Args:
        value: the header's value (``None``: absent).

    Returns:
        The values, stripped, empty ones left out.
    """
    return [] if value is None else [v.strip() for v in str(value).split(",") if v.strip()]


def header_number(headers: Any, name: str,
                  pick: Callable[[list[float]], float] = min) -> float | None:
    """A numeric header's value (``None`` when absent, not a number, NaN or infinite).

    Args:
        headers: the response's headers (a mapping, case-insensitive as httpx's).
        name: the header's name.
        pick: which of a repeated header's values counts (``min``: the most restrictive
            limit or remaining count; ``max`` for a wait).

    Returns:
        The number.
    """
    numbers = []
    for text in header_values(_header(headers, name)):
        try:
            number = float(text)
        except ValueError:
            return None
        if not math.isfinite(number):
            return None
        numbers.append(number)
    return pick(numbers) if numbers else None


def _header(headers: Any, name: str) -> str | None:
    if headers is None:
        return None
    try:
        value = headers.get(name)
    except AttributeError:
        return None
    return None if value is None else str(value)


def header_retry_after(headers: Any) -> float | None:
    """The ``Retry-After`` of a response's headers, in seconds (``retry-after-ms`` first).

    Args:
        headers: the response's headers.

    A value that is a Unix time (some gateways send the time to retry at, ``Retry-After:
    1767225600``, or ``retry-after-ms`` in ms since the epoch) is left for flow control to
    read on our clock (``runtime._flow.sane_rate_limit``), unless the answer's ``Date`` says
    the provider's clock is not ours: then it is the seconds from that ``Date``.

    Returns:
        The seconds to wait (or the Unix time), or ``None``.
    """
    now = server_now(headers)
    ms = header_number(headers, "retry-after-ms", max)
    wait = ms / 1000.0 if ms is not None and ms >= 0 else \
        retry_after_s(_header(headers, "retry-after"), now)
    if wait is not None and now is not None and _EPOCH_FROM <= wait < _EPOCH_TO:
        return max(0.0, wait - now)
    return wait


_EPOCH_FROM, _EPOCH_TO = 1e9, 1e10
"""A wait in this range is a Unix time (2001 to 2286), as flow control reads it."""


_DATE_RESOLUTION_S = 2.0
"""How far an answer's ``Date`` may be from our clock and still be read as the same clock
(it counts whole seconds, and the answer took time to arrive)."""


def server_now(headers: Any) -> float | None:
    """The provider's clock, from the answer's ``Date`` header, when it is not ours.

    A time the provider sends (an HTTP-date ``Retry-After``, Anthropic's reset times) is
    on its clock: read on ours, a provider whose clock runs an hour ahead asks for an hour
    when it means a second. When the answer's ``Date`` differs from our clock by more than
    its resolution, such a time is counted from that ``Date`` instead.

    Args:
        headers: the response's headers.

    Returns:
        The ``Date`` as a Unix time, or ``None`` (no readable ``Date``, or one that agrees
        with our clock: counted from ours, to the sub-second).
    """
    text = _header(headers, "date")
    if text is None:
        return None
    try:
        when = email.utils.parsedate_to_datetime(text.strip())
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.timezone.utc)
    said = when.timestamp()
    return said if abs(said - time.time()) > _DATE_RESOLUTION_S else None


def with_extra_body(method: Callable[..., Any], request: dict[str, Any]) -> dict[str, Any]:
    """Move the fields ``method`` (an SDK's ``create``) does not take into ``extra_body``.

    SDKs type their parameters and refuse unknown keywords; a field the provider takes but
    the installed SDK does not know (or no longer lists) is still sent, in the JSON body.

    Args:
        method: the SDK method the request goes to.
        request: the request's fields.

    Returns:
        The request, with the fields ``method`` does not take moved into ``extra_body``.
    """
    try:
        params = inspect.signature(method).parameters
    except (TypeError, ValueError):
        return request
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return request
    known = {k: v for k, v in request.items() if k in params}
    extra = {k: v for k, v in request.items() if k not in params}
    if extra:
        known["extra_body"] = {**(known.get("extra_body") or {}), **extra}
    return known


class FreshOnUnpickle:
    """Mixin for resources: pickling keeps the configuration and drops the runtime state.

    Clients, sessions and locks cannot be pickled; a copy (a Flink worker's) starts with the
    private attributes' defaults and connects on first use. The resource name and resolver
    are dropped too: the receiving environment binds the copy again.
    """

    def __getstate__(self) -> dict[Any, Any]:
        state = dict(super().__getstate__())  # type: ignore[misc]
        state["__pydantic_private__"] = None
        return state

    def __setstate__(self, state: dict[Any, Any]) -> None:
        super().__setstate__(state)  # type: ignore[misc]
        fresh = {name: (attr.default_factory() if attr.default_factory is not None
                        else copy.deepcopy(attr.default))
                 for name, attr in type(self).__private_attributes__.items()}  # type: ignore[attr-defined]
        object.__setattr__(self, "__pydantic_private__", fresh)
