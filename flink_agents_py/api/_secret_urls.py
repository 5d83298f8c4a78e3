"""Credentials written into a resource's arguments: in URLs and in command lines.

A secret belongs in an environment variable (``api_key_env``, ``secret_headers``,
``secret_env``), but some services take it in the URL (``https://user:<password>@host``,
``https://<token>@host``, ``...?api_key=<key>``, an MCP endpoint ``...?token=<token>``) or
on a command line (``--api-key <key>``, ``--token=<token>``), and a program may put it
there. Such a value is part of the plan (as a plain ``Authorization`` header is): it is
registered as a secret when the descriptor or the resource holding it is made, in every
process that makes one, so a URL or a command line quoted in a warning, an error record, a
log line or a ``repr`` shows ``[REDACTED]`` in its place.

What counts: the password of a URL's user part (its user name when it has no password: a
token used as the user, as GitHub and Sentry URLs do), the values of query and fragment
parameters under credential names (``key``, ``api_key``, ``api-key``, ``token``,
``access_token``, ``password``, ``secret``, ``sig``, ``signature``, ``auth``...), and the
value of a command-line option with such a name (``--api-key X``, ``--token=X``), and a text
given under a credential name (``password="..."``, ``api_key="..."``, ``{"db": {"secret":
"..."}}``: a field or an entry of a dict, at any depth), which the ``repr`` of a resource or
a descriptor masked already but an error, a log line or a provider's echo of it did not. A
field named just ``key`` is not one (``key="documents"`` names a thing far more often than
it holds a credential, and masking the word everywhere would blank out ordinary text; in a
URL's query ``?key=`` is), nor is a tokenizer's special token (``eos_token="<|im_end|>"``).
Values shorter than ``MIN_SECRET_CHARS`` are not registered, as ever.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl, unquote, unquote_plus, urlsplit

from ._secret_fields import revealed_secrets
from ._secrets import is_credential_name, register_header_secret

__all__ = ["plan_credentials", "register_plan_credentials", "register_sdk_default_url",
           "register_sdk_env_headers"]

_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>`]+")
_QUERY_CREDENTIAL = re.compile(r"(?:^|[-_.])(?:sig|signature|auth|credential)$", re.IGNORECASE)
_MAX_DEPTH = 8


def _query_credential(name: str) -> bool:
    return is_credential_name(name) or bool(_QUERY_CREDENTIAL.search(name))


def _url_credentials(text: str) -> Iterator[str]:
    for match in _URL.finditer(text):
        try:
            parts = urlsplit(match.group(0))
        except ValueError:  # a malformed URL (a bad port, brackets): nothing to read
            continue
        if "@" in parts.netloc:
            user, colon, password = parts.netloc.rpartition("@")[0].partition(":")
            yield unquote(password if colon else user)
        for piece in (parts.query, parts.fragment):
            for name, value in parse_qsl(piece):
                if _query_credential(name):
                    yield value


def _option_credentials(args: list[str]) -> Iterator[str]:
    for i, arg in enumerate(args):
        if not arg.startswith("-"):
            continue
        name, eq, value = arg.lstrip("-").partition("=")
        if not is_credential_name(name):
            continue
        if eq:
            yield value
        elif i + 1 < len(args) and not args[i + 1].startswith("-"):
            yield args[i + 1]


_PAIR = re.compile(
    r"(?:^|(?<=[\s;&?#,]))([A-Za-z_][\w.-]*)[ \t]*=[ \t]*"
    r"(?:'((?:[^'\\]|\\.)*)'|\"([^\"]*)\"|\{((?:[^}]|\}\})*)\}|([^\s;&'\"{][^\s;&]*))")
"""A ``name=value`` pair of a connection string: libpq's (``password='...'``, separated by
spaces, ``\\`` escapes), ADO.NET's and ODBC's (``Pwd={...};``, ``}}`` for ``}``), Azure's
(``AccountKey=...;``), a JDBC URL's (``;password=...``) and a URL's path parameters."""
_PAIR_NAMES = re.compile(r"^pwd$", re.IGNORECASE)
"""Credential names of connection strings besides ``is_credential_name``'s (ODBC's ``PWD``)."""
_HEADER_LINE = re.compile(r"^[ \t]*([A-Za-z][\w-]*)[ \t]*:[ \t]*(\S[^\r\n]*?)[ \t]*$")
"""A text that is one HTTP header line, ``X-Api-Key: <key>`` (curl's ``-H`` argument)."""


def _pair_credentials(text: str, found: set[str]) -> Iterator[str]:
    """The values of ``text``'s ``name=value`` pairs under credential names (``_PAIR``).

    Yields:
        Each value, unquoted and unescaped; one already in ``found`` (a URL's query
        parameter, decoded) is not yielded again.
    """
    for m in _PAIR.finditer(text):
        name = m.group(1)
        if not (_named_credential(name) or _PAIR_NAMES.search(name)):
            continue
        quoted, double, braced, plain = m.group(2, 3, 4, 5)
        if quoted is not None:
            value = re.sub(r"\\(.)", r"\1", quoted)
        elif braced is not None:
            value = braced.replace("}}", "}")
        else:
            value = double if double is not None else plain
        if value and not {value, unquote(value), unquote_plus(value)} & found:
            yield value


def _text_credentials(text: str) -> Iterator[str]:
    """The credentials a text carries: in URLs, ``name=value`` pairs and a header line."""
    found: set[str] = set()
    if "://" in text:
        for credential in _url_credentials(text):
            found.add(credential)
            yield credential
    if "=" in text:
        yield from _pair_credentials(text, found)
    header = _HEADER_LINE.match(text) if ":" in text else None
    if header is not None and _named_credential(header.group(1)):
        yield header.group(2)


_ENV_NAME_MAPS = ("secret_env", "secret_headers")
"""Fields mapping names to environment variables (``api._secrets``): values are names."""


_NOT_CREDENTIALS = re.compile(r"^key$|^(?:eos|bos|pad|sep|unk|cls|mask|stop|start|end)_token$",
                              re.IGNORECASE)
"""Names like a credential's that are not: ``key`` alone, a tokenizer's special tokens."""


def _named_credential(name: Any) -> bool:
    return is_credential_name(name) and not _NOT_CREDENTIALS.search(str(name))


def plan_credentials(value: Any, depth: int = 0, name: Any = "") -> Iterator[str]:
    """The credentials a resource argument carries: named so, in URLs, in command lines.

    A text under a credential name (``_named_credential``) is one whole; other texts are
    searched for URLs; lists and tuples (a command line) for options with a credential
    name too; dicts' values (named by their keys), lists' and tuples' items (named as the
    list) are walked (8 levels).

    Args:
        value: the argument's value.
        depth: how deep the walk is (callers leave it at 0).
        name: the name ``value`` is given under (a field's, a dict key), or ``""``.

    Yields:
        Each credential found (possibly shorter than a secret may be).
    """
    if isinstance(value, str):
        if value and _named_credential(name):
            yield value
        else:
            yield from _text_credentials(value)
    elif not isinstance(value, (list, tuple, dict)):  # a SecretStr, whatever its name
        yield from revealed_secrets(value)
    elif isinstance(value, (list, tuple)) and depth < _MAX_DEPTH:
        yield from _option_credentials([v for v in value if isinstance(v, str)])
        for item in value:
            yield from plan_credentials(item, depth + 1, name)
    elif isinstance(value, dict) and depth < _MAX_DEPTH:
        names = name not in _ENV_NAME_MAPS  # ``{"x-api-key": "MY_VAR"}``: not a credential
        for key, item in value.items():
            yield from plan_credentials(item, depth + 1, key if names else "")


def register_plan_credentials(arguments: Any, source: str) -> None:
    """Register the credentials in a resource's arguments (``plan_credentials``) as secrets.

    Args:
        arguments: the arguments or fields, by name.
        source: whose they are, for the DEBUG log line (the values are never logged).
    """
    for credential in plan_credentials(arguments):
        # (a header-like value ``Bearer <token>``: the token alone too)
        register_header_secret(credential, f"a credential in {source}")


def register_sdk_default_url(variable: str, given: str | None) -> None:
    """Register the credentials of the URL an SDK reads from ``variable`` when none is given.

    A connection whose ``base_url``/``host`` is ``None`` lets its SDK take the server from
    the environment (``OPENAI_BASE_URL``, ``ANTHROPIC_BASE_URL``, ``OLLAMA_HOST``): a
    credential written there (``https://user:<token>@gateway/v1``, ``?api-key=<key>``) is
    sent as one given in the descriptor is, and registered as such a one is.

    Args:
        variable: the environment variable the SDK reads.
        given: the URL the connection was given (``None``: the SDK reads ``variable``).
    """
    if given is None:
        register_plan_credentials({"url": os.environ.get(variable) or ""}, f"${variable}")


def register_sdk_env_headers(variable: str) -> None:
    """Register the credentials of the headers an SDK reads from ``variable`` on its own.

    The ``openai`` and ``anthropic`` SDKs add the ``Name: value`` lines of
    ``OPENAI_CUSTOM_HEADERS`` / ``ANTHROPIC_CUSTOM_HEADERS`` to every request (a gateway's
    key), whatever the connection is given: each under a credential's name
    (``x-gateway-key``, ``Authorization``) is registered, as a connection's own headers are,
    so a gateway quoting it back leaves it nowhere.

    Args:
        variable: the environment variable the SDK reads.
    """
    for line in (os.environ.get(variable) or "").split("\n"):
        name, colon, value = line.partition(":")
        if colon and is_credential_name(name.strip()):
            register_header_secret(value.strip(), f"${variable}")
