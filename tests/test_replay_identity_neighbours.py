"""Neighbours of the call-identity defects fixed before: callables whose identities could
collide or drift between a recorded run and its replay after a restore (and an upgrade).

Core-level restores (``support.harness``): a key's state is snapshotted mid-run through its
JSON form, the code is "redeployed" by flipping a module switch, and the snapshot resumes on
a new ``AgentCore``. A replay must hand each call its own recorded outcome or fail with a
``ReplayDivergenceError`` naming the call, never hand it another call's outcome.
"""

from __future__ import annotations

import array
import collections
import enum
import functools
import logging
from typing import Any

import pytest
from support.harness import (
    KEY,
    call_of,
    drive_until,
    new_core,
    poll_until,
    resume,
    snapshot_of,
)
from support.probes import count, gate, wait

from flink_agents_py.api import (
    Agent,
    ChatMessage,
    ChatModelSetup,
    InputEvent,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    action,
    qualified_name,
)
from flink_agents_py.integrations.chat_models import ScriptedChatModel
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import InMemoryKeyState
from flink_agents_py.runtime._serde import digest
from flink_agents_py.runtime.recorder._outcomes import call_digest

pytestmark = pytest.mark.timeout(60)

SWITCH: dict[str, Any] = {"swap": False, "order": ("apple", "pear"), "strict": None}


@pytest.fixture(autouse=True)
def _first_deploy():
    SWITCH.update(swap=False, order=("apple", "pear"), strict=None)


# -- fakes ---------------------------------------------------------------------------------
def fetch_weather() -> str:
    count("weather")
    return "sunny"


def fetch_stock() -> str:
    count("stock")
    return "up"


class Feeds:
    """``FEEDS.weather()`` and ``FEEDS.stock()``: calls that differ by attribute name only."""

    @staticmethod
    def weather() -> str:
        return fetch_weather()

    @staticmethod
    def stock() -> str:
        return fetch_stock()


FEEDS = Feeds()
WEATHER_CITY = "paris"
STOCK_CITY = "london"


def fetch_for(city: str) -> str:
    count(f"for:{city}")
    return f"news of {city}"


def slow_price(item: str) -> str:
    """Prices ``item`` once its gate (named after it) opens."""
    count(f"price:{item}")
    wait(item)
    return f"PRICE({item})"


def gated(tag: str) -> str:
    count(f"gated:{tag}")
    assert gate().wait(10), "gate never opened"
    return tag


def _lambdas(form: str) -> list[Any]:
    """Two lambdas of one qualified name that differ only in the global names they use."""
    if form == "global_function":
        return [lambda: fetch_weather(), lambda: fetch_stock()]  # noqa: PLW0108
    if form == "attribute":
        return [lambda: FEEDS.weather(), lambda: FEEDS.stock()]  # noqa: PLW0108
    if form == "global_argument":
        return [lambda: fetch_for(WEATHER_CITY), lambda: fetch_for(STOCK_CITY)]
    if form == "comprehension":
        return [lambda: [fetch_weather() for _ in range(1)][0],
                lambda: [fetch_stock() for _ in range(1)][0]]
    raise AssertionError(form)


LAMBDA_FORMS = ["global_function", "attribute", "global_argument", "comprehension"]


class TwoLambdas(Agent):
    """Two durable calls through lambdas (in ``SWITCH["swap"]`` order), then a gated call."""

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        calls = _lambdas(event.input["form"])
        if SWITCH["swap"]:
            calls.reverse()
        got = [await ctx.durable_execute_async(c) for c in calls]
        await ctx.durable_execute_async(gated, "g")
        ctx.send_event(OutputEvent(output=got))


def snapshot_at(plan: AgentPlan, ordinal: int, record: dict[str, Any]) -> InMemoryKeyState:
    """The key's state (through its JSON form) once call ``ordinal`` has started."""
    core = new_core(plan)
    try:
        state = InMemoryKeyState()
        res = core.on_input(KEY, record, state)
        assert res.errors == [] and res.outputs == []
        drive_until(core, state, quiet=True, done=lambda s: (
            (c := call_of(s, "go", ordinal)) is not None and not c.done))
        return snapshot_of(state, "json")
    finally:
        gate().set()
        core.close()


