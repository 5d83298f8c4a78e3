"""On Flink, ``agents.execute()`` reads an error output the program never took.

Flink drops a side output nobody consumes, and the operator's log lines go to the
TaskManager's log (a MiniCluster's under PyFlink's ``log`` folder): a failed record left
no trace where the user looks. ``execute()`` now collects such error outputs back to the
program's process and logs each row at WARNING there (key, position, error; bounded), when
the job runs on a local MiniCluster. An agent whose ``errors_datastream()`` was taken is the
program's to handle; the outputs' ``execute_and_collect`` reads them the same way (and a
later ``execute`` does not read them again: that would run the job again); a job submitted
to a cluster is left as built.
"""

from __future__ import annotations

import logging
import uuid

import pytest

pytestmark = pytest.mark.flink

pytest.importorskip("pyflink")

from support import key_type_agents as kt  # noqa: E402


def _unread(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "flink_agents_py.errors" and r.levelno == logging.WARNING]


@pytest.mark.timeout(600)
def test_execute_logs_the_rows_of_error_outputs_nobody_took(caplog):
    from pyflink.common import Types

    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.flink import create_stream_environment

    env = create_stream_environment(execution_mode="thread", restart_attempts=0)
    pickled = Types.PICKLED_BYTE_ARRAY()
    agents = AgentsExecutionEnvironment.flink(env, metrics=False)

    def source(values):
        return env.from_collection(values, type_info=pickled)

    # a job run by the outputs' execute_and_collect (the tutorial's way) reads its agent's
    # untaken error output itself (before, its failed records left no trace); a later
    # execute does not read it again
    first = agents.from_datastream(source(["bad c", "ok c"]), key_selector=lambda r: r)
    with caplog.at_level(logging.WARNING), first.apply(
            kt.FailsOnBad(), name="first").to_datastream().execute_and_collect("first") as rows:
        assert len(list(rows)) == 1
    [line] = _unread(caplog)
    assert line.startswith("unread error record (read them with errors_datastream()): key "
                           "'bad c', input 0, r0/on_input: ValueError: cannot handle bad c")
    caplog.clear()
    # one job, two agents: the errors of one are taken, the other's nobody reads
    taken = agents.from_datastream(source(["ok a", "bad a"]), key_selector=lambda r: r[-1])
    taken.apply(kt.FailsOnBad(), name="taken")
    taken.errors_datastream().map(lambda e: e["message"], output_type=Types.STRING()).print()
    key = uuid.UUID("0f8fad5b-d9cb-469f-a165-70867728950e")
    unread = agents.from_datastream(source(["ok b", "bad b" + "!" * 5000]),
                                    key_selector=lambda r: key)
    unread.apply(kt.FailsOnBad(), name="unread")
    with caplog.at_level(logging.WARNING):
        result = agents.execute("unread-errors")
    assert result is not None  # Flink's JobExecutionResult, as before
    [line] = _unread(caplog)
    assert line.startswith(f"unread error record (read them with errors_datastream()): key "
                           f"{key!r}, input 1, r1/on_input: ValueError: cannot handle bad b!!!")
    assert len(line) < 800


def test_a_job_for_a_cluster_is_left_as_built():
    """A collect sink would add state to the job's savepoints: a later version that takes
    ``errors_datastream()`` could not restore them; the TaskManagers' logs hold the rows."""
    from types import SimpleNamespace

    from pyflink.datastream import StreamExecutionEnvironment

    from flink_agents_py.flink._unread_errors import unread_error_streams
    from flink_agents_py.flink._workers import _env_config

    env = StreamExecutionEnvironment.get_execution_environment()
    untaken = SimpleNamespace(_errors_read=False, _errors="side output", _result=None)
    _env_config(env).setString("execution.target", "remote")  # as `flink run` submits it
    try:
        assert unread_error_streams(env, [untaken]) == []
    finally:
        _env_config(env).setString("execution.target", "local")


def _fails(record):
    raise ZeroDivisionError(f"the source broke at {record}")


@pytest.mark.timeout(600)
def test_a_failed_job_read_with_execute_and_collect_says_why_it_failed():
    """Collecting the outputs and the untaken error output, a job that restarted and then
    failed raised only ``RuntimeException: Job restarted`` (from the outputs' collect
    iterator): now it raises the job's own failure, which names the cause."""
    from pyflink.common import Types

    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.flink import create_stream_environment

    env = create_stream_environment(execution_mode="thread", restart_attempts=1,
                                    restart_delay_s=0.1)
    agents = AgentsExecutionEnvironment.flink(env, metrics=False)
    records = env.from_collection(["bad d"], type_info=Types.PICKLED_BYTE_ARRAY()) \
        .map(_fails, output_type=Types.PICKLED_BYTE_ARRAY())
    job = agents.from_datastream(records, key_selector=lambda r: r).apply(kt.FailsOnBad())
    with pytest.raises(Exception) as failed:  # noqa: PT011 - py4j's error, naming Flink's
        with job.to_datastream().execute_and_collect("fails") as rows:
            list(rows)
    assert "the source broke at bad d" in str(failed.value)
