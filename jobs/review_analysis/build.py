"""Wiring: the review agent for a chat model kind and a rating strategy, with its resources.

``build_agent("scripted")`` is what the tests run; ``build_agent("local")`` is ``make run``'s
agent. Which chat models exist depends on the strategy (``strategies``):

=============  ===============================================================================
``committee``  no rating model
``model``      ``review_model`` on ``review_connection``
``hybrid``     the same
``delegate``   ``orchestrator_model`` on ``orchestrator_connection``, offering the ``reviewer``
               sub-agent (``agent.ReviewerAgent`` with its own ``review_model``)
=============  ===============================================================================

and every agent has the ``advisor`` sub-agent (``agent.ProductAdvisorAgent``, ``advice_model``).
The connection is the same kind for all of them (``--model``): the scripted models of
``scripted`` (each role its own script), the embedded llama.cpp model (loaded once and shared:
the connections are equal descriptors), or an OpenAI-compatible server.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from flink_agents_py.api import (
    ChatModelSetup,
    InternalSubagent,
    ResourceDescriptor,
    ResourceType,
)

from .agent import ADVICE_MODEL, ADVISOR, ProductAdvisorAgent, ReviewAgent, ReviewerAgent
from .models import ProductDigest, ReviewTask
from .scripted import scripted_advice, scripted_orchestrator, scripted_rating
from .strategies import ORCHESTRATOR_MODEL, REVIEW_MODEL

__all__ = ["ADVICE_PROMPT", "MODELS", "ORCHESTRATOR_PROMPT", "REVIEW_PROMPT", "build_agent",
           "connection", "default_rating", "local_contexts",
           "local_threads"]

MODELS = ("local", "scripted", "openai")
"""The chat model kinds of ``--model``."""

REVIEW_PROMPT = (
    "You rate customer reviews of products. Read the review and answer with JSON: "
    '"reasons", a list of at most three short phrases from the review that explain the '
    'rating, then "score", an integer from 1 (very negative) to 5 (very positive); '
    "3 means mixed or neutral."
)
ORCHESTRATOR_PROMPT = (
    "You coordinate the rating of customer reviews of products. Call _subagent_reviewer "
    'once with {"review": <the review text of the user message>}; it answers with a list '
    "holding one rating. Then answer with exactly that rating as JSON: "
    '{"reasons": [...], "score": 1..5}.'
)
ADVICE_PROMPT = (
    "You advise the team that makes and sells a product. You get a summary of its customer "
    "reviews. Answer with JSON holding \"suggestions\": up to three improvement "
    "suggestions, most important first. Each is one short sentence of at most 15 words that "
    "names a problem customers report and says what to change. Do not copy the reviews and "
    "do not invent problems they do not mention; if there are no complaints, say what to keep."
)

ADVICE_MAX_TOKENS = 200
LOCAL_MAX_TOKENS = 160
THREADS_ENV_VAR = "FLINK_AGENTS_PY_THREADS"
CONTEXTS_ENV_VAR = "FLINK_AGENTS_PY_MODEL_CONTEXTS"

_SCRIPTED = "flink_agents_py.integrations.chat_models.ScriptedChatModel"
_LLAMA = "flink_agents_py.integrations.chat_models._llama.LlamaCppChatModel"
_OPENAI = "flink_agents_py.integrations.chat_models._openai.OpenAIChatModel"


def _ref(obj: Any) -> str:
    """``module:qualname`` of a function or class (how the plan names code).

    Computed, not written out, so the job runs under any package name (e.g. copied out of
    this repository).

    Returns:
        The reference.
    """
    return f"{obj.__module__}:{obj.__qualname__}"


def default_rating(model: str) -> str:
    """The rating strategy of ``--model model`` when ``--rating`` is not given.

    Returns:
        ``hybrid`` for the embedded model (sized for a 2-core CPU), ``model`` otherwise.
    """
    return "hybrid" if model == "local" else "model"


def _usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def local_contexts() -> int:
    """llama.cpp contexts of the embedded model answering chats side by side.

    Two on a machine with 2 or more cores: they share the loaded weights, each with its own
    KV cache (about 0.3 GB more memory in all). On the 2-core machine two single-thread
    contexts rated 3.4-4.2x as many reviews per second as one two-thread context while other
    processes used the CPU (one context's threads wait on each other at every step, so a
    descheduled thread stalls it), with the same answers.

    Returns:
        ``$FLINK_AGENTS_PY_MODEL_CONTEXTS``, else 2 (1 on a single core).
    """
    env = os.environ.get(CONTEXTS_ENV_VAR)
    if env:
        return max(1, int(env))
    return 2 if _usable_cores() >= 2 else 1


def local_threads() -> int:
    """llama.cpp threads of each context of the embedded model.

    Returns:
        ``$FLINK_AGENTS_PY_THREADS``, else this process's usable cores over
        ``local_contexts()`` (at least 1, at most 8).
    """
    env = os.environ.get(THREADS_ENV_VAR)
    if env:
        return max(1, int(env))
    return max(1, min(_usable_cores() // local_contexts(), 8))


def connection(model: str, script: Callable[[Any], Any],
               base_url: str | None = None) -> ResourceDescriptor:
    """The chat model connection of ``--model model``.

    Args:
        model: ``local`` (the embedded llama.cpp model, ``$FLINK_AGENTS_PY_GGUF`` or the
            cached default), ``scripted`` or ``openai``.
        script: the scripted model's function for this role (``scripted``).
        base_url: the OpenAI-compatible server (``openai``; default ``$OPENAI_BASE_URL``).

    Returns:
        The connection's descriptor.

    Raises:
        ValueError: for an unknown model kind.
    """
    if model == "scripted":
        return ResourceDescriptor(_SCRIPTED, function=_ref(script))
    if model == "local":
        return ResourceDescriptor(_LLAMA, model_path=os.environ.get("FLINK_AGENTS_PY_GGUF"),
                                  max_tokens=LOCAL_MAX_TOKENS, n_threads=local_threads(),
                                  instances=local_contexts())
    if model == "openai":
        return ResourceDescriptor(_OPENAI, base_url=base_url or os.environ.get("OPENAI_BASE_URL"))
    raise ValueError(f"unknown --model {model!r} ({', '.join(MODELS)})")


def build_agent(model: str = "local", rating: str | None = None, *,
                base_url: str | None = None, model_name: str | None = None) -> ReviewAgent:
    """The review agent for ``--model model`` and ``--rating rating``, with its sub-agents.

    Args:
        model: the chat model kind (``MODELS``).
        rating: the rating strategy (``strategies.RATINGS``); ``None``: ``default_rating``.
        base_url: the OpenAI-compatible server (``openai``).
        model_name: the provider's model name (``openai``), for every chat model setup.

    Returns:
        The ``ReviewAgent``, ready to apply.

    Raises:
        ValueError: for an unknown model kind or rating strategy.
    """
    agent = ReviewAgent(rating or default_rating(model))
    rating = agent.rating

    def setup(conn: str, prompt: str, **more: Any) -> ResourceDescriptor:
        return ResourceDescriptor(ChatModelSetup, connection=conn, prompt=prompt,
                                  model=model_name, **more)

    if rating in ("model", "hybrid"):
        agent.add_resource("review_connection", ResourceType.CHAT_MODEL_CONNECTION,
                           connection(model, scripted_rating, base_url))
        agent.add_resource(REVIEW_MODEL, ResourceType.CHAT_MODEL,
                           setup("review_connection", REVIEW_PROMPT))
    elif rating == "delegate":
        reviewer = ReviewerAgent()
        reviewer.add_resource("review_connection", ResourceType.CHAT_MODEL_CONNECTION,
                              connection(model, scripted_rating, base_url))
        reviewer.add_resource(REVIEW_MODEL, ResourceType.CHAT_MODEL,
                              setup("review_connection", REVIEW_PROMPT))
        agent.add_resource("orchestrator_connection", ResourceType.CHAT_MODEL_CONNECTION,
                           connection(model, scripted_orchestrator, base_url))
        agent.add_resource("reviewer", ResourceType.AGENT, ResourceDescriptor(
            InternalSubagent, agent=reviewer, input_type=_ref(ReviewTask),
            description="Rates one customer review of a product; returns a list holding one "
                        'rating {"reasons": [...], "score": 1..5}.'))
        agent.add_resource(ORCHESTRATOR_MODEL, ResourceType.CHAT_MODEL,
                           setup("orchestrator_connection", ORCHESTRATOR_PROMPT,
                                 subagents=["reviewer"]))

    advisor = ProductAdvisorAgent()
    advisor.add_resource("advice_connection", ResourceType.CHAT_MODEL_CONNECTION,
                         connection(model, scripted_advice, base_url))
    advisor.add_resource(ADVICE_MODEL, ResourceType.CHAT_MODEL, setup(
        "advice_connection", ADVICE_PROMPT, options={"max_tokens": ADVICE_MAX_TOKENS}))
    agent.add_resource(ADVISOR, ResourceType.AGENT, ResourceDescriptor(
        InternalSubagent, agent=advisor, input_type=_ref(ProductDigest),
        description="Writes at most three improvement suggestions for one product from the "
                    "digest of its reviews."))
    return agent
