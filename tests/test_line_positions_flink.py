"""Error rows of a file's records name their line on Flink, as on the local runner.

A record ``read_lines_file`` read and the agent did not run (its key selector raised, it
gave an unhashable key) or whose action failed reached ``errors_datastream()`` saying
``record``: which line of the file it was could not be told (the local runner's rows of
``from_list(read_json_lines(path))`` said ``line N``). Now each such row names its line in
``execution_id`` and ``source``, and the same hostile file gives the same rows on both
runners: the same keys, lines, actions and error types; a bad line's reader row holds the
message and excerpt of the local runner's ``BadRecordError`` row; good records after each bad
one all come out. The job runs as a user's own module, from a folder outside the repository.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

AGENT = """
    from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action


    def key_of(record):
        return record["id"]


    class Echo(Agent):
        @action(InputEvent)
        @staticmethod
        def on_input(event: InputEvent, ctx: RunnerContext) -> None:
            if event.input.get("boom"):
                raise RuntimeError("the action failed on purpose")
            ctx.send_event(OutputEvent(output={"key": ctx.key, "n": event.input.get("n")}))
"""

JOB = """
    import json
    import sys

    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.io import read_json_lines
    from myagent import Echo, key_of

    path = sys.argv[1]
    local = AgentsExecutionEnvironment.local().from_list(
        read_json_lines(path, max_record_bytes=1000), key_selector=key_of).apply(Echo()).run()
    for o in local.outputs:
        print("LOCAL_OUT " + json.dumps(o), flush=True)
    for e in local.errors:
        print("LOCAL_ERR " + json.dumps(e.json_row()), flush=True)

    from pyflink.common import Types
    from flink_agents_py.flink import create_stream_environment, read_lines_file

    env = create_stream_environment(execution_mode=sys.argv[2], parallelism=1,
                                    restart_attempts=0)
    records, bad_lines = read_lines_file(env, path, max_record_bytes=1000)
    agents = AgentsExecutionEnvironment.flink(env, metrics=False)
    job = agents.from_datastream(records, key_selector=key_of).apply(Echo())
    pickled = Types.PICKLED_BYTE_ARRAY()
    rows = job.to_datastream().map(lambda o: ("out", o), output_type=pickled).union(
        job.errors_datastream().map(lambda e: ("err", e), output_type=pickled),
        bad_lines.map(lambda e: ("line", e), output_type=pickled))
    with rows.execute_and_collect("line-positions") as results:
        for kind, row in results:
            print("FLINK_" + kind.upper() + " " + json.dumps(row), flush=True)
"""


def hostile_file(path: Path) -> int:
    """Write good lines between bad ones; return how many good records it holds."""
    deep = "[" * 250 + "]" * 250
    lines = [
        b'{"id": "a", "n": 0}',
        b"not json",  # 1
        b'{"id": "a", "n": 2}',
        b"[1, 2]",  # 3: not an object: the key selector raises TypeError
        b'{"n": 4}',  # 4: no "id": KeyError
        b'{"id": "caf\xe9", "n": 5}',  # 5: invalid UTF-8
        b'{"id": "big", "pad": "' + b"x" * 2000 + b'"}',  # 6: over max_record_bytes
        b'{"id": "b", "boom": true}',  # 7: the action fails
        deep.encode(),  # 8: nested 250 levels deep
        b'{"id": "c", "x": NaN}',  # 9: NaN is not JSON
        b'{"id": ["a", "list"]}',  # 10: an unhashable key
        b'{"id": "nul\x00", "n": 11}',  # 11: a NUL byte
        b"",  # 12: blank, skipped but counted
        b'{"id": null, "n": 13}',  # the key None: runs
        b'{"id": 7, "n": 14}',  # an int key: runs
        b'{"id": "a", "n": 15}',
    ]
    path.write_bytes(b"\n".join(lines) + b"\n")
    return 5


def _rows(stdout: str, tag: str) -> list:
    return [
        json.loads(line[len(tag) + 1 :])
        for line in stdout.splitlines()
        if line.startswith(tag + " ")
    ]


@pytest.mark.flink
@pytest.mark.timeout(400)
@pytest.mark.parametrize("mode", ["thread", "process"])  # process: the records travel sealed
def test_a_files_error_rows_name_their_lines_alike_on_both_runners(tmp_path, mode):
    pytest.importorskip("pyflink")
    assert ROOT not in tmp_path.resolve().parents
    (tmp_path / "myagent.py").write_text(textwrap.dedent(AGENT))
    (tmp_path / "job.py").write_text(textwrap.dedent(JOB))
    good = hostile_file(tmp_path / "in.jsonl")
    proc = subprocess.run(
        [sys.executable, "job.py", "in.jsonl", mode],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=380,
        env={**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{tmp_path}"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    expected_outputs = sorted(map(str, [("a", 0), ("a", 2), (None, 13), (7, 14), ("a", 15)]))
    assert len(expected_outputs) == good
    for tag in ("LOCAL_OUT", "FLINK_OUT"):
        assert sorted(str((o["key"], o["n"])) for o in _rows(out, tag)) == expected_outputs, tag

    local = _rows(out, "LOCAL_ERR")
    flink = _rows(out, "FLINK_ERR")

    # the agent's error rows: the same key, line, action and error type on both runners
    def agent_rows(rows: list) -> list:
        return sorted(
            (
                (r["key"], r["source"], r["action"], r["error_type"])
                for r in rows
                if r["error_type"] != "BadRecordError"
            ),
            key=str,
        )

    assert (
        agent_rows(local)
        == agent_rows(flink)
        == sorted(
            [
                ("b", "line 7", "on_input", "RuntimeError"),
                (None, "line 10", "<key_selector>", "TypeError"),
                (None, "line 3", "<key_selector>", "TypeError"),
                (None, "line 4", "<key_selector>", "KeyError"),
            ],
            key=str,
        )
    )
    for row in flink:  # a record not run: its place is where it was read, not "record"
        if row["action"] == "<key_selector>":
            assert row["execution_id"] == row["source"], row

    # a line that could not be read: the local runner's BadRecordError row and the Flink
    # reader's row say the same (line, message, excerpt)
    local_bad = sorted(
        (r["source"], r["message"], r["input"])
        for r in local
        if r["error_type"] == "BadRecordError"
    )
    flink_bad = sorted(
        (f"line {r['line']}", r["error"], r["value"]) for r in _rows(out, "FLINK_LINE")
    )
    assert local_bad == flink_bad
    assert [s for s, _, _ in local_bad] == [
        "line 1",
        "line 11",
        "line 5",
        "line 6",
        "line 8",
        "line 9",
    ]
    messages = dict((s, m) for s, m, _ in local_bad)
    assert "invalid UTF-8 at byte 11" in messages["line 5"]
    assert "over the limit of 1,000 bytes" in messages["line 6"]
    assert "nested more than 200 levels deep" in messages["line 8"]
    assert "not JSON" in messages["line 9"]
    assert "NUL byte" in messages["line 11"]