def assert_swap_diverges(agent: Agent, form: str, probes: Any, name: str) -> None:
    """Recorded: c0 made with ``apple``, c1 with ``pear``. Restored with the two swapped: a
    divergence at c0, not each call handed the other's recorded outcome; each ran once."""
    plan = AgentPlan.from_agent(agent)
    snap = snapshot_at(plan, 2, {"key": KEY, "form": form})
    SWITCH["order"] = ("pear", "apple")
    outputs, errors, _core = resume(plan, snap)
    assert outputs == []
    [err] = errors
    assert err.error_type == "ReplayDivergenceError" and "r0/go/c0" in err.message
    assert "arguments are those recorded for r0/go/c1" in err.message
    assert (probes[f"{name}:apple"], probes[f"{name}:pear"]) == (1, 1)


def assert_same_order_replays_quietly(agent: Agent, form: str, caplog: Any,
                                      want: list[str]) -> None:
    """Restored with the calls in the recorded order: the recorded outcomes, no warning."""
    plan = AgentPlan.from_agent(agent)
    snap = snapshot_at(plan, 2, {"key": KEY, "form": form})
    with caplog.at_level(logging.WARNING, logger="flink_agents_py.runtime"):
        outputs, errors, _core = resume(plan, snap)
    assert errors == [] and outputs == [want]
    assert not [r for r in caplog.records if "arguments changed" in r.getMessage()]


@pytest.mark.parametrize("form", LAMBDA_FORMS)
def test_lambdas_that_differ_only_in_the_global_names_they_use_have_other_identities(form):
    first, second = _lambdas(form)
    assert call_digest(first, (), {}, "r0/go/c0") != call_digest(second, (), {}, "r0/go/c0")


@pytest.mark.parametrize("form", LAMBDA_FORMS)
def test_lambdas_using_other_global_names_made_in_another_order_diverge(form, probes):
    """Recorded: c0 is the weather lambda, c1 the stock lambda. Restored with the two
    swapped, c0 asks for the stock: the action fails with a divergence naming the call
    instead of handing the stock lambda the recorded weather."""
    plan = AgentPlan.from_agent(TwoLambdas())
    snap = snapshot_at(plan, 2, {"key": KEY, "form": form})
    SWITCH["swap"] = True
    outputs, errors, core = resume(plan, snap)
    assert outputs == []  # no output made from swapped answers
    [err] = errors
    assert err.error_type == "ReplayDivergenceError" and "r0/go/c0" in err.message
    assert "arguments are those recorded for r0/go/c1" in err.message
    assert core.counters["replay_divergences"] == 1


@pytest.mark.parametrize("form", LAMBDA_FORMS)
def test_lambdas_using_other_global_names_in_the_same_order_replay_quietly(form, probes):
    plan = AgentPlan.from_agent(TwoLambdas())
    snap = snapshot_at(plan, 2, {"key": KEY, "form": form})
    made = probes.counts()
    outputs, errors, core = resume(plan, snap)
    assert errors == []
    want = (["news of paris", "news of london"] if form == "global_argument"
            else ["sunny", "up"])
    assert outputs == [want]
    assert core.counters["calls_replayed"] == 2 and core.counters["calls_executed"] == 1
    assert {k: v for k, v in probes.counts().items() if not k.startswith("gated")} == \
        {k: v for k, v in made.items() if not k.startswith("gated")}  # nothing ran again


# -- a call whose record says only that it had started -------------------------------------
class Concurrent(Agent):
    """Starts one call per item of ``SWITCH["order"]`` at once, then awaits them in order."""

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        calls = [ctx.durable_execute_async(slow_price, item, strict=SWITCH["strict"])
                 for item in SWITCH["order"]]
        ctx.send_event(OutputEvent(output=[await c for c in calls]))


def snapshot_with(probes, done: str, held: str) -> InMemoryKeyState:
    """The key's state once ``price(done)`` is recorded while ``price(held)`` (started
    too) still waits on its gate."""
    plan = AgentPlan.from_agent(Concurrent())
    core = new_core(plan)
    probes.open(done)
    at = SWITCH["order"].index(done)
    try:
        state = InMemoryKeyState()
        res = core.on_input(KEY, {"key": KEY}, state)
        assert res.errors == [] and res.outputs == []
        poll_until(core, state, lambda s: (c := call_of(s, "go", at)) is not None and c.done)
        assert not call_of(state, "go", 1 - at).done
        return snapshot_of(state, "json")
    finally:
        probes.open(held)
        core.close()


