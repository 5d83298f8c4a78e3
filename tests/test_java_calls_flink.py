"""``bench._java_calls`` on a MiniCluster: the agent operator's calls into Java, per chat.

The figures are what the operator's cost on the Flink side is judged by (issue 31), so they
must count the agent operator's callbacks only (the job's maps are Python functions too, on
the same PyFlink classes) and the keyed-state writes a chat makes: its run written when the
chat starts and cleared when it ends, the key's queue tail written once; and that each input
record is converted without PyFlink's ``Row`` (``flink._fast_input``).
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("pyflink")

from bench._java_calls import FAST_INPUT, LAYERS_ENV  # noqa: E402

pytestmark = pytest.mark.flink

ROOT = pathlib.Path(__file__).resolve().parents[1]
CHATS, KEYS = 400, 100


def test_java_calls_counts_the_operators_callbacks_and_a_chats_state_writes(
    tmp_path: pathlib.Path,
) -> None:
    out = tmp_path / "calls.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT), LAYERS_ENV: "1"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench._java_calls",
            "--chats",
            str(CHATS),
            "--keys",
            str(KEYS),
            "--json",
            str(out),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    data = json.loads(out.read_text())
    counts = data["counts"]
    assert data["job"]["count"] == CHATS and data["job"]["failed"] == 0
    # one callback per input record: the source's and the stamping maps' are not counted
    assert counts["callback.process_element"] == CHATS
    # every input moves its key's queue tail once; every chat's run is written once as it
    # starts (over its key's last run when one was queued behind it), cleared as its key idles
    assert counts["tail.update"] == CHATS
    assert counts["run.update"] == CHATS
    assert KEYS <= counts["run.clear"] <= CHATS
    assert counts.get("queue.put", 0) == counts.get("queue.remove", 0)
    assert counts["ctx.get_current_key"] >= CHATS
    # each input's record converted without PyFlink's Row (``_fast_input``), in the operator
    assert counts[FAST_INPUT] == CHATS
    assert "pyflink.input row conversion" not in counts
    assert data["micro"]["run update (760 chars)"] > 0
    assert "calls into Java, together" in proc.stdout
    # the layers inside the callbacks: each nested in the one above, every chat in each
    cpu = data["cpu_ns"]
    assert counts["layer.operator.process_element"] == CHATS
    assert counts["layer.core.on_input"] == CHATS
    assert counts["layer.operator.on_timer"] == counts["callback.on_timer"]
    assert 0 < cpu["layer.operator.process_element"] < cpu["callback.process_element"]
    core = cpu["layer.core.on_input"] + cpu["layer.core.advance"]
    operator = cpu["layer.operator.process_element"] + cpu["layer.operator.on_timer"]
    assert 0 < core < operator
    # what could slow the interpreter, read in the operator's thread (nothing of it is set)
    interpreter = data["interpreter"]
    assert interpreter["trace"] == interpreter["profile"] == "None"
    assert interpreter["tracemalloc"] is False
