"""How many labels a labelled metric keeps: a bound against labels drawn from hostile data.

A label is an action's, a model setup's, a tool's or an event type's name. Most come from
the agent's code, but some can come from data: a dynamic event's type taken from a record,
the model a provider reports, the name of the tool a model called. Each label is a counter
or a distribution in the operator's memory and, on Flink, a metric group of its own in the
TaskManager (and a series in every metrics backend): without a bound, a stream of distinct
names grows both without end. A metric keeps its first ``MAX_LABELS`` labels; values of
any further label are counted under ``OTHER_LABEL``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["MAX_LABELS", "OTHER_LABEL", "add_label", "kept_label"]

MAX_LABELS = 1000
"""The distinct labels one labelled metric keeps."""

OTHER_LABEL = "(other)"
"""The label counting the values of labels past ``MAX_LABELS``."""


def kept_label(by: dict[Any, Any], label: Any) -> Any:
    """``label``, or ``OTHER_LABEL`` when it is new and ``by`` holds ``MAX_LABELS`` already.

    Args:
        by: a labelled metric's values by label.
        label: the label of a value.

    Returns:
        The label to count the value under.
    """
    if label in by or len(by) < MAX_LABELS:
        return label
    return OTHER_LABEL


def add_label(by: dict[Any, int], label: Any, n: int = 1) -> None:
    """Add ``n`` to ``by[label]`` (a count), bounded as ``kept_label`` says.

    Args:
        by: a labelled counter's counts by label.
        label: the label.
        n: what to add.
    """
    label = kept_label(by, label)
    by[label] = by.get(label, 0) + n
