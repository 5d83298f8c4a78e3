r"""Known secrets, masked wherever text leaves the process.

The framework knows some secrets by value: the API key a connection reads from its
``api_key_env`` variable, a header or an MCP server environment entry a resource marks
secret. Each is registered here when it is resolved (``secret_from_env``,
``register_secret``), in the process that uses it (a Flink worker registers its own), and
``mask_secrets`` replaces every registered value by ``[REDACTED]`` in a text: error records
and tracebacks, the event log (and so the trace HTML, the trace text and the OpenTelemetry
spans built from it), failure texts carried by events and results, log records (a
``logging`` record factory installed with the first secret masks the message, the formatted
traceback and the stack of every record, whichever logger made it), the text of every
warning (``warnings.formatwarning``, which Python prints to stderr and
``logging.captureWarnings`` logs) and the reports Python prints itself for an exception
nobody caught or could raise (``sys.excepthook``, ``threading.excepthook``,
``sys.unraisablehook``, when they are Python's own: ``_secret_hooks``).

Exceptions handed on, validation errors and reprs: ``_secret_scrub``.

A value is also masked in the forms it commonly takes in text: JSON- and ``repr``-escaped,
percent-encoded, quoted-printable, hex-encoded (either case), base64-encoded at any
alignment (so an ``Authorization: Basic ...`` header built from it is masked too, whatever
comes before it in the encoded text). Encoders differ in which characters they escape (PHP
writes ``\/``, .NET ``\u002B`` and ``%2b``, ``quote`` keeps ``/``), so each character other
than a letter or a digit is matched as itself or in any of its escapes (a JSON ``\uXXXX`` or
``\/``, a percent-encoded or quoted-printable UTF-8 byte, hex digits in either case): the
value is masked whichever of its characters an encoder escaped. A second search finds a
value hidden by what a text went through (line breaks and whitespace anywhere inside it,
HTML character references, escapes of every character, quoted-printable soft line breaks, a
text escaped twice), in the text's canonical form: ``_secret_forms``. Both regexes run only
over a text holding one of the secrets' anchors (``anchors_of``: literals every match
contains, found by plain ``str`` searches), so a text holding no secret (the runtime's ids,
long in a long event chain) costs about what it costs with no secret registered.

Values shorter than ``MIN_SECRET_CHARS`` characters are not registered: masking a short
string would blank out ordinary words and numbers everywhere (and a key that short is a
placeholder, not a secret). The values themselves are never logged.

Secret-looking substrings (``SECRET_VALUE_PATTERNS``: bearer credentials, ``sk-...`` keys,
GitHub, AWS and Slack tokens) are masked as a second line, for secrets the framework was
never told about.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import quopri
import re
import sys
import threading
import warnings
from collections.abc import Callable
from typing import Annotated, Any
from urllib.parse import quote, quote_plus

from pydantic import AfterValidator

from ._secret_encodings import EncodedForms, encoded_forms, utf8_bytes
from ._secret_forms import anchored, anchors_of, canonical, is_canonical, mask_hidden

__all__ = ["MASK", "MESSAGE_MAX_CHARS", "MIN_SECRET_CHARS", "SECRET_VALUE_PATTERNS", "MaskedStr",
           "clip", "has_known_secret",
           "is_credential_name", "mask_known", "mask_known_value", "mask_secrets", "mask_value",
           "register_header_secret", "register_secret",
           "registered_secret_count", "secret_from_env"]

MASK = "[REDACTED]"
"""What a secret is replaced by."""

MIN_SECRET_CHARS = 8
"""The shortest value ``register_secret`` accepts (shorter values are ignored)."""

SECRET_VALUE_PATTERNS = (
    r"\b[Bb](?:earer|EARER)\s+[A-Za-z0-9._~+/=-]{8,}",  # Authorization header values
    r"\bsk-[A-Za-z0-9_-]{16,}",                  # OpenAI / Anthropic style keys
    r"\bgh[pousr]_[A-Za-z0-9]{20,}",             # GitHub tokens
    r"\bAKIA[0-9A-Z]{16}\b",                     # AWS access key ids
    r"\bxox[abpr]-[A-Za-z0-9-]{10,}",            # Slack tokens
)
"""Secret-looking substrings of any text, masked wherever they appear, on top of the
registered values (the event log's ``Redactor`` uses the same patterns)."""

_PATTERN_RE = re.compile("|".join(f"(?:{p})" for p in SECRET_VALUE_PATTERNS))

log = logging.getLogger("flink_agents_py.secrets")


def _base64_cores(raw: bytes) -> set[str]:
    """The parts of ``raw``'s base64 encoding that do not depend on its neighbours.

    In a longer text encoded as a whole (``user:key`` in a Basic auth header), ``raw`` starts
    at one of three alignments; for each, the characters made of its bits only are the same
    whatever comes before and after it.

    Returns:
        The cores long enough to mask, in the standard and the URL-safe alphabet.
    """
    cores: set[str] = set()
    n = len(raw)
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + raw).decode("ascii")
        start = -(-8 * shift // 6)  # the first character holding no bit of the prefix
        end = (8 * (shift + n)) // 6  # past the last character holding only bits of raw
        core = encoded[start:end]
        if len(core) >= MIN_SECRET_CHARS:
            cores.add(core)
            cores.add(core.replace("+", "-").replace("/", "_"))  # the URL-safe alphabet
    return cores


def _forms(value: str) -> set[str]:
    """``value`` and the forms it takes when escaped or encoded into other text."""
    raw = utf8_bytes(value)  # a byte that is not UTF-8 (os.environ's) as itself
    forms = {value, json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1],
             repr(value)[1:-1], quote(raw, safe=""), quote_plus(raw, safe=""),
             quopri.encodestring(raw, quotetabs=True).decode("ascii")}
    forms |= _base64_cores(raw) | {raw.hex(), raw.hex().upper()}
    return {f for f in forms if len(f) >= MIN_SECRET_CHARS}


