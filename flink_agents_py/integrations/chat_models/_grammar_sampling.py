"""Greedy decoding under a grammar that asks the grammar about one token, not the vocabulary.

llama-cpp-python (0.3.x) puts a grammar into its sampler chain ahead of the greedy pick, so at
every generated token the grammar is matched against the whole vocabulary (151,936 tokens for
Qwen2.5), in one thread: on a 2-core machine that was 0.51 s of CPU per generated token for a
JSON-schema answer against 0.20 s without the grammar. llama.cpp's own sampler
(``common_sampler_sample`` in ``common/sampling.cpp``) avoids it: it samples first, asks the
grammar only whether the chosen token is allowed, and applies the grammar to the whole
vocabulary only when it is not. At temperature 0 with no penalties that gives the same token
as masking first: the greedy pick over the masked logits is the unmasked maximum whenever the
grammar allows it, and the first maximum otherwise (ties go to the lower token id in both, as
llama.cpp's greedy sampler keeps the first maximum).

``GrammarFirstLlama`` is ``llama_cpp.Llama`` with that sampler for the requests it applies to
(a grammar, temperature 0, no repetition penalties, no logits processors); every other request
takes llama-cpp-python's own chain.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

import numpy as np

__all__ = ["GreedyGrammarSampler", "make_grammar_first_llama"]


class GreedyGrammarSampler:
    """Greedy sampling that checks the grammar on the greedy token first.

    Has the methods ``llama_cpp.Llama`` calls on its sampler (``sample``, ``accept``,
    ``reset``, ``close``), so it stands in for the ``LlamaSampler`` chain of one generation.

    Args:
        vocab: the model's ``llama_vocab`` pointer.
        n_vocab: the vocabulary's size (tokens).
        grammar: llama-cpp-python's ``LlamaGrammar`` (GBNF text and root rule).

    Raises:
        ValueError: when llama.cpp cannot parse the grammar.
    """

    def __init__(self, vocab: Any, n_vocab: int, grammar: Any) -> None:
        import llama_cpp

        self._lib = llama_cpp
        self._n_vocab = n_vocab
        self._grammar = llama_cpp.llama_sampler_init_grammar(
            vocab, grammar._grammar.encode("utf-8"), grammar._root.encode("utf-8"))
        if not self._grammar:
            raise ValueError("llama.cpp could not parse the grammar")
        self._one = (llama_cpp.llama_token_data * 1)()
        self._one_array = llama_cpp.llama_token_data_array(
            data=ctypes.cast(self._one, llama_cpp.llama_token_data_p), size=1, selected=-1,
            sorted=False)
        self._all: Any = None  # the whole vocabulary's array, made on the first rejection
        self._all_view: np.ndarray[Any, Any] | None = None

    def sample(self, ctx: Any, idx: int = -1) -> int:
        """Pick the next token and let the grammar accept it.

        Args:
            ctx: llama-cpp-python's ``LlamaContext`` holding the logits.
            idx: which output's logits (negative counts from the last), as ``Llama.sample``
                passes it.

        Returns:
            The token id: the greedy token when the grammar allows it, else the greedy
            token among those it allows.
        """
        lib = self._lib
        logits = np.ctypeslib.as_array(lib.llama_get_logits_ith(ctx.ctx, idx),
                                       shape=(self._n_vocab,))
        token = int(np.argmax(logits))
        one = self._one[0]
        one.id, one.logit, one.p = token, float(logits[token]), 0.0  # type: ignore[assignment]
        lib.llama_sampler_apply(self._grammar, ctypes.byref(self._one_array))
        if not np.isfinite(self._one[0].logit):
            token = self._constrained_pick(logits)
        lib.llama_sampler_accept(self._grammar, token)
        return token

    def _constrained_pick(self, logits: np.ndarray[Any, Any]) -> int:
        """The greedy token over the whole vocabulary masked by the grammar."""
        lib = self._lib
        if self._all is None:
            self._all = (lib.llama_token_data * self._n_vocab)()
            self._all_view = np.frombuffer(self._all, dtype=np.dtype(
                [("id", np.int32), ("logit", np.float32), ("p", np.float32)]))
            self._all_view["id"] = np.arange(self._n_vocab, dtype=np.int32)
        view: Any = self._all_view
        view["logit"] = logits
        array = lib.llama_token_data_array(
            data=ctypes.cast(self._all, lib.llama_token_data_p), size=self._n_vocab,
            selected=-1, sorted=False)
        lib.llama_sampler_apply(self._grammar, ctypes.byref(array))
        # the grammar only masks (sets logits to -inf) and keeps the array's order and size
        masked = np.frombuffer(self._all, dtype=view.dtype, count=int(array.size))
        return int(masked["id"][int(np.argmax(masked["logit"]))])

    def accept(self, token: int) -> None:
        """Advance the grammar over a token chosen elsewhere (a prompt token)."""
        self._lib.llama_sampler_accept(self._grammar, token)

    def reset(self) -> None:
        """Return the grammar to its start."""
        self._lib.llama_sampler_reset(self._grammar)

    def close(self) -> None:
        """Free the grammar's llama.cpp sampler (idempotent)."""
        if self._grammar:
            self._lib.llama_sampler_free(self._grammar)
            self._grammar = None

    def __del__(self) -> None:
        self.close()


