"""Whether a run succeeded: its records, how many failed, and why (the exit status).

A record *failed* when it produced no ``review`` row: its line was bad input (an error row
from reading) or its rating failed (an error row from the agent). A record is identified by
``(partition, line)`` (``partition`` is ``None`` for file input); error rows without a line
count as one failed record each. Errors of a record that still has its ``review`` row (e.g. a
failed final product advice) do not make the record failed.

The job fails (non-zero exit) when every record failed, or when ``--max-error-rate R`` is
given and more than a fraction ``R`` of the records failed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["EXIT_FAILED", "Verdict", "judge", "parse_error_rate"]

EXIT_FAILED = 1
"""Exit status of a run whose records failed beyond the allowed rate."""


@dataclass(frozen=True)
class Verdict:
    """The outcome of a run.

    Attributes:
        records: records seen (rated plus failed).
        failed: records that produced no review row.
        ok: whether the run counts as a success.
        reason: why it failed (``""`` when ``ok``), for the summary line.
    """

    records: int
    failed: int
    ok: bool
    reason: str


def parse_error_rate(text: str) -> float:
    """``--max-error-rate``: a fraction in [0, 1], or a percentage like ``5%``.

    Args:
        text: the option's value.

    Returns:
        The fraction.

    Raises:
        ValueError: for anything else.
    """
    value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{text!r} is not a fraction between 0 and 1 (or 0% to 100%)")
    return value


def _where(row: dict[str, Any]) -> str:
    if row.get("partition") is not None:
        return f"partition {row['partition']} offset {row.get('line')}"
    return "no line" if row.get("line") is None else f"line {row['line']}"


def judge(outputs: list[dict[str, Any]], errors: list[dict[str, Any]],
          max_error_rate: float | None = None) -> Verdict:
    """Judge a finished run from its rows.

    Args:
        outputs: the output rows.
        errors: the error rows, in the order to quote them (the first failed one is quoted).
        max_error_rate: the largest allowed fraction of failed records (``None``: fail only
            when every record failed).

    Returns:
        The ``Verdict``.
    """
    rated = {(o.get("partition"), o.get("line")) for o in outputs if o.get("kind") == "review"}
    failed: dict[Any, dict[str, Any]] = {}
    for i, e in enumerate(errors):
        where = (e.get("partition"), e.get("line"))
        if e.get("line") is None:
            failed[("no line", i)] = e
        elif where not in rated:
            failed.setdefault(where, e)
    records = len(rated) + len(failed)
    n_failed = len(failed)
    if n_failed == 0:
        return Verdict(records, 0, True, "")
    first = next(iter(failed.values()))
    message = str(first.get("error", ""))
    if not message.startswith(_where(first)):
        message = f"{_where(first)}: {message}"
    quote = message if len(message) <= 300 else message[:300] + "..."
    if n_failed == records:
        return Verdict(records, n_failed, False,
                       f"all {records} records failed; first error: {quote}")
    if max_error_rate is not None and n_failed / records > max_error_rate:
        return Verdict(records, n_failed, False,
                       f"{n_failed} of {records} records failed ({n_failed / records:.1%}, "
                       f"over --max-error-rate {max_error_rate:.1%}); first error: {quote}")
    return Verdict(records, n_failed, True, "")