def _hex_any_case(digits: str) -> str:
    return "".join(f"[{d.lower()}{d.upper()}]" if d.isalpha() else d for d in digits)


def _char_escapes(ch: str) -> str:
    r"""A regex of ``ch`` as itself or in any escape an encoder writes it in.

    Returns:
        The regex: ``ch``, a JSON ``\uXXXX`` (each UTF-16 unit) or ``\/`` / ``\"`` /
        ``\\``, its UTF-8 bytes percent-encoded or quoted-printable (``=3D``, hex digits
        in either case), and ``+`` (or ``_``, quoted-printable headers) for a space.
    """
    alternatives = [re.escape(ch)]
    units = ch.encode("utf-16-be", "surrogatepass")
    alternatives.append("".join("\\\\u" + _hex_any_case(units[i:i + 2].hex())
                                for i in range(0, len(units), 2)))
    if ch in "/\"\\":
        alternatives.append(re.escape("\\" + ch))
    for escape in ("%", "="):  # percent-encoded, quoted-printable
        alternatives.append("".join(escape + _hex_any_case(f"{b:02x}") for b in utf8_bytes(ch)))
    if ch == " ":
        alternatives.append("[+_]")
    return "(?:" + "|".join(alternatives) + ")"


def _escape_pattern(value: str) -> str | None:
    """A regex of ``value`` with any of its non-alphanumeric characters escaped (or not).

    Returns:
        The regex; ``None`` when ``value`` is letters and digits only (its forms are exact).
    """
    if value.isascii() and value.isalnum():
        return None
    return "".join(ch if ch.isascii() and ch.isalnum() else _char_escapes(ch) for ch in value)


def _longest_first(forms: set[str]) -> list[str]:
    return sorted(forms, key=lambda f: (-len(f), f))


