r"""An agent over a Kafka table declared in SQL, its verdicts written to a Kafka table.

Both topics are tables made with ``CREATE TABLE ... WITH ('connector' = 'kafka', ...)``; the
agent sits between them with ``from_table`` / ``to_table``. The review table is read bounded
(``'scan.bounded.mode' = 'latest-offset'``: what the topic holds when the job starts), so the
job ends by itself; drop that option to keep reading. The "chat model" is offline: a scripted
one that calls a review negative when it mentions a complaint word.

    python examples/sql_kafka_agent.py --bootstrap 127.0.0.1:9092 \\
        --input reviews --output verdicts

Input messages are JSON ``{"id": "...", "text": "..."}``; output messages are JSON
``{"id": "...", "sentiment": "positive|negative", "error": null}``.
"""

from __future__ import annotations

import argparse
import sys

from pyflink.common import Types
from pyflink.table import StreamTableEnvironment

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    ChatMessage,
    ChatModelSetup,
    ChatRequestEvent,
    ChatResponseEvent,
    InputEvent,
    MessageRole,
    OutputEvent,
    ResourceDescriptor,
    RunnerContext,
    action,
    chat_model_connection,
    chat_model_setup,
)
from flink_agents_py.flink import add_kafka_jars, create_stream_environment
from flink_agents_py.integrations.chat_models import ScriptedChatModel, ScriptRule

COMPLAINTS = ("slow", "broken", "late", "rude", "bad")


class SentimentAgent(Agent):
    """Asks the chat model for one review's sentiment and emits the verdict."""

    @chat_model_connection
    @staticmethod
    def judge_model() -> ResourceDescriptor:
        """The scripted, offline connection: ``negative`` when a complaint word appears."""
        return ResourceDescriptor(ScriptedChatModel, default_reply="positive", rules=[
            ScriptRule(when=rf"(?i)\b({'|'.join(COMPLAINTS)})\b", reply="negative")])

    @chat_model_setup
    @staticmethod
    def sentiment_model() -> ResourceDescriptor:
        """The chat setup the agent asks."""
        return ResourceDescriptor(ChatModelSetup, connection="judge_model")

    @action(InputEvent)
    @staticmethod
    def ask(event: InputEvent, ctx: RunnerContext) -> None:
        """Send the review text to the chat model."""
        ctx.send_event(ChatRequestEvent(model="sentiment_model", messages=[ChatMessage(
            role=MessageRole.USER,
            content=f"Answer positive or negative: {event.input['text']}")]))

    @action(ChatResponseEvent)
    @staticmethod
    def verdict(event: ChatResponseEvent, ctx: RunnerContext) -> None:
        """Emit the review id with the model's answer (or the failed call's error)."""
        answer = event.response.message.content.strip() if event.response else None
        ctx.send_event(OutputEvent(output={"id": ctx.key, "sentiment": answer,
                                           "error": event.error}))


def kafka_table_ddl(name: str, columns: str, topic: str, bootstrap: str, source: bool) -> str:
    """``CREATE TABLE`` for a JSON Kafka topic (a bounded source, or a sink)."""
    scan = (", 'properties.group.id' = 'sql-kafka-agent', "
            "'scan.startup.mode' = 'earliest-offset', "
            "'scan.bounded.mode' = 'latest-offset'") if source else ""
    return (f"CREATE TABLE {name} ({columns}) WITH ("
            f"'connector' = 'kafka', 'topic' = '{topic}', "
            f"'properties.bootstrap.servers' = '{bootstrap}', 'format' = 'json'{scan})")


def main(argv: list[str] | None = None) -> int:
    """Run the job: Kafka table ``--input`` -> agent -> Kafka table ``--output``.

    Args:
        argv: command-line arguments (default ``sys.argv[1:]``).

    Returns:
        The exit status, 0 once the bounded job finished.
    """
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bootstrap", required=True, help="Kafka bootstrap servers")
    parser.add_argument("--input", required=True, help="topic of JSON reviews {id, text}")
    parser.add_argument("--output", required=True, help="topic for JSON verdicts")
    args = parser.parse_args(argv)

    env = create_stream_environment()
    add_kafka_jars(env)
    t_env = StreamTableEnvironment.create(env)
    t_env.execute_sql(kafka_table_ddl("reviews", "id STRING, text STRING", args.input,
                                      args.bootstrap, source=True))
    t_env.execute_sql(kafka_table_ddl("verdicts", "id STRING, sentiment STRING, error STRING",
                                      args.output, args.bootstrap, source=False))

    agents = AgentsExecutionEnvironment.flink(env, t_env=t_env)
    out = (agents.from_table(t_env.from_path("reviews"), key_selector=lambda row: row["id"])
           .apply(SentimentAgent())
           .to_table(output_type=Types.ROW_NAMED(["id", "sentiment", "error"],
                                                 [Types.STRING()] * 3)))
    out.execute_insert("verdicts").wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
