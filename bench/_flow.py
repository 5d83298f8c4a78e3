"""Flow: chats against a provider that throttles, with and without the operator's flow control.

    python -m bench._flow [--quick] [--out bench/results-flow.json]

The provider is ``flink_agents_py.testing.ThrottlingProvider``: an OpenAI-compatible HTTP
server on 127.0.0.1 answering ``rate_per_s`` requests per one-second window and 429 with
``Retry-After`` above it. The agent sends one chat per record through ``OpenAIChatModel``
(``error_policy="retry"``), on the local runner with ``max_in_flight`` calls in flight.

Rows: ``flow control`` (the defaults: held throttled calls, adaptive concurrency, the
provider's rate-limit headers read) and ``no flow control`` (``hold_throttled=False``,
``adaptive=False``, no headers sent: what the runtime did before, each 429 an attempt of
the error policy). Figures: failed chats, the share of requests answered 429, and the rate
the provider served (first to last answer) against its limit.

Without the load of other processes the client reaches about 100 chats/s on 2 cores, so the
provider's limit is set below that: a limit the client cannot reach measures the client.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    ChatMessage,
    ChatModelSetup,
    ChatRequestEvent,
    ChatResponseEvent,
    FlowControl,
    InputEvent,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    action,
)
from flink_agents_py.integrations.chat_models import OpenAIChatModel
from flink_agents_py.testing import ThrottlingProvider

from ._report import Table, standalone_main

__all__ = ["bench_flow", "config"]


def config(quick: bool) -> dict[str, Any]:
    """The sizes: chats, calls in flight, the provider's limit per second."""
    if quick:
        return {"chats": 2000, "max_in_flight": 256, "rate_per_s": 50, "latency_s": 0.05,
                "baseline": False}
    return {"chats": 4000, "max_in_flight": 256, "rate_per_s": 80, "latency_s": 0.05,
            "baseline": True}


class FlowAsker(Agent):
    """One chat per record ``{"key", "q"}``; outputs whether it failed."""

    @action(InputEvent)
    @staticmethod
    def ask(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(ChatRequestEvent(model="model",
                                        messages=[ChatMessage(content=str(event.input["q"]))]))

    @action(ChatResponseEvent)
    @staticmethod
    def done(event: ChatResponseEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output={"key": ctx.key, "error": event.error}))


def _run(cfg: dict[str, Any], controlled: bool) -> dict[str, Any]:
    rate = cfg["rate_per_s"]
    with ThrottlingProvider(rate_per_s=rate, latency_s=cfg["latency_s"],
                            rate_headers=controlled) as fake:
        agent = FlowAsker()
        conn: dict[str, Any] = {"base_url": fake.base_url}
        if not controlled:
            conn["flow_control"] = FlowControl(hold_throttled=False, adaptive=False)
        agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION,
                           ResourceDescriptor(OpenAIChatModel, **conn))
        agent.add_resource("model", ResourceType.CHAT_MODEL, ResourceDescriptor(
            ChatModelSetup, connection="conn", error_policy="retry"))
        records = [{"key": f"k{i}", "q": i} for i in range(cfg["chats"])]
        t0 = time.monotonic()
        res = (AgentsExecutionEnvironment.local(max_in_flight=cfg["max_in_flight"])
               .from_list(records).apply(agent).run())
        wall = time.monotonic() - t0
        failed = sum(1 for o in res.outputs if o["error"]) + len(res.errors)
        served_rate = fake.served_rate()
        return {"flow control": "on" if controlled else "off", "chats": cfg["chats"],
                "in_flight": cfg["max_in_flight"], "limit_per_s": rate, "failed": failed,
                "requests": fake.requests,
                "pct_429": 100 * fake.throttled / max(1, fake.requests),
                "served_per_s": served_rate, "pct_of_limit": 100 * served_rate / rate,
                "wall_s": wall, "ok": failed == 0 and fake.throttled < 0.05 * fake.requests}


def bench_flow(cfg: dict[str, Any]) -> tuple[dict[str, Any], Table]:
    """Run the rows.

    Args:
        cfg: ``config(quick)``.

    Returns:
        The figures and their table.
    """
    rows = [_run(cfg, controlled=True)]
    if cfg.get("baseline"):
        rows.append(_run(cfg, controlled=False))
    table = Table("Flow: chats against a provider that throttles (429 + Retry-After above "
                  "its limit)",
                  [("flow control", "flow control"), ("chats", "chats"),
                   ("in_flight", "in flight"), ("limit_per_s", "limit/s"),
                   ("failed", "failed"), ("requests", "requests"), ("pct_429", "% 429"),
                   ("served_per_s", "served/s"), ("pct_of_limit", "% of limit"),
                   ("wall_s", "wall s")],
                  rows, note="goal: 0 failed, < 5 % answered 429, >= 90 % of the limit; "
                             "served/s from the first to the last answer")
    return {"rows": rows}, table


if __name__ == "__main__":
    sys.exit(standalone_main("python -m bench._flow", bench_flow, config, __doc__ or ""))
