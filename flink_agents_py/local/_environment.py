"""``LocalExecutionEnvironment``: the local runner's options, and the jobs it starts."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ..runtime import HostOptions, Journal, Observer
from ._records import check_records, default_key_selector
from ._runner import LocalAgentJob, _no_attribute

__all__ = ["LocalExecutionEnvironment"]


class LocalExecutionEnvironment:
    """Runs agents in-process over bounded input.

    Args:
        max_in_flight: the most I/O calls (model, tool) running at once across keys.
        max_in_flight_per_key: the most of them one key's calls hold at once (``None``: three
            quarters of ``max_in_flight``, rounded up; all of them up to 3), so that other
            keys' calls start while a hot key's backlog waits.
        progress: show a progress bar on stderr: input records done of total, outputs,
            errors, calls in flight, rate and time left.
        journal: an optional write-ahead journal of durable call outcomes.
        metrics: keep metrics (``LocalRunResult.metrics``).
        event_log: write the event log: an ``observability.EventLog``, a path (JSON lines,
            appended to) or an ``EventLogSink``.
        observer: an extra ``runtime.Observer`` of the core.
        apache_event_log: Apache Flink Agents' file event log (``observability.ApacheEventLog``).
        options: all of the above but ``progress`` as one ``runtime.HostOptions``, instead
            of those keyword arguments.

    Raises:
        ValueError: when an option is out of range (names it).
        TypeError: when ``options`` is given together with one of the keyword arguments it
            replaces.
    """

    def __init__(
        self,
        max_in_flight: int = 32,
        progress: bool = False,
        journal: Journal | None = None,
        *,
        metrics: bool = True,
        event_log: Any = None,
        observer: Observer | None = None,
        options: HostOptions | None = None,
        apache_event_log: Any = None,
        max_in_flight_per_key: int | None = None,
    ) -> None:
        self.progress = progress
        given = HostOptions(
            max_in_flight=max_in_flight,
            journal=journal,
            metrics=metrics,
            event_log=event_log,
            observer=observer,
            apache_event_log=apache_event_log,
            max_in_flight_per_key=max_in_flight_per_key,
        )
        if options is not None and given != HostOptions():
            raise TypeError(
                "LocalExecutionEnvironment: pass either options= or the keyword "
                "arguments it replaces (max_in_flight, max_in_flight_per_key, "
                "journal, metrics, event_log, observer, apache_event_log), not both"
            )
        self.options = options if options is not None else given

    def __getattr__(self, name: str) -> Any:
        raise _no_attribute(self, name)

    @property
    def max_in_flight(self) -> int:
        """The most I/O calls running at once (settable)."""
        return self.options.max_in_flight

    @max_in_flight.setter
    def max_in_flight(self, value: int) -> None:
        self.options = self.options.replace(max_in_flight=value)

    def from_list(
        self,
        records: Iterable[Any],
        key_selector: Callable[[Any], Any] | None = None,
        *,
        counted: Callable[[Any], bool] | None = None,
        value_selector: Callable[[Any], Any] | None = None,
    ) -> LocalAgentJob:
        """Start a job over ``records``, keyed by ``key_selector`` (default: ``record["key"]``).

        Args:
            records: the input records (a list, to ``restore`` a snapshot of the job).
            key_selector: the record's key (default ``default_key_selector``): a ``str``,
                ``int``, ``float``, ``bool``, ``None`` or a tuple of those, keyed as Flink's
                default key encoding keys it (``runtime.KeyEncoding``: ``1``, ``True`` and
                ``1.0`` are three keys). A record it (or ``value_selector``) raises on, or
                gives another key for, goes to the run's errors as ``record <index>``,
                logged with its traceback.
            counted: which records the progress bar counts as input records (default: all);
                leave out control records, such as end-of-input markers.
            value_selector: what of a record the agent gets as ``InputEvent.input`` (default:
                the whole record), e.g. ``lambda r: r["value"]``.

        Returns:
            The job; ``apply`` an agent, then ``run`` (or ``restore`` a snapshot first).

        Raises:
            UsageError: when ``records`` is one value (a dict, a string, one record), not a
                list of records; the message says what to pass.
        """
        check_records(records, "from_list")
        return LocalAgentJob(
            self, records, key_selector or default_key_selector, counted, value_selector
        )
