"""The agent and failpoint of ``test_replay_upgrades_flink``: code "redeployed" by a restore.

Imported by the Flink workers by reference (``tests/`` is on ``sys.path``). On the first
attempt the agent runs the old code; once the job was crashed (the ``crashed`` marker exists,
see ``support.crash``) it runs the new code: key ``swap`` makes its two ``functools.partial``
calls in the other order, key ``patch`` branches with ``ctx.patched("v2")``, and key ``new``
(a record that arrives only after the restore) runs the new branch; key ``lambdas`` makes its
two lambdas, ``lambda: quote(d, a, b)`` and ``lambda: quote(d, b, a)`` (one name, the same
bound values and functions: only their code tells them apart), in the other order; key
``default`` calls ``convert(d, 1)`` strictly, whose ``currency`` default the new code changed
from USD to EUR (the arguments passed are those recorded); key ``added`` calls ``weigh(d, n)``
strictly, to which the new code added a parameter with a default (``unit="kg"``).
"""

from __future__ import annotations

import functools
import types
from typing import Any

from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from support.crash import CrashOnceBase, append_line, first_attempt, hold, pace

__all__ = ["Upgraded", "CrashWhenHeld", "Pick", "pace", "LAST"]

KINDS = ("swap", "patch", "lambdas", "default", "added", "rows")
"""The runs in flight at the crash (records 0-4)."""

LAST = 60
"""The last number of the paced source: the ``new`` record (~3 s of open input)."""


def price(d: str, item: str) -> str:
    append_line(d, "calls.log", f"price {item}")
    return f"PRICE({item})"


def price_v2(d: str, item: str) -> str:
    append_line(d, "calls.log", f"price_v2 {item}")
    return f"V2({item})"


def convert(d: str, amount: int, currency: str = "USD") -> str:
    append_line(d, "calls.log", f"convert {amount}")
    return f"{amount} {currency}"


def weigh(d: str, amount: int) -> str:
    append_line(d, "calls.log", f"weigh {amount}")
    return f"{amount}"


def weigh_in(d: str, amount: int, unit: str = "kg") -> str:  # the new code's ``weigh``
    append_line(d, "calls.log", f"weigh {amount} {unit}")
    return f"{amount} {unit}"


weigh_in.__name__ = weigh_in.__qualname__ = "weigh"


def quote(d: str, base: str, other: str) -> str:
    append_line(d, "calls.log", f"quote {base} {other}")
    return f"{base}/{other}"


class Upgraded(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        d, kind = event.input["dir"], event.input["kind"]
        upgraded = not first_attempt(d)  # the code deployed from the checkpoint
        new_branch = None
        if kind == "swap":
            order = ("pear", "apple") if upgraded else ("apple", "pear")
            got = [await ctx.durable_execute_async(functools.partial(price, d, item))
                   for item in order]
        elif kind == "default":
            convert.__defaults__ = ("EUR",) if upgraded else ("USD",)  # the redeployed default
            got = [await ctx.durable_execute_async(convert, d, n, strict=True) for n in (1, 2)]
        elif kind == "added":
            fn = weigh_in if upgraded else weigh
            got = [await ctx.durable_execute_async(fn, d, n, strict=True) for n in (1, 2)]
        elif kind == "lambdas":
            a, b = "USD", "EUR"
            there, back = (lambda: quote(d, a, b)), (lambda: quote(d, b, a))
            got = [await ctx.durable_execute_async(fn)
                   for fn in ((back, there) if upgraded else (there, back))]
        elif kind == "rows":
            rows = [types.SimpleNamespace(item=i) for i in ("apple", "pear")]
            got = [await ctx.durable_execute_async(lambda row=row: price(d, row.item))
                   for row in (rows[::-1] if upgraded else rows)]
        else:
            new_branch = upgraded and ctx.patched("v2")
            if new_branch:
                got = [await ctx.durable_execute_async(price_v2, d, "fig")]
            else:
                got = [await ctx.durable_execute_async(price, d, "fig"),
                       await ctx.durable_execute_async(price, d, "kiwi")]
        await ctx.durable_execute_async(hold, d)
        ctx.send_event(OutputEvent(output={"key": ctx.key, "got": got, "patched": new_branch}))


class Pick:
    """The records of the scenario from the paced numbers: the ``KINDS`` at once, ``new`` as
    the last number, only after the restore."""

    def __init__(self, d: str) -> None:
        self.d = d

    def __call__(self, n: int) -> bool:
        return n in range(len(KINDS)) or (n == LAST and not first_attempt(self.d))


class CrashWhenHeld(CrashOnceBase):
    """Crash once the runs of ``KINDS`` have recorded their call ``c1`` under a completed checkpoint
    (their ``hold`` call is then in flight)."""

    def __call__(self, point: str, key: Any, info: dict[str, Any]) -> None:
        if not self.first_attempt():
            return
        if point == "call_recorded" and info["call_id"] == "r0/go/c1":
            self.note(str(key))
        elif point == "timer" and set(KINDS) <= set(self.seen) and all(
                self.checkpointed_since(self.seen[k]) for k in KINDS):
            self.crash("swap+patch", "injected crash: the runs mid-way, checkpointed")
