"""A credential in an agent's configuration is a secret the framework knows.

``agent.set_config(**{"openai.api_key": ...})``, a YAML agent's ``config:`` and a ported
Flink Agents program's ``env.get_config().set("openai.api-key", ...)`` put a key where
actions read it (``ctx.config``) and send it on; the plan (and the job Flink ships) holds it
as a resource argument would. A value under a credential's name there was never
registered, so a provider or a tool quoting it back put it in clear into error records,
logs and traces. It is now registered when the plan is made (and when a worker reads the
plan back) or when the configuration is set, as a resource argument under such a name is.
"""

from __future__ import annotations

import uuid

import pytest

from flink_agents_py.api import Agent, InputEvent, RunnerContext, action, mask_secrets
from flink_agents_py.plan import AgentPlan


class _Configured(Agent):
    @action(InputEvent)
    @staticmethod
    def run(event: InputEvent, ctx: RunnerContext) -> None:
        """Nothing."""


@pytest.fixture()
def secret() -> str:
    return f"cfg{uuid.uuid4().hex}"


@pytest.mark.parametrize("name", ["openai.api_key", "db.password", "GITHUB_TOKEN",
                                  "mcp.headers.Authorization"])
def test_a_plans_configuration_registers_its_credentials(secret, name):
    agent = _Configured()
    agent.set_config(**{name: secret, "region": "eu-west-region-1"})
    plan = AgentPlan.from_agent(agent)
    assert mask_secrets(f"401 for {secret}") == "401 for [REDACTED]"
    assert mask_secrets("eu-west-region-1") == "eu-west-region-1"  # other values stay
    assert plan.config[name] == secret  # the value itself is unchanged


def test_a_plan_read_back_registers_them_too(secret, monkeypatch):
    from flink_agents_py.api import _secrets

    agent = _Configured()
    agent.set_config(**{"nested": {"api_key": secret}})
    text = AgentPlan.from_agent(agent).model_dump_json()
    monkeypatch.setattr(_secrets, "_REGISTRY", type(_secrets._REGISTRY)())  # a new worker
    assert secret in mask_secrets(secret)
    AgentPlan.model_validate_json(text)
    assert mask_secrets(secret) == "[REDACTED]"


def test_a_ported_programs_configuration_registers_them(secret):
    from flink_agents_py.compat import AgentsExecutionEnvironment

    env = AgentsExecutionEnvironment.get_execution_environment()
    env.get_config().set("openai.api-key", secret)
    assert mask_secrets(f"echo {secret}") == "echo [REDACTED]"
