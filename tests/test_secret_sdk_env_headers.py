"""A credential an SDK reads from the environment on its own is masked too.

The ``anthropic`` and ``openai`` SDKs add the headers of ``ANTHROPIC_CUSTOM_HEADERS`` /
``OPENAI_CUSTOM_HEADERS`` (``Name: value`` lines) to every request, whatever the connection
is given (a gateway's key, as ``OTEL_EXPORTER_OTLP_HEADERS`` carries a collector's), and take
the server from ``OPENAI_BASE_URL`` / ``ANTHROPIC_BASE_URL`` when given none. The framework
never registered them, so a gateway quoting such a header back in its 401 put the
key in clear into the chat's error, error records and logs. The values of the
credential-named headers, and the credentials of such a URL, are now registered when the
connection makes its client, as a connection's own headers and URL are.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from support.providers import (
    WireServer,
    anthropic_reply,
    openai_reply,
    outputs_of,
    probe_agent,
    run_probe,
)

from flink_agents_py.api import ResourceDescriptor
from flink_agents_py.integrations.chat_models import AnthropicChatModel


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_gateway_key_from_the_sdks_custom_headers_is_masked_in_the_error(monkeypatch,
                                                                           provider):
    from flink_agents_py.integrations.chat_models import OpenAIChatModel

    key = f"gw-{uuid.uuid4().hex}"
    monkeypatch.setenv(f"{provider.upper()}_CUSTOM_HEADERS",
                       f"x-gateway-key: {key}\nx-team: some-team-2024-01-01")
    monkeypatch.setenv("FAP_TEST_KEY", "k-test-key-0123")
    seen: list[str] = []

    def echo(req: dict[str, Any]) -> tuple[int, Any]:
        sent = req["headers"].get("x-gateway-key", "")
        seen.append(sent)
        if provider == "openai":
            return 401, {"error": {"message": f"gateway key {sent} is not valid",
                                   "type": "invalid_request_error"}}
        return 401, {"type": "error", "error": {
            "type": "authentication_error", "message": f"gateway key {sent} is not valid"}}

    with WireServer(echo) as srv:
        if provider == "openai":
            conn = ResourceDescriptor(OpenAIChatModel, base_url=f"{srv.url}/v1", max_retries=0,
                                      api_key_env="FAP_TEST_KEY", default_model="gpt-test")
        else:
            conn = ResourceDescriptor(AnthropicChatModel, base_url=srv.url, max_retries=0,
                                      api_key_env="FAP_TEST_KEY", default_model="claude-test")
        res = run_probe(probe_agent(conn), [{"key": "k", "q": "hi"}])
    assert seen and seen[0] == key  # the SDK sent it
    [ans] = outputs_of(res, "answer")
    assert ans["error"] and "is not valid" in ans["error"], ans
    assert key not in ans["error"] and "[REDACTED]" in ans["error"]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_credential_in_the_url_the_sdk_reads_from_the_environment_is_registered(
        monkeypatch, provider):
    """``base_url=None``: the SDK takes ``OPENAI_BASE_URL`` / ``ANTHROPIC_BASE_URL``, and a
    gateway token written into it (``?api-key=``, userinfo) was sent but never registered."""
    from flink_agents_py.api import mask_secrets
    from flink_agents_py.integrations.chat_models import OpenAIChatModel

    token = f"urltok-{uuid.uuid4().hex}"
    monkeypatch.setenv("FAP_TEST_KEY", "k-test-key-0123")

    def answer(req: dict[str, Any]) -> tuple[int, Any]:
        if provider == "openai":
            return 200, openai_reply("ok")
        return 200, anthropic_reply([{"type": "text", "text": "ok"}])

    with WireServer(answer) as srv:
        base = srv.url.replace("http://", f"http://gw:{token}@")
        if provider == "openai":
            monkeypatch.setenv("OPENAI_BASE_URL", f"{base}/v1")
            conn = ResourceDescriptor(OpenAIChatModel, api_key_env="FAP_TEST_KEY",
                                      default_model="gpt-test")
        else:
            monkeypatch.setenv("ANTHROPIC_BASE_URL", base)
            conn = ResourceDescriptor(AnthropicChatModel, api_key_env="FAP_TEST_KEY",
                                      default_model="claude-test")
        res = run_probe(probe_agent(conn), [{"key": "k", "q": "hi"}])
    assert srv.requests, "the SDK did not reach the server named by the environment"
    [ans] = outputs_of(res, "answer")
    assert ans["error"] is None and ans["content"] == "ok", ans
    assert mask_secrets(f"502 from gw:{token}@gateway") == "502 from gw:[REDACTED]@gateway"


def test_an_ollama_key_the_sdk_sends_on_its_own_is_masked_in_the_error(monkeypatch):
    """The ``ollama`` SDK sends ``$OLLAMA_API_KEY`` as a bearer token (Ollama's cloud)."""

    from flink_agents_py.integrations.chat_models import OllamaChatModel

    key = f"ollama-{uuid.uuid4().hex}"
    monkeypatch.setenv("OLLAMA_API_KEY", key)
    seen: list[str] = []

    def echo(req: dict[str, Any]) -> tuple[int, Any]:
        sent = req["headers"].get("authorization", "")
        seen.append(sent)
        return 401, {"error": f"unauthorized: {sent.removeprefix('Bearer ')} is not a key"}

    with WireServer(echo) as srv:
        conn = ResourceDescriptor(OllamaChatModel, host=srv.url, default_model="llama-test")
        res = run_probe(probe_agent(conn), [{"key": "k", "q": "hi"}])
    assert seen and seen[0] == f"Bearer {key}"  # the SDK sent it
    [ans] = outputs_of(res, "answer")
    assert ans["error"] and "is not a key" in ans["error"], ans
    assert key not in ans["error"] and "[REDACTED]" in ans["error"]
