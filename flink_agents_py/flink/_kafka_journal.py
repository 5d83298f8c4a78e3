"""``KafkaJournal``: the write-ahead journal of durable call outcomes in a compacted Kafka topic.

Same role as ``SqliteJournal`` (see ``runtime.recorder._journal``), for jobs whose task
managers share no disk: each durable call's outcome is appended before the action
continues, and after a restore the calls the checkpoint does not hold are answered from
the journal instead of running again.

How it works (kept simple on purpose):

- **append** produces one record to the topic, Kafka key ``"<agent key as JSON>|<call_id>"``,
  value the ``CallRecord`` as JSON, with an idempotent producer (``acks=all``), and flushes
  before returning: when ``append`` returns, the broker has the entry.
- **lookup** answers from an in-memory index. The index is built once per operator instance,
  at its first lookup (at job start, and again after every restore, since Flink then creates
  new instances), by reading every partition of the topic from the beginning to its end;
  later appends of the instance are added to it. An instance only needs entries of its own
  keys, and a key's entries are written by the instance that owns the key, so entries other
  instances append later do not matter (after a rescale, the restart rebuilds the indexes).
- **pruning**: when a run completes, its entries are kept ``retention_s`` longer (PyFlink gives
  no checkpoint-completed signal; choose more than checkpoint interval + checkpoint duration +
  restart time), then deleted with tombstones. The topic is created with
  ``cleanup.policy=compact``, so Kafka keeps only the latest value per entry and drops
  tombstoned ones: the topic stays about as large as the in-flight work.

Needs ``confluent-kafka`` (``pip install 'flink-agents-py[kafka]'``) where the job's Python
workers run.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from ..runtime import CallRecord, Journal, JournaledCall
from ..runtime.internal import key_text

__all__ = ["KafkaJournal"]


def _entry_key(key: Any, call_id: str) -> str:
    return f"{key_text(key)}|{call_id}"


def _run_of(entry_key: str) -> str:
    key_text, call_id = entry_key.rsplit("|", 1)
    return f"{key_text}|{call_id.split('/', 1)[0]}"


class KafkaJournal(Journal):
    """A journal in a compacted Kafka topic (see the module docstring).

    Picklable: it travels with the operator and connects lazily in each instance.

    Args:
        bootstrap_servers: ``host:port[,host:port...]``.
        topic: the journal topic (one per job).
        retention_s: how long entries of completed runs are kept, in seconds.
        create_topic: create the topic (compacted) if it does not exist, on first use.
        partitions: partitions of a created topic.
        replication_factor: replication factor of a created topic.
        flush_timeout_s: how long ``append`` waits for the broker's acknowledgement.
        producer_config: more librdkafka producer settings.
        consumer_config: more librdkafka consumer settings (for building the index).

    """

    def __init__(self, bootstrap_servers: str, topic: str, *, retention_s: float = 600.0,
                 create_topic: bool = True, partitions: int = 1, replication_factor: int = 1,
                 flush_timeout_s: float = 30.0, producer_config: dict[str, Any] | None = None,
                 consumer_config: dict[str, Any] | None = None) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.topic = topic
        self.retention_s = retention_s
        self.create_topic = create_topic
        self.partitions = partitions
        self.replication_factor = replication_factor
        self.flush_timeout_s = flush_timeout_s
        self.producer_config = dict(producer_config or {})
        self.consumer_config = dict(consumer_config or {})
        self._reset()

    def _reset(self) -> None:
        self._lock = threading.RLock()
        self._producer: Any = None
        self._index: dict[str, str] | None = None
        self._runs: dict[str, list[str]] = {}  # "<key json>|r<seq>" -> its entry keys
        self._completed: dict[str, float] = {}  # same -> when its run completed
        self._topic_ready = False
        self.loaded_entries = 0  # entries read when the index was built (for tests)

    # -- connections -------------------------------------------------------------------------
    def _ensure_topic(self) -> None:
        if self._topic_ready or not self.create_topic:
            return
        from confluent_kafka import KafkaError, KafkaException
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers})
        fut = admin.create_topics([NewTopic(
            self.topic, num_partitions=self.partitions,
            replication_factor=self.replication_factor,
            config={"cleanup.policy": "compact"})])[self.topic]
        try:
            fut.result(timeout=30)
        except KafkaException as e:
            if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise
        self._topic_ready = True

    def _get_producer(self) -> Any:
        if self._producer is None:
            from confluent_kafka import Producer

            self._ensure_topic()
            self._producer = Producer({
                "bootstrap.servers": self.bootstrap_servers, "enable.idempotence": True,
                "acks": "all", "linger.ms": 0, **self.producer_config})
        return self._producer

    def _load_index(self) -> dict[str, str]:
        """Read the topic from the beginning to its current end into the index."""
        if self._index is not None:
            return self._index
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        self._ensure_topic()
        consumer = Consumer({
            "bootstrap.servers": self.bootstrap_servers, "group.id": f"{self.topic}-recovery",
            "enable.auto.commit": False, "enable.partition.eof": False, **self.consumer_config})
        index: dict[str, str] = {}
        try:
            meta = consumer.list_topics(self.topic, timeout=30).topics[self.topic]
            if meta.error is not None:
                raise RuntimeError(f"journal topic {self.topic}: {meta.error}")
            parts = sorted(meta.partitions)
            ends = {p: consumer.get_watermark_offsets(TopicPartition(self.topic, p), timeout=30)[1]
                    for p in parts}
            todo = {p for p in parts if ends[p] > 0}
            consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in todo])
            deadline = time.monotonic() + 120
            while todo:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"reading journal topic {self.topic} timed out")
                for msg in consumer.consume(num_messages=10_000, timeout=0.5):
                    if msg.error() is not None:
                        raise RuntimeError(f"reading journal topic {self.topic}: {msg.error()}")
                    raw_key, value, offset = msg.key(), msg.value(), msg.offset()
                    if raw_key is None or offset is None:
                        raise RuntimeError(
                            f"reading journal topic {self.topic}: a record without a key "
                            f"(partition {msg.partition()}, offset {offset}); the topic holds "
                            "something other than a journal")
                    entry = raw_key.decode()
                    if value is None:
                        index.pop(entry, None)
                    else:
                        index[entry] = value.decode()
                    if offset + 1 >= ends[msg.partition()]:
                        todo.discard(msg.partition())
                # compaction can remove the last records: stop at the position, not a record
                if todo:
                    for tp in consumer.position([TopicPartition(self.topic, p) for p in todo]):
                        if tp.offset >= ends[tp.partition]:
                            todo.discard(tp.partition)
        finally:
            consumer.close()
        for entry in index:
            self._runs.setdefault(_run_of(entry), []).append(entry)
        self.loaded_entries = len(index)
        self._index = index
        return index

    # -- Journal -----------------------------------------------------------------------------
    def append(self, key: Any, call_id: str, record: CallRecord) -> None:
        """Produce the outcome and wait until the broker acknowledged it.

        Raises:
            RuntimeError: when the broker did not acknowledge it in ``flush_timeout_s`` (the
                task then fails and Flink restarts it: the action does not go on unjournaled).

        """
        entry = _entry_key(key, call_id)
        value = record.to_json()
        errors: list[str] = []

        def on_delivery(err: Any, _msg: Any) -> None:
            if err is not None:
                errors.append(str(err))

        with self._lock:
            producer = self._get_producer()
            producer.produce(self.topic, key=entry.encode(), value=value.encode(),
                             on_delivery=on_delivery)
            left = producer.flush(self.flush_timeout_s)
            if left or errors:
                raise RuntimeError(f"journal append of {call_id} to {self.topic} failed: "
                                   f"{errors or f'{left} unacknowledged'}")
            if self._index is not None:
                self._index[entry] = value
            self._runs.setdefault(_run_of(entry), []).append(entry)

    def lookup(self, key: Any, call_id: str) -> CallRecord | None:
        """The journaled outcome of ``(key, call_id)``, or ``None`` (builds the index first)."""
        with self._lock:
            raw = self._load_index().get(_entry_key(key, call_id))
        return JournaledCall.read(raw) if raw is not None else None

    def run_completed(self, key: Any, run: str, now_s: float | None = None) -> None:
        """Mark run ``run`` of ``key`` completed; tombstone runs completed ``retention_s`` ago."""
        now_s = time.time() if now_s is None else now_s
        with self._lock:
            run_key = f"{key_text(key)}|{run}"
            if run_key in self._runs:
                self._completed.setdefault(run_key, now_s)
            expired = [r for r, t in self._completed.items() if t < now_s - self.retention_s]
            if not expired:
                return
            producer = self._get_producer()
            for r in expired:
                del self._completed[r]
                for entry in self._runs.pop(r, []):
                    producer.produce(self.topic, key=entry.encode(), value=None)
                    if self._index is not None:
                        self._index.pop(entry, None)
            producer.poll(0)  # tombstones need no flush: losing one only delays pruning

    def close(self) -> None:
        """Flush pending tombstones and drop the connections."""
        with self._lock:
            if self._producer is not None:
                self._producer.flush(self.flush_timeout_s)
            self._producer = None

    def count(self) -> int:
        """Entries in this instance's index (building it if needed)."""
        with self._lock:
            return len(self._load_index())

    def __getstate__(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in (
            "bootstrap_servers", "topic", "retention_s", "create_topic", "partitions",
            "replication_factor", "flush_timeout_s", "producer_config", "consumer_config")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._reset()
