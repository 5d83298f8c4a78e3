"""Known secrets in exceptions handed on, validation errors and reprs (see ``_secrets``).

Exceptions are masked in place where the framework hands them on (``scrub_exception``: an
SDK's error chained to a ``ProviderError``, a resource's failed check or open, a failed
durable call), a resource's pydantic validation error is rebuilt with its quoted inputs
masked (``mask_validation_error``), and reprs of descriptors and resources show
credential-named entries as ``MASK`` (``mask_credentials``).
"""

from __future__ import annotations

from typing import Any

from ._secrets import (
    MASK,
    has_known_secret,
    is_credential_name,
    mask_secrets,
    mask_value,
    register_header_secret,
    registered_secret_count,
)

__all__ = ["mask_credentials", "mask_validation_error", "scrub_exception"]


def _holds_secret(text: str) -> bool:
    """Whether ``text`` holds a known secret or a secret-looking substring."""
    return mask_secrets(text) != text


def _mask_bytes(data: bytes) -> bytes:
    text = data.decode("utf-8", "surrogateescape")
    masked = mask_secrets(text)
    return data if masked == text else masked.encode("utf-8", "surrogateescape")


def _scrub_http_message(message: Any) -> None:
    """Mask the headers, URL and body of an HTTP request or response object (httpx's).

    Duck-typed: ``headers`` (a mapping, rebuilt with masked values), ``url``, and the body
    cached in ``_content`` (the bytes ``.content``/``.text``/``.json()`` read) are replaced
    when they hold a secret; whatever cannot be set is left as it is.
    """
    headers = getattr(message, "headers", None)
    if headers is not None and hasattr(headers, "items"):
        try:
            pairs = [(k, v) for k, v in headers.items()]
            masked = [(k, mask_secrets(v) if isinstance(v, str) else v) for k, v in pairs]
            if masked != pairs:
                message.headers = type(headers)(masked)
        except Exception:  # noqa: BLE001 - a headers object that cannot be rebuilt
            pass
    url = getattr(message, "url", None)
    if url is not None and has_known_secret(str(url)):
        try:
            message.url = type(url)(mask_secrets(str(url)))
        except Exception:  # noqa: BLE001 - a read-only url
            pass
    content = getattr(message, "_content", None)
    if isinstance(content, bytes):
        masked_content = _mask_bytes(content)
        if masked_content is not content:
            try:
                message._content = masked_content  # noqa: SLF001 - httpx's body cache
                if hasattr(message, "_text"):
                    message._text = None  # noqa: SLF001 - re-decoded from the masked body
            except Exception:  # noqa: BLE001
                pass


def _scrub_attr(value: Any, seen: set[int]) -> Any:
    """``value`` masked, or scrubbed in place.

    Returns:
        A text or a container masked (one holding no secret as it is, its tuples kept); an
        exception or an HTTP message itself, masked in place.
    """
    if isinstance(value, str):
        return mask_secrets(value)
    if isinstance(value, (dict, list, tuple)):
        try:
            shown = repr(value)
        except Exception:  # noqa: BLE001 - a repr that fails: masked anyway
            shown = MASK
        if shown is not MASK and not (has_known_secret(shown) or _holds_secret(shown)):
            return value
        return mask_value(value) if not isinstance(value, tuple) else tuple(mask_value(value))
    if isinstance(value, bytes):
        return _mask_bytes(value)
    if isinstance(value, BaseException):
        _scrub_one(value, seen)
    elif hasattr(value, "headers") and (hasattr(value, "_content") or hasattr(value, "url")):
        _scrub_http_message(value)
        request = getattr(value, "_request", None)  # a response's request (httpx)
        if request is not None and request is not value:
            _scrub_http_message(request)
    return value


def _scrub_one(exc: BaseException, seen: set[int]) -> None:
    if id(exc) in seen:
        return
    seen.add(id(exc))
    try:
        exc.args = tuple(_scrub_attr(a, seen) for a in exc.args)
    except Exception:  # noqa: BLE001 - an exception class that refuses new args
        pass
    for name, value in list(getattr(exc, "__dict__", {}).items()):
        if name.startswith("__"):
            continue
        try:
            masked = _scrub_attr(value, seen)
            if masked is not value and masked != value:
                setattr(exc, name, masked)
        except Exception:  # noqa: BLE001 - a read-only attribute: left as it is
            pass
    notes = getattr(exc, "__notes__", None)
    if isinstance(notes, list):
        masked_notes = [mask_secrets(n) if isinstance(n, str) else n for n in notes]
        exc.__notes__ = masked_notes  # type: ignore[attr-defined]
    for linked in (exc.__cause__, exc.__context__):
        if linked is not None:
            _scrub_one(linked, seen)


