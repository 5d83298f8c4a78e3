"""Trace and span ids derived from a run's identity, so a replayed run keeps its spans' ids.

After a restore, a run that had completed (and whose spans a live ``OtelSink`` had sent)
after the checkpoint runs again: its recorded calls replay and it completes again, and the
sink sends its spans a second time. With random ids that was a second trace, a duplicate of
the first. With ids derived from the run (the sink's job token, the agent, the key, the run)
and each span's node (its kind and id in the trace tree), the second sending has the first's
trace id and, node for node, its span ids: the backend shows one trace whose spans came
twice, and the second copies mark what was replayed (``flink_agents.replayed``).
"""

from __future__ import annotations

import hashlib
import random
import threading

__all__ = ["RunIds", "run_trace_id", "node_span_id"]


def _int(text: str, size: int) -> int:
    n = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=size).digest(), "big")
    return n or 1  # 0 is the invalid id


def run_trace_id(identity: str) -> int:
    """The 128-bit trace id of the run named by ``identity`` (never 0).

    Returns:
        The id.
    """
    return _int(identity, 16)


def node_span_id(trace_id: int, kind: str, node_id: str) -> int:
    """The 64-bit span id of one node of a run's trace (never 0).

    Returns:
        The id.
    """
    return _int(f"{trace_id:032x}|{kind}|{node_id}", 8)


class RunIds:
    """An OpenTelemetry id generator giving the ids set for the span about to start.

    ``next(trace_id, span_id)`` sets them for the calling thread (the SDK asks for a trace id
    for a root span only, and a span id for every span); without them it draws random ids as
    the SDK's own generator does.
    """

    def __init__(self) -> None:
        self._local = threading.local()

    def next(self, trace_id: int | None, span_id: int | None) -> None:
        """Give ``trace_id`` and ``span_id`` to the next span this thread starts."""
        self._local.ids = (trace_id, span_id)

    def _take(self, index: int) -> int | None:
        ids = getattr(self._local, "ids", None)
        return ids[index] if ids is not None else None

    def generate_trace_id(self) -> int:
        """The set trace id, or a random one.

        Returns:
            The id.
        """
        return self._take(0) or random.getrandbits(128) or 1

    def generate_span_id(self) -> int:
        """The set span id (once), or a random one.

        Returns:
            The id.
        """
        span_id = self._take(1)
        self._local.ids = None
        return span_id or random.getrandbits(64) or 1

    def is_trace_id_random(self) -> bool:
        """Whether trace ids are random (W3C's flag): not, they are derived.

        Returns:
            ``False``.
        """
        return False
