"""Agents the replay-safety checker must catch, and their fixed twins
(tests/test_crash_checker_sentinel.py).

Defined at the top level of a module so that the checker can restore them in another
process (by ``module:qualname``).
"""

from __future__ import annotations

import logging
import random
import socket
import subprocess
import sys
import time
from datetime import date, datetime
from random import random as coin

from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action

__all__ = ["Mailer", "HelperMailer", "DurableMailer", "Scribe", "Gambler", "CarefulGambler",
           "Dater", "Forgetful", "FanOut", "FewFanOut", "SortedFanOut", "TOPICS", "FEW",
           "line_of"]

log = logging.getLogger("tests.unsafe_agents")

TOPICS = frozenset(f"topic-{i:02d}" for i in range(24))
"""Strings whose set iteration order differs between two hash seeds (24 of them: two
seeds giving the same order is vanishingly unlikely)."""


def line_of(fragment: str) -> int:
    """The line of this module holding ``fragment`` (the first one)."""
    with open(__file__, encoding="utf-8") as f:
        return next(i for i, line in enumerate(f, 1) if fragment in line)


def send_mail(port: int, text: str) -> str:
    """An e-mail over a socket (a one-line SMTP stand-in)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:  # SEND-MAIL
        s.sendall(text.encode() + b"\n")
    return f"sent {text}"


def confirm(key: str) -> str:
    """A durable call the mailers await after the mail went out."""
    return f"confirmed {key}"


class Mailer(Agent):
    """Sends its e-mail outside any durable call, then awaits one: a crash in between
    sends the e-mail again."""

    @action(InputEvent)
    @staticmethod
    async def notify(event: InputEvent, ctx: RunnerContext) -> None:
        port = event.input["port"]
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:  # MAILER-CONNECT
            s.sendall(f"mail for {ctx.key}\n".encode())
        done = await ctx.durable_execute_async(confirm, ctx.key)
        ctx.send_event(OutputEvent(output=done))


class HelperMailer(Agent):
    """A plain (not async) action that sends its e-mail through a helper, outside any
    durable call, then makes a durable call."""

    @action(InputEvent)
    @staticmethod
    def notify(event: InputEvent, ctx: RunnerContext) -> None:
        send_mail(event.input["port"], f"mail for {ctx.key}")
        ctx.send_event(OutputEvent(output=ctx.durable_execute(confirm, ctx.key)))


class DurableMailer(Agent):
    """The fix: the e-mail, the clock and a file write are durable calls; it also logs, and
    imports a module the first time it runs (``event.input["lazy"]``, written then)."""

    @action(InputEvent)
    @staticmethod
    async def notify(event: InputEvent, ctx: RunnerContext) -> None:
        log.info("mailing %s", ctx.key)  # logging reads the clock: not the action's doing
        if "lazy" in event.input:  # an import writes its .pyc: not the action's doing either
            sys.path.insert(0, event.input["lazy"])
            try:
                __import__("lazy_helper")
            finally:
                sys.path.remove(event.input["lazy"])
        sent = await ctx.durable_execute_async(send_mail, event.input["port"],
                                               f"mail for {ctx.key}")
        stamp = ctx.durable_execute(time.time)
        ctx.durable_execute(write_line, event.input["outbox"], f"mailed {ctx.key}")
        done = await ctx.durable_execute_async(confirm, ctx.key)
        ctx.send_event(OutputEvent(output={"sent": sent, "done": done,
                                           "late": stamp < 0}))


def write_line(path: str, text: str) -> str:
    """Append a line to a file (a durable call's function)."""
    with open(path, "a", encoding="utf-8") as f:
        f.write(text + "\n")
    return "written"


class Scribe(Agent):
    """Appends to an outbox file outside a durable call (``outbox`` in the input), then
    writes another file in one (``ledger``)."""

    @action(InputEvent)
    @staticmethod
    async def write(event: InputEvent, ctx: RunnerContext) -> None:
        with open(event.input["outbox"], "a", encoding="utf-8") as f:  # SCRIBE-WRITE
            f.write(f"mail for {ctx.key}\n")
        done = await ctx.durable_execute_async(write_line, event.input["ledger"], ctx.key)
        ctx.send_event(OutputEvent(output=done))


class Gambler(Agent):
    """Branches on the clock and a random number, and starts a process, between calls."""

    @action(InputEvent)
    @staticmethod
    async def play(event: InputEvent, ctx: RunnerContext) -> None:
        late = time.time() > 0  # GAMBLER-CLOCK
        pick = random.choice(["a", "b"])  # GAMBLER-RANDOM
        subprocess.run([sys.executable, "-c", "pass"], check=True)  # GAMBLER-PROCESS
        done = await ctx.durable_execute_async(confirm, f"{ctx.key}:{late}:{pick != ''}")
        ctx.send_event(OutputEvent(output=done))


class Dater(Agent):
    """Reads the clock and a coin through names imported from their modules."""

    @action(InputEvent)
    @staticmethod
    async def stamp(event: InputEvent, ctx: RunnerContext) -> None:
        weekend = datetime.now().weekday() >= 5  # DATER-NOW
        heads = coin() < 0.5  # DATER-COIN
        today = date.today()  # DATER-TODAY
        fixed = datetime(2024, 1, 1).weekday()  # a constructor: not a clock read
        done = await ctx.durable_execute_async(confirm, f"{ctx.key}:{weekend}:{heads}")
        ctx.send_event(OutputEvent(output={"done": done, "fixed": fixed,
                                           "dated": today.year > 2000}))


SEEN: set[str] = set()


class Forgetful(Agent):
    """Fails when it runs again for a key in the same process (a module-level set)."""

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        first = ctx.key not in SEEN
        SEEN.add(ctx.key)
        await ctx.durable_execute_async(confirm, ctx.key)
        if not first:
            raise ValueError(f"seen {ctx.key} before")  # FORGETFUL-RAISE
        ctx.send_event(OutputEvent(output="ok"))


def pick_one(options: list[str]) -> str:
    """A durable call's function that reads randomness (allowed: its result is recorded)."""
    return random.choice(options)


class CarefulGambler(Agent):
    """The fix: the clock and the random choice are durable calls."""

    @action(InputEvent)
    @staticmethod
    async def play(event: InputEvent, ctx: RunnerContext) -> None:
        late = await ctx.durable_execute_async(time.time) > 0
        pick = await ctx.durable_execute_async(pick_one, ["a", "b"])
        done = await ctx.durable_execute_async(confirm, f"{ctx.key}:{late}:{pick != ''}")
        ctx.send_event(OutputEvent(output=done))


def announce(topic: str) -> str:
    """One durable call per topic."""
    return f"announced {topic}"


class FanOut(Agent):
    """Makes its durable calls in a set's iteration order, which changes between processes."""

    @action(InputEvent)
    @staticmethod
    async def announce_all(event: InputEvent, ctx: RunnerContext) -> None:
        done = []
        for topic in set(TOPICS):  # FANOUT-SET
            done.append(await ctx.durable_execute_async(announce, topic))
        ctx.send_event(OutputEvent(output=sorted(done)))


FEW = {"alpha", "beta", "gamma"}
"""Three strings: two seeds give them the same order about 1 time in 6."""


class FewFanOut(Agent):
    """``FanOut`` over a set of three strings (the usual size of such a bug)."""

    @action(InputEvent)
    @staticmethod
    async def announce_all(event: InputEvent, ctx: RunnerContext) -> None:
        done = []
        for topic in FEW:
            done.append(await ctx.durable_execute_async(announce, topic))
        ctx.send_event(OutputEvent(output=sorted(done)))


class SortedFanOut(Agent):
    """The fix: the same calls in a sorted order."""

    @action(InputEvent)
    @staticmethod
    async def announce_all(event: InputEvent, ctx: RunnerContext) -> None:
        done = []
        for topic in sorted(TOPICS):
            done.append(await ctx.durable_execute_async(announce, topic))
        ctx.send_event(OutputEvent(output=sorted(done)))