def test_calls_swapped_where_one_had_only_started_diverge_and_nothing_runs_twice(probes):
    """Recorded: c0 ``price(apple)`` had started, c1 ``price(pear)`` was done. Restored with
    the two swapped, c0 is ``price(pear)``: it must not run again (its outcome is recorded,
    at c1) nor take over apple's started attempt; the action diverges at c0."""
    snap = snapshot_with(probes, done="pear", held="apple")
    assert (probes["price:apple"], probes["price:pear"]) == (1, 1)
    SWITCH["order"] = ("pear", "apple")
    outputs, errors, core = resume(AgentPlan.from_agent(Concurrent()), snap)
    assert outputs == []
    [err] = errors
    assert err.error_type == "ReplayDivergenceError" and "r0/go/c0" in err.message
    assert "arguments are those recorded for r0/go/c1" in err.message
    assert probes["price:pear"] == 1  # recorded once, never run again
    assert core.counters["replay_divergences"] == 1


def test_a_call_inserted_before_recorded_ones_diverges_before_any_runs_twice(probes):
    """Recorded: c0 ``price(apple)`` done, c1 ``price(pear)`` started. The new code inserts
    ``price(kiwi)`` first: apple now comes at c1, where pear had started, with the arguments
    recorded for c0; the action diverges there, and apple is not run a second time."""
    snap = snapshot_with(probes, done="apple", held="pear")
    SWITCH["order"] = ("kiwi", "apple", "pear")
    probes.open("kiwi")
    outputs, errors, _core = resume(AgentPlan.from_agent(Concurrent()), snap)
    assert outputs == []
    [err] = errors
    assert err.error_type == "ReplayDivergenceError" and "r0/go/c1" in err.message
    assert "arguments are those recorded for r0/go/c0" in err.message
    assert probes["price:apple"] == 1 and probes["price:kiwi"] == 0


@pytest.mark.parametrize("strict", [False, True])
def test_a_started_call_made_again_with_other_arguments_is_warned_about_or_strict_diverges(
        strict, probes, caplog):
    """Recorded: c0 ``price(apple)`` done, c1 ``price(pear)`` started. The new code makes c1
    ``price(plum)``: the started attempt had other arguments, which is said (a warning and
    a finding, as for a replayed call), or in strict mode is a divergence."""
    snap = snapshot_with(probes, done="apple", held="pear")
    SWITCH.update(order=("apple", "plum"), strict=strict)
    probes.open("plum")
    with caplog.at_level(logging.WARNING, logger="flink_agents_py.runtime"):
        outputs, errors, _core = resume(AgentPlan.from_agent(Concurrent()), snap)
    if strict:
        assert outputs == []
        [err] = errors
        assert err.error_type == "ReplayDivergenceError" and "r0/go/c1" in err.message
        assert "strict replay" in err.message
        assert probes["price:plum"] == 0
    else:
        assert errors == []
        assert outputs == [["PRICE(apple)", "PRICE(plum)"]]
        assert [r for r in caplog.records
                if "r0/go/c1 had started with other arguments" in r.getMessage()]
    assert probes["price:apple"] == 1  # replayed, not run again


# -- bound values of standard-library types with no JSON form -------------------------------
def post(body: Any) -> str:
    count(f"post:{bytes(body).decode()}")
    return f"POSTED({bytes(body).decode()})"


def _posting(body: Any):
    def call() -> str:
        return post(body)
    return call


class Upload:
    """A bound method's object whose attribute is ``bytes`` (no JSON form)."""

    def __init__(self, body: bytes) -> None:
        self.body = body

    def send(self) -> str:
        return post(self.body)


BYTES_FORMS: dict[str, Any] = {
    "partial_bytes": lambda item: functools.partial(post, item.encode()),
    "closure_bytes": lambda item: _posting(item.encode()),
    "bound_method_bytes": lambda item: Upload(item.encode()).send,
    "partial_array": lambda item: functools.partial(post, array.array("b", item.encode())),
    "partial_deque_of_bytes": lambda item: functools.partial(
        lambda q: post(q[0]), collections.deque([item.encode()])),
}


class Posts(Agent):
    """One durable call per item of ``SWITCH["order"]`` through ``BYTES_FORMS[form]``, then a
    call that waits on the gate."""

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        make = BYTES_FORMS[event.input["form"]]
        got = [await ctx.durable_execute_async(make(item)) for item in SWITCH["order"]]
        await ctx.durable_execute_async(gated, "g")
        ctx.send_event(OutputEvent(output=got))


@pytest.mark.parametrize("form", sorted(BYTES_FORMS))
def test_callables_binding_other_bytes_made_in_another_order_diverge(form, probes):
    assert_swap_diverges(Posts(), form, probes, "post")


@pytest.mark.parametrize("form", sorted(BYTES_FORMS))
def test_callables_binding_bytes_in_the_same_order_replay_quietly(form, probes, caplog):
    assert_same_order_replays_quietly(Posts(), form, caplog, ["POSTED(apple)", "POSTED(pear)"])


