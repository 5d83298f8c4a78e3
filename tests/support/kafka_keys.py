"""A Kafka parse that keys records by their Kafka key, and an agent counting per key."""

from __future__ import annotations

from typing import Any

from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents_py.flink import KafkaMessage
from flink_agents_py.flink._kafka import json_value


def by_kafka_key(message: KafkaMessage) -> dict[str, Any]:
    """The record's value, keyed by the record's Kafka key (text, or bytes when not UTF-8)."""
    return {"key": message.key, **json_value(message)}


class CountPerKey(Agent):
    """Outputs how many records its key has seen (in short-term memory) and the key's repr."""

    @action(InputEvent)
    @staticmethod
    def count(event: InputEvent, ctx: RunnerContext) -> None:
        seen = ctx.short_term_memory.get("seen", 0) + 1
        ctx.short_term_memory.set("seen", seen)
        ctx.send_event(
            OutputEvent(output={"key": repr(ctx.key), "seen": seen, "n": event.input["n"]})
        )
