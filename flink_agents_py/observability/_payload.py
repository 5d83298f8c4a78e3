"""Making payloads safe and small for logs: secret redaction and truncation."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import orjson

from ..api.internal import SECRET_VALUE_PATTERNS, mask_known, mask_secrets

__all__ = ["Redactor", "REDACTED", "MAX_DEPTH", "NESTED_TOO_DEEP", "truncate", "to_loggable",
           "SECRET_KEY_PATTERN"]

REDACTED = "[REDACTED]"

SECRET_KEY_PATTERN = (
    r"(^|_)(api_?key|apikey|x_api_key|authorization|proxy_authorization|auth|auth_token|"
    r"password|passwd|pwd|passphrase|secret|secret_key|client_secret|private_key|token|"
    r"access_token|refresh_token|id_token|session_token|bearer|credential|credentials|cookie|"
    r"set_cookie|pass|jwt)$|(password|passwd|passphrase|apikey)$"
)
"""Key names (normalized: lower case, ``camelCase``/``-``/spaces to ``_``) whose values are
secrets (``db_pass`` and glued ``pgpassword`` too, as ``api.is_credential_name`` reads
them). ``input_tokens``, ``max_tokens`` and the like do not match."""

_VALUE_PATTERNS = SECRET_VALUE_PATTERNS
"""Secret-looking substrings of any string value, replaced wherever they appear (shared with
the runtime's failure texts, ``runtime._failures``)."""

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def _normalize(key: str) -> str:
    return re.sub(r"[\s\-.]+", "_", _CAMEL.sub("_", key)).lower()


class Redactor:
    """Replaces secrets in JSON-like values by ``"[REDACTED]"``.

    Args:
        fields: more field names to redact (matched case-insensitively, exactly, after the
            same normalization as the built-in names: ``"userEmail"`` matches ``user_email``).
        key_pattern: the regex of secret key names (default ``SECRET_KEY_PATTERN``).
        value_patterns: regexes of secret substrings in any string (default: bearer
            credentials, ``sk-...`` keys, GitHub, AWS and Slack tokens); ``()`` turns it off.
            The values of known secrets (``api.register_secret``: API keys read from
            ``api_key_env`` and the like) are masked whatever the patterns.
    """

    def __init__(self, fields: Iterable[str] = (), key_pattern: str = SECRET_KEY_PATTERN,
                 value_patterns: Iterable[str] | None = None) -> None:
        self.fields = frozenset(_normalize(f) for f in fields)
        self._key_re = re.compile(key_pattern)
        patterns = tuple(_VALUE_PATTERNS if value_patterns is None else value_patterns)
        self._value_re = re.compile("|".join(f"(?:{p})" for p in patterns)) if patterns else None
        self._cache: dict[str, bool] = {}

    def is_secret_key(self, key: str) -> bool:
        """Whether values under ``key`` are redacted."""
        hit = self._cache.get(key)
        if hit is None:
            norm = _normalize(key)
            hit = norm in self.fields or bool(self._key_re.search(norm))
            if len(self._cache) < 4096 and len(key) <= 256:  # keys come from records too
                self._cache[key] = hit
        return hit

    def text(self, value: str) -> str:
        """``value`` with known secrets and secret-looking substrings replaced.

        Returns:
            The masked text (known secrets: ``api.register_secret``).
        """
        if not value:
            return value
        value = mask_known(value)
        if self._value_re is None:
            return value
        return self._value_re.sub(REDACTED, value)

    def __call__(self, value: Any) -> Any:
        """A copy of ``value`` (JSON-like) with secrets replaced; other leaves unchanged."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {k: (REDACTED if isinstance(k, str) and self.is_secret_key(k)
                        and v not in (None, "") else self(v))
                    for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self(v) for v in value]
        return value


MAX_DEPTH = 64
"""The deepest a payload is written to a log: a value nested deeper (a record, a model's
answer or a tool's result can nest hundreds of levels) is replaced there by a text saying
so, as the JSON writers of the logs (orjson: 255 levels; the interpreter's stack) could not
write its record at all."""

NESTED_TOO_DEEP = f"[... nested deeper than {MAX_DEPTH} levels: not logged]"
"""What stands for a value nested deeper than ``MAX_DEPTH`` in a log."""


def to_loggable(value: Any, depth: int = 0) -> Any:
    """A JSON-like form of ``value``: runtime-tagged models unwrapped, objects as text.

    Args:
        value: any value.
        depth: how deep ``value`` is in what is being logged (``0``: the top).

    Returns:
        Its form; what lies deeper than ``MAX_DEPTH`` levels is ``NESTED_TOO_DEEP``.
    """
    if isinstance(value, dict):
        if depth >= MAX_DEPTH:
            return NESTED_TOO_DEEP
        if len(value) == 2 and "$model" in value and "data" in value:
            inner = value["data"]
            if isinstance(value["$model"], str):  # a tagged model: its fields
                return to_loggable(inner, depth)
            if value["$model"] is None and isinstance(inner, dict):  # an escaped plain dict
                return {str(k): to_loggable(v, depth + 1) for k, v in inner.items()}
        return {str(k): to_loggable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        if depth >= MAX_DEPTH:
            return NESTED_TOO_DEEP
        return [to_loggable(v, depth + 1) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        try:
            return to_loggable(dump(mode="json"), depth)
        except Exception:  # noqa: BLE001 - fall back to the text form
            pass
    return repr(value)


def truncate(value: Any, max_chars: int) -> Any:
    """``value`` when its JSON form has at most ``max_chars`` characters, else a stand-in.

    The stand-in is ``{"$truncated": <chars of the JSON form>, "preview": <its first
    max_chars characters>}``; a long string becomes a shortened string ending in
    ``"...[+N chars]"``. ``max_chars <= 0`` means no limit. What is cut is masked first
    (``api.mask_secrets``): a known secret standing across the cut (in a dict key, which
    ``Redactor`` leaves as it is, or in a string nobody redacted) leaves no part behind.

    Args:
        value: a JSON-form value.
        max_chars: the most characters of its JSON form to keep.

    Returns:
        ``value``, or its stand-in.
    """
    if max_chars <= 0:
        return value
    if isinstance(value, str):
        if len(value) <= max_chars:
            return value
        value = mask_secrets(value)  # whole, before the cut could leave a piece unrecognised
        if len(value) <= max_chars:
            return value
        return f"{value[:max_chars]}...[+{len(value) - max_chars} chars]"
    if value is None or isinstance(value, (int, float, bool)):
        return value
    try:
        text = orjson.dumps(value, default=str).decode()
    except Exception:  # noqa: BLE001 - e.g. non-string keys
        text = repr(value)
    if len(text) <= max_chars:
        return value
    return {"$truncated": len(text), "preview": mask_secrets(text)[:max_chars]}
