"""Credentials named in camelCase are credentials too.

Header and environment entries are registered as secrets, and shown as ``[REDACTED]`` in
the ``repr`` of a descriptor or a resource, when their names say they carry a credential.
The names were matched only with ``-``, ``_`` or ``.`` before the word (``x-api-key``,
``GITHUB_TOKEN``): ``accessToken``, ``clientSecret``, ``privateKey`` (as JSON configs and
SDKs write them, and as the event log's redaction already read them) were shown in clear
and never masked.
"""

from __future__ import annotations

import uuid

import pytest

from flink_agents_py.api import ResourceDescriptor, mask_secrets
from flink_agents_py.api.internal import register_resource_secrets
from flink_agents_py.integrations.chat_models import OpenAIChatModel

CAMEL = ["accessToken", "clientSecret", "privateKey", "sessionToken", "dbPassword",
         "authPassphrase", "x-AuthToken"]


@pytest.mark.parametrize("name", CAMEL)
def test_a_camel_case_credential_header_is_hidden_in_reprs_and_masked_once_built(name):
    value = f"cc{uuid.uuid4().hex[:20]}"
    descriptor = ResourceDescriptor(OpenAIChatModel, headers={name: value, "x-team": "blue"})
    assert value not in repr(descriptor) and "'x-team': 'blue'" in repr(descriptor)
    connection = OpenAIChatModel(headers={name: value}, api_key_required=False)
    assert value not in repr(connection)
    register_resource_secrets(connection)  # as the runtime does when it builds it
    assert mask_secrets(f"401: bad credential {value}") == "401: bad credential [REDACTED]"


def test_words_that_only_end_like_a_credential_are_not_credentials():
    from flink_agents_py.api._secrets import is_credential_name

    for name in ("monkey", "TURKEY", "maxTokens", "inputTokens", "x-team", "hotkey"):
        assert not is_credential_name(name), name
