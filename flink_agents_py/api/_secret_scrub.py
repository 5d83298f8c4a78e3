"""Known secrets in exceptions handed on, validation errors and reprs (see ``_secrets``).

Exceptions are masked in place where the framework hands them on (``scrub_exception``: an
SDK's error chained to a ``ProviderError``, a resource's failed check or open, a failed
durable call), a resource's pydantic validation error is rebuilt with its quoted inputs
masked (``mask_validation_error``), and reprs of descriptors and resources show
credential-named entries as ``MASK`` (``mask_credentials``).
"""

from __future__ import annotations

import builtins
import copy
import dataclasses
import sys
from types import GetSetDescriptorType, MemberDescriptorType, SimpleNamespace
from typing import Any

from pydantic import ValidationError

from ._secrets import (
    MASK,
    has_known_secret,
    is_credential_name,
    mask_secrets,
    mask_value,
    register_header_secret,
    registered_secret_count,
)

__all__ = ["described", "error_text", "group_types", "mask_credentials", "mask_validation_error",
           "quoted_inputs_masked", "scrub_exception", "validation_masked"]


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


_MAX_DEPTH = 32
"""How deep ``scrub_exception`` walks nested data; anything deeper showing a known secret in
its ``repr`` is replaced by ``MASK``."""

_SCALARS = (int, float, complex, bool, type(None))
_LINKS = frozenset({"args", "__cause__", "__context__", "__traceback__", "__suppress_context__",
                    "__dict__", "__weakref__", "__notes__", "exceptions"})
"""An exception's fields walked on their own (or never: its traceback)."""


def _shown(value: Any) -> str:
    try:
        return f"{value!s} {value!r}"
    except Exception:  # noqa: BLE001 - a str or repr that fails: nothing shown to mask
        return ""


