"""OpenAI-compatible chat models through the official ``openai`` SDK.

Covers OpenAI and any server speaking its chat-completions API (vLLM, LM Studio, llama.cpp's
server, Ollama's ``/v1``). Needs the ``openai`` extra (``pip install 'flink-agents-py[openai]'``).
Structured output uses ``response_format={"type": "json_schema", ...}`` as OpenAI documents it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from pydantic import Field, PrivateAttr

from ...api import ChatMessage, ChatModelConnection, ChatResponse, ProviderError, ToolMetadata
from ._llama import from_openai_choice, to_openai_messages

__all__ = ["OpenAIChatModel"]


class OpenAIChatModel(ChatModelConnection):
    """A chat-completions endpoint.

    Attributes:
        base_url: the API base URL (``None``: the SDK's default, or ``OPENAI_BASE_URL``).
        api_key_env: the environment variable holding the API key (read at first use; a
            local server that needs no key gets a placeholder).
        default_model: the model when the setup names none.
        timeout_s: request timeout in seconds.
        max_retries: the SDK's own retries on connection errors, 429 and 5xx.
    """

    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    default_model: str = "default"
    timeout_s: float = Field(default=120.0, gt=0)
    max_retries: int = Field(default=2, ge=0)

    _client: Any = PrivateAttr(default=None)

    def _sdk(self) -> Any:
        if self._client is None:
            try:
                import openai
            except ImportError as e:
                raise ImportError(
                    "the openai chat model needs the openai SDK: "
                    "pip install 'flink-agents-py[openai]'"
                ) from e
            self._client = openai.AsyncOpenAI(
                base_url=self.base_url, api_key=os.environ.get(self.api_key_env) or "unused",
                timeout=self.timeout_s, max_retries=self.max_retries,
            )
        return self._client

    async def achat(
        self,
        messages: Sequence[ChatMessage],
        *,
        model: str | None = None,
        tools: Sequence[ToolMetadata] = (),
        output_schema: dict[str, Any] | None = None,
        **options: Any,
    ) -> ChatResponse:
        """Send one chat-completions request; see ``ChatModelConnection.chat``.

        Raises:
            ProviderError: with the HTTP status, ``retryable`` for timeouts, 429 and 5xx.
        """
        client = self._sdk()
        import openai

        kwargs: dict[str, Any] = {"model": model or self.default_model,
                                  "messages": to_openai_messages(messages), **options}
        if tools:
            kwargs["tools"] = [{"type": "function", "function": {
                "name": t.name, "description": t.description, "parameters": t.parameters}}
                for t in tools]
        if output_schema is not None:
            kwargs["response_format"] = {"type": "json_schema", "json_schema": {
                "name": "output", "schema": output_schema}}
        try:
            completion = await client.chat.completions.create(**kwargs)
        except openai.APIStatusError as e:
            raise ProviderError(f"chat completion failed: {e.message}", status_code=e.status_code,
                                retryable=e.status_code == 429 or e.status_code >= 500) from e
        except (openai.APITimeoutError, openai.APIConnectionError) as e:
            raise ProviderError(f"chat completion failed: {e}", retryable=True) from e
        return from_openai_choice(completion.model_dump())
