"""A progress bar for a running Flink job, fed by the job's REST API.

The operator already counts what a bar shows (``observability.AgentMetrics`` in the metric group
``flink_agents``: ``runs_completed``, ``outputs_emitted``, ``actions_failed{action}``,
``calls_in_flight``), so the driver reads those metrics from the JobManager's REST API, summed
over subtasks (``/jobs/<job>/vertices/<vertex>/subtasks/metrics?agg=sum``), four times a
second: no per-record cost beyond the counters the operator keeps anyway.

Where the REST API is: a local MiniCluster binds it to ``rest.bind-port``, which
``configure_workers`` sets to a small free range when nothing is configured (and lowers
``metrics.fetcher.update-interval`` to 250 ms, so the numbers are fresh); on a cluster it is
``rest.address``:``rest.port`` of the configuration.

Shown when asked for (not with ``--no-progress``) and stderr is a terminal;
``FLINK_AGENTS_PY_PROGRESS=1`` shows a requested bar on any stderr (tests, logs), ``=0`` none.
"""

from __future__ import annotations

import http.client
import json
import os
import sys
import threading
import urllib.parse
import urllib.request
from typing import Any

from ..local.internal import bar_size

__all__ = ["JobProgress", "progress_enabled", "rest_urls"]

PROGRESS_ENV = "FLINK_AGENTS_PY_PROGRESS"
"""``1``: show requested progress bars even when stderr is not a terminal; ``0``: never."""

_GROUP = ".flink_agents."
_FINAL_STATES = {"FINISHED", "FAILED", "CANCELED"}


def progress_enabled(requested: bool) -> bool:
    """Whether to show a requested bar.

    Never when not ``requested`` (``--no-progress``); else when stderr is a terminal, unless
    ``FLINK_AGENTS_PY_PROGRESS`` says otherwise (``1``: also when it is not, ``0``: never).

    Returns:
        Whether to show it.
    """
    if not requested:
        return False
    forced = os.environ.get(PROGRESS_ENV, "").strip().lower()
    if forced in ("1", "true", "yes", "on"):
        return True
    if forced in ("0", "false", "no", "off"):
        return False
    return hasattr(sys.stderr, "isatty") and sys.stderr.isatty()


def _ports(spec: str) -> list[int]:
    ports: list[int] = []
    for part in spec.split(","):
        part = part.strip()
        if "-" in part:
            lo, hi = part.split("-", 1)
            ports.extend(range(int(lo), int(hi) + 1))
        elif part:
            ports.append(int(part))
    return ports


def rest_urls(get: Any) -> list[str]:
    """Where the job's REST API may be, from the environment's configuration.

    Args:
        get: ``key -> str | None``, reading the environment's configuration.

    Returns:
        Base URLs (``http://host:port``) to try, in order; empty when unknown.
    """
    target = get("execution.target") or "local"
    if target == "local":
        spec = get("rest.bind-port") or get("rest.port")
        host = "127.0.0.1"
    else:
        spec = get("rest.port") or "8081"
        host = get("rest.address") or get("jobmanager.rpc.address") or "127.0.0.1"
    try:
        return [f"http://{host}:{p}" for p in _ports(spec or "")]
    except ValueError:
        return []