class _Walk:
    """One ``scrub_exception``: what each object visited became (cycles end there)."""

    def __init__(self) -> None:
        self.done: dict[int, Any] = {}
        self.alive: list[Any] = []  # the visited objects, so that no id is reused meanwhile

    def value(self, value: Any, depth: int) -> Any:
        """``value`` masked: itself when it holds no known secret, else a masked copy.

        Texts, bytes and containers (dicts, lists, tuples, sets, frozensets: their type
        kept), pydantic models and dataclasses come back as masked copies; an exception
        is masked in place (``exception``); an HTTP message in place (its headers, URL and
        body); any other object as it is.

        Returns:
            The masked value.
        """
        if isinstance(value, str):
            return mask_secrets(value)
        if isinstance(value, _SCALARS):
            return value
        if isinstance(value, (bytes, bytearray)):
            masked = _mask_bytes(bytes(value))
            return value if masked == value else type(value)(masked)
        key = id(value)
        if key in self.done:
            return self.done[key]
        if depth > _MAX_DEPTH:
            return MASK if _holds_secret(_shown(value)) else value
        self.done[key] = value  # a cycle back to it finds it as it is
        self.alive.append(value)
        result = self._object(value, depth + 1)
        self.done[key] = result
        return result

    def _object(self, value: Any, depth: int) -> Any:
        value = validation_masked(value)  # a ValidationError's text cuts what it quotes
        if isinstance(value, BaseException):
            return self.exception(value, depth)
        if isinstance(value, (dict, list)):
            return self._mutable(value, depth)
        if isinstance(value, (tuple, set, frozenset)):
            items = [self.value(v, depth) for v in value]
            if all(a is b for a, b in zip(items, value, strict=True)):
                return value
            return _rebuilt(value, items)
        if _is_model(value):
            return self._fields(value, depth, dict(vars(value)),
                                getattr(value, "__pydantic_extra__", None) or {},
                                getattr(value, "__pydantic_private__", None) or {})
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return self._fields(value, depth, {f.name: getattr(value, f.name, None)
                                               for f in dataclasses.fields(value)}, {}, {})
        if isinstance(value, SimpleNamespace):
            return self._fields(value, depth, dict(vars(value)), {}, {})
        if hasattr(value, "headers") and (hasattr(value, "_content") or hasattr(value, "url")):
            _scrub_http_message(value)
            request = getattr(value, "_request", None)  # a response's request (httpx)
            if request is not None and request is not value:
                _scrub_http_message(request)
        return value

    def _mutable(self, value: dict[Any, Any] | list[Any], depth: int) -> Any:
        """A dict or a list masked.

        Its copy is made before its items are walked: an item reaching back to it (a cycle)
        finds the copy.

        Returns:
            The copy, when an item changed; else ``value``.
        """
        masked: Any = _rebuilt(value, [])
        self.done[id(value)] = masked
        if isinstance(value, dict):
            pairs = [(self.value(k, depth), self.value(v, depth)) for k, v in value.items()]
            changed = any(a is not k or b is not v
                          for (a, b), (k, v) in zip(pairs, value.items(), strict=True))
            if changed:
                masked.update(pairs)
        else:
            items = [self.value(v, depth) for v in value]
            changed = any(a is not b for a, b in zip(items, value, strict=True))
            if changed:
                masked.extend(items)
        return masked if changed else value

    def _fields(self, value: Any, depth: int, fields: dict[str, Any], extra: dict[str, Any],
                private: dict[str, Any]) -> Any:
        """A shallow copy of ``value`` with its masked fields.

        pydantic's extra and private fields are set in their dicts, the others past
        ``__setattr__`` (a frozen model or dataclass too).

        Returns:
            The copy (``value`` when no field changed; its masked text when it cannot be
            copied).
        """
        changed = [{k: m for k, v in part.items() if (m := self.value(v, depth)) is not v}
                   for part in (fields, extra, private)]
        if not any(changed):
            return value
        try:
            masked = copy.copy(value)
            for k, v in changed[0].items():
                object.__setattr__(masked, k, v)
            for attr, part in (("__pydantic_extra__", changed[1]),
                               ("__pydantic_private__", changed[2])):
                if part:
                    object.__setattr__(masked, attr, {**getattr(masked, attr), **part})
        except Exception:  # noqa: BLE001 - one that cannot be copied: its masked text
            return mask_secrets(_shown(value))
        return masked

    def exception(self, exc: BaseException, depth: int) -> BaseException:
        """``exc`` masked in place; a masked copy when some of it cannot be changed.

        Walked: its ``args``, its attributes (``__dict__``, slots, the fields of Python's
        own exception types: an ``OSError``'s ``filename``, a ``SyntaxError``'s ``text``),
        its ``__notes__``, a group's sub-exceptions and its ``__cause__``/``__context__``.

        Returns:
            ``exc``, or the masked copy (``_masked_copy``).
        """
        stuck = False  # something holding a secret could not be replaced
        args = tuple(self.value(a, depth) for a in exc.args)
        if any(a is not b for a, b in zip(args, exc.args, strict=True)):
            stuck |= not _try_set(exc, "args", args)
        for name, value in _fields_of(exc):
            masked = self.value(value, depth)
            if masked is not value:
                stuck |= not _try_set(exc, name, masked)
        notes = getattr(exc, "__notes__", None)
        if isinstance(notes, list):
            masked_notes = [self.value(n, depth) for n in notes]
            if any(a is not b for a, b in zip(masked_notes, notes, strict=True)):
                stuck |= not _try_set(exc, "__notes__", masked_notes)
        subs: tuple[BaseException, ...] | None = None
        if isinstance(exc, group_types()):
            group: Any = exc
            subs = tuple(self.value(e, depth) for e in group.exceptions)
            if all(a is b for a, b in zip(subs, group.exceptions, strict=True)):
                subs = None
        for link in ("__cause__", "__context__"):
            linked = getattr(exc, link)
            if linked is not None:
                masked_link = self.value(linked, depth)
                if masked_link is not linked:
                    stuck |= not _try_set(exc, link, masked_link)
        if subs is None and not stuck and not _holds_secret(_shown(exc)):
            return exc
        return _masked_copy(exc, args, subs)


def group_types() -> tuple[type, ...]:
    """The exception group types: Python's (3.11+), the ``exceptiongroup`` backport's."""
    found = (getattr(builtins, "BaseExceptionGroup", None),
             getattr(sys.modules.get("exceptiongroup"), "BaseExceptionGroup", None))
    return tuple(t for t in found if isinstance(t, type))


def _is_model(value: Any) -> bool:
    from pydantic import BaseModel

    return isinstance(value, BaseModel)


