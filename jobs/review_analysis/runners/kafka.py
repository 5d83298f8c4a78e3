"""The review-analysis job with Kafka input and/or output (``kafka://HOST:PORT/topic``).

Input from Kafka: each record's value is a review ``{"id", "review", "ts"}`` (JSON); its
``line`` is its offset and its ``partition`` is kept, so results name the record they rate.
A record that is not a valid review goes to the error output with its partition and offset:
a value that is not UTF-8, holds a NUL byte or is over ``max_record_bytes`` (decoded by
``read_json_topic``), or one that is not a review object (``parse_review_message``).

Output to Kafka: results go to the output topic, keyed by product id (the agent key); errors
(malformed records and failed ratings) go to ``<topic>-errors``. Both go through one
``KafkaSink``, exactly-once by default: written in transactions committed at checkpoints, so
consumers reading ``read_committed`` see every result once, also across failures.

File input and output work as in ``runners.flink`` (FileSource, collected results).
"""

from __future__ import annotations

import pathlib
from typing import Any, Literal

from pyflink.common import Types

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent
from flink_agents_py.flink import (
    KafkaMessage,
    add_kafka_jars,
    check_servers,
    create_stream_environment,
    kafka_sink,
    parse_kafka_url,
    read_json_topic,
    read_lines_file,
    to_kafka_rows,
)
from flink_agents_py.io import MAX_RECORD_BYTES
from flink_agents_py.runtime import Failpoint, Journal

from ..records import input_error, parse_line
from .flink import NumberAndParse, flink_agent_error, tagged

__all__ = ["is_kafka", "parse_review_message", "run_kafka_job"]


def is_kafka(spec: Any) -> bool:
    """Whether ``spec`` is a ``kafka://`` URL."""
    return str(spec).startswith("kafka://")


def parse_review_message(message: KafkaMessage) -> dict[str, Any]:
    """Parse a Kafka record's value as a review.

    Returns:
        ``{"line": offset, "partition", "id", "review", "ts"}``.

    Raises:
        ValueError: naming the partition and offset, for a record that is not a review.
    """
    where = f"partition {message.partition} offset {message.offset}"
    if message.value is None:
        raise ValueError(f"{where}: the record has no value")
    try:
        record = parse_line(message.offset, message.value)
    except ValueError as e:
        raise ValueError(str(e).replace(f"line {message.offset}", where, 1)) from e
    return {**record, "partition": message.partition}


def _kafka_error(e: dict[str, Any]) -> dict[str, Any]:
    """A malformed-record error of ``read_json_topic`` in the job's error shape.

    Returns:
        The error row; its message names the partition and offset.
    """
    where = f"partition {e['partition']} offset {e['offset']}"
    error = e["error"] if e["error"].startswith(where) else f"{where}: {e['error']}"
    return {"kind": "error", "line": e["offset"], "id": None, "error": error,
            "topic": e["topic"], "partition": e["partition"], "offset": e["offset"],
            "value": e["value"]}


