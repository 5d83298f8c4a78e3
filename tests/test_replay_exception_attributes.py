"""A durable call's failure with attributes that have no JSON form (an HTTP error's
``response``).

Before: the record kept its JSON-form attributes only, so after a restore the replayed
exception had no ``response``, while the first run's had one: an action that branched on
``e.response.status`` emitted one thing in a fault-free run and another (or failed) after a
crash. Now the first run hands over what a replay rebuilds (same type, message and
``args``, JSON-form attributes), with a note naming what was left out and the original as
its ``__cause__``; an exception whose attributes all have a JSON form is handed over as it
was raised.
"""

from __future__ import annotations

from typing import Any

import pytest

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents_py.testing import check_replay_safety

pytestmark = pytest.mark.timeout(120)


class Response:
    def __init__(self, status: int) -> None:
        self.status = status


class HttpError(Exception):
    def __init__(self, message: str, response: Response, code: int) -> None:
        super().__init__(message)
        self.response = response
        self.code = code


class PlainError(Exception):
    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


RAISED: list[BaseException] = []


def fetch(status: int) -> str:
    err = HttpError(f"status {status}", Response(status), status)
    RAISED.append(err)
    raise err


def plain() -> str:
    err = PlainError("plain", 7)
    RAISED.append(err)
    raise err


class Caller(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        seen: dict[str, Any] = {}
        try:
            await ctx.durable_execute_async(fetch, event.input["status"])
        except HttpError as e:
            response = getattr(e, "response", None)
            seen["http"] = [str(e), e.code, response.status if response else None]
        try:
            await ctx.durable_execute_async(plain)
        except PlainError as e:
            seen["plain"] = [str(e), e.code]
        ctx.send_event(OutputEvent(output=seen))


def test_a_crash_never_changes_what_the_action_sees_of_the_failure():
    report = check_replay_safety(Caller(), [{"key": "a", "status": 404}], other_process=False)
    report.assert_ok()  # before: "http" [.., 404] fault-free, [.., None] after a restore


def test_the_first_run_hands_over_what_a_replay_rebuilds():
    RAISED.clear()
    caught: dict[str, BaseException] = {}

    class Catching(Agent):
        @action(InputEvent)
        @staticmethod
        async def go(event: InputEvent, ctx: RunnerContext) -> None:
            for name, fn, args in (("http", fetch, (503,)), ("plain", plain, ())):
                try:
                    await ctx.durable_execute_async(fn, *args)
                except Exception as e:  # noqa: BLE001 - kept for the test's checks
                    caught[name] = e
            ctx.send_event(OutputEvent(output="done"))

    result = AgentsExecutionEnvironment.local().from_list([{"key": "k"}]).apply(
        Catching()).run()
    assert result.errors == []
    http, original = caught["http"], RAISED[0]
    assert type(http) is HttpError and str(http) == "status 503" and http.code == 503
    assert http.args == ("status 503",)
    assert not hasattr(http, "response")  # as a replay rebuilds it
    assert http.__cause__ is original and original.response.status == 503  # type: ignore[attr-defined]
    assert any("response" in note for note in http.__notes__)
    assert caught["plain"] is RAISED[1]  # all its attributes recorded: handed over as raised


# -- an explicit cause (``raise ... from e``) ---------------------------------------------------
def chained() -> str:
    try:
        {}["sku"]
    except KeyError as e:
        raise ValueError("no price") from e
    return "unreachable"


class Chained(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        try:
            await ctx.durable_execute_async(chained)
        except ValueError as e:
            cause = e.__cause__
            seen = [str(e), type(cause).__name__, str(cause), isinstance(cause, KeyError)]
        await ctx.durable_execute_async(len, "after")  # a point after the failure is recorded
        ctx.send_event(OutputEvent(output=seen))


def test_a_crash_never_changes_the_cause_an_action_sees():
    report = check_replay_safety(Chained(), [{"key": "a"}], other_process=False)
    report.assert_ok()  # before: the replayed cause was OriginalFailure, not KeyError


def test_a_replayed_cause_is_rebuilt_and_the_original_traceback_ends_its_chain():
    from flink_agents_py.runtime._failures import OriginalFailure, with_original
    from flink_agents_py.runtime.recorder._outcomes import rebuild_exception, store_outcome
    from flink_agents_py.runtime.recorder._state import CallRecord

    try:
        chained()
    except ValueError as e:
        raised = e
    rec = CallRecord(digest="d")
    store_outcome(rec, "r0/go/c0", False, raised)
    again = with_original(rebuild_exception(rec), rec.traceback)
    assert type(again) is ValueError and str(again) == "no price"
    cause = again.__cause__
    assert type(cause) is KeyError and cause.args == ("sku",)
    assert isinstance(cause.__cause__, OriginalFailure) and "chained" in str(cause.__cause__)


# -- both: a cause, and attributes with no JSON form at either level ----------------------------
def wrapped(status: int) -> str:
    try:
        fetch(status)
    except HttpError as e:
        raise PlainError("lookup failed", status) from e
    return "unreachable"


def with_response_from_cause() -> str:
    try:
        {}["sku"]
    except KeyError as e:
        raise HttpError("no sku", Response(404), 404) from e
    return "unreachable"


class Both(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        seen: list[Any] = []
        for fn in (wrapped, with_response_from_cause):
            try:
                await ctx.durable_execute_async(fn, *((404,) if fn is wrapped else ()))
            except (PlainError, HttpError) as e:
                cause = e.__cause__
                seen.append([type(e).__name__, str(e), type(cause).__name__, str(cause),
                             getattr(e, "response", None) is None,
                             getattr(cause, "response", None) is None])
        await ctx.durable_execute_async(len, "after")
        ctx.send_event(OutputEvent(output=seen))


def test_a_cause_and_attributes_without_json_form_read_the_same_after_a_crash():
    report = check_replay_safety(Both(), [{"key": "a"}], other_process=False)
    report.assert_ok()
