"""Values an action gets live are the values a restore gives it back.

Each scenario is a user's module run in its own process from a temporary directory: the
agent runs fault-free and restored at every point a checkpoint could be taken
(``check_replay_safety``), and the script prints what the action saw.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.timeout(180)


def run_script(tmp_path: pathlib.Path, body: str, **modules: str) -> dict:
    """Run ``body`` as ``tmp_path/user_job.py`` (beside ``modules``); its last line is JSON."""
    for name, text in modules.items():
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(text))
    script = tmp_path / "user_job.py"
    script.write_text(textwrap.dedent(body))
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, env={"PYTHONPATH": str(ROOT),
                                                        "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_str_int_and_float_subclasses_come_back_as_plain_values_on_both_paths(tmp_path):
    # a durable call returning a str subclass (a `Sku(str)`, an `int` flag type) handed the
    # caller the subclass on the first run, and the plain value after a restore (the state's
    # JSON form keeps no class): an `isinstance(x, Sku)` branch changed course on replay
    out = run_script(tmp_path, """
        import json
        from flink_agents_py import AgentsExecutionEnvironment
        from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
        from flink_agents_py.testing import check_replay_safety

        class Sku(str):
            pass

        class Cents(int):
            pass

        class Ratio(float):
            pass

        def lookup() -> Sku:
            return Sku("apple")

        def price() -> dict:
            return {"cents": Cents(120), "tax": [Ratio(0.2)]}

        def kinds(*values):
            return [type(v).__name__ for v in values]

        class Shop(Agent):
            @action(InputEvent)
            @staticmethod
            async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
                sku = await ctx.durable_execute_async(lookup)
                got = ctx.durable_execute(price)
                ctx.short_term_memory.set("sku", Sku("pear"))
                kept = ctx.short_term_memory.get("sku")
                ctx.send_event(OutputEvent(output={
                    "key": ctx.key,
                    "kinds": kinds(sku, got["cents"], got["tax"][0], kept)}))

        live = AgentsExecutionEnvironment.local().from_list([{"key": "a"}]).apply(
            Shop()).collect()
        report = check_replay_safety(Shop(), [{"key": "a"}])
        print(json.dumps({"live": live, "ok": report.ok, "table": report.table}))
    """)
    assert out["live"] == [{"key": "a", "kinds": ["str", "int", "float", "str"]}]
    assert out["ok"], out["table"]


def test_a_result_model_whose_validator_is_not_idempotent_fails_its_call_when_made(tmp_path):
    # the result is handed over as rebuilt from its stored fields, which runs the model's
    # validators a second time: `Order(qty=2)` with a doubling validator (qty 4) came back
    # as qty 8, on the first run and after a restore alike, and nothing said so
    out = run_script(tmp_path, """
        import json
        import pydantic
        from flink_agents_py import AgentsExecutionEnvironment
        from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
        from flink_agents_py.testing import check_replay_safety

        class Order(pydantic.BaseModel):
            qty: int

            @pydantic.field_validator("qty")
            @classmethod
            def in_pairs(cls, qty: int) -> int:
                return qty * 2

        class Label(pydantic.BaseModel):   # a validator that normalises: rebuilds as stored
            name: str

            @pydantic.field_validator("name")
            @classmethod
            def tidy(cls, name: str) -> str:
                return name.strip().lower()

        def order() -> dict:
            return {"orders": [Order(qty=2)]}

        def label() -> Label:
            return Label(name="  Apple ")

        class Shop(Agent):
            @action(InputEvent)
            @staticmethod
            async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
                try:
                    got = await ctx.durable_execute_async(order)
                    seen = got["orders"][0].qty
                except Exception as e:
                    seen = f"{type(e).__name__}: {e}"
                tag = ctx.durable_execute(label)
                ctx.send_event(OutputEvent(output={"key": ctx.key, "seen": seen,
                                                   "label": tag.name}))

        live = AgentsExecutionEnvironment.local().from_list([{"key": "a"}]).apply(
            Shop()).collect()
        report = check_replay_safety(Shop(), [{"key": "a"}])
        print(json.dumps({"live": live, "ok": report.ok, "table": report.table}))
    """)
    (row,) = out["live"]
    assert row["label"] == "apple"
    assert row["seen"].startswith("SerializationError: result of durable call r0/on_input/c0: "
                                  "its stored form rebuilds to another value at $.orders[0] "
                                  "(Order: stored {'qty': 4}, rebuilt {'qty': 8})"), row
    assert out["ok"], out["table"]


TAGGED = """
    import pydantic
    from flink_agents_py.api import Agent, Event, InputEvent, OutputEvent, RunnerContext, action

    class Listing(pydantic.BaseModel):
        sku: str
        tags: set[str]
        sizes: frozenset[int] = frozenset()

    class Loose(pydantic.BaseModel):
        meta: dict

    class Listed(Event):
        listing: Listing
        seen: set[str]

    def fetch(sku: str) -> Listing:
        return Listing(sku=sku, tags={"fresh", "organic", "local", "cheap", "red"},
                       sizes=frozenset({3, 1, 2}))

    def count(listing: Listing) -> int:
        return len(listing.tags)

    class Catalog(Agent):
        @action(InputEvent)
        @staticmethod
        async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
            listing = await ctx.durable_execute_async(fetch, event.input["sku"])
            tags = ctx.durable_execute(count, listing)   # a model with a set as an argument
            ctx.send_event(Listed(listing=listing, seen={"web", "shop", "app"}))
            ctx.short_term_memory.set("tags", tags)

        @action(Listed)
        @staticmethod
        def on_listed(event: Listed, ctx: RunnerContext) -> None:
            ctx.send_event(OutputEvent(output={
                "tags": sorted(event.listing.tags), "sizes": sorted(event.listing.sizes),
                "kinds": [type(event.listing.tags).__name__, type(event.seen).__name__],
                "count": ctx.short_term_memory.get("tags")}))