def run_kafka_job(
    input_spec: str | pathlib.Path,
    output_spec: str | pathlib.Path,
    agent: Agent,
    *,
    parallelism: int = 1,
    limit: int | None = None,
    bounded: bool = False,
    starting_offsets: str = "earliest",
    checkpoint_interval_ms: int = 10_000,
    delivery_guarantee: Literal["exactly-once", "at-least-once", "none"] = "exactly-once",
    transactional_id_prefix: str | None = None,
    journal: Journal | None = None,
    failpoint: Failpoint | None = None,
    extra_config: dict[str, str] | None = None,
    restart_attempts: int = 3,
    job_name: str = "review-analysis",
    max_record_bytes: int | None = MAX_RECORD_BYTES,
    event_log: str | None = None,
) -> tuple[list[Any], list[Any]] | None:
    """Run the review job with Kafka on one side or both.

    On a MiniCluster, or on the cluster when the program runs under ``flink run``.

    Args:
        input_spec: ``kafka://HOST:PORT/topic`` or a JSON-lines file.
        output_spec: ``kafka://HOST:PORT/topic`` (errors to ``<topic>-errors``) or a file
            (results are then collected and returned).
        agent: the review agent.
        parallelism: Flink parallelism.
        limit: file input only: analyse the first N lines.
        bounded: Kafka input: stop at the offsets that are the latest when the job starts
            (otherwise the job runs until cancelled).
        starting_offsets: Kafka input without a checkpoint: ``earliest``, ``latest`` or
            ``committed``.
        checkpoint_interval_ms: checkpoint interval; exactly-once output is committed (and
            visible to ``read_committed`` consumers) at each checkpoint.
        delivery_guarantee: Kafka output: ``exactly-once``, ``at-least-once`` or ``none``.
        transactional_id_prefix: Kafka output, exactly-once: default
            ``flink-agents-py-<job_name>-<topic>``.
        journal: a write-ahead journal of durable call outcomes.
        failpoint: a test hook for crash injection.
        extra_config: more Flink configuration.
        restart_attempts: fixed-delay restart attempts.
        job_name: the Flink job's name.
        max_record_bytes: longer input lines or Kafka values are error rows.
        event_log: a path for the event log (one file per subtask).

    Returns:
        ``(outputs, errors)`` when the output is a file, else ``None``.

    Raises:
        ValueError: for Kafka input that is unbounded while the output is a file, a
            ``limit`` with Kafka input, or exactly-once Kafka output without checkpoints.
    """
    kafka_in, kafka_out = is_kafka(input_spec), is_kafka(output_spec)
    if kafka_in and not kafka_out and not bounded:
        raise ValueError("Kafka input with file output needs --bounded (the job must end)")
    if kafka_in and limit is not None:
        raise ValueError("--limit applies to file input only")
    if kafka_out and delivery_guarantee == "exactly-once" and not checkpoint_interval_ms:
        raise ValueError("exactly-once Kafka output is committed at checkpoints: give "
                         "--checkpoint-interval-ms, or --delivery-guarantee at-least-once")
    env = create_stream_environment(parallelism=parallelism,
                                    checkpoint_interval_ms=checkpoint_interval_ms,
                                    restart_attempts=restart_attempts, extra_config=extra_config)
    if kafka_in or kafka_out:
        add_kafka_jars(env)

    if kafka_in:
        servers, topic = parse_kafka_url(str(input_spec))
        records, bad = read_json_topic(env, servers, topic, parse=parse_review_message,
                                       starting_offsets=starting_offsets, bounded=bounded,
                                       group_id=f"{job_name}-{topic}", name="reviews",
                                       max_record_bytes=max_record_bytes)
        parse_errors = bad.map(_kafka_error, output_type=Types.PICKLED_BYTE_ARRAY())
    else:
        records, bad = read_lines_file(
            env, pathlib.Path(input_spec), name="reviews",
            operator=NumberAndParse(limit, None, max_record_bytes=max_record_bytes))
        parse_errors = bad.map(input_error, output_type=Types.PICKLED_BYTE_ARRAY())

    applied = (AgentsExecutionEnvironment.flink(env, journal=journal, failpoint=failpoint,
                                                event_log=event_log)
               .from_datastream(records, key_selector=lambda r: r["id"]).apply(agent))
    outputs = applied.to_datastream()
    agent_errors = applied.errors_datastream().map(flink_agent_error,
                                                   output_type=Types.PICKLED_BYTE_ARRAY())
    errors = parse_errors.union(agent_errors)

    if kafka_out:
        servers, topic = parse_kafka_url(str(output_spec))
        check_servers(env, servers)
        rows = to_kafka_rows(outputs, topic, lambda o: o.get("id"), name="results-rows").union(
            to_kafka_rows(errors, f"{topic}-errors", lambda e: e.get("id"), name="errors-rows"))
        sink = kafka_sink(servers, delivery_guarantee=delivery_guarantee,
                          transactional_id_prefix=transactional_id_prefix
                          or f"flink-agents-py-{job_name}-{topic}")
        rows.sink_to(sink).name(f"kafka-{topic}").uid("kafka-sink")
        env.execute(job_name)
        return None

    everything = outputs.map(tagged("out"), output_type=Types.PICKLED_BYTE_ARRAY()).union(
        errors.map(tagged("err"), output_type=Types.PICKLED_BYTE_ARRAY()))
    out: list[Any] = []
    err: list[Any] = []
    with everything.execute_and_collect(job_name) as results:
        for kind, value in results:
            (out if kind == "out" else err).append(value)
    return out, err
