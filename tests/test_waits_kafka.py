"""The approvals example on a real broker: crash while runs wait, restore at another parallelism.

``examples/approvals_kafka.py`` and its agent module are copied to a temporary directory (a
user's own job, outside the repository) and run as a process. Five requests wait for their
approval; once their ``ApprovalRequest``s are committed on the outputs topic (so a completed
checkpoint holds the waiting runs), the process is killed. The answers are produced while no
job runs; the job is started again from the last checkpoint at parallelism 2. It approves
three emails, rejects one, lets a text message time out (5 s: before or after the crash), and
names an answer that matches no wait.
"""

from __future__ import annotations

import glob
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time
import uuid

import orjson
import pytest

pytestmark = [pytest.mark.kafka, pytest.mark.flink]

pytest.importorskip("pyflink")
pytest.importorskip("confluent_kafka")

from kafka_fixture import consume_all, produce  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
PYTHON = str(VENV_PYTHON if VENV_PYTHON.exists() else pathlib.Path(sys.executable))
KEYS = ("k0", "k1", "k2", "k3", "k4")
LIMIT_S = 240  # generous: a busy 2-core machine starts a MiniCluster in 10-40 s


def _start(user: pathlib.Path, args: list[str], log: pathlib.Path) -> subprocess.Popen:
    # a user's shell: nothing of the repository's test path, nor what a MiniCluster job run
    # earlier in this process left in its environment (PyFlink's gateway switches)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "FLINK_CONF_DIR") and not k.startswith("PYFLINK_")}
    return subprocess.Popen([PYTHON, "approvals_kafka.py", *args], cwd=user, env=env,
                            stdout=log.open("w"), stderr=subprocess.STDOUT,
                            start_new_session=True)


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)


def _wait_for(what: str, condition, proc: subprocess.Popen, log: pathlib.Path):
    deadline = time.monotonic() + LIMIT_S
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        if proc.poll() is not None:
            break
        time.sleep(0.5)
    _kill(proc)
    pytest.fail(f"{what}: not within {LIMIT_S} s (job exit {proc.poll()}); log tail:\n"
                + log.read_text()[-3000:])


def _outputs(bootstrap: str, topic: str) -> list[dict]:
    return [orjson.loads(m.value()) for m in consume_all(bootstrap, topic)]


def _latest_checkpoint(d: pathlib.Path) -> pathlib.Path:
    done = glob.glob(str(d / "*" / "chk-*" / "_metadata"))
    return pathlib.Path(max(done, key=lambda p: int(p.split("chk-")[1].split(os.sep)[0]))).parent


def test_approvals_survive_a_crash_and_a_rescale_on_kafka(kafka_broker, tmp_path):
    from flink_agents_py.api import ApprovalRequest

    user = tmp_path / "user"
    user.mkdir()
    for name in ("approvals_kafka.py", "approvals_agent.py"):
        shutil.copy(ROOT / "examples" / name, user / name)
    tag = uuid.uuid4().hex[:6]
    requests, approvals, outputs = f"req-{tag}", f"appr-{tag}", f"out-{tag}"
    kafka_broker.create_topics([requests, approvals, outputs, f"{outputs}-errors"], partitions=2)
    bootstrap = kafka_broker.bootstrap
    produce(bootstrap, requests, [(k, orjson.dumps({
        "key": k, "to": f"{k}@shop.example", "text": f"about {k}",
        "channel": "sms" if k == "k3" else "email"})) for k in KEYS])
    ckpt, outbox = tmp_path / "checkpoints", tmp_path / "outbox.jsonl"
    common = ["--bootstrap", bootstrap, "--requests", requests, "--approvals", approvals,
              "--outputs", outputs, "--checkpoint-dir", str(ckpt),
              "--checkpoint-interval-ms", "1000", "--approval-timeout-s", "900",
              "--sms-timeout-s", "5",
              "--outbox", str(outbox)]

    # 1. every run waits: its approval request is committed (a checkpoint holds the wait)
    log1 = tmp_path / "job1.log"
    job1 = _start(user, common, log1)
    try:
        asked = _wait_for("five approval requests", lambda: [
            r for o in _outputs(bootstrap, outputs) if (r := ApprovalRequest.of(o))
        ] if len(_outputs(bootstrap, outputs)) >= len(KEYS) else None, job1, log1)
    finally:
        _kill(job1)  # the crash: nothing runs while the answers come
    by_key = {r.key: r for r in asked}
    assert sorted(by_key) == list(KEYS) and len(asked) == len(KEYS)
    assert not outbox.exists(), "a message went out before its approval"
    restore_from = _latest_checkpoint(ckpt)

    answers = [by_key["k0"].approve(by="ann"), by_key["k1"].approve(),
               by_key["k2"].reject("not this customer"), by_key["k4"].approve(),
               {"key": "k0", "correlation_id": "approval:nope", "payload": {"approved": True}}]
    produce(bootstrap, approvals, [(a["key"], orjson.dumps(a)) for a in answers])

    # 2. restored at parallelism 2: the answers release or refuse, k3 times out
    log2 = tmp_path / "job2.log"
    job2 = _start(user, [*common, "--restore", str(restore_from), "--parallelism", "2"], log2)
    try:
        final = _wait_for("five answers", lambda: (
            a if len(a := [o for o in _outputs(bootstrap, outputs) if o.get("kind") == "answer"])
            >= len(KEYS) else None), job2, log2)
        errors = _wait_for("the unmatched answer on the errors topic", lambda: [
            orjson.loads(m.value()) for m in consume_all(bootstrap, f"{outputs}-errors",
                                                         read_committed=False)], job2, log2)
    finally:
        _kill(job2)
    answer = {o["key"]: o["answer"] for o in final}
    assert len(final) == len(KEYS), final  # once each, at the exactly-once sink
    for k in ("k0", "k1", "k4"):
        assert answer[k] == f"sent to {k}@shop.example"  # the tool's text result
    assert "rejected by its reviewer: not this customer" in answer["k2"]
    assert "'send_sms' was not approved" in answer["k3"] and "within 5 s" in answer["k3"]
    sent = sorted(orjson.loads(line)["to"] for line in outbox.read_text().splitlines())
    assert sent == [f"{k}@shop.example" for k in ("k0", "k1", "k4")]  # each email once
    assert [(e["error_type"], e["input"]["correlation_id"]) for e in errors] == [
        ("UnmatchedEventError", "approval:nope")]
    # no approval request was sent again after the restore (the waits were in keyed state)
    assert len([o for o in _outputs(bootstrap, outputs) if ApprovalRequest.of(o)]) == len(KEYS)
