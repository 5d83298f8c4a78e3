"""The input-errors page's job that writes its outputs and error rows to JSON-lines files.

Found by a newcomer: the page said to give each stream "its own sink (a file, a topic)" and
showed a topic only; writing an agent's outputs to a file on Flink meant finding PyFlink's
``FileSink``, its string encoder, and why its files come out in dated folders.
"""

from __future__ import annotations

import json

import pytest
from test_docs_snippets import DOCS, blocks, run


def _file_block() -> str:
    [block] = [b for b in blocks("how-to/input-errors.md") if "FileSink" in b]
    return block


def test_the_page_shows_a_file_sink_job():
    block = _file_block()
    assert 'json_lines_sink("out", "answers")' in block
    assert "### Write the outputs to files" in (DOCS / "how-to/input-errors.md").read_text()


@pytest.mark.flink
@pytest.mark.timeout(400)
def test_the_file_sink_job_writes_answers_and_errors_as_json_lines(tmp_path):
    pytest.importorskip("pyflink")
    (tmp_path / "reviews.jsonl").write_text(
        '{"key": "a", "text": "good"}\nnot json\n{"key": "b", "txt": "typo"}\n'
        '{"key": "c", "text": "fine"}\n'
    )
    (tmp_path / "my_agents.py").write_text(
        "from flink_agents_py.api import Agent, InputEvent, OutputEvent, action\n\n\n"
        "class MyAgent(Agent):\n"
        "    @action(InputEvent)\n"
        "    @staticmethod\n"
        "    def on_input(event, ctx):\n"
        "        ctx.send_event(OutputEvent(output={'key': ctx.key,"
        " 'text': event.input['text']}))\n"
    )
    run(tmp_path, "from my_agents import MyAgent", _file_block(), timeout_s=360)
    out = tmp_path / "out"
    files = sorted(p.name for p in out.iterdir())
    assert all(not name.startswith(".") for name in files), files  # all committed
    answers = [
        json.loads(line) for p in out.glob("answers-*.jsonl") for line in p.read_text().splitlines()
    ]
    errors = [
        json.loads(line) for p in out.glob("errors-*.jsonl") for line in p.read_text().splitlines()
    ]
    assert sorted(answers, key=lambda a: a["key"]) == [
        {"key": "a", "text": "good"},
        {"key": "c", "text": "fine"},
    ]
    assert sorted(e.get("line", -1) for e in errors) == [-1, 1], errors  # the bad line
    [failed] = [e for e in errors if e.get("kind") != "error"]
    assert failed["key"] == "b" and failed["error_type"] == "KeyError"