class _Registry:
    """The process's known secrets: a set of values and the regexes of all their forms.

    Registration takes a lock and builds new regexes; masking reads the current pair
    without a lock (an attribute read is atomic).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: set[str] = set()
        self._forms: set[str] = set()
        self._patterns: set[str] = set()
        self._hidden: set[str] = set()
        self.regexes: tuple[re.Pattern[str], re.Pattern[str], tuple[str, ...] | None] | None
        self.regexes = None
        self.encoded: EncodedForms | None = None  # base32, UTF-16, ROT13...: str searches
        self._encoded: set[str] = set()
        self.added = 0  # registrations so far: what was made with none known compares it
        """The regex of the forms, the one of their canonical forms (``canonical``), and
        the anchors (``anchors_of``): one value, replaced whole (read without a lock)."""

    def add(self, value: str) -> bool:
        with self._lock:
            if value in self._values:
                return False
            self._values.add(value)
            self.added += 1
            forms = all_forms = _forms(value)
            pattern = _escape_pattern(value)
            if pattern is not None:
                self._patterns.add(pattern)
                matches = re.compile(pattern).fullmatch
                forms = {f for f in forms if not matches(f)}  # the pattern finds those
            self._forms |= forms
            self._hidden |= {h for f in all_forms if len(h := canonical(f)) >= MIN_SECRET_CHARS}
            self._encoded |= encoded_forms(value, MIN_SECRET_CHARS, _base64_cores) - all_forms
            self.encoded = EncodedForms(self._encoded, self._values, MIN_SECRET_CHARS)
            # the escape patterns first (they match the longest span of an escaped value),
            # then the exact forms, longest first
            alternatives = [*sorted(self._patterns), *map(re.escape, _longest_first(self._forms))]
            self.regexes = (re.compile("|".join(alternatives)),
                            re.compile("|".join(map(re.escape, _longest_first(self._hidden)))),
                            anchors_of([v for v in self._values if _escape_pattern(v)],
                                       self._forms | self._hidden))
            return True

    def __len__(self) -> int:
        return len(self._values)


_REGISTRY = _Registry()
SECRETS = _REGISTRY
"""The registry itself, for a check without a call: ``SECRETS.added`` counts registrations
(``recorder/_prestored``: a result made ready while none was known, recorded only if still so)."""


def register_secret(value: str | None, source: str = "") -> bool:
    """Make ``value`` a known secret of this process: masked from now on (``mask_secrets``).

    Called by the framework where a connection resolves its API key, a header or an MCP
    server environment entry marked secret; call it for secrets of your own that may end
    up in error messages (a token your tool sends). The first registration also installs
    the log masking (see the module docstring).

    Args:
        value: the secret (and, when whitespace surrounds it, also the value without it:
            what a client strips and sends). ``None``, empty and values shorter than
            ``MIN_SECRET_CHARS`` characters are ignored (masking them would blank out
            ordinary text).
        source: where it comes from (e.g. ``"$OPENAI_API_KEY"``), for the DEBUG log line
            (the value is never logged).

    Returns:
        Whether ``value`` was newly registered.
    """
    if not value or len(value) < MIN_SECRET_CHARS:
        if value:
            log.debug("secret %s is shorter than %d characters: not masked", source or "?",
                      MIN_SECRET_CHARS)
        return False
    added = _REGISTRY.add(value)
    stripped = value.strip()  # a key file's newline: a client sends it without
    if stripped != value and len(stripped) >= MIN_SECRET_CHARS:
        added = _REGISTRY.add(stripped) or added
    if added:
        _install_masking()
        log.debug("secret %s registered for masking", source or "(unnamed)")
    return added


_AUTH_SCHEME = re.compile(r"^\s*(?:Bearer|Basic|Token|Bot|ApiKey|Key|Digest)\s+(\S.*)$",
                          re.IGNORECASE)


def register_header_secret(value: str | None, source: str = "") -> bool:
    """Register a header's value, and its credential alone when it has an auth scheme.

    ``Authorization: Bearer <token>`` is masked whole, and ``<token>`` wherever it appears
    without the scheme (a server quoting it back, a URL).

    Args:
        value: the header's value.
        source: where it comes from, for the DEBUG log line.

    Returns:
        Whether anything was newly registered.
    """
    if not value:
        return False
    added = register_secret(value, source)
    m = _AUTH_SCHEME.match(value)
    if m:
        added = register_secret(m.group(1).strip(), source) or added
    return added


_CREDENTIAL_NAME = re.compile(
    r"(?:(?:^|[-_.]|(?-i:(?<=[a-z0-9])(?=[A-Z])))(?:authorization|auth|cookie|key|token|"
    r"secret|pass|pwd|jwt|credentials?)|apikey|password|passwd|passphrase)$", re.IGNORECASE)
"""Names of headers and environment variables that carry a credential: ``Authorization``,
``Proxy-Authorization``, ``Cookie``, ``x-api-key``, ``X-Auth-Token``, ``GITHUB_TOKEN``,
``DB_PASSWORD``, ``DB_PASS``, ``MYSQL_PWD``, ``REDISCLI_AUTH``, and in camelCase
``accessToken``, ``clientSecret``, ``privateKey``, ``basicAuth`` (not ``x-team``, nor
``MONKEY``, ``bypass`` or ``oauth_flow``: a short word must stand apart, after a separator
or a lower-case letter or digit followed by its capital); the words no ordinary name ends
with count glued to what comes before too (``PGPASSWORD``, ``dbpassword``,
``OPENAIAPIKEY``)."""


def secret_from_env(env_var: str) -> str | None:
    """The value of the environment variable ``env_var``, registered as a secret.

    Args:
        env_var: the variable's name (e.g. a connection's ``api_key_env``).

    Returns:
        Its value; ``None`` when it is unset or empty.
    """
    value = os.environ.get(env_var) or None
    if value is not None:
        register_secret(value, f"${env_var}")
    return value


def registered_secret_count() -> int:
    """How many secrets this process has registered (their values are not exposed)."""
    return len(_REGISTRY._values)  # (``len(_REGISTRY)`` without its ``__len__`` call)


def mask_secrets(text: str) -> str:
    """``text`` with every known secret (and secret-looking substring) replaced by ``MASK``.

    Known secrets are the registered values in every form of ``_forms``; then
    ``SECRET_VALUE_PATTERNS`` are applied.

    Args:
        text: any text.

    Returns:
        The masked text (``text`` itself when nothing matched).
    """
    if not text:
        return text
    return _PATTERN_RE.sub(MASK, mask_known(text))


MESSAGE_MAX_CHARS = 4000
"""The longest failure message a tool result or a chat's error carries (``clip``)."""


