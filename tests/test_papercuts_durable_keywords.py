"""``ctx.durable_execute(fn, ...)`` gives ``fn`` its own ``strict``; ambiguous keywords raise.

Before, ``durable_execute`` and ``durable_execute_async`` always took ``strict=``,
``reconciler=`` and ``durable_id=`` for themselves: ``fn(x, strict=False)`` called as
``ctx.durable_execute(fn, x, strict=True)`` ran with ``strict=False``, silently (Apache Flink
Agents passes ``strict`` to the function: only ``reconciler`` and ``durable_id`` are its own).
Now ``strict=`` is ``fn``'s when ``fn`` has that parameter; ``reconciler=``/``durable_id=``
given to a function with a parameter of that name, or any of the three to one whose
parameters cannot be read, is refused with a ``UsageError`` naming the function and what to
write; a function taking them only through ``**kwargs`` leaves them to the runtime.
"""

from __future__ import annotations

import functools
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents_py.testing import check_replay_safety

ROOT = Path(__file__).resolve().parents[1]
VENV_PY = ROOT / ".venv" / "bin" / "python"
PYTHON = VENV_PY if VENV_PY.exists() else Path(sys.executable)

pytestmark = pytest.mark.timeout(120)


def parse(text: str, strict: bool = False) -> dict[str, Any]:
    """A function with a parameter named as the runtime's ``strict``."""
    return {"text": text, "strict": strict}


async def parse_async(text: str, *, strict: bool = False) -> dict[str, Any]:
    return {"text": text, "strict": strict}


def with_reconciler(text: str, reconciler: str = "none") -> str:
    return f"{text}/{reconciler}"


def with_durable_id(text: str, durable_id: str = "none") -> str:
    return f"{text}/{durable_id}"


def plain(text: str) -> str:
    return text.upper()


def any_keywords(text: str, **options: Any) -> dict[str, Any]:
    return {"text": text, **options}


CALLS = {
    "strict": lambda ctx: ctx.durable_execute(parse, "a", strict=True),
    "strict_kw_only_async": None,  # the async form, in ``Calls.on_input``
    "strict_none": lambda ctx: ctx.durable_execute(parse, "a", strict=None),
    "partial_and_runtime": lambda ctx: ctx.durable_execute(
        functools.partial(parse, strict=True), "a", strict=False
    ),
    "runtime_strict": lambda ctx: ctx.durable_execute(plain, "a", strict=True),
    "runtime_strict_bad": lambda ctx: ctx.durable_execute(plain, "a", strict="yes"),
    "reconciler_clash": lambda ctx: ctx.durable_execute(with_reconciler, "a", reconciler="r"),
    "reconciler_bound": lambda ctx: ctx.durable_execute(
        functools.partial(with_reconciler, reconciler="mine"), "a", reconciler=lambda: "x"
    ),
    "durable_id_taken": lambda ctx: ctx.durable_execute(plain, "a", durable_id="call-1"),
    "durable_id_clash": lambda ctx: ctx.durable_execute(with_durable_id, "a", durable_id="call-1"),
    "kwargs_strict": lambda ctx: ctx.durable_execute(any_keywords, "a", strict=True),
    "builtin_strict": lambda ctx: ctx.durable_execute(zip, "ab", "cd", strict=True),
}


class Calls(Agent):
    """Makes the call its record's key names; outputs what it returned."""

    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        if ctx.key == "strict_kw_only_async":
            value = await ctx.durable_execute_async(parse_async, "a", strict=True)
        else:
            value = CALLS[ctx.key](ctx)
        ctx.send_event(OutputEvent(output={"key": ctx.key, "value": value}))


def _run() -> tuple[dict[str, Any], dict[str, str]]:
    result = (
        AgentsExecutionEnvironment.local()
        .from_list([{"key": k} for k in CALLS])
        .apply(Calls())
        .run()
    )
    return (
        {o["key"]: o["value"] for o in result.outputs},
        {e.key: f"{e.error_type}: {e.message}" for e in result.errors},
    )


