"""Agreement with human labels: ``--evaluate LABELS.jsonl``.

A label file holds JSON lines ``{"line", "id", "score"}``. The job then rates exactly the
labelled lines (and adds no end-of-input markers: it measures ratings only) and prints a last
line ``agreement: 0.NN``, the fraction of labels whose review's score is within 1 of the
label.
"""

from __future__ import annotations

import pathlib
from typing import Any

import orjson

__all__ = ["evaluate", "read_labels"]


def read_labels(path: pathlib.Path) -> list[dict[str, Any]]:
    """The labels of ``path``.

    Returns:
        One dict per non-blank line.

    Raises:
        OSError: when the file cannot be read.
        orjson.JSONDecodeError: at a line that is not JSON.
    """
    return [orjson.loads(x) for x in path.read_text().splitlines() if x.strip()]


def evaluate(outputs: list[Any], labels: list[dict[str, Any]]) -> float:
    """The fraction of ``labels`` whose line's review score is within 1 of the label.

    Args:
        outputs: the job's output rows (``review`` rows are read).
        labels: ``{"line", "score"}`` each.

    Returns:
        The agreement, 0.0 when there are no labels.
    """
    scores = {o["line"]: o["score"] for o in outputs if o.get("kind") == "review"}
    hits = sum(1 for lab in labels
               if lab["line"] in scores and abs(scores[lab["line"]] - lab["score"]) <= 1)
    return hits / len(labels) if labels else 0.0