"""


def test_pydantic_models_and_events_with_set_fields_are_stored_and_replay(tmp_path):
    # a model's `set[str]` field had no JSON form here ("a set at $.tags has no JSON form"),
    # though pydantic validates a list back into it: a durable call returning such a model,
    # one taking it as an argument, and an event with a set field all failed
    out = run_script(tmp_path, """
        import json
        from flink_agents_py import AgentsExecutionEnvironment
        from flink_agents_py.testing import check_replay_safety
        from catalog import Catalog, Loose
        from flink_agents_py.runtime._serde import to_json_value

        live = AgentsExecutionEnvironment.local().from_list([{"key": "a", "sku": "s1"}]).apply(
            Catalog()).collect()
        report = check_replay_safety(Catalog(), [{"key": "a", "sku": "s1"}], hash_seeds=3)
        try:
            to_json_value(Loose(meta={"x": {1, 2}}), "loose")
        except Exception as e:
            any_set = str(e)
        print(json.dumps({"live": live, "ok": report.ok, "table": report.table,
                          "any_set": any_set}))
    """, catalog=TAGGED)
    assert out["live"] == [{"tags": ["cheap", "fresh", "local", "organic", "red"],
                            "sizes": [1, 2, 3], "kinds": ["set", "set"], "count": 5}]
    # a set in a field typed Any could come back only as a list: it is still refused
    assert "a set at $.meta.x has no JSON form" in out["any_set"]
    # restored in other processes too (other hash seeds: a set's order differs), with no
    # "arguments changed" finding: the stored form is the same whatever the seed
    assert "points restored again (PYTHONHASHSEED=" in out["table"], out["table"]
    assert out["ok"], out["table"]


def test_str_subclass_and_str_enum_map_keys_come_back_as_plain_strings(tmp_path):
    # a dict key of a str subclass (or a `str` enum member) stayed itself on the first run
    # and came back a plain string after a restore, as the values did
    out = run_script(tmp_path, """
        import json
        from flink_agents_py import AgentsExecutionEnvironment
        from flink_agents_py.testing import check_replay_safety
        from stock import Stock

        live = AgentsExecutionEnvironment.local().from_list([{"key": "a"}]).apply(
            Stock()).collect()
        report = check_replay_safety(Stock(), [{"key": "a"}])
        print(json.dumps({"live": live, "ok": report.ok, "table": report.table}))
    """, stock="""
        import enum
        from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action

        class Sku(str):
            pass

        class Fruit(str, enum.Enum):
            APPLE = "apple"

        def levels() -> dict:
            return {Sku("s1"): 3, Fruit.APPLE: 5}

        class Stock(Agent):
            @action(InputEvent)
            @staticmethod
            async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
                got = await ctx.durable_execute_async(levels)
                ctx.send_event(OutputEvent(output={
                    "keys": sorted(f"{k}:{type(k).__name__}" for k in got)}))
    """)
    assert out["live"] == [{"keys": ["apple:str", "s1:str"]}]
    assert out["ok"], out["table"]


def test_a_memory_write_of_a_model_whose_validator_is_not_idempotent_is_refused(tmp_path):
    # memory keeps a model's stored form and a read rebuilds it, running its validators
    # again: `Order(qty=2)` (qty 4 once validated) was read back as qty 8, every time
    out = run_script(tmp_path, """
        import json
        import pydantic
        from flink_agents_py import AgentsExecutionEnvironment
        from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action

        class Order(pydantic.BaseModel):
            qty: int

            @pydantic.field_validator("qty")
            @classmethod
            def in_pairs(cls, qty: int) -> int:
                return qty * 2

        class Basket(Agent):
            @action(InputEvent)
            @staticmethod
            def on_input(event: InputEvent, ctx: RunnerContext) -> None:
                try:
                    ctx.short_term_memory.set("orders", {"first": Order(qty=2)})
                    seen = ctx.short_term_memory.get("orders")["first"].qty
                except TypeError as e:
                    seen = f"{type(e).__name__}: {e}"
                ctx.short_term_memory.set("plain", {"first": {"qty": 2}})
                ctx.send_event(OutputEvent(output={
                    "seen": seen, "plain": ctx.short_term_memory.get("plain")}))

        live = AgentsExecutionEnvironment.local().from_list([{"key": "a"}]).apply(
            Basket()).collect()
        print(json.dumps({"live": live}))
    """)
    (row,) = out["live"]
    assert row["plain"] == {"first": {"qty": 2}}
    assert row["seen"].startswith(
        "SerializationError: short_term_memory value at 'orders': its stored form rebuilds to "
        "another value at $.first (Order: stored {'qty': 4}, rebuilt {'qty': 8})"), row