def rate(table: Any, item: str) -> str:
    count(f"rate:{item}")
    return f"RATE({item})={table[(item, 'eur')]}"


def _table(order: str) -> dict[tuple[str, str], int]:
    pairs = [(("apple", "eur"), 1), (("pear", "eur"), 2)]
    return dict(pairs if order == "first" else pairs[::-1])


class Rates(Agent):
    """Strict replay; a partial bound to a dict with tuple keys (no JSON form), built in
    ``SWITCH["order"]`` order (as from a set, whose order changes with the hash seed)."""

    replay = "strict"

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        table = _table(SWITCH["order"][0])
        got = await ctx.durable_execute_async(functools.partial(rate, table), "apple")
        await ctx.durable_execute_async(gated, "g")
        ctx.send_event(OutputEvent(output=got))


def test_a_bound_dict_counts_the_same_in_any_insertion_order():
    assert call_digest(functools.partial(rate, _table("first")), ("apple",), {}, "r0/go/c0") \
        == call_digest(functools.partial(rate, _table("last")), ("apple",), {}, "r0/go/c0")
    assert call_digest(functools.partial(rate, _table("first")), ("apple",), {}, "r0/go/c0") \
        != call_digest(functools.partial(rate, {("apple", "eur"): 3}), ("apple",), {},
                       "r0/go/c0")


def test_a_bound_dict_built_in_another_order_replays_in_strict_mode(probes):
    """A restore in another process builds the same dict in another order: the same call,
    replayed, not a strict divergence."""
    SWITCH["order"] = ("first",)
    plan = AgentPlan.from_agent(Rates())
    snap = snapshot_at(plan, 1, {"key": KEY})
    SWITCH["order"] = ("last",)
    outputs, errors, _core = resume(plan, snap)
    assert errors == [] and outputs == ["RATE(apple)=1"]
    assert probes["rate:apple"] == 1


# -- class-based decorators (functools.update_wrapper keeps the function in __wrapped__) ------
class retrying:  # noqa: N801 - a decorator, named as users name them
    """A class-based decorator: the wrapped callable is only in ``__wrapped__``."""

    def __init__(self, fn: Any) -> None:
        functools.update_wrapper(self, fn)

    def __call__(self, *args: Any) -> Any:
        return self.__wrapped__(*args)  # type: ignore[attr-defined]


class SlotWrapper:
    """The same, with ``__wrapped__`` in a slot."""

    __slots__ = ("__wrapped__",)

    def __init__(self, fn: Any) -> None:
        self.__wrapped__ = fn

    def __call__(self) -> Any:
        return self.__wrapped__()


def price(item: str) -> str:
    count(f"price:{item}")
    return f"PRICE({item})"


WRAPPER_FORMS: dict[str, Any] = {
    "class_decorator_over_partial": lambda item: retrying(functools.partial(price, item)),
    "class_decorator_over_lambda": lambda item: retrying(
        (lambda: price("apple")) if item == "apple" else (lambda: price("pear"))),
    "slot_wrapper_over_partial": lambda item: SlotWrapper(functools.partial(price, item)),
}


class Wrapped(Agent):
    """One durable call per item of ``SWITCH["order"]`` through ``WRAPPER_FORMS[form]``, then
    a call that waits on the gate."""

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        make = WRAPPER_FORMS[event.input["form"]]
        got = [await ctx.durable_execute_async(make(item)) for item in SWITCH["order"]]
        await ctx.durable_execute_async(gated, "g")
        ctx.send_event(OutputEvent(output=got))


@pytest.mark.parametrize("form", sorted(WRAPPER_FORMS))
def test_wrapper_objects_over_other_callables_made_in_another_order_diverge(form, probes):
    assert_swap_diverges(Wrapped(), form, probes, "price")


@pytest.mark.parametrize("form", sorted(WRAPPER_FORMS))
def test_wrapper_objects_in_the_same_order_replay_quietly(form, probes, caplog):
    assert_same_order_replays_quietly(Wrapped(), form, caplog, ["PRICE(apple)", "PRICE(pear)"])


def answer(request: Any) -> str:
    """The scripted model: answers ``about <item>`` once the item's gate opens."""
    item = request.last_user_text
    count(f"model:{item}")
    wait(item)
    return f"about {item}"


class Chats(Agent):
    """One chat per item of ``SWITCH["order"]``, awaited one after another."""

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        got = []
        for item in SWITCH["order"]:
            response = await ctx.chat("cm", [ChatMessage(role="user", content=item)])
            got.append(response.message.content)
        ctx.send_event(OutputEvent(output=got))


