"""End-to-end on a real Kafka broker: topic -> review agent (MiniCluster) -> topic.

The broker is the session's ``kafka_broker`` (KRaft, local Java process, see
``tests/kafka_fixture.py``). Inputs are produced and outputs read with confluent-kafka;
outputs are read ``read_committed``, so only what the exactly-once sink committed counts.
"""

from __future__ import annotations

import collections
import pathlib
import sys
import time
import uuid

import orjson
import pytest

pytestmark = [pytest.mark.kafka, pytest.mark.flink]

pytest.importorskip("pyflink")
pytest.importorskip("confluent_kafka")

ROOT = pathlib.Path(__file__).resolve().parents[1]

from kafka_fixture import consume_all, produce  # noqa: E402
from support import durability_agents as da  # noqa: E402
from support import kafka_agents as ka  # noqa: E402

REVIEWS = ROOT / "jobs" / "data" / "product_reviews.jsonl"
MALFORMED_AT = 1000  # the malformed record is produced after this many reviews


def _reviews() -> list[dict]:
    return [orjson.loads(x) for x in REVIEWS.read_text().splitlines() if x.strip()]


def _topic(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:6]}"


# -- the whole data set, topic to topic ---------------------------------------------------------
@pytest.fixture(scope="module")
def review_run(kafka_broker, tmp_path_factory):
    """Produce the 3,163 reviews (and one malformed record) and run the job over them once."""
    from jobs import review_analysis

    src, dst = _topic("reviews"), _topic("results")
    kafka_broker.create_topics([src, dst, f"{dst}-errors"], partitions=2)
    reviews = _reviews()
    records = [(r["id"], orjson.dumps(r)) for r in reviews]
    records.insert(MALFORMED_AT, ("broken", b'{"id": "B0BROKEN", "review": '))
    where = produce(kafka_broker.bootstrap, src, records)
    malformed_at = where.pop(MALFORMED_AT)
    t0 = time.monotonic()
    rc = review_analysis.main([
        "--input", f"kafka://{kafka_broker.bootstrap}/{src}",
        "--output", f"kafka://{kafka_broker.bootstrap}/{dst}",
        "--model", "scripted", "--bounded", "--checkpoint-interval-ms", "1000", "--no-progress"])
    elapsed = time.monotonic() - t0
    assert rc == 0
    results = consume_all(kafka_broker.bootstrap, dst)
    errors = consume_all(kafka_broker.bootstrap, f"{dst}-errors")
    stamps = sorted(m.timestamp()[1] for m in results)
    span_s = max((stamps[-1] - stamps[0]) / 1000, 1e-3)
    print(f"\n[kafka] {len(reviews)} reviews topic->topic in {elapsed:.1f} s wall "
          f"({len(reviews) / elapsed:.0f} reviews/s incl. start-up; "
          f"{len(results) / 2 / span_s:.0f} reviews/s between the first and last result)",
          file=sys.stderr)
    return {"reviews": reviews, "where": where, "malformed_at": malformed_at,
            "results": results, "errors": errors}


def test_every_review_has_exactly_one_result(review_run):
    reviews, where = review_run["reviews"], review_run["where"]
    rows = [(m, orjson.loads(m.value())) for m in review_run["results"]]
    by_kind = collections.Counter(r["kind"] for _, r in rows)
    assert by_kind["review"] == len(reviews) and by_kind["product_summary"] == len(reviews)
    seen = collections.Counter((r["partition"], r["line"])
                               for _, r in rows if r["kind"] == "review")
    assert set(seen) == set(where) and set(seen.values()) == {1}
    from jobs.review_analysis.scoring import lexicon_rating

    assert all(m.key().decode() == r["id"] for m, r in rows)  # Kafka key = the agent key
    review_of = {w: rev for w, rev in zip(where, reviews, strict=True)}
    for _, r in rows:
        if r["kind"] == "review":
            rev = review_of[(r["partition"], r["line"])]
            assert r["id"] == rev["id"]
            assert r["score"] == lexicon_rating(rev["review"]).score
    # per product, the running summaries count 1..n exactly once each
    counts = collections.defaultdict(list)
    for _, r in rows:
        if r["kind"] == "product_summary":
            counts[r["id"]].append(r["count"])
    per_product = collections.Counter(r["id"] for r in reviews)
    assert {p: sorted(c) for p, c in counts.items()} == {
        p: list(range(1, n + 1)) for p, n in per_product.items()}


def test_malformed_record_goes_to_error_topic(review_run):
    partition, offset = review_run["malformed_at"]
    errors = [orjson.loads(m.value()) for m in review_run["errors"]]
    assert len(errors) == 1
    err = errors[0]
    assert (err["partition"], err["offset"]) == (partition, offset)
    assert err["kind"] == "error" and "not JSON" in err["error"]
    assert err["value"] == '{"id": "B0BROKEN", "review": '


# -- a crash mid-stream, exactly-once sink ------------------------------------------------------
N_CRASH = 1500


