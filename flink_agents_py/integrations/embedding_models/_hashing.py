"""A deterministic embedding without a model, for tests: hashed bag of words."""

from __future__ import annotations

import hashlib
import math
import re
import threading
from typing import Any

from pydantic import Field, PrivateAttr

from ...api import EmbeddingError, EmbeddingModelConnection, EmbeddingResult, EmbeddingTokenUsage
from ..chat_models._common import FreshOnUnpickle

__all__ = ["HashingEmbeddingModel"]

_WORD = re.compile(r"[a-z0-9]+")


class HashingEmbeddingModel(FreshOnUnpickle, EmbeddingModelConnection):
    """Each lower-cased word adds 1 to the dimension its BLAKE2b hash picks; L2-normalized.

    Texts sharing words get close vectors, so semantic tests stay meaningful without a model.
    ``calls`` counts the ``embed_texts`` calls of this instance (a test reads it to see that a
    replay embedded nothing).

    Attributes:
        dimension: the vector size.
        max_words: words per text; later ones are cut, and the text is reported truncated.

    """

    dimension: int = Field(default=64, ge=2)
    max_words: int = Field(default=512, ge=1)

    _calls: int = PrivateAttr(default=0)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @property
    def calls(self) -> int:
        """How many times ``embed_texts`` ran."""
        return self._calls

    def embed_texts(self, texts: list[str], *, model: str | None = None,
                    **options: Any) -> EmbeddingResult:
        """Embed ``texts``; ``options`` may hold ``dimensions`` (must equal ``dimension``).

        Returns:
            One vector per text, in order, with token usage when known.

        Raises:
            EmbeddingError: for a ``dimensions`` option other than ``dimension``.

        """
        dims = options.pop("dimensions", None)
        if dims is not None and dims != self.dimension:
            raise EmbeddingError(f"HashingEmbeddingModel has dimension {self.dimension}, "
                                 f"not {dims}")
        with self._lock:
            self._calls += 1
        vectors, cut, total = [], [], 0
        for i, text in enumerate(texts):
            words = _WORD.findall(text.lower())
            if len(words) > self.max_words:
                words = words[: self.max_words]
                cut.append(i)
            total += len(words)
            v = [0.0] * self.dimension
            for w in words:
                h = int.from_bytes(hashlib.blake2b(w.encode(), digest_size=8).digest(), "big")
                v[h % self.dimension] += 1.0
            norm = math.sqrt(sum(x * x for x in v)) or 1.0
            vectors.append([x / norm for x in v])
        return EmbeddingResult(embeddings=vectors, truncated=cut, model=model or "hashing",
                               token_usage=EmbeddingTokenUsage(prompt_tokens=total,
                                                               total_tokens=total))