def _chats() -> AgentPlan:
    agent = Chats()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ResourceDescriptor(
        ScriptedChatModel, function=qualified_name(answer)))
    agent.add_resource("cm", ResourceType.CHAT_MODEL,
                       ResourceDescriptor(ChatModelSetup, connection="conn"))
    return AgentPlan.from_agent(agent)


def test_a_call_inserted_before_an_open_chat_does_not_attach_to_another_chats_answer(probes):
    """Recorded: chat c0 about apple answered, chat c1 about pear still open (its model call
    waits). The new code asks about kiwi first: apple's chat comes at c1, whose open
    invocation is pear's; it diverges instead of attaching to pear's answer."""
    plan = _chats()
    core = new_core(plan)
    probes.open("apple")
    try:
        state = InMemoryKeyState()
        core.on_input(KEY, {"key": KEY}, state)
        poll_until(core, state, lambda s: (c := call_of(s, "go", 1)) is not None
                   and not c.done and probes["model:pear"] == 1)
        snap = snapshot_of(state, "json")
    finally:
        probes.open("pear")
        core.close()
    SWITCH["order"] = ("kiwi", "apple", "pear")
    probes.open("kiwi")
    outputs, errors, _core = resume(plan, snap)
    assert outputs == []
    assert [e.error_type for e in errors] == ["ReplayDivergenceError"]
    assert "r0/go/c1" in errors[0].message
    assert "arguments are those recorded for r0/go/c0" in errors[0].message
    assert probes["model:apple"] == 1  # its answer was recorded: never asked again


# -- enum members: their JSON form is their value alone --------------------------------------
class AppleGrade(enum.Enum):
    FIRST = 1


class PearGrade(enum.Enum):
    FIRST = 1


GRADES = {"apple": AppleGrade.FIRST, "pear": PearGrade.FIRST}


def grade(value: Any) -> str:
    name = "apple" if "Apple" in repr(value) else "pear"
    count(f"grade:{name}")
    return f"GRADE({name})"


ENUM_FORMS: dict[str, Any] = {
    "argument": lambda item: (grade, (GRADES[item],), {}),
    "keyword": lambda item: (grade, (), {"value": GRADES[item]}),
    "in_a_list": lambda item: (lambda v: grade(v[0]), ([GRADES[item]],), {}),
    "in_a_dict": lambda item: (lambda v: grade(v["g"]), ({"g": GRADES[item]},), {}),
    "partial": lambda item: (functools.partial(grade, GRADES[item]), (), {}),
    "partial_list": lambda item: (functools.partial(lambda v: grade(v[0]), [GRADES[item]]),
                                  (), {}),
}


class Grades(Agent):
    """One durable call per item of ``SWITCH["order"]`` with that item's enum member (of its
    own class, the same value) as ``ENUM_FORMS[form]`` passes it, then a gated call."""

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        make = ENUM_FORMS[event.input["form"]]
        got = []
        for item in SWITCH["order"]:
            fn, args, kwargs = make(item)
            got.append(await ctx.durable_execute_async(fn, *args, **kwargs))
        await ctx.durable_execute_async(gated, "g")
        ctx.send_event(OutputEvent(output=got))


def test_enum_members_of_other_classes_with_one_value_are_other_arguments():
    assert call_digest(grade, (AppleGrade.FIRST,), {}, "c0") != call_digest(
        grade, (PearGrade.FIRST,), {}, "c0")
    assert call_digest(grade, (AppleGrade.FIRST,), {}, "c0") != call_digest(grade, (1,), {}, "c0")
    assert call_digest(grade, ([{"g": AppleGrade.FIRST}],), {}, "c0") != call_digest(
        grade, ([{"g": PearGrade.FIRST}],), {}, "c0")
    # without enums, a digest is what it was: the name and the arguments' JSON forms
    assert call_digest(grade, (1, [2]), {"k": "v"}, "c0") == digest(
        [qualified_name(grade), [1, [2]], {"k": "v"}])


@pytest.mark.parametrize("form", sorted(ENUM_FORMS))
def test_calls_with_enum_members_of_other_classes_made_in_another_order_diverge(form, probes):
    assert_swap_diverges(Grades(), form, probes, "grade")


@pytest.mark.parametrize("form", sorted(ENUM_FORMS))
def test_calls_with_enum_members_in_the_same_order_replay_quietly(form, probes, caplog):
    assert_same_order_replays_quietly(Grades(), form, caplog, ["GRADE(apple)", "GRADE(pear)"])