def _rebuilt(value: Any, items: list[Any]) -> Any:
    """A container of ``value``'s type holding ``items`` (pairs for a dict).

    Returns:
        The container; of the nearest built-in type when ``value``'s own takes other
        arguments.
    """
    cls = type(value)
    try:
        if isinstance(value, (dict, list)):
            masked = copy.copy(value)  # a defaultdict keeps its factory
            masked.clear()
            if isinstance(masked, dict):
                masked.update(items)
            else:
                masked.extend(items)
            return masked
        if isinstance(value, tuple) and hasattr(cls, "_make"):  # a named tuple
            return cls._make(items)
        return cls(items)
    except Exception:  # noqa: BLE001 - a subclass taking other arguments
        for base in (dict, list, tuple, set, frozenset):
            if isinstance(value, base):
                return base(items)
        raise


def _fields_of(exc: BaseException) -> list[tuple[str, Any]]:
    """An exception's attributes: its ``__dict__``'s, its slots and built-in fields.

    Returns:
        ``(name, value)`` pairs; dunder names and the links walked apart are left out.
    """
    fields = [(k, v) for k, v in getattr(exc, "__dict__", {}).items()
              if not k.startswith("__")]
    named = {k for k, _ in fields}
    for cls in type(exc).__mro__:
        for name, field in vars(cls).items():
            if (name in _LINKS or name in named or name.startswith("__")
                    or not isinstance(field, (MemberDescriptorType, GetSetDescriptorType))):
                continue
            named.add(name)
            try:
                fields.append((name, getattr(exc, name)))
            except Exception:  # noqa: BLE001 - an unset slot
                continue
    return fields


def _try_set(exc: BaseException, name: str, value: Any) -> bool:
    try:
        setattr(exc, name, value)
    except Exception:  # noqa: BLE001 - read-only: the caller checks what still shows
        try:
            BaseException.__setattr__(exc, name, value)
        except Exception:  # noqa: BLE001
            return False
    return True


def _masked_copy(exc: BaseException, args: tuple[Any, ...],
                 subs: tuple[BaseException, ...] | None) -> BaseException:
    """A copy of ``exc`` that shows no known secret, of its type when possible.

    Made from the masked ``args`` (a group from its masked message and ``subs``: its
    ``message`` and sub-exceptions cannot be changed in place), with ``exc``'s masked
    attributes, notes, cause, context and traceback. When the copy still shows a secret
    (a ``__str__`` that reads something else), a subclass of its type with the masked text;
    when none can be made, a ``RuntimeError`` with it.

    Returns:
        The copy.
    """
    cls: Any = type(exc)
    copied: BaseException | None = None
    groups = group_types()
    if isinstance(exc, groups):
        group: Any = exc
        message = mask_secrets(str(group.message))
        exceptions = list(subs if subs is not None else group.exceptions)
        for make in (cls, groups[0]):
            try:
                copied = make(message, exceptions)
                break
            except Exception:  # noqa: BLE001 - a subclass taking other arguments
                continue
    else:
        try:
            copied = cls(*args)
        except Exception:  # noqa: BLE001 - a constructor taking other arguments
            try:
                copied = cls.__new__(cls, *args)
                BaseException.__init__(copied, *args)
            except Exception:  # noqa: BLE001
                copied = None
    if copied is not None:
        _carry(exc, copied)
        if not _holds_secret(_shown(copied)):
            return copied
    text, shown = mask_secrets(str(_safe(str, exc))), mask_secrets(_safe(repr, exc))
    try:
        masked_cls: Any = type(cls.__name__, (cls,), {
            "__str__": lambda self: text, "__repr__": lambda self: shown,
            "__module__": cls.__module__, "__qualname__": cls.__qualname__})
        copied = masked_cls.__new__(masked_cls)
        BaseException.__init__(copied, *args)
    except Exception:  # noqa: BLE001 - a type that cannot be subclassed or made so
        copied = RuntimeError(f"{cls.__qualname__}: {text}")
    _carry(exc, copied)
    return copied


def _safe(show: Any, exc: BaseException) -> str:
    try:
        return str(show(exc))
    except Exception:  # noqa: BLE001
        return f"<{type(exc).__qualname__}>"


