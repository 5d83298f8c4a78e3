"""A recorded failure keeps the exception's private attributes and ``__slots__`` entries,
and the first run reads its attributes as a replay rebuilds them.

Before: the record kept an exception's public ``__dict__`` entries only. An exception that
keeps its state in ``self._retry_after`` (read through a property) or in a ``__slots__``
entry was rebuilt by a replay from its ``args`` alone: the constructor's default there
(``retry_after`` 9 live, 3 after a restore), or no attribute at all (``e.code`` raised
``AttributeError`` after a restore, where the first run read 5). Silent: the action went on
with another value. Now both are recorded and set back, so a replay hands over what the
first run got; one with no JSON form is left out on both paths (with the note the public
attributes get). An attribute whose JSON form rebuilds as another type (a tuple, a list)
was a tuple in the first run and a list after a restore (``e.where == ("eu", 1)`` held only
until a crash); the first run's exception now gets it as rebuilt, its cause's too.
"""

from __future__ import annotations

from typing import Any

import pytest

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents_py.testing import check_replay_safety

pytestmark = pytest.mark.timeout(120)


class Throttled(Exception):
    """Keeps its state private, behind a property (a default in its constructor)."""

    def __init__(self, message: str, retry_after: int = 3) -> None:
        super().__init__(message)
        self._retry_after = retry_after

    @property
    def retry_after(self) -> int:
        return self._retry_after


class Slotted(Exception):
    """Keeps its code in a slot."""

    __slots__ = ("code",)

    def __init__(self, message: str, code: int = 0) -> None:
        super().__init__(message)
        self.code = code


class Required(Exception):
    """A private attribute its constructor requires (a replay cannot pass it)."""

    def __init__(self, message: str, token: str) -> None:
        super().__init__(message)
        self._token = token
        self._handle = object()  # no JSON form: left out, on both paths


class Located(Exception):
    """Keeps tuples in its attributes (their JSON form is a list), its cause too."""

    def __init__(self, message: str, where: tuple[str, int]) -> None:
        super().__init__(message)
        self.where = where
        self.by_region = {"eu": (1, 2)}


def located() -> str:
    try:
        raise Located("inner", ("us", 2))
    except Located as e:
        raise Located("outer", ("eu", 1)) from e


def throttled() -> str:
    raise Throttled("slow down", retry_after=9)


def slotted() -> str:
    raise Slotted("bad input", code=5)


def required() -> str:
    raise Required("denied", token="t-1")


def done(tag: str) -> str:
    return tag


def _seen(e: Exception) -> list[Any]:
    return [
        type(e).__name__,
        str(e),
        getattr(e, "retry_after", None),
        getattr(e, "code", "missing"),
        getattr(e, "_token", "missing"),
        hasattr(e, "_handle"),
    ]


class Catches(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        seen = []
        for fn in (throttled, slotted, required):
            try:
                await ctx.durable_execute_async(fn)
            except Exception as e:  # noqa: BLE001 - what the action reads of it
                seen.append(_seen(e))
        try:
            await ctx.durable_execute_async(located)
        except Located as e:
            cause: Any = e.__cause__
            seen.append(
                [
                    e.where == ("eu", 1),
                    type(e.where).__name__,
                    type(e.by_region["eu"]).__name__,
                    type(cause.where).__name__,
                ]
            )
        await ctx.durable_execute_async(done, "end")  # a crash point after the failures
        ctx.send_event(OutputEvent(output=seen))


EXPECTED = [
    ["Throttled", "slow down", 9, "missing", "missing", False],
    ["Slotted", "bad input", None, 5, "missing", False],
    ["Required", "denied", None, "missing", "t-1", False],
    [False, "list", "list", "list"],  # as a replay rebuilds them, in the first run too
]


def test_the_first_run_reads_the_state_the_exception_was_raised_with():
    job = AgentsExecutionEnvironment.local().from_list([{"key": "k"}]).apply(Catches())
    result = job.run()
    assert result.errors == []
    assert result.outputs == [EXPECTED]


def test_a_restore_at_every_point_reads_the_same_state():
    report = check_replay_safety(Catches(), [{"key": "k"}, {"key": "j"}], hash_seeds=1)
    report.assert_ok()
    assert sum(p.replayed for p in report.points) > 0  # failures were answered from records