def clip(text: str, limit: int = MESSAGE_MAX_CHARS) -> str:
    """``text`` when it has at most ``limit`` characters, else its start and end, marked.

    For text made from what a model, a tool or a server wrote (an exception's message, a
    validator's message quoting the value), which goes back to the model and into records:
    the start and the end are kept (a validator's message ends with the reason, after the
    value it quotes). A text that is cut is masked first (``api.mask_secrets``), so no
    part of a known secret is left at a cut.

    Args:
        text: the text.
        limit: the most characters of ``text`` kept.

    Returns:
        ``text``, or about its first three quarters of ``limit`` characters, then
        ``[... N of M characters cut ...]``, then its last quarter.
    """
    if len(text) <= limit:
        return text
    text = mask_secrets(text)  # before a cut could leave part of a secret unrecognised
    if len(text) <= limit:
        return text
    tail = limit // 4
    head = limit - tail
    return (f"{text[:head]}[... {len(text) - limit:,} of {len(text):,} characters cut ...]"
            f"{text[len(text) - tail:]}")


def cut_masked(text: str, limit: int) -> str:
    """The first ``limit`` characters of ``text``, masked first when it is longer.

    For a message quoting what a record, a model, a tool or a server wrote: the message is
    masked again where it leaves (an error's text, a trace, a log line), but a secret cut
    in two there is no longer one a mask recognises, and its first part would leave.

    Args:
        text: the quoted text.
        limit: the most characters kept.

    Returns:
        ``text`` when it has at most ``limit`` characters, else the start of
        ``mask_secrets(text)``.
    """
    if len(text) <= limit:
        return text
    return mask_secrets(text)[:limit]