def _carry(exc: BaseException, copied: BaseException) -> None:
    """Give ``copied`` what ``exc`` links to, and its (masked) attributes and notes."""
    for name in ("__cause__", "__context__", "__traceback__", "__suppress_context__"):
        _try_set(copied, name, getattr(exc, name))
    state = getattr(copied, "__dict__", None)
    if isinstance(state, dict):
        for name, value in getattr(exc, "__dict__", {}).items():
            state.setdefault(name, value if not isinstance(value, str) else mask_secrets(value))


def scrub_exception(exc: BaseException) -> BaseException:
    """Mask the known secrets an exception carries, in place, and return it.

    For an SDK's exception the framework chains to one of its own (``raise ProviderError(...)
    from scrub_exception(e)``), and for the exception a failed durable call hands its
    caller: a user catching it, printing its traceback or looking at its cause, finds the
    exception (its type, status and response kept) with the secrets masked in its ``args``,
    its attributes (texts, bytes, and dicts, lists, tuples, sets, pydantic models and
    dataclasses walked, nested; an HTTP request's or response's headers, URL and body,
    httpx's), its slots and the fields of Python's own exception types, its ``__notes__``,
    and the same for each sub-exception of an exception group and every exception of its
    ``__cause__``/``__context__`` chain (each once: a cycle ends). Containers and models
    holding a secret are replaced by masked copies of their type; the exceptions are masked
    in place.

    An exception that cannot be changed so (a group's ``message`` and sub-exceptions, a
    read-only attribute, a ``__str__`` reading something else) is replaced by a masked copy
    of its type when one can be made (``_masked_copy``), and linked to in its place.

    Nothing is done while no secret is registered.

    Returns:
        ``exc``, or its masked copy (raise that one).
    """
    if not registered_secret_count():
        return exc
    masked: BaseException = _Walk().value(exc, 0)
    return masked


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


def validation_masked(error: BaseException) -> BaseException:
    """A pydantic ``ValidationError`` rebuilt with its quoted inputs masked, linked as it was.

    ``mask_validation_error``; its cause, context and traceback are carried. Any other
    exception is returned as it is.

    pydantic cuts a long input it quotes to its first and last 24 characters: masked after
    that, a key at either end of a long input left 24 of its characters.

    Returns:
        The rebuilt error; ``error`` when it quotes no known secret (or is no
        ``ValidationError``).
    """
    if not isinstance(error, ValidationError) or not registered_secret_count():
        return error
    masked: ValidationError = mask_validation_error(error)
    if masked is not error:
        _carry(error, masked)
    return masked


def _has_validation_error(exc: BaseException | None) -> bool:
    """Whether ``exc`` or an exception of its cause/context chain is a ``ValidationError``."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, ValidationError):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


_ExcInfo = tuple[Any, Any, Any]


def quoted_inputs_masked(exc_info: _ExcInfo) -> _ExcInfo:
    """``exc_info`` to format: a chain holding a pydantic ``ValidationError`` scrubbed first.

    Masking the formatted text is not enough there: pydantic quotes a long input cut to its
    ends, so a known key at one end shows in part (``scrub_exception`` rebuilds the error
    from its whole inputs, masked).

    Returns:
        ``exc_info``, or the scrubbed exception's.
    """
    exc = exc_info[1]
    if not registered_secret_count() or not _has_validation_error(exc):
        return exc_info
    masked = scrub_exception(exc)
    return type(masked), masked, exc_info[2]


def error_text(error: BaseException) -> str:
    """``str(error)``, or what it is when its ``__str__`` raises.

    An exception whose ``__str__`` fails (a library's exception class, a user's) would
    otherwise fail the reporting of the failure, and with it the job; Python's own tracebacks
    write ``<exception str() failed>`` there. A pydantic ``ValidationError`` is masked before
    its text is made (``validation_masked``).

    Returns:
        The text, or ``<str() of the exception failed: TYPE>``.
    """
    try:
        return str(validation_masked(error))
    except Exception as e:  # noqa: BLE001 - whatever its __str__ raised
        return f"<str() of the exception failed: {type(e).__name__}>"


def described(error: BaseException) -> str:
    """``"TYPE: text"`` of an exception a user's code (or a library) raised (``error_text``).

    Returns:
        The type's name and the text.
    """
    return f"{type(error).__name__}: {error_text(error)}"