def scrub_exception(exc: BaseException) -> BaseException:
    """Mask the known secrets an exception carries, in place, and return it.

    For an SDK's exception the framework chains to one of its own (``raise ProviderError(...)
    from scrub_exception(e)``): a user catching the framework's error, printing its
    traceback or looking at its cause, finds the SDK's exception (its type, status and
    response kept) with the secrets masked in its ``args``, its text attributes
    (``message``, ``body``: nested dicts and lists walked), ``__notes__``, an HTTP
    request's or response's headers, URL and body (httpx's), and the same for every
    exception of its ``__cause__``/``__context__`` chain.

    Nothing is done while no secret is registered.

    Returns:
        ``exc``.
    """
    if not registered_secret_count():
        return exc
    _scrub_one(exc, set())
    return exc


# -- reprs and validation errors -----------------------------------------------------------
def mask_credentials(value: Any, name: Any = "") -> Any:
    """A copy of ``value`` for display: text under a credential name becomes ``MASK``.

    Dicts and lists are walked (a dict's keys name their values); every other text is
    masked by ``mask_secrets``. For reprs of descriptors and resources: the values stay
    what they are, only what is shown changes.

    Returns:
        The masked copy (other leaves as they are).
    """
    if isinstance(value, str):
        return MASK if value and is_credential_name(name) else mask_secrets(value)
    if isinstance(value, dict):
        return {k: mask_credentials(v, k) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(mask_credentials(v, name) for v in value)
    return value


def _register_named_credentials(value: Any, name: Any = "", depth: int = 0) -> None:
    """Register the texts under credential names in an input (a dict walked, ``depth`` 8)."""
    if isinstance(value, str):
        if is_credential_name(name):
            register_header_secret(value, f"argument {name}")
    elif isinstance(value, dict) and depth < 8:
        for k, v in value.items():
            _register_named_credentials(v, k, depth + 1)
    elif isinstance(value, (list, tuple)) and depth < 8:
        for v in value:
            _register_named_credentials(v, name, depth + 1)


def mask_validation_error(error: Any) -> Any:
    """A pydantic ``ValidationError`` whose quoted inputs and messages carry no secret.

    pydantic quotes each rejected input (``input_value='sk-...'``): an API key passed as an
    argument the class does not take (``api_key=`` where it takes ``api_key_env``), or a
    whole input dict (a missing field). Texts under credential names in the inputs are
    registered as secrets (a key given in the wrong place is still a key), then each error's
    input and message are masked.

    Returns:
        A new ``ValidationError`` with the same title, types and locations; ``error`` itself
        when nothing needed masking.
    """
    from pydantic import ValidationError
    from pydantic_core import PydanticCustomError

    details = error.errors()
    for err in details:
        loc = [p for p in err.get("loc", ()) if isinstance(p, str)]
        _register_named_credentials(err.get("input"), loc[-1] if loc else "")
    if not any(has_known_secret(str(err.get("input"))) or has_known_secret(err.get("msg", ""))
               or _holds_secret(str(err.get("input"))) for err in details):
        return error
    standard: list[Any] = []
    custom: list[Any] = []
    for err in details:
        masked_input = mask_value(err.get("input"))
        entry: dict[str, Any] = {"type": err["type"], "loc": err["loc"], "input": masked_input}
        if "ctx" in err:
            entry["ctx"] = {k: (type(v)(mask_secrets(str(v))) if isinstance(v, Exception)
                                else mask_value(v)) for k, v in err["ctx"].items()}
        standard.append(entry)
        custom.append({"type": PydanticCustomError(err["type"], mask_secrets(err["msg"])),
                       "loc": err["loc"], "input": masked_input})
    try:
        masked = ValidationError.from_exception_data(error.title, standard)
        if not has_known_secret(str(masked)):
            return masked
    except Exception:  # noqa: BLE001 - a custom error type: its message, masked, as a custom one
        pass
    return ValidationError.from_exception_data(error.title, custom)
