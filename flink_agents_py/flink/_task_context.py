"""What an agent operator reads of its runtime context in ``open``, in either execution mode.

PyFlink's thread-mode and process-mode runtime contexts differ (thread mode's calls Java
methods, some of which moved in PyFlink 2.3), so each reader tries what each offers and
falls back to a neutral value.
"""

from __future__ import annotations

from typing import Any

from ..runtime import HostOptions

__all__ = ["_switchable_backend", "_timers_are_synchronous", "_task_info", "_job_names",
           "_parallelism"]


def _switchable_backend(runtime_context: Any) -> Any:
    """Flink's keyed state backend, when a callback may switch its current key (thread mode).

    In thread mode the Python function's keyed state and timer service are Java objects that
    act on the backend's current key, so setting it redirects state access and timer
    registrations to another key of this subtask for the rest of the callback. Process mode
    (state through the bundle) has no such backend.

    Returns:
        The (Java) backend, or ``None``.
    """
    backend = getattr(getattr(runtime_context, "_keyed_state_backend", None),
                      "_keyed_state_backend", None)
    try:
        if backend is None or not (callable(backend.getCurrentKey)
                                   and callable(backend.setCurrentKey)):
            return None
    except Exception:  # noqa: BLE001 - e.g. a pemja attribute error
        return None
    return backend


def _timers_are_synchronous(ctx: Any) -> bool:
    """Whether timer registrations reach Flink's timer service at once (thread mode).

    In thread mode the Python function calls the Java timer service directly; in process
    mode registrations travel back with the bundle's output.

    Returns:
        ``True`` in thread mode.
    """
    return type(ctx).__module__.startswith("pyflink.fn_execution.datastream.embedded")


def _task_info(runtime_context: Any) -> tuple[int, int]:
    """The subtask's index and attempt number.

    PyFlink 2.3's thread-mode context calls Java methods that moved to
    ``RuntimeContext.getTaskInfo()``, so that is tried next.

    Returns:
        ``(subtask index, attempt number)`` (0 for what cannot be found).
    """
    found: list[int] = []
    for name, java in (("get_index_of_this_subtask", "getIndexOfThisSubtask"),
                       ("get_attempt_number", "getAttemptNumber")):
        try:
            found.append(int(getattr(runtime_context, name)()))
            continue
        except Exception:  # noqa: BLE001 - e.g. AttributeError from pemja
            pass
        try:
            info = runtime_context._runtime_context.getTaskInfo()
            found.append(int(getattr(info, java)()))
        except Exception:  # noqa: BLE001
            found.append(0)
    return found[0], found[1]


def _job_names(runtime_context: Any, options: HostOptions) -> tuple[str, str]:
    """The job id and task name of Apache's file event log (``ApacheEventLog``).

    Returns:
        The job id (the job's, read from the Java runtime context in thread mode; else the
        operator's lineage token) and the task name.
    """
    if options.apache_event_log is None:
        return "", ""
    try:
        job_id = str(runtime_context._runtime_context.getJobInfo().getJobId().toString())
    except Exception:  # noqa: BLE001 - process mode: no Java runtime context here
        job_id = options.lineage or ""
    try:
        task_name = str(runtime_context.get_task_name())
    except Exception:  # noqa: BLE001
        task_name = ""
    return job_id, task_name


def _parallelism(runtime_context: Any) -> int:
    """The number of parallel subtasks of the operator (1 when it cannot be found)."""
    try:
        return max(1, int(runtime_context.get_number_of_parallel_subtasks()))
    except Exception:  # noqa: BLE001 - thread mode: the Java method moved (``_task_info``)
        pass
    try:
        info = runtime_context._runtime_context.getTaskInfo()
        return max(1, int(info.getNumberOfParallelSubtasks()))
    except Exception:  # noqa: BLE001
        return 1
