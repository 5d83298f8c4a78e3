"""The review-analysis job: rates product reviews with a chat model, per product.

Reads JSON lines ``{"id": product, "review": text, "ts": epoch_s}`` (a file, or a Kafka
topic), keys them by product, and for each review runs the agent's one action
(``agent.ReviewAgent``): it rates the review ``{"reasons": [...], "score": 1..5}`` with the
rating strategy the configuration names (``strategies``: the fast ``committee``, the chat
``model``, the ``hybrid`` of both, or ``delegate`` to a sub-agent), keeps per-product
aggregates in short-term memory and asks the ``advisor`` sub-agent for product advice. It
writes ``review``, ``product_summary`` and ``product_advice`` rows; a bad input line or a
failed rating becomes an error row with its line, and the job goes on.

The modules, each importing only modules listed below it (``tests/test_review_package.py``
keeps it so; nothing imports this ``__init__``, so the directory can be copied anywhere,
renamed, and run as ``python -m <name>``):

=====================  =========================================================================
``cli``                the command line (``python -m jobs.review_analysis --help``)
``runners``            where it runs: ``local``, ``flink`` (MiniCluster or cluster), ``kafka``
``build``              ``build_agent``: the agent for a ``--model`` and a ``--rating``, wired
``agent``              the review agent, its ``reviewer`` and ``advisor`` sub-agents
``scripted``           the deterministic chat models of ``--model scripted``
``strategies``         the rating step: ``committee``, ``model``, ``hybrid``, ``delegate``
``scoring``            the cheap scorers: a word lexicon, VADER, their committee
``advice``             when advice is due, the product digest, what the advisor reads
``records``            input lines, error rows, writing JSON lines
``evaluation``         agreement with labels (``--evaluate``)
``outcome``            whether a run failed (the exit status)
``models``             the data shapes (``Rating``, ``Advice``, ``ProductDigest``...)
=====================  =========================================================================

Usage::

    python -m jobs.review_analysis [--input PATH] [--output PATH.jsonl]
        [--runner local|flink] [--model local|scripted|openai]
        [--rating committee|model|hybrid|delegate] [--limit N] [--max-error-rate RATE]
        [--max-record-bytes N] [--event-log PATH]
    python -m jobs.review_analysis --evaluate LABELS.jsonl [--model ...]
    python -m jobs.review_analysis --input kafka://HOST:PORT/reviews \
        --output kafka://HOST:PORT/results [--bounded] [--delivery-guarantee exactly-once]

See docs/main-job.md.
"""

from .build import build_agent
from .cli import main
from .records import DEFAULT_INPUT, parse_line, read_records

__all__ = ["DEFAULT_INPUT", "build_agent", "main", "parse_line", "read_records"]
