"""A Kafka parse that keys records by their Kafka key, and an agent counting per key."""

from __future__ import annotations

import time
from typing import Any

from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents_py.flink import KafkaMessage
from flink_agents_py.flink._kafka import json_value


def by_kafka_key(message: KafkaMessage) -> dict[str, Any]:
    """The record's value, keyed by the record's Kafka key (text, or bytes when not UTF-8)."""
    return {"key": message.key, **json_value(message)}


class CountPerKey(Agent):
    """Outputs how many records its key has seen (in short-term memory) and the key's repr.

    A record with ``"fail": true`` fails the action (an error row) after it counted; one
    with ``"slow": true`` first waits half a second in a durable call (the key's next
    records queue behind it).
    """

    @action(InputEvent)
    @staticmethod
    async def count(event: InputEvent, ctx: RunnerContext) -> None:
        if event.input.get("slow"):
            await ctx.durable_execute_async(time.sleep, 0.5)
        seen = ctx.short_term_memory.get("seen", 0) + 1
        ctx.short_term_memory.set("seen", seen)
        if event.input.get("fail"):
            raise ValueError(f"record {event.input['n']} fails")
        ctx.send_event(
            OutputEvent(output={"key": repr(ctx.key), "seen": seen, "n": event.input["n"]})
        )
