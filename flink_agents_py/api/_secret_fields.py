"""The secrets a resource declares by its fields, registered when the runtime builds it.

A resource says where its secrets are by the shape of its fields, whatever its class (a
connection of this package, a vector store, an MCP server, one of yours), and each is
registered by value (``_secrets.register_secret``) on the worker that builds it, before the
resource reads it:

- a field naming an environment variable: its name is a credential's name followed by
  ``_env``, ``_env_var``, ``Env`` or ``EnvVar`` (``api_key_env``, ``token_env``,
  ``password_env``, ``access_token_env``, ``client_secret_env``, ``clientSecretEnv``): the
  variable's value; a mapping under such a name (``secret_env``, ``secret_headers``) names a
  variable per entry: their values;
- a ``pydantic.SecretStr`` (or ``SecretBytes``) anywhere in a field (a dict's entry, a
  list's item, 8 levels deep): its value, whatever the field is called;
- the entries of a plain ``headers`` or ``env`` mapping whose names say they carry a
  credential (``Authorization``, ``x-api-key``, ``GITHUB_TOKEN``: a secret put in the plan
  anyway).

A literal text under a credential name (``password="..."``) is registered when the
descriptor or the resource is made (``_secret_urls``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import Any

from pydantic import SecretBytes, SecretStr

from ._secrets import is_credential_name, register_header_secret, secret_from_env

__all__ = ["register_resource_secrets", "revealed_secrets", "secret_env_field"]

_ENV_SUFFIX = re.compile(r"(?:[-_.]env(?:[-_.]var)?|Env(?:Var)?)$")
_PLAIN_MAPS = ("headers", "env")
_KNOWN_ENV_FIELDS = ("api_key_env", "token_env", "secret_env_var", "secret_env",
                     "secret_headers")
"""Fields read even when they are not model fields (a property of a plain class)."""
_MAX_DEPTH = 8


def secret_env_field(name: Any) -> bool:
    """Whether a field named ``name`` names environment variables holding secrets.

    Returns:
        ``True`` for a credential's name followed by an ``env`` suffix (``api_key_env``,
        ``password_env``, ``access_token_env_var``, ``clientSecretEnv``, ``secret_env``)
        and for ``secret_headers``.
    """
    if not isinstance(name, str):
        return False
    if name == "secret_headers":
        return True
    suffix = _ENV_SUFFIX.search(name)
    return suffix is not None and is_credential_name(name[:suffix.start()])


def revealed_secrets(value: Any, depth: int = 0) -> Iterator[str]:
    """The values of the ``SecretStr``/``SecretBytes`` in ``value`` (8 levels deep).

    Args:
        value: a field's value (dicts, lists, tuples and sets are walked).
        depth: how deep the walk is (callers leave it at 0).

    Yields:
        Each secret's text (a ``SecretBytes`` decoded as UTF-8, where it is text).
    """
    if isinstance(value, SecretStr):
        yield value.get_secret_value()
    elif isinstance(value, SecretBytes):
        try:
            yield value.get_secret_value().decode()
        except UnicodeDecodeError:
            return
    elif depth < _MAX_DEPTH:
        if isinstance(value, dict):
            value = value.values()
        if isinstance(value, (list, tuple, set, frozenset, type({}.values()))):
            for item in value:
                yield from revealed_secrets(item, depth + 1)


def _fields(resource: Any) -> dict[str, Any]:
    """The fields of ``resource`` by name (a pydantic model's, else its attributes)."""
    names = getattr(type(resource), "model_fields", None)
    if isinstance(names, dict):
        fields = {n: getattr(resource, n, None) for n in names}
        extra = getattr(resource, "__pydantic_extra__", None)  # a class allowing extras
        if isinstance(extra, dict):
            fields.update(extra)
    else:
        try:
            fields = dict(vars(resource))
        except TypeError:  # no __dict__
            fields = {}
    for name in _KNOWN_ENV_FIELDS:
        if name not in fields and hasattr(resource, name):
            fields[name] = getattr(resource, name, None)
    return fields


def register_resource_secrets(resource: Any) -> None:
    """Register the secrets ``resource`` declares by its fields (the module docstring).

    The runtime calls this for every resource it builds, on the worker that builds it,
    before the resource reads them.

    Args:
        resource: any object; a pydantic model's fields (its extra ones too) are read,
            else its attributes.
    """
    for name, value in _fields(resource).items():
        if secret_env_field(name):
            if isinstance(value, str) and value:
                secret_from_env(value)
            elif isinstance(value, dict):
                for env_var in value.values():
                    if isinstance(env_var, str) and env_var:
                        register_header_secret(os.environ.get(env_var), f"${env_var}")
        elif name in _PLAIN_MAPS and isinstance(value, dict):
            for entry, text in value.items():
                if isinstance(text, str) and is_credential_name(entry):
                    register_header_secret(text, f"{name} {entry}")
        for secret in revealed_secrets(value):
            register_header_secret(secret, f"field {name}")