def has_known_secret(text: str) -> bool:
    """Whether ``text`` holds a registered secret, in any of its forms (a quick check).

    Returns:
        ``True`` when ``mask_known(text)`` would change it.
    """
    regexes = _REGISTRY.regexes
    if regexes is None or not text:
        return False
    encoded = _REGISTRY.encoded
    if encoded is not None and encoded.found(text):
        return True
    forms, hidden, anchors = regexes
    if anchors is not None and not anchored(text, anchors):
        if is_canonical(text):
            return False
        text = canonical(text)  # no form where it stands: only a hidden one can be there
        if not anchored(text, anchors):
            return False
        return hidden.search(text) is not None
    return forms.search(text) is not None or hidden.search(canonical(text)) is not None



def mask_known(text: str) -> str:
    """``text`` with the registered secrets masked (not the patterns); for hot paths.

    The forms of ``_forms`` are masked where they stand, then a secret hidden by wrapping,
    references or escapes (``_secret_forms.canonical``) in the span of text it was made of.

    Returns:
        The masked text (``text`` itself when nothing matched).
    """
    regexes = _REGISTRY.regexes
    if regexes is None or not text:
        return text
    forms, hidden, anchors = regexes
    if anchors is not None and not anchored(text, anchors):
        if not is_canonical(text) and anchored(canonical(text), anchors):
            text = mask_hidden(text, hidden, MASK)  # no form where it stands
    else:
        text = mask_hidden(forms.sub(MASK, text), hidden, MASK)
    encoded = _REGISTRY.encoded  # the encodings (base32, UTF-16...), by str searches
    return text if encoded is None else encoded.mask(text, MASK)


MaskedStr = Annotated[str, AfterValidator(mask_secrets)]
"""A text field masked when its model is made (``mask_secrets``), whoever makes it.

The failure texts of ``ChatResponseEvent`` (``error``, ``traceback``), ``ToolResult``
(``error``, ``traceback``), ``SubagentResult`` (``error_message``, ``traceback``),
``ContextRetrievalResponseEvent`` (``error``) and the runtime's ``ErrorRecord``
(``message``, ``traceback``) are such fields.
"""