def test_a_function_s_own_strict_reaches_it_and_the_runtime_keeps_the_others():
    outputs, errors = _run()
    assert outputs["strict"] == {"text": "a", "strict": True}
    assert outputs["strict_kw_only_async"] == {"text": "a", "strict": True}
    assert outputs["strict_none"] == {"text": "a", "strict": None}
    # bound by partial: the function's; the keyword beside it: the runtime's
    assert outputs["partial_and_runtime"] == {"text": "a", "strict": True}
    assert outputs["reconciler_bound"] == "a/mine"
    # no parameter of that name: the runtime's (a bad value is the runtime's error)
    assert outputs["runtime_strict"] == "A"
    assert (
        "durable_execute(..., strict=...) takes True, False or None" in errors["runtime_strict_bad"]
    )
    assert outputs["durable_id_taken"] == "A"
    assert outputs["kwargs_strict"] == {"text": "a"}  # ``**kwargs``: the runtime's


def test_ambiguous_keywords_are_refused_naming_the_function_and_the_fix():
    _, errors = _run()
    assert errors["reconciler_clash"] == (
        "UsageError: ctx.durable_execute(with_reconciler, ..., reconciler=...) is ambiguous: "
        "with_reconciler has a parameter 'reconciler', and reconciler= is the runtime's "
        "function called at recovery instead of it. To give with_reconciler its reconciler, "
        "bind it first: ctx.durable_execute(functools.partial(with_reconciler, "
        "reconciler=...), ...) (a reconciler= given beside it is then the runtime's); or make "
        "the call with ctx.durable_execute_all_async([DurableCallSpec(func=with_reconciler, "
        "kwargs={'reconciler': ...})]), whose keywords are all the function's"
    )
    assert "with_durable_id has a parameter 'durable_id'" in errors["durable_id_clash"]
    assert "the parameters of zip cannot be read" in errors["builtin_strict"]
    assert set(errors) == {
        "runtime_strict_bad",
        "reconciler_clash",
        "durable_id_clash",
        "builtin_strict",
    }


class StrictParse(Agent):
    """One durable call passing the function's own ``strict``, replayed after each crash."""

    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        first = ctx.durable_execute(parse, event.input["text"], strict=True)
        second = await ctx.durable_execute_async(parse_async, event.input["text"], strict=True)
        ctx.send_event(OutputEvent(output={"key": ctx.key, "got": [first, second]}))


def test_a_function_s_strict_is_replayed_after_a_crash_as_it_ran():
    report = check_replay_safety(
        StrictParse(), [{"key": "a", "text": "x"}, {"key": "b", "text": "y"}], other_process=False
    )
    assert report.ok, report


USER_MODULE = """
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent, InputEvent, OutputEvent, action


def lookup(sku, strict=False):
    return {"sku": sku, "strict": strict}


def reconcile_me(sku, reconciler=None):
    return sku


class Shop(Agent):
    @action(InputEvent)
    @staticmethod
    async def on_input(event, ctx):
        if event.input["mode"] == "own":
            value = await ctx.durable_execute_async(lookup, event.input["sku"], strict=True)
        else:
            value = ctx.durable_execute(reconcile_me, event.input["sku"], reconciler=len)
        ctx.send_event(OutputEvent(output=value))


result = (AgentsExecutionEnvironment.local()
          .from_list([{"key": "a", "mode": "own", "sku": "s1"},
                      {"key": "b", "mode": "clash", "sku": "s2"}])
          .apply(Shop()).run())
print(result.outputs)
for e in result.errors:
    print(e.key, e.error_type, e.message.split(". ")[0])
"""


def test_a_user_module_run_from_its_own_directory(tmp_path: Path):
    (tmp_path / "shop.py").write_text(textwrap.dedent(USER_MODULE))
    proc = subprocess.run(
        [str(PYTHON), "-W", "ignore", "shop.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=100,
        env={"PYTHONPATH": str(ROOT), "PATH": ""},
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines[0] == "[{'sku': 's1', 'strict': True}]"
    assert lines[1] == (
        "b UsageError ctx.durable_execute(reconcile_me, ..., reconciler=...) is "
        "ambiguous: reconcile_me has a parameter 'reconciler', and reconciler= "
        "is the runtime's function called at recovery instead of it"
    )
