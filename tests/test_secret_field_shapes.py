"""A resource's secrets are known by the shape of its fields, not by three exact names.

The runtime registered the value of the variable a field named exactly ``api_key_env``,
``token_env`` or ``secret_env_var`` names. A resource of a user's own class keeping its
database password in ``password_env`` (or a token in ``access_token_env``, a client secret
in ``clientSecretEnv``) had it masked nowhere: a driver's error quoting it reached the error
record, the event log and the logs in clear. Nor was a ``pydantic.SecretStr`` given to a
resource directly (not through a descriptor's text) registered: its value, which the
resource sends, was masked nowhere either. Each is now registered by its shape: a
credential's name with an ``env`` suffix names a variable, a ``SecretStr`` is a secret
whatever its field is called.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap
import uuid
from typing import Any

import pytest
from pydantic import SecretStr

from flink_agents_py.api import Resource, ResourceType, mask_secrets
from flink_agents_py.api.internal import register_resource_secrets

REPO = pathlib.Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("field", ["password_env", "access_token_env", "client_secret_env",
                                   "db_password_env_var", "clientSecretEnv", "privateKeyEnv",
                                   "api_key_env", "token_env", "secret_env_var"])
def test_a_field_naming_a_credentials_variable_registers_its_value(monkeypatch, field):
    value = f"v{uuid.uuid4().hex}"
    monkeypatch.setenv("ATTACK_CREDENTIAL", value)

    class Store(Resource):
        RESOURCE_TYPE = ResourceType.TOOL
        model_config = {"extra": "allow"}

    register_resource_secrets(Store(**{field: "ATTACK_CREDENTIAL"}))
    assert mask_secrets(f"login failed: {value}") == "login failed: [REDACTED]"


@pytest.mark.parametrize("field", ["tokenizer_env", "region_env", "env", "monkey_env",
                                   "max_tokens_env"])
def test_a_field_naming_another_variable_registers_nothing(monkeypatch, field):
    value = f"v{uuid.uuid4().hex}"
    monkeypatch.setenv("ATTACK_PLAIN", value)

    class Store(Resource):
        RESOURCE_TYPE = ResourceType.TOOL
        model_config = {"extra": "allow"}

    register_resource_secrets(Store(**{field: "ATTACK_PLAIN"}))
    assert mask_secrets(f"region {value}") == f"region {value}"


@pytest.mark.parametrize("shape", ["field", "dict", "list"])
def test_a_secret_str_given_to_a_resource_is_registered_whatever_its_name(shape):
    value = f"s{uuid.uuid4().hex}"
    secret = SecretStr(value)

    class Store(Resource):
        RESOURCE_TYPE = ResourceType.TOOL
        login: Any = None

    login = {"field": secret, "dict": {"db": {"pw": secret}}, "list": ["user", secret]}[shape]
    register_resource_secrets(Store.model_construct(login=login))  # no __init__: built so
    assert mask_secrets(f"echo {value}") == "echo [REDACTED]"


USER_MODULE = '''
import json, os, sys
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (Agent, InputEvent, OutputEvent, Resource, ResourceDescriptor,
                                 ResourceType, RunnerContext, action)
from flink_agents_py.observability import EventLog


class ShopDb(Resource):
    """The user's own database client: its password comes from ``password_env``."""

    RESOURCE_TYPE = ResourceType.TOOL
    password_env: str = "SHOP_DB_PASSWORD"

    def lookup(self, sku):
        password = os.environ[self.password_env]
        raise ConnectionError(f"login to shop-db failed (user=shop password={password})")


class Shop(Agent):
    @action(InputEvent)
    @staticmethod
    async def ask(event: InputEvent, ctx: RunnerContext) -> None:
        db = ctx.get_resource("db", ResourceType.TOOL)
        await ctx.durable_execute_async(db.lookup, event.input["sku"])
        ctx.send_event(OutputEvent(output="unreachable"))


if __name__ == "__main__":
    agent = Shop()
    agent.add_resource("db", ResourceType.TOOL, ResourceDescriptor(ShopDb))
    result = (AgentsExecutionEnvironment.local(event_log=EventLog("events.jsonl"))
              .from_list([{"key": "k", "sku": "B01"}]).apply(agent).run())
    print(json.dumps([e.model_dump(mode="json") for e in result.errors]))
'''


def test_a_users_resource_whose_driver_echoes_its_password_leaks_it_nowhere(tmp_path):
    home = tmp_path / "user"
    home.mkdir()
    (home / "shop.py").write_text(textwrap.dedent(USER_MODULE))
    password = f"pw-{uuid.uuid4().hex}"
    env = {**os.environ, "PYTHONPATH": str(REPO), "SHOP_DB_PASSWORD": password}
    done = subprocess.run([sys.executable, "shop.py"], cwd=home, env=env,
                          capture_output=True, text=True, timeout=150)
    assert done.returncode == 0, done.stderr[-3000:]
    assert str(REPO) not in str(home)
    [error] = json.loads(done.stdout.strip().splitlines()[-1])
    assert "login to shop-db failed" in error["message"]
    assert "password=[REDACTED]" in error["message"]
    for where, text in (("the error record", json.dumps(error)), ("the logs", done.stderr),
                        ("the event log", (home / "events.jsonl").read_text())):
        assert password not in text, f"the password reached {where}"
