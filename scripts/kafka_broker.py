"""Run a local Kafka broker to try the Kafka examples with: the jars ``make setup`` fetched.

The tutorial's Kafka step and the Kafka how-to need a broker at ``localhost:9092``. Without
one of your own (and without Docker), this runs Apache Kafka in KRaft mode, one node, from the
``org.apache.kafka:kafka_2.13`` jars that ``make setup`` fetched for the tests (no download
when they are there; ``scripts/fetch_jars.sh broker`` otherwise), with Java::

    make kafka                                       # 127.0.0.1:9092 until Ctrl-C
    .venv/bin/python scripts/kafka_broker.py --port 9093 --topics questions,answers

Its data lives in a temporary directory removed when it stops: topics do not outlive it.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import socket
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the broker the Kafka tests start (kafka_fixture)


def port_taken(port: int) -> bool:
    """Whether something accepts connections on ``127.0.0.1:port`` already."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(1.0)
        return s.connect_ex(("127.0.0.1", port)) == 0


def main(argv: list[str] | None = None) -> int:
    """Start the broker, create the topics asked for, and run until SIGINT or SIGTERM.

    Args:
        argv: the command line's arguments (default: ``sys.argv[1:]``).

    Returns:
        The exit status: 0 after a clean stop, 1 when the port is taken or the broker
        does not start (the message says why).
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=9092, help="client port (default 9092)")
    parser.add_argument(
        "--topics", default="", help="comma-separated topics to create once it is up (1 partition)"
    )
    args = parser.parse_args(argv)
    if port_taken(args.port):
        print(
            f"kafka_broker: something already listens on 127.0.0.1:{args.port} (a broker "
            f"started before?): use it, stop it, or pass --port",
            file=sys.stderr,
        )
        return 1
    from kafka_fixture import KafkaBroker  # imports confluent-kafka (the test extra)

    stop = {"signal": False}

    def on_signal(signum: int, frame: object) -> None:
        stop["signal"] = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    workdir = Path(tempfile.mkdtemp(prefix="flink-agents-py-kafka-"))
    print(
        f"kafka_broker: starting Kafka on 127.0.0.1:{args.port} (Java; 10-30 s), data in {workdir}",
        flush=True,
    )
    broker = KafkaBroker(workdir, port=args.port)
    keep = False  # the data and log of a broker that failed, to read
    try:
        try:
            broker.start()
            topics = [t.strip() for t in args.topics.split(",") if t.strip()]
            if topics:
                broker.create_topics(topics)
        except (RuntimeError, FileNotFoundError) as e:
            print(
                f"kafka_broker: the broker did not start: {e}\n(its log: {workdir / 'server.log'})",
                file=sys.stderr,
            )
            keep = True
            return 1
        made = f", topics {', '.join(topics)}" if topics else ""
        print(
            f"kafka_broker: ready at 127.0.0.1:{args.port} in {broker.started_in_s:.0f} s"
            f"{made}; Ctrl-C stops it",
            flush=True,
        )
        while not stop["signal"] and broker.proc is not None and broker.proc.poll() is None:
            time.sleep(0.2)
        if not stop["signal"]:
            print(
                f"kafka_broker: the broker exited (log: {workdir / 'server.log'})", file=sys.stderr
            )
            keep = True
            return 1
        print("kafka_broker: stopping", flush=True)
        return 0
    finally:
        broker.stop()
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