def test_crash_mid_stream_exactly_once_and_no_repeated_recorded_calls(kafka_broker, tmp_path):
    from flink_agents_py.api import ResourceDescriptor
    from jobs.review_analysis import build_agent
    from jobs.review_analysis.runners.kafka import run_kafka_job

    d = tmp_path / "crash"
    (d / "checkpoints").mkdir(parents=True)
    src, dst = _topic("crash-in"), _topic("crash-out")
    kafka_broker.create_topics([src, dst, f"{dst}-errors"], partitions=1)
    reviews = _reviews()[:N_CRASH]
    tagged = [{**r, "review": f"{r['review']} [#{i}]"} for i, r in enumerate(reviews)]
    produce(kafka_broker.bootstrap, src, [(r["id"], orjson.dumps(r)) for r in tagged])

    agent = build_agent("scripted").override_resource(  # with a counting review model
        "review_connection", ResourceDescriptor(
            "support.kafka_agents.CountingChatModel",
            function="jobs.review_analysis.scripted:scripted_rating", log_dir=str(d), slow_s=0.03))
    run_kafka_job(
        f"kafka://{kafka_broker.bootstrap}/{src}", f"kafka://{kafka_broker.bootstrap}/{dst}", agent,
        bounded=True, checkpoint_interval_ms=300, restart_attempts=2,
        failpoint=ka.CrashMidStream(str(d), min_calls=N_CRASH // 5),
        extra_config={"execution.checkpointing.dir": f"file://{d}/checkpoints",
                      "execution.checkpointing.storage": "filesystem",
                      # the failpoint paces records on the first attempt; unaligned barriers
                      # overtake the records buffered behind it, so checkpoints keep completing
                      "execution.checkpointing.unaligned.enabled": "true",
                      "restart-strategy.fixed-delay.delay": "500 ms"},
        job_name=f"crash-{dst}")

    assert (d / "crashed").exists(), "the failpoint never fired: the crash did not happen"
    crash_ckpt = int((d / "crashed").read_text())

    # committed output: every review exactly once (no duplicates, no gaps), state restored
    rows = [orjson.loads(m.value()) for m in consume_all(kafka_broker.bootstrap, dst)]
    lines = collections.Counter(r["line"] for r in rows if r["kind"] == "review")
    assert sorted(lines) == list(range(N_CRASH)) and set(lines.values()) == {1}
    counts = collections.defaultdict(list)
    for r in rows:
        if r["kind"] == "product_summary":
            counts[r["id"]].append(r["count"])
    per_product = collections.Counter(r["id"] for r in reviews)
    assert {p: sorted(c) for p, c in counts.items()} == {
        p: list(range(1, n + 1)) for p, n in per_product.items()}
    assert consume_all(kafka_broker.bootstrap, f"{dst}-errors") == []
    uncommitted = consume_all(kafka_broker.bootstrap, dst, read_committed=False)
    print(f"\n[kafka] crash at checkpoint {crash_ckpt}: {len(rows)} committed results, "
          f"{len(uncommitted)} written (aborted transactions included)", file=sys.stderr)

    # model calls: each review's rating was requested at least once; a call whose outcome was
    # recorded before a checkpoint the restore includes was not requested again
    calls = ka.read_calls(str(d))
    assert sorted(calls) == list(range(N_CRASH))
    seq_of, per_key = {}, collections.Counter()
    for i, r in enumerate(reviews):  # one partition: a key's runs are numbered in offset order
        seq_of[(r["id"], per_key[r["id"]])] = i
        per_key[r["id"]] += 1
    covered = {seq_of[(key, seq)] for key, seq, ckpt in ka.read_recorded(str(d))
               if ckpt <= crash_ckpt - 2}
    assert covered, "no recorded call was covered by a checkpoint before the crash"
    repeated = {i for i, attempts in calls.items() if len(attempts) > 1}
    again = sorted(covered & repeated)
    assert not again, f"recorded calls requested again: {again[:10]}"
    assert repeated, "the crash cut no work short"
    assert all(len(a) <= 2 for a in calls.values())
    print(f"[kafka] {len(covered)} calls covered by the restored checkpoint (none repeated), "
          f"{len(repeated)} repeated after the restore", file=sys.stderr)


# -- the Kafka journal in the journal_window scenario --------------------------------------------
def test_kafka_journal_closes_the_window_after_the_last_checkpoint(kafka_broker, tmp_path):
    from pyflink.common import Types, WatermarkStrategy
    from pyflink.datastream.connectors.number_seq import NumberSequenceSource

    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.flink import KafkaJournal, create_stream_environment

    d = tmp_path / "s"
    (d / "checkpoints").mkdir(parents=True)
    scenario = "journal_window"
    journal_topic = _topic("journal")
    env = create_stream_environment(
        checkpoint_interval_ms=300, restart_attempts=2, restart_delay_s=0.5,
        extra_config={"execution.checkpointing.dir": f"file://{d}/checkpoints",
                      "execution.checkpointing.storage": "filesystem"})
    task = {"dir": str(d), "scenario": scenario}
    seq = NumberSequenceSource(0, 80)
    records = (env.from_source(seq, WatermarkStrategy.no_watermarks(), "seq")
               .map(da.pace, output_type=Types.LONG())
               .filter(lambda n: n == 0)
               .map(lambda n: {**task, "key": f"k{n}"}, output_type=Types.PICKLED_BYTE_ARRAY()))
    agents = AgentsExecutionEnvironment.flink(
        env, journal=KafkaJournal(kafka_broker.bootstrap, journal_topic),
        failpoint=da.CrashOnce(str(d), scenario))
    out = agents.from_datastream(records).apply(da.DurableChatAgent()).to_datastream()
    with out.execute_and_collect("kafka-journal-window") as results:
        outputs = list(results)

    assert (d / "crashed").exists(), "the failpoint never fired: the scenario did not play out"
    assert outputs == [{"key": "k0", "answer": '{"a":"A(k0)","b":"B(k0)"}', "error": None}]
    counts = {who: n for (who, key), n in da.read_counts(str(d)).items() if key == "k0"}
    # without a journal tool_b runs twice (see test_durability_flink); with it, once
    assert counts == {"model_r1": 1, "tool_a": 1, "tool_b": 1, "model_r2": 1}
    entries = consume_all(kafka_broker.bootstrap, journal_topic)
    keys = {m.key().decode() for m in entries}
    assert any(k.startswith('"k0"|') and "_tool_call_action/c1" in k for k in keys), keys
