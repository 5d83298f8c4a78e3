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

A job submitted to a cluster (any other ``execution.target``) is left as the program built
it: a collect sink keeps state in the job's savepoints (a later version that takes
``errors_datastream()`` could not restore them without ignoring that state), the client may
be detached, and the TaskManagers' logs are where a cluster's failures are read.
"""

from __future__ import annotations

from typing import Any

from ._workers import config_getter

__all__ = ["execute_reading_errors", "unread_error_streams"]


def unread_error_streams(env: Any, applied: list[Any]) -> list[Any]:
    """The error outputs of ``applied`` agents that are in the job and nobody took.

    None on a cluster (see the module docstring). An agent applied for a job that already
    ran (``execute_and_collect``, PyFlink's own ``env.execute``: its transformations left the
    environment with it) is not: reading its error output would run its whole pipeline
    again.

    Args:
        env: the PyFlink ``StreamExecutionEnvironment``.
        applied: the ``FlinkAgentBuilder``s applied since the last ``execute``.

    Returns:
        Their error side outputs (``DataStream``), those ``errors_datastream()`` was not
        called for.
    """
    pending = [b for b in applied if not b._errors_read]
    if not pending or (config_getter(env)("execution.target") or "local") != "local":
        return []
    try:
        live = {t.getId() for t in env._j_stream_execution_environment.getTransformations()}
    except Exception:  # noqa: BLE001 - not an environment Flink can list (a unit test's)
        return []
    return [b._errors for b in pending
            if b._result._j_data_stream.getTransformation().getId() in live]


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
    from pyflink.datastream.data_stream import CloseableIterator

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