class _BorrowedModel:
    """Another ``Llama``'s loaded ``LlamaModel``, lent to a new ``Llama``.

    Closing it is a no-op, and it holds the lending ``Llama``: the model lives while the
    context made on it does.
    """

    def __init__(self, lender: Any) -> None:
        self._lender = lender

    def __getattr__(self, name: str) -> Any:
        return getattr(self._lender._model, name)

    def close(self) -> None:
        """Nothing: the lending ``Llama`` frees the model."""


_BORROWING = threading.Lock()


def make_grammar_first_llama() -> type:
    """The ``llama_cpp.Llama`` subclass that samples grammar-constrained greedy answers fast.

    Made on first use, so importing this module does not import llama-cpp-python.

    Returns:
        A subclass of ``llama_cpp.Llama`` whose ``_init_sampler`` returns a
        ``GreedyGrammarSampler`` when a request has a grammar, temperature 0, no repetition,
        frequency or presence penalty and no logits processor; otherwise llama-cpp-python's
        own sampler chain. Its keyword ``weights_of=other`` makes a new context on
        ``other``'s loaded model instead of loading the file again: llama.cpp lets contexts
        share one model, and its weights (repacked in memory for this CPU, 0.7 GB for the
        default model) are then held once.

    Raises:
        ImportError: when llama-cpp-python is not installed.
    """
    import llama_cpp.llama as llama_module
    from llama_cpp import Llama

    class GrammarFirstLlama(Llama):
        """``llama_cpp.Llama`` whose grammar-constrained greedy sampling checks one token."""

        def __init__(self, *args: Any, weights_of: Any = None, **kwargs: Any) -> None:
            if weights_of is None:
                super().__init__(*args, **kwargs)
                return
            internals: Any = llama_module.internals
            # llama-cpp-python has no argument for an existing model: its constructor is
            # handed the other context's model for the time of this call
            with _BORROWING:
                loader = internals.LlamaModel
                internals.LlamaModel = lambda **_: _BorrowedModel(weights_of)
                try:
                    super().__init__(*args, **kwargs)
                finally:
                    internals.LlamaModel = loader

        def _init_sampler(self, *args: Any, **kwargs: Any) -> Any:
            grammar = kwargs.get("grammar")
            if (grammar is not None and not args and kwargs.get("temp") == 0.0
                    and kwargs.get("repeat_penalty", 1.0) == 1.0
                    and kwargs.get("frequency_penalty", 0.0) == 0.0
                    and kwargs.get("presence_penalty", 0.0) == 0.0
                    and kwargs.get("logits_processor") is None):
                return GreedyGrammarSampler(self._model.vocab, self._n_vocab, grammar)
            return super()._init_sampler(*args, **kwargs)

    return GrammarFirstLlama