def mask_value(value: Any, mask: Callable[[str], str] = mask_secrets) -> Any:
    """A copy of a JSON-like ``value`` with every string masked (by ``mask``).

    Dicts (keys too), lists and tuples are walked; other leaves are returned as they are.

    Args:
        value: the value.
        mask: what masks one string: ``mask_secrets`` (known secrets and secret-looking
            values), or ``mask_known`` (known secrets only: data that merely looks like a
            key is left as it is).

    Returns:
        The masked value (``value`` itself when it is a leaf that needed no masking).
    """
    if isinstance(value, str):
        return mask(value)
    if isinstance(value, dict):
        return {mask(k) if isinstance(k, str) else k: mask_value(v, mask)
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [mask_value(v, mask) for v in value]
    return value


def mask_known_value(value: Any) -> Any:
    """``value`` with the registered secrets masked in each of its strings (``mask_known``).

    Returns:
        ``value`` itself when this process registered no secret, else a masked copy.
    """
    return value if not _REGISTRY else mask_value(value, mask_known)


# -- logs --------------------------------------------------------------------------------
_installed = False
_install_lock = threading.Lock()
_formatter = logging.Formatter()
_RECORD_FIELDS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message", "asctime", "taskName"}
"""The attributes every log record has; any other was given with ``extra=``."""


def _mask_extra(record: logging.LogRecord) -> None:
    """Mask the texts given with ``extra=`` (a JSON formatter writes them out)."""
    for name, value in list(vars(record).items()):
        if name in _RECORD_FIELDS or not isinstance(value, (str, dict, list, tuple)):
            continue
        masked = mask_value(value)
        if isinstance(value, tuple):
            masked = tuple(masked)
        if masked != value:
            setattr(record, name, masked)


def _mask_record(record: logging.LogRecord) -> None:
    """Mask a record's message, traceback and stack in place (before any handler sees it).

    Its ``extra=`` fields are set after the record factory made it: ``Logger.makeRecord``
    masks them (``_install_masking``).
    """
    try:
        message = record.getMessage()
    except Exception:  # noqa: BLE001 - a bad format: logging reports it when it emits
        return
    masked = mask_secrets(message)
    if masked != message:
        record.msg, record.args = masked, None
    if record.exc_info and record.exc_info[0] is not None and not record.exc_text:
        from ._secret_scrub import quoted_inputs_masked  # (it imports this module)

        text = _formatter.formatException(quoted_inputs_masked(record.exc_info))
        masked = mask_secrets(text)
        if masked != text:
            record.exc_text = masked  # what Formatter.format prints instead of formatting
    if record.stack_info:
        record.stack_info = mask_secrets(record.stack_info)


def _install_masking() -> None:
    """Mask log records when they are made, warnings' texts, uncaught exceptions' tracebacks.

    The logging record factory is wrapped (whatever it is), and ``Logger.makeRecord`` (which
    sets the ``extra=`` fields after the factory), and ``warnings.formatwarning`` (the text
    Python prints to stderr for a warning, and ``logging.captureWarnings`` logs); the
    exception hooks (``sys.unraisablehook`` too) are replaced
    only when they are Python's own (a hook someone installed prints what it prints).
    """
    global _installed
    with _install_lock:
        if _installed:
            return
        previous = logging.getLogRecordFactory()

        def masking_factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
            record = previous(*args, **kwargs)
            _mask_record(record)
            return record

        logging.setLogRecordFactory(masking_factory)
        make_record = logging.Logger.makeRecord
        if not getattr(make_record, "_masks_extra", False):
            def masking_make_record(self: logging.Logger, *args: Any,
                                    **kwargs: Any) -> logging.LogRecord:
                record = make_record(self, *args, **kwargs)
                extra = kwargs.get("extra", args[8] if len(args) > 8 else None)
                if extra:
                    _mask_extra(record)
                return record

            masking_make_record._masks_extra = True  # type: ignore[attr-defined]
            logging.Logger.makeRecord = masking_make_record  # type: ignore[method-assign]
        format_warning = warnings.formatwarning  # what stderr and logging show of a warning
        if not getattr(format_warning, "_masks", False):
            def masking_formatwarning(message: Warning | str, category: type[Warning],
                                      filename: str, lineno: int,
                                      line: str | None = None) -> str:
                return mask_secrets(format_warning(message, category, filename, lineno, line))

            masking_formatwarning._masks = True  # type: ignore[attr-defined]
            warnings.formatwarning = masking_formatwarning
        from ._secret_hooks import (
            masked_excepthook,
            masked_thread_excepthook,
            masked_unraisablehook,
        )

        if sys.excepthook is sys.__excepthook__:
            sys.excepthook = masked_excepthook
        if threading.excepthook is threading.__excepthook__:
            threading.excepthook = masked_thread_excepthook
        if sys.unraisablehook is sys.__unraisablehook__:
            sys.unraisablehook = masked_unraisablehook
        _installed = True


def is_credential_name(name: Any) -> bool:
    """Whether entries under ``name`` carry a credential.

    Returns:
        ``True`` for ``Authorization``, ``api_key``, ``GITHUB_TOKEN``, ``db_password``...
        (``_CREDENTIAL_NAME``).
    """
    return isinstance(name, str) and bool(_CREDENTIAL_NAME.search(name))
