"""The event log file has an idle operator's records without waiting for its next record.

``FileSink`` buffers records and flushed them only when a record was written (at least
``flush_interval_s`` after the last flush, or 64 KiB later) or at close: the records of a
streaming job that went idle (the last record's run, the failure a user wants to trace)
stayed in memory until the next record arrived, however long that took. A record written
to an empty buffer now arms a timer that flushes it.
"""

from __future__ import annotations

import pickle
import threading
from pathlib import Path

import pytest

from flink_agents_py.observability import EventLog, FileSink, read_event_log

pytestmark = pytest.mark.timeout(60)


def _wait_for_lines(path: Path, n: int) -> list[dict]:
    """The file's records once it has ``n`` (polled; 30 s is 600 flush intervals)."""
    pause = threading.Event()
    for _ in range(3000):
        records = read_event_log([path])
        if len(records) >= n:
            return records
        pause.wait(0.01)
    raise AssertionError(f"{path} still has {len(records)} of {n} records")


def test_records_reach_the_file_while_nothing_more_is_written(tmp_path):
    path = tmp_path / "events.jsonl"
    obs = EventLog(sink=FileSink(path, flush_interval_s=0.05)).open()
    assert obs is not None
    try:
        obs.run_started("k", 0)  # buffered (the header was flushed a moment ago)
        records = _wait_for_lines(path, 2)
        assert [r["kind"] for r in records] == ["log_opened", "run_started"]
        obs.run_completed("k", 0)
        assert [r["kind"] for r in _wait_for_lines(path, 3)][-1] == "run_completed"
    finally:
        obs.close()
    assert len(read_event_log([path])) == 3


def test_a_closed_or_pickled_sink_has_no_timer(tmp_path):
    sink = FileSink(tmp_path / "e.jsonl", flush_interval_s=30).open()
    sink.write({"kind": "x"})
    assert sink._timer is not None and sink._timer.daemon
    timer = sink._timer
    sink.close()
    assert sink._timer is None and timer.finished.is_set()  # cancelled
    again = pickle.loads(pickle.dumps(FileSink(tmp_path / "f.jsonl")))
    assert again._timer is None
    assert read_event_log([tmp_path / "e.jsonl"]) == [{"kind": "x"}]
