"""``make kafka`` (``scripts/kafka_broker.py``): the broker a newcomer tries the Kafka step with.

The tutorial's Kafka step needed a broker at ``localhost:9092`` and said nothing of where to
get one: without Docker (or its daemon) a user stopped there, though ``make setup`` had
fetched a broker's jars for the tests. The script runs that broker in the foreground, as a
user runs it from a directory of their own.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from kafka_fixture import free_port
from support.waiting import SLOW_S, wait_until

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "kafka_broker.py"

pytestmark = pytest.mark.timeout(400)


def test_a_taken_port_is_refused_at_once_naming_it(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        proc = subprocess.run(
            [sys.executable, str(SCRIPT), "--port", str(port)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert proc.returncode == 1
    assert f"127.0.0.1:{port}" in proc.stderr and "--port" in proc.stderr, proc.stderr


@pytest.mark.kafka
def test_the_broker_serves_the_topics_asked_for_and_stops_on_ctrl_c(tmp_path):
    confluent = pytest.importorskip("confluent_kafka.admin")
    port = free_port()
    log = tmp_path / "out.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [sys.executable, str(SCRIPT), "--port", str(port), "--topics", "questions,answers"],
            cwd=tmp_path,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_until(
            "the script saying the broker is ready",
            lambda: "ready at" in log.read_text(),
            SLOW_S,
            interval_s=0.2,
            abort=lambda: None if proc.poll() is None else f"exited {proc.returncode}",
            details=log.read_text,
        )
        admin = confluent.AdminClient({"bootstrap.servers": f"localhost:{port}"})
        assert {"questions", "answers"} <= set(admin.list_topics(timeout=30).topics)
        data = log.read_text().split("data in ", 1)[1].split()[0]
        assert Path(data).is_dir()
    finally:
        os.kill(proc.pid, signal.SIGINT)
        code = proc.wait(timeout=60)
    assert code == 0, log.read_text()
    # what the tutorial says it prints, and how it is started there
    page = (ROOT / "docs" / "getting-started" / "tutorial.md").read_text()
    said = re.search(r"It prints `(kafka_broker: ready at [^`]+)`", page).group(1)
    assert said.replace(":9092", f":{port}") in log.read_text()
    assert (
        "\nkafka: $(STAMP)\n\t$(PY) scripts/kafka_broker.py $(ARGS)\n"
        in (ROOT / "Makefile").read_text()
    )
    assert "stopping" in log.read_text()
    assert not Path(data).exists()  # its data went with it
    with socket.socket() as s:  # and nothing listens there any more
        assert s.connect_ex(("127.0.0.1", port)) != 0
