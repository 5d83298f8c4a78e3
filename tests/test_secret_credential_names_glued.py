"""Credentials named as database clients and shells name them are credentials too.

A stdio MCP server for a database is given its password in its environment under the name
the client reads (``PGPASSWORD``, ``MYSQL_PWD``, ``DB_PASS``, ``REDISCLI_AUTH``): such
entries were neither shown as ``[REDACTED]`` in the server's ``repr`` nor registered, so a
server quoting its password in an error put it in clear into error records and logs. The
word was matched only after a separator (``DB_PASSWORD``), never glued (``PGPASSWORD``),
and ``pwd``, ``pass`` and ``auth`` were not credential words.
"""

from __future__ import annotations

import uuid

import pytest

from flink_agents_py.api import ResourceDescriptor, mask_secrets
from flink_agents_py.api.internal import register_resource_secrets
from flink_agents_py.integrations.mcp import McpServer

NAMES = ["PGPASSWORD", "MYSQL_PWD", "DB_PASS", "RABBITMQ_DEFAULT_PASS", "REDISCLI_AUTH",
         "X-Auth", "basicAuth", "dbpassword", "OPENAIAPIKEY", "JWT", "x-jwt"]


@pytest.mark.parametrize("name", NAMES)
def test_a_database_password_in_a_servers_env_is_hidden_and_masked(name):
    value = f"pw{uuid.uuid4().hex[:20]}"
    descriptor = ResourceDescriptor(McpServer, command=["server"],
                                    env={name: value, "PGHOST": "db.example"})
    assert value not in repr(descriptor) and "'PGHOST': 'db.example'" in repr(descriptor)
    server = McpServer(command=["server"], env={name: value}, list_at_plan_build=False)
    assert value not in repr(server)
    register_resource_secrets(server)  # as the runtime does when it builds it
    assert mask_secrets(f"FATAL: password {value} refused") == \
        "FATAL: password [REDACTED] refused"


def test_words_that_only_end_like_these_are_not_credentials():
    from flink_agents_py.api._secrets import is_credential_name

    for name in ("bypass", "COMPASS", "oauth_flow", "PGHOST", "PGPASSFILE", "user",
                 "session_id", "monkey", "maxTokens", "authority", "passes"):
        assert not is_credential_name(name), name


@pytest.mark.parametrize("name", ["PGPASSWORD", "MYSQL_PWD", "DB_PASS", "dbPass", "x-jwt",
                                  "openaiapikey"])
def test_the_event_log_redacts_values_under_these_names(name):
    from flink_agents_py.observability._payload import Redactor

    redactor = Redactor()
    assert redactor.is_secret_key(name)
    assert not redactor.is_secret_key("bypass") and not redactor.is_secret_key("compass")