class JobProgress:
    """Polls a running job's agent metrics and shows them as a tqdm bar on stderr.

    Shows records done (runs completed) of ``total`` when known, outputs, errors (failed
    actions), calls in flight, rate and ETA. Use it as a context manager around the call
    that runs the job (``execute``, or iterating ``execute_and_collect``); leaving the block
    without an exception marks the bounded input as done.

    Args:
        urls: base URLs of the REST API to look for the job at (``rest_urls``).
        total: how many input records the job reads, when known.
        job_name: the job's name, to tell it from other jobs seen at those URLs.
        poll_interval_s: seconds between two polls. With the operator's metric push (every
            0.5 s, ``observability.FLUSH_INTERVAL_S``) and a local MiniCluster's metric
            fetcher (every 250 ms, set by ``configure_workers``), the bar lags the job by
            about a second: a run shorter than that shows its end only.
        enabled: show the bar (see ``progress_enabled``); when false nothing is polled.
    """

    def __init__(self, urls: list[str], *, total: int | None = None,
                 job_name: str | None = None, poll_interval_s: float = 0.25,
                 enabled: bool = True) -> None:
        self.urls = list(urls)
        self.total = total
        self.job_name = job_name
        self.poll_interval_s = poll_interval_s
        self.enabled = enabled and bool(self.urls)
        self.values: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._bar: Any = None
        self._base: str | None = None
        self._job: str | None = None
        self._metric_ids: dict[str, list[str]] = {}
        self._polls = 0
        self._final: dict[str, float] = {}

    # -- REST ------------------------------------------------------------------------------
    def _get(self, base: str, path: str) -> Any:
        """GET ``base + path`` as JSON.

        Returns:
            The parsed body.

        Raises:
            OSError: when nothing answers, or something that is not an HTTP server does (a
                candidate URL may be another process's port: ``http.client.HTTPException``
                such as ``BadStatusLine`` is raised as ``OSError`` so callers skip it).
            ValueError: when the body is not JSON.
        """
        try:
            with urllib.request.urlopen(base + path, timeout=2) as resp:
                return json.loads(resp.read())
        except http.client.HTTPException as e:
            raise OSError(f"{base}{path}: not an HTTP answer ({type(e).__name__})") from e

    def _find_job(self) -> bool:
        for base in self.urls:
            try:
                jobs = self._get(base, "/jobs/overview").get("jobs", [])
            except (OSError, ValueError):
                continue
            live = [j for j in jobs if j.get("state") not in _FINAL_STATES
                    and (self.job_name is None or j.get("name") == self.job_name)]
            for job in sorted(live, key=lambda j: -int(j.get("start-time") or 0)):
                self._base, self._job = base, job["jid"]
                try:
                    self._refresh_metric_ids()
                except (OSError, ValueError, KeyError):
                    continue  # e.g. the job ended meanwhile
                if self._metric_ids:
                    return True
        self._base = self._job = None
        return False

    def _refresh_metric_ids(self) -> None:
        assert self._base is not None and self._job is not None
        detail = self._get(self._base, f"/jobs/{self._job}")
        ids: dict[str, list[str]] = {}
        for vertex in detail.get("vertices", []):
            listed = self._get(self._base,
                               f"/jobs/{self._job}/vertices/{vertex['id']}/subtasks/metrics")
            wanted = [m["id"] for m in listed if _GROUP in m["id"] and _wanted(m["id"])]
            if wanted:
                ids[vertex["id"]] = wanted
        self._metric_ids = ids

    def poll(self) -> dict[str, float] | None:
        """Read the agent metrics once; ``None`` while the job is not found (yet).

        Returns:
            ``runs_completed``, ``outputs_emitted``, ``errors`` and ``calls_in_flight``,
            summed over the job's agent operators and subtasks.
        """
        if self._job is None and not self._find_job():
            return None
        assert self._base is not None
        self._polls += 1
        try:
            if self._polls % 10 == 0:  # labelled metrics appear as tools, models are used
                self._refresh_metric_ids()
            totals = {"runs_completed": 0.0, "outputs_emitted": 0.0, "errors": 0.0,
                      "calls_in_flight": 0.0}
            for vertex, ids in self._metric_ids.items():
                query = urllib.parse.urlencode({"agg": "sum", "get": ",".join(ids)})
                for m in self._get(self._base, f"/jobs/{self._job}/vertices/{vertex}"
                                               f"/subtasks/metrics?{query}"):
                    name = m["id"].rsplit(".", 1)[-1]
                    key = "errors" if name == "actions_failed" else name
                    totals[key] += float(m.get("sum") or 0.0)
        except (OSError, ValueError, KeyError):
            self._job = None  # the job ended or moved: look again next time
            return None
        self.values = totals
        return totals

    # -- the bar ---------------------------------------------------------------------------
    def _show(self, values: dict[str, float] | None) -> None:
        bar = self._bar
        if values is None:
            return
        if bar.desc != "agent":
            bar.set_description_str("agent", refresh=False)
        done = self._done(values)
        shown = {"outputs": "outputs_emitted", "errors": "errors", "in_flight": "calls_in_flight"}
        bar.set_postfix({label: int(values[name]) for label, name in shown.items()
                         if name in values}, refresh=False)
        bar.update(done - bar.n)

    def _done(self, values: dict[str, float]) -> int:
        done = int(values.get("runs_completed", self._bar.n))
        if self.total is not None:
            done = min(done, self.total)  # runs of control records (end markers) past the end
        return done

    def _loop(self) -> None:
        while not self._stop.wait(self.poll_interval_s):
            values = self.poll()
            if values is not None and self._bar.desc != "agent":
                # the job is found: rate and ETA count from here, not from our start-up and
                # not over what was done before it was seen
                bar, done = self._bar, self._done(values)
                bar.reset(total=self.total)
                bar.initial = bar.n = bar.last_print_n = done
            self._show(values)

    def __enter__(self) -> JobProgress:
        if not self.enabled:
            return self
        from tqdm import tqdm

        self._bar = tqdm(total=self.total, unit="rec", desc="agent (starting)", file=sys.stderr,
                         mininterval=0.1, **bar_size(sys.stderr))
        self._thread = threading.Thread(target=self._loop, name="flink-agents-progress",
                                        daemon=True)
        self._thread.start()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join(timeout=5)
        if exc_type is None:  # bounded input ran to its end: every record is done
            values = self.poll() or dict(self.values)
            values.update(self._final, calls_in_flight=0.0)
            self._show(values)
            if self.total is not None:
                self._bar.update(self.total - self._bar.n)
        self._bar.close()

    def finish(self, *, outputs: int | None = None, errors: int | None = None) -> None:
        """Give the final counts, when the caller knows them.

        The metrics of a job that just ended may no longer be readable; these are shown when
        the ``with`` block ends.
        """
        if outputs is not None:
            self._final["outputs_emitted"] = float(outputs)
        if errors is not None:
            self._final["errors"] = float(errors)


def _wanted(metric_id: str) -> bool:
    name = metric_id.rsplit(".", 1)[-1]
    return name in ("runs_completed", "outputs_emitted", "calls_in_flight", "actions_failed")
