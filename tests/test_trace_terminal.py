"""``flink-agents-py trace`` writes no raw control characters to the terminal (issue 26).

Keys, outputs, error messages and tracebacks come from records and models: an ESC starts a
terminal escape sequence (colours, cursor moves, a new window title), a BEL rings, a CR
overwrites the line, a C1 CSI (U+009B) is an ESC [ on some terminals, and bidi overrides
reorder what follows. The text output writes each of them as a visible escape; the HTML
page (``--html``) keeps escaping every payload as HTML.

The agent is a user's own module, run from a temporary directory outside the repository.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from flink_agents_py.observability import (
    build_traces,
    escape_controls,
    read_event_log,
    render_text,
)

ROOT = Path(__file__).resolve().parents[1]
VENV_PY = ROOT / ".venv" / "bin" / "python"
PYTHON = VENV_PY if VENV_PY.exists() else Path(sys.executable)

pytestmark = pytest.mark.timeout(180)

HOSTILE = ("\x1b]0;pwned\x07"       # OSC: set the window title, ended by BEL
           "\x1b[2J\x1b[31m"        # clear the screen, red
           "\rOK "                  # back to the start of the line
           "\x9b31m"                # C1 CSI
           "\x00\x08\x0b\x0c\x7f"   # NUL, backspace, VT, FF, DEL
           "\u202eevil\u202c"       # right-to-left override ... pop
           "\u2066\u2069\u200b"     # isolate, pop isolate, zero-width space
           "\u2028end")             # line separator

USER_MODULE = '''
from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action


class Hostile(Agent):
    """Echoes its text; fails on a record asking it to."""

    @action(InputEvent)
    @staticmethod
    def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        if event.input.get("fail"):
            raise ValueError("bad " + event.input["text"])
        ctx.send_event(OutputEvent(output={"echo": event.input["text"]}))
'''

SCRIPT = '''
import json
import sys

from flink_agents_py import AgentsExecutionEnvironment
from my_agents import Hostile

text = json.loads(sys.argv[1])
records = [{"key": "k" + text, "text": text}, {"key": text, "text": text, "fail": True}]
env = AgentsExecutionEnvironment.local(event_log="events.jsonl")
result = env.from_list(records).apply(Hostile()).run()
print(len(result.outputs), len(result.errors))
'''

# every code point the text output must never write raw
UNSAFE = {chr(c) for c in [*range(0x20), *range(0x7F, 0xA0)]} | set(
    "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200b\u200e\u200f\u2028\u2029")


def _raw(text: str) -> list[str]:
    return sorted({f"U+{ord(c):04X}" for c in text if c in UNSAFE and c != "\n"})


def test_escape_controls_makes_every_control_and_bidi_character_visible():
    assert escape_controls("\x1b[31mred\x07\r") == "\\x1b[31mred\\x07\\x0d"
    assert escape_controls("\x9b\x85\x00\t\n") == "\\x9b\\x85\\x00\\x09\\x0a"
    assert escape_controls("a\u202eb\u2066c\u200fd\ufeff") == "a\\u202eb\\u2066c\\u200fd\\ufeff"
    assert escape_controls("\ud800 \U000e0041") == "\\ud800 \\U000e0041"
    # printable text stays as it is: accents, CJK, emoji, backslashes, quotes
    plain = 'café 漢字 🙂 C:\\path "q" <b>'
    assert escape_controls(plain) == plain
    assert _raw(escape_controls(HOSTILE)) == []


@pytest.fixture
def hostile_log(tmp_path: Path) -> Path:
    """The event log of the user's agent run on hostile text, from outside the repo."""
    assert ROOT not in tmp_path.resolve().parents
    (tmp_path / "my_agents.py").write_text(textwrap.dedent(USER_MODULE))
    (tmp_path / "main.py").write_text(textwrap.dedent(SCRIPT))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    import json

    proc = subprocess.run([str(PYTHON), "main.py", json.dumps(HOSTILE)], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["1", "1"]
    return tmp_path / "events.jsonl"


def test_trace_text_escapes_keys_outputs_errors_and_tracebacks(hostile_log: Path):
    exe = PYTHON.with_name("flink-agents-py")
    proc = subprocess.run([str(exe), "trace", str(hostile_log), "--html", "page.html"],
                          cwd=hostile_log.parent, capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout.decode("utf-8")
    err = proc.stderr.decode("utf-8")
    assert _raw(out) == [] and _raw(err) == []
    # each field is there, escaped: the key, the output, the error and its traceback
    escaped = escape_controls(HOSTILE)
    lines = out.splitlines()
    assert any(f"key k{escaped}" in ln for ln in lines)       # a key
    assert any(f"key {escaped}" in ln for ln in lines)        # the failing run's key
    assert any(f"ValueError: bad {escaped}" in ln for ln in lines)  # flag and anomaly list
    assert any(ln.lstrip(" │├└─").startswith("┆ ValueError: bad ") and "\\x1b" in ln
               for ln in lines)                               # the traceback's last line
    assert "\\u202eevil\\u202c" in out and "\\x9b31m" in out and "\\x0dOK " in out
    # the page embeds the same payloads as JSON in its script: no raw C0 control in it
    page = (hostile_log.parent / "page.html").read_text(encoding="utf-8")
    assert sorted({f"U+{ord(c):04X}" for c in page if ord(c) < 0x20 and c != "\n"}) == []
    assert "\\u001b]0;pwned\\u0007" in page


def test_render_text_escapes_a_payload_that_breaks_lines():
    """A CR, VT, FF or U+2028 inside an error or a traceback does not start a new line."""
    records = [
        {"ts": 1.0, "kind": "run_started", "key": "k\r\nk", "id": "r0", "parent": None},
        {"ts": 1.0, "kind": "event", "key": "k\r\nk", "id": "r0", "parent": None,
         "type": "InputEvent", "data": {"input": "x"}},
        {"ts": 1.0, "kind": "action_started", "key": "k\r\nk", "id": "r0/a", "parent": "r0",
         "action": "a\x1b[8m"},
        {"ts": 1.1, "kind": "action_finished", "key": "k\r\nk", "id": "r0/a", "parent": "r0",
         "status": "failed", "error": "E: one\rtwo\x0bthree\u2028four",
         "traceback": "Traceback\r\n  line\x1b[A\r\nE: one\rtwo\n"},
        {"ts": 1.2, "kind": "run_completed", "key": "k\r\nk", "id": "r0", "parent": None},
    ]
    text = render_text(build_traces(records))
    assert _raw(text) == []
    lines = text.splitlines()
    assert "run r0  key k\\x0d\\x0ak" in lines[0]
    assert sum("E: one\\x0dtwo\\x0bthree\\u2028four" in ln for ln in lines) == 2
    tb = [ln.split("┆ ", 1)[1] for ln in lines if "┆ " in ln]
    assert tb == ["Traceback", "  line\\x1b[A", "E: one\\x0dtwo"]
    assert any("a\\x1b[8m" in ln for ln in lines)


def test_anomaly_lines_of_a_log_read_back_are_escaped(hostile_log: Path):
    text = render_text(build_traces(read_event_log([hostile_log])), limit=0)
    assert _raw(text) == []
    assert "anomalies (1)" in text
