"""A prompt template written from a record is data: it reads no attribute and asks no giant text.

Placeholders are ``{identifier}`` only (with a conversion and a format spec), so a template's
``{0.__class__}`` or ``{x.__init__.__globals__}`` stays literal text and reads nothing. A
format spec's width or precision was unbounded: ``{x:>300000000}`` made a 300-million-character
prompt (572 MiB at its peak) before any bound on what goes to a model applied. Now a width or
precision over ``MAX_SPEC_NUMBER`` (10,000) is a ``UsageError`` naming the placeholder.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pytest

from flink_agents_py.api import Prompt, UsageError
from flink_agents_py.api._prompts import MAX_SPEC_NUMBER

ROOT = Path(__file__).resolve().parents[1]


def test_attribute_and_index_access_in_a_template_stay_literal():
    template = "{0.__class__} {x.__class__.__init__.__globals__} {x[0]} {x!r}"
    filled = Prompt.from_text(template).format_string(x="ab")
    assert filled == "{0.__class__} {x.__class__.__init__.__globals__} {x[0]} 'ab'"


@pytest.mark.parametrize("spec", [">300000000", ".99999999f", "0>10001", "9" * 5000, ",.20000"])
def test_a_giant_width_or_precision_is_refused_without_making_the_text(spec):
    tracemalloc.start()
    try:
        started = time.monotonic()
        with pytest.raises(UsageError, match=r"asks for a width or precision over 10,000"):
            Prompt.from_text("Say {x:" + spec + "} now").format_string(x=1.5)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 5_000_000 and time.monotonic() - started < 5


def test_ordinary_specs_still_format():
    prompt = Prompt.from_text("{a:>8}|{b:.2f}|{c:,}|{d:*^{w}}|{e:0>" + str(MAX_SPEC_NUMBER) + "}")
    filled = prompt.format_string(a="x", b=3.14159, c=1234567, e=1)
    assert filled.startswith("       x|3.14|1,234,567|{d:*^{w}}|") and len(filled) < 10_100


SCRIPT = """
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent, InputEvent, OutputEvent, Prompt, RunnerContext, action


class Templated(Agent):
    @action(InputEvent)
    @staticmethod
    def go(event: InputEvent, ctx: RunnerContext) -> None:
        text = Prompt.from_text(event.input["template"]).format_string(name="ann")
        ctx.send_event(OutputEvent(output={"key": ctx.key, "len": len(text)}))


records = [{"key": "a", "template": "Hi {name:>9999999999}"},
           {"key": "b", "template": "Hi {name} {name.__class__}"}]
result = AgentsExecutionEnvironment.local().from_list(records).apply(Templated()).run()
print("OUT", sorted((o["key"], o["len"]) for o in result.outputs))
print("ERR", [(e.key, e.error_type, e.message[:60]) for e in result.errors])
"""


def test_a_users_agent_filling_a_template_from_a_record(tmp_path):
    assert ROOT not in tmp_path.resolve().parents
    (tmp_path / "agent.py").write_text(SCRIPT)
    proc = subprocess.run(
        [sys.executable, "agent.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "OUT [('b', 23)]" in proc.stdout, proc.stdout
    assert (
        "ERR [('a', 'UsageError', 'prompt placeholder {name:>9999999999} asks for a width"
        in proc.stdout
    ), proc.stdout
