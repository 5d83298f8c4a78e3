"""Reading the agent's error output in ``execute`` when the program does not.

The operator sends a record it could not run (an action that raised, a key with no
encoding...) to its error side output, ``errors_datastream()``, and logs it in the
TaskManager's log. A program that never takes that stream, run on a local MiniCluster
(``python main.py``), lost those records quietly: Flink drops a side output nobody
consumes, and a MiniCluster's TaskManager log is a file in PyFlink's ``log`` folder, where
a user running a script never looks. So there ``execute`` collects such error outputs back
to the program (Flink's collect sink, beside the job's own sinks, in the same job) and hands
each row to ``runtime.internal.UnreadErrors``, which logs it at WARNING in the program's own
process as it arrives.

``to_datastream()`` gives a ``DataStream`` whose ``execute_and_collect`` does the same
(``AgentOutputs``): the tutorial's way to run a job on a MiniCluster, where a failed record
otherwise left no trace at all.

A job submitted to a cluster (any other ``execution.target``) is left as the program built
it: a collect sink keeps state in the job's savepoints (a later version that takes
``errors_datastream()`` could not restore them without ignoring that state), the client may
be detached, and the TaskManagers' logs are where a cluster's failures are read.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from pyflink.datastream import DataStream
from pyflink.datastream.data_stream import CloseableIterator

from ..runtime.internal import UnreadErrors
from ._workers import on_local_target

__all__ = ["AgentOutputs", "execute_reading_errors", "note_input_errors",
           "unread_error_streams"]

_INPUT_ERRORS = "_flink_agents_py_input_errors"
"""The attribute of an environment listing the bad-input streams its readers made."""


def note_input_errors(env: Any, errors: Any) -> None:
    """Remember ``errors``, the bad-input rows a reader made (``read_lines_file``, Kafka).

    A program that unpacks ``records, errors = read_lines_file(...)`` and never uses
    ``errors`` lost every bad line without a word (Flink drops a side output nobody
    consumes): ``unread_error_streams`` reads such a stream back on a local MiniCluster.

    Args:
        env: the PyFlink ``StreamExecutionEnvironment`` the reader was built in.
        errors: the reader's error side output (``DataStream``).
    """
    noted = getattr(env, _INPUT_ERRORS, None)
    if noted is None:
        noted = []
        setattr(env, _INPUT_ERRORS, noted)
    noted.append(errors)


def unread_error_streams(env: Any, applied: list[Any]) -> list[Any]:
    """The error outputs in the job that nobody took: agents' and input readers'.

    None on a cluster (see the module docstring). An agent applied for a job that already
    ran (``execute_and_collect`` of another stream: its transformations left the environment
    with it) is not: reading its error output would run its whole pipeline
    again. So is a reader's bad-input stream (``note_input_errors``) whose reader is not in
    the job, or that a transformation of the job consumes (a sink, a union, a map).

    Args:
        env: the PyFlink ``StreamExecutionEnvironment``.
        applied: the ``FlinkAgentBuilder``s applied since the last ``execute``.

    Returns:
        Their error side outputs (``DataStream``), those ``errors_datastream()`` was not
        called for, and the bad-input streams nobody consumes.
    """
    pending = [b for b in applied if not b._errors_read]
    inputs = getattr(env, _INPUT_ERRORS, None) or []
    if not (pending or inputs) \
            or not on_local_target(env):
        return []
    try:
        job = list(env._j_stream_execution_environment.getTransformations())
    except Exception:  # noqa: BLE001 - not an environment Flink can list (a unit test's)
        return []
    live = {t.getId() for t in job}
    setattr(env, _INPUT_ERRORS, [])  # the job takes them with it, read or not
    # what some transformation of the job reads from (a union or a side output too, which
    # are no transformations of the job's list themselves)
    consumed = {p.getId() for t in job for p in t.getTransitivePredecessors()
                if p.getId() != t.getId()}
    return [b._errors for b in pending
            if b._result._j_data_stream.getTransformation().getId() in live] + [
        e for e in inputs if _stream_id(e) in live and _stream_id(e) not in consumed]


def _stream_id(stream: Any) -> Any:
    """The id of ``stream``'s transformation (PyFlink's side output: the map it adds)."""
    return stream._j_data_stream.getTransformation().getId()


def execute_reading_errors(env: Any, job_name: str, streams: list[Any], unread: Any) -> Any:
    """Run the job (blocking), reading ``streams`` (error side outputs) into ``unread``.

    Args:
        env: the PyFlink ``StreamExecutionEnvironment``.
        job_name: the job's name.
        streams: the error outputs nobody took (``DataStream`` of error rows).
        unread: a ``runtime.internal.UnreadErrors`` each row is handed to, as it arrives.

    Returns:
        Flink's ``JobExecutionResult``.

    Raises:
        Exception: what the job failed with (from Flink, as ``env.execute`` raises it).
    """
    errors = streams[0] if len(streams) == 1 else streams[0].union(*streams[1:])
    # registered with the environment: the job submitted next feeds it (Flink's collect sink)
    results = CloseableIterator(errors._j_data_stream.collectAsync(), errors.get_type())
    client = env.execute_async(job_name)
    try:
        with results:
            for row in results:
                unread.add(row)
    except Exception:
        client.get_job_execution_result().result()  # the job's own failure, when it failed
        raise
    return client.get_job_execution_result().result()


class AgentOutputs(DataStream):
    """An agent's outputs whose ``execute_and_collect`` also reads unread error outputs.

    On a local MiniCluster, ``execute_and_collect(job_name)`` (without ``limit``) collects
    the error outputs of the agents applied for this job whose ``errors_datastream()`` the
    program never took, in the same job, and logs each row at WARNING in this process
    (logger ``flink_agents_py.errors``) as it arrives, as ``agents.execute()`` does. Every
    other method is PyFlink's ``DataStream``'s.

    Args:
        outputs: the agent's output stream.
        agents: the ``FlinkExecutionEnvironment`` the agent was applied in.
    """

    def __init__(self, outputs: DataStream, agents: Any) -> None:
        super().__init__(outputs._j_data_stream)
        self._agents = agents

    def execute_and_collect(self, job_execution_name: str | None = None,
                            limit: int | None = None) -> Any:
        """Run the job and iterate over this stream's elements (PyFlink's method).

        Args:
            job_execution_name: the job's name.
            limit: collect at most this many elements, as a list (error outputs are then
                left as PyFlink leaves them).

        Returns:
            A ``CloseableIterator`` over the outputs (close it, or use ``with``), or a list
            with ``limit``.
        """
        agents = self._agents
        streams = unread_error_streams(agents.env, agents._applied) if limit is None else []
        if not streams:
            return super().execute_and_collect(job_execution_name, limit)
        agents._applied = []  # the job takes the environment's transformations with it
        errors = streams[0] if len(streams) == 1 else streams[0].union(*streams[1:])
        rows = CloseableIterator(errors._j_data_stream.collectAsync(), errors.get_type())
        outputs = CloseableIterator(self._j_data_stream.collectAsync(), self.get_type())
        client = agents.env.execute_async(job_execution_name or "DataStream Collect")
        reader = threading.Thread(target=_log_rows, args=(rows, UnreadErrors(
            "errors_datastream()")), name="flink-agents-py-unread-errors", daemon=True)
        reader.start()
        return _Collected(outputs, rows, reader, client)


def _log_rows(rows: Any, unread: Any) -> None:
    # not closed here: closing one collect iterator before the whole job has ended cancels
    # the job (its error sink can finish before the outputs' one); ``_Collected`` closes it
    try:
        for row in rows:
            unread.add(row)
    except Exception:  # noqa: BLE001 - the job was cancelled or failed: the outputs say so
        return


class _Collected(CloseableIterator):
    """The outputs' iterator; at their end (or ``close``) the error rows are read to the end."""

    def __init__(self, outputs: Any, rows: Any, reader: threading.Thread, client: Any) -> None:
        super().__init__(outputs._j_closeable_iterator, outputs._type_info)
        self._rows, self._reader, self._client = rows, reader, client

    def next(self) -> Any:
        try:
            return super().next()
        except StopIteration:
            self._reader.join(60)  # the job ended: its last error rows are on their way
            raise
        except Exception:
            # with two collect sinks, a restart fails the iterator with "Job restarted":
            # raise the job's own failure instead, when it fails (it says why); a job that
            # keeps running (it recovered) is not waited for past a minute
            ended = self._client.get_job_execution_result()
            deadline = time.monotonic() + 60
            while not ended.done() and time.monotonic() < deadline:
                time.sleep(0.1)
            if ended.done():
                ended.result()
            raise

    def close(self) -> None:
        super().close()  # before the job's end, this cancels it (as PyFlink's iterator does)
        self._reader.join(5)
        self._rows.close()
