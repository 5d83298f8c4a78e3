"""``metric_counts``: a metrics snapshot with each latency summary reduced to its count."""

from __future__ import annotations

from typing import Any


def metric_counts(m: Any) -> dict[str, Any]:
    """``m.snapshot()`` (an ``AgentMetrics``) with ``latency_ms`` replaced by the counts.

    Returns:
        The snapshot; ``latency_counts`` maps each latency name to its count (or to a
        ``{label: count}`` map for labelled ones). Two observers that saw the same work give
        equal results, whatever their timings.
    """
    snap = m.snapshot()
    latency = snap.pop("latency_ms")
    snap["latency_counts"] = {
        name: ({label: s["count"] for label, s in by.items()} if "count" not in by
               else by["count"])
        for name, by in latency.items()}
    return snap
