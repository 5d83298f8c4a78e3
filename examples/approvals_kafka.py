r"""Human approval on Kafka: requests in, approvals in, answers and approval requests out.

Each request ``{"key": "...", "to": "...", "text": "...", "channel": "email" | "sms"}`` on
the requests topic starts a run of ``approvals_agent.SupportAgent``, whose email and text
message tools need approval: the held call
becomes an ``ApprovalRequest`` on the outputs topic, and the run waits, in keyed state, for
the answer on the approvals topic (``ApprovalRequest.approve()`` / ``reject(reason)`` as
JSON). Then the email is sent (or not) and the answer ``{"kind": "answer", ...}`` follows on
the outputs topic. Answers that match no waiting call go to ``<outputs>-errors``.

    python examples/approvals_kafka.py --bootstrap 127.0.0.1:9092 --requests requests \
        --approvals approvals --outputs outputs --checkpoint-dir /tmp/approvals-ckpt

The job reads forever (stop it with Ctrl-C or by killing it); its checkpoints are kept, and
``--restore <chk dir>`` starts it again from one, at any ``--parallelism``: runs waiting for
their approval resume when it comes, and their timeouts still fire.
"""

from __future__ import annotations

import argparse
import os
import sys

from approvals_agent import OUTBOX_ENV, SMS_TIMEOUT_ENV, TIMEOUT_ENV, build_agent

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.flink import create_stream_environment, read_json_topic, write_json_topic


def main(argv: list[str] | None = None) -> int:
    """Run the job until it is stopped.

    Args:
        argv: command-line arguments (default ``sys.argv[1:]``).

    Returns:
        The exit status.
    """
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bootstrap", required=True, help="Kafka bootstrap servers")
    parser.add_argument("--requests", required=True, help="topic of JSON requests")
    parser.add_argument("--approvals", required=True, help="topic of JSON answers")
    parser.add_argument("--outputs", required=True, help="topic for answers and requests")
    parser.add_argument("--checkpoint-dir", required=True, help="where checkpoints are kept")
    parser.add_argument("--checkpoint-interval-ms", type=int, default=2_000)
    parser.add_argument("--parallelism", type=int, default=1)
    parser.add_argument("--restore", default=None, help="a checkpoint directory to start from")
    parser.add_argument("--approval-timeout-s", type=float, default=None,
                        help="how long an email waits for its approval (default: a day)")
    parser.add_argument("--sms-timeout-s", type=float, default=None,
                        help="how long a text message waits (default: an hour)")
    parser.add_argument("--outbox", default=None, help="file the email tool appends to")
    args = parser.parse_args(argv)
    if args.approval_timeout_s is not None:
        os.environ[TIMEOUT_ENV] = str(args.approval_timeout_s)
    if args.sms_timeout_s is not None:
        os.environ[SMS_TIMEOUT_ENV] = str(args.sms_timeout_s)
    if args.outbox:
        os.environ[OUTBOX_ENV] = args.outbox

    config = {"execution.checkpointing.dir": f"file://{os.path.abspath(args.checkpoint_dir)}",
              "execution.checkpointing.storage": "filesystem",
              "execution.checkpointing.externalized-checkpoint-retention":
                  "RETAIN_ON_CANCELLATION",
              "state.backend.type": "rocksdb"}
    if args.restore:
        config["execution.state-recovery.path"] = f"file://{os.path.abspath(args.restore)}"
    env = create_stream_environment(parallelism=args.parallelism,
                                    checkpoint_interval_ms=args.checkpoint_interval_ms,
                                    extra_config=config)
    agents = AgentsExecutionEnvironment.flink(env)
    requests = read_json_topic(env, args.bootstrap, args.requests, name="requests")
    approvals = read_json_topic(env, args.bootstrap, args.approvals, name="approvals")
    job = (agents.from_datastream(requests.records)
           .connect(approvals.records)
           .apply(build_agent(), name="support"))
    write_json_topic(job.to_datastream(), args.bootstrap, args.outputs,
                     transaction_timeout_ms=600_000)
    write_json_topic(job.errors_datastream().union(requests.errors, approvals.errors),
                     args.bootstrap, f"{args.outputs}-errors", key_selector=lambda r: None,
                     delivery_guarantee="at-least-once")
    agents.execute("approvals")
    return 0


if __name__ == "__main__":
    sys.exit(main())
