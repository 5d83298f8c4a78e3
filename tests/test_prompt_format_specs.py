"""Prompt placeholders with a conversion or a format spec are filled, as ``str.format`` does.

Apache Flink Agents fills a prompt with Python's formatter, so its users write
``{price:.2f}`` or ``{name!r}``. Only ``{identifier}`` was a placeholder here: such a
field went to the model as written, with no warning (``unfilled`` did not see it), and its
lone braces made the whole template "raw", so its ``{{``/``}}`` escapes went to the model
doubled too.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from flink_agents_py.api import Prompt, UsageError

ROOT = Path(__file__).resolve().parents[1]
VENV_PY = ROOT / ".venv" / "bin" / "python"
PYTHON = VENV_PY if VENV_PY.exists() else Path(sys.executable)

pytestmark = pytest.mark.timeout(300)

MODULE = textwrap.dedent('''
    import json

    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.api import (Agent, ChatMessage, ChatModelSetup, ChatResponseError,
                                     InputEvent, OutputEvent, ResourceDescriptor, ResourceType,
                                     action)
    from flink_agents_py.testing import model_from_function

    PROMPT = 'Item {name!r} costs {price:.2f} ({price:>8}). Answer as {{"ok": true}}.'


    class Pricer(Agent):
        @action(InputEvent)
        @staticmethod
        async def ask(event, ctx):
            try:
                r = await ctx.chat("m", [ChatMessage(content="go")],
                                   prompt_args=event.input["args"])
            except ChatResponseError as e:
                ctx.send_event(OutputEvent(output={"key": ctx.key, "error": str(e)}))
                return
            ctx.send_event(OutputEvent(output={"key": ctx.key, "system": r.message.content}))


    agent = Pricer()
    agent.add_resource("c", ResourceType.CHAT_MODEL_CONNECTION,
                       model_from_function(lambda request: request.messages[0].content))
    agent.add_resource("m", ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="c", prompt=PROMPT))
    out = AgentsExecutionEnvironment.local().from_list([
        {"key": "ok", "args": {"name": "tea", "price": 3.5}},
        {"key": "text price", "args": {"name": "tea", "price": "cheap"}},
    ]).apply(agent).collect()
    print(json.dumps(sorted(out, key=lambda o: o["key"])))
''')


def test_a_chat_prompt_with_format_specs_reaches_the_model_filled(tmp_path: Path) -> None:
    (tmp_path / "pricer.py").write_text(MODULE)
    proc = subprocess.run([str(PYTHON), "pricer.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=250, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert proc.returncode == 0, proc.stderr
    ok, text_price = json.loads(proc.stdout.strip().splitlines()[-1])
    assert ok["system"] == "Item 'tea' costs 3.50 (     3.5). Answer as {\"ok\": true}."
    # a spec its value cannot take fails the chat naming the placeholder (str.format raises)
    assert "UsageError: prompt placeholder {price:.2f} cannot format the str" \
        in text_price["error"], text_price


def test_format_specs_count_as_placeholders_filled_or_not() -> None:
    prompt = Prompt.from_text("{n:04d} of {total} {{literal}}")
    assert prompt.format_string(n=7, total=9) == "0007 of 9 {literal}"
    assert prompt.unfilled({"total": 9}) == ["n"]  # the warning names it
    assert prompt.format_string(total=9) == "{n:04d} of 9 {literal}"
    # JSON among the text (lone braces) still keeps its braces, specs still filled
    raw = Prompt.from_text('Return {"score": 1} for {x:.1f}')
    assert raw.format_string(x=2) == 'Return {"score": 1} for 2.0'
    with pytest.raises(UsageError, match=r"\{x:d\}"):
        Prompt.from_text("{x:d}").format_messages(x="a")
