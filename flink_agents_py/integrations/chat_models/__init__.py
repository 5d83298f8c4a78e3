"""Chat model connections: ``scripted`` (tests), ``local`` (llama.cpp), and provider adapters.

Every adapter imports its SDK on first use, so this package imports without any of them; a
connection whose SDK is missing fails with an ``ImportError`` naming the extra to install.

| connection | SDK (extra) | wire |
|---|---|---|
| ``ScriptedChatModel`` | none | rules or a function |
| ``LlamaCppChatModel`` | ``llama-cpp-python`` (``local``) | in-process llama.cpp |
| ``OpenAIChatModel`` | ``openai`` (``openai``) | chat completions (OpenAI, vLLM, llama.cpp...) |
| ``OllamaChatModel`` | ``ollama`` (``ollama``) | Ollama ``/api/chat`` |
| ``AnthropicChatModel`` | ``anthropic`` (``anthropic``) | Anthropic ``/v1/messages`` |
"""

from ._anthropic import AnthropicChatModel
from ._gguf import GGUF_ENV_VAR, bundled_gguf, find_gguf_model
from ._llama import LlamaCppChatModel
from ._ollama import OllamaChatModel
from ._openai import OpenAIChatModel
from ._scripted import ScriptedChatModel, ScriptedRequest, ScriptRule

__all__ = [
    "GGUF_ENV_VAR",
    "AnthropicChatModel",
    "LlamaCppChatModel",
    "OllamaChatModel",
    "OpenAIChatModel",
    "ScriptRule",
    "ScriptedChatModel",
    "ScriptedRequest",
    "bundled_gguf",
    "find_gguf_model",
]
