"""Every code block of the tutorial (docs/getting-started/tutorial.md) runs as a user runs it.

The page marks each fenced block with an HTML comment on the line before it:

- ``<!-- file: NAME -->``: the user saves the block as ``NAME``;
- ``<!-- run: STEP -->``: shell commands of step ``STEP`` (``python ...`` lines, optionally
  with ``export VAR=...`` or ``VAR=value`` prefixes);
- ``<!-- output: STEP -->``: what the last command of step ``STEP`` prints (compared line by
  line, in any order: keys run concurrently);
- ``<!-- not run: WHY -->``: the shell block that only makes a directory and activates the
  venv (this test does both itself), and ``make kafka``, a broker in the foreground (this
  test starts its own; ``test_kafka_broker_script.py`` runs the script).

The files are written into a temporary directory outside the repository and the commands run
there with the venv's interpreter, without the repository on ``PYTHONPATH``: the way a user
who followed the installation page runs them.
"""

from __future__ import annotations

import os
import re
import shlex
import socket
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "getting-started" / "tutorial.md"
VENV_PY = ROOT / ".venv" / "bin" / "python"
PYTHON = str(VENV_PY if VENV_PY.exists() else Path(sys.executable))
DOC_KAFKA = "localhost:9092"

_BLOCK = re.compile(r"^(?:<!-- (?P<kind>file|run|output|not run): ?(?P<arg>.*?) -->\n)?"
                    r"```(?P<lang>[\w-]*)(?: [^\n]*)?\n(?P<body>.*?)^```$", re.M | re.S)


def _blocks() -> list[dict[str, str]]:
    return [m.groupdict() for m in _BLOCK.finditer(PAGE.read_text())]


def _files() -> dict[str, str]:
    return {b["arg"]: b["body"] for b in _blocks() if b["kind"] == "file"}


def _step(name: str, kind: str) -> str:
    found = [b["body"] for b in _blocks() if b["kind"] == kind and b["arg"] == name]
    assert len(found) == 1, f"the tutorial has {len(found)} '{kind}: {name}' blocks"
    return found[0]


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A fresh directory outside the repository holding every file of the tutorial."""
    assert ROOT not in tmp_path.resolve().parents, "the test directory must be outside the repo"
    for name, text in _files().items():
        (tmp_path / name).write_text(text)
    return tmp_path


def _run_step(workdir: Path, step: str, subst: dict[str, str] | None = None,
              timeout_s: float = 300.0) -> list[subprocess.CompletedProcess[str]]:
    """Run the ``run: step`` block's lines as a user's shell would, in ``workdir``."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PATH"] = f"{Path(PYTHON).parent}{os.pathsep}{env.get('PATH', '')}"  # venv activated
    done = []
    for line in _step(step, "run").splitlines():
        for old, new in (subst or {}).items():
            line = line.replace(old, new)
        words = shlex.split(line, comments=True)
        if not words:
            continue
        if words[0] == "export":
            for w in words[1:]:
                k, _, v = w.partition("=")
                env[k] = v
            continue
        extra = {}
        while "=" in words[0] and not words[0].startswith("-"):
            k, _, v = words.pop(0).partition("=")
            extra[k] = v
        assert words[0] == "python", f"unexpected command in the tutorial: {line}"
        if words[1:3] == ["-m", "pytest"]:
            words[3:3] = ["-p", "no:cacheprovider"]  # leave nothing but the user's files
        proc = subprocess.run([PYTHON, *words[1:]], cwd=workdir, env={**env, **extra},
                              capture_output=True, text=True, timeout=timeout_s)
        assert proc.returncode == 0, (
            f"`{line}` exited {proc.returncode}\n--- stdout\n{proc.stdout[-3000:]}"
            f"\n--- stderr\n{proc.stderr[-6000:]}")
        done.append(proc)
    assert done, f"step {step} ran nothing"
    return done


def _assert_output(step: str, printed: str) -> None:
    expected = Counter(x for x in _step(step, "output").splitlines() if x.strip())
    got = Counter(x for x in printed.splitlines() if x.strip())
    assert got == expected, (
        f"step {step} printed something else than the tutorial shows\n--- printed\n{printed}"
        f"\n--- missing\n{expected - got}\n--- unexpected\n{got - expected}")


# -- the page itself ------------------------------------------------------------------------
def test_every_block_is_marked_and_runs_somewhere():
    blocks = _blocks()
    fences = re.findall(r"^```[\w-]+(?: .*)?$", PAGE.read_text(), re.M)
    assert len(blocks) == len(fences), "a fenced block was not parsed (unbalanced fences?)"
    unmarked = [b["body"][:60] for b in blocks if b["kind"] is None]
    assert not unmarked, f"tutorial blocks without a marker: {unmarked}"
    assert [b["lang"] for b in blocks if b["kind"] == "not run"] == ["bash", "bash"]
    broker = [b["body"] for b in blocks if b["kind"] == "not run"][1]
    assert broker.startswith("make kafka "), broker  # the Makefile has it: test_kafka_broker_script
    for b in blocks:
        if b["lang"] == "python":
            assert b["kind"] == "file", f"a python block that is not a file: {b['body'][:60]}"
    ran = " ".join(b["body"] for b in blocks if b["kind"] == "run")
    for name in _files():
        if name.endswith(".py") and name != "shop_agent.py":
            assert re.search(rf"python (-m pytest -q )?{re.escape(name)}", ran), (
                f"{name} is written but no step runs it")
    steps = {b["arg"] for b in blocks if b["kind"] == "run"}
    assert {b["arg"] for b in blocks if b["kind"] == "output"} <= steps
    assert steps == {"local", "test", "flink", "kafka", "real-model"}


# -- the steps ------------------------------------------------------------------------------
def test_step_local(workdir):
    _assert_output("local", _run_step(workdir, "local")[-1].stdout)


def test_step_test(workdir):
    # the user's own tests of the agent, replay-safety check included, pass under pytest
    printed = _run_step(workdir, "test")[-1].stdout
    assert re.search(r"\b2 passed\b", printed), printed


def test_what_the_page_says_of_the_replay_check_is_what_it_does(workdir):
    # the page said the check ran "in well under a second": it restores every point in two
    # fresh Python processes too (the default), about 3 s on the project's machine
    (workdir / "report.py").write_text(_files()["test_shop.py"] + (
        "\nprint(check_replay_safety(ShopAssistant(), QUESTIONS, key_selector=by_customer))\n"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    report = subprocess.run([PYTHON, "report.py"], cwd=workdir, env=env, capture_output=True,
                            text=True, timeout=300, check=True).stdout
    points = re.search(r"crash points tried\s+(\d+) of \1", report)
    assert points, report
    again = re.search(r"in another process\s+(\d+) points restored again", report)
    assert again and again.group(1) == points.group(1), report
    text = " ".join(PAGE.read_text().split())
    assert f"every crash point of these three questions ({points.group(1)} here)" in text
    assert "then restores each again in two fresh Python processes" in text


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_switch_to_a_real_model_builds_the_openai_connection(workdir):
    # No provider is reachable in tests: the URL is a closed local port, so each chat fails
    # with a connection error, which the action turns into its "(no answer: ...)" text; the
    # run still completes with one answer per question (the sub-agent needs no model).
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    printed = _run_step(workdir, "real-model", {"https://api.openai.com/v1": url},
                        timeout_s=120)[-1].stdout
    answers = [line for line in printed.splitlines() if line.startswith("{")]
    assert len(answers) == 3
    for line in answers:
        # (quoted as Python prints it: with "..." when the text holds a ')
        assert "'answer': '(no answer:" in line or "'answer': \"(no answer:" in line, line
        assert "APIConnectionError" in line and url in line, line  # the server named
    assert "chats: {'assistant': 3} tool calls: {}" in printed


@pytest.mark.flink
@pytest.mark.timeout(600)
def test_step_flink(workdir):
    pytest.importorskip("pyflink")
    _assert_output("flink", _run_step(workdir, "flink")[-1].stdout)


@pytest.mark.kafka
@pytest.mark.flink
@pytest.mark.timeout(900)
def test_step_kafka(workdir, kafka_broker):
    pytest.importorskip("pyflink")
    done = _run_step(workdir, "kafka", {DOC_KAFKA: kafka_broker.bootstrap})
    assert "job finished" in done[-2].stdout
    _assert_output("kafka", done[-1].stdout)


@pytest.mark.model
@pytest.mark.timeout(900)
def test_switch_to_the_embedded_model_runs_the_tool(workdir):
    # The page's offline choice, made as it says: model_connection returns the descriptor the
    # page names. Before, the default model (Qwen2.5-Coder-1.5B) wrote each call in its GGUF
    # template's doubled braces, which were not read as calls: every answer was the call's
    # text and no tool ran ("tool calls: {}").
    pytest.importorskip("llama_cpp")
    from flink_agents_py.integrations.chat_models._gguf import cached_gguf

    if cached_gguf() is None:
        pytest.skip("the default model is not cached (make setup fetches it)")
    text = " ".join(PAGE.read_text().split())
    descriptor = re.search(r"return `(ResourceDescriptor\(LlamaCppChatModel, [^`]*\))`", text)
    assert descriptor, "the page names the embedded model's descriptor"
    agent = (workdir / "shop_agent.py").read_text()
    scripted = 'return ResourceDescriptor(ScriptedChatModel, function="shop_agent:shop_model")'
    assert scripted in agent
    agent = agent.replace(scripted, f"return {descriptor.group(1)}").replace(
        "import OpenAIChatModel, ScriptedChatModel",
        "import LlamaCppChatModel, OpenAIChatModel, ScriptedChatModel")
    (workdir / "shop_agent.py").write_text(agent)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "FLINK_AGENTS_PY_GGUF")}
    proc = subprocess.run([PYTHON, "run_local.py"], cwd=workdir, env=env, capture_output=True,
                          text=True, timeout=880)
    assert proc.returncode == 0, proc.stderr[-3000:]
    answers = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert len(answers) == 3 and "errors: []" in proc.stdout, proc.stdout
    calls = re.search(r"tool calls: \{'check_stock': (\d+)\}", proc.stdout)
    assert calls and int(calls.group(1)) >= 3, proc.stdout  # at least one per question
    assert '"name": "check_stock"' not in proc.stdout  # no call left as an answer's text


def test_create_topics_says_at_once_when_no_broker_answers(workdir):
    # before, the page's script waited 60 s without a word, then failed with "Failed while
    # waiting for controller: Local: Timed out", naming neither the address nor what to do
    pytest.importorskip("confluent_kafka")
    servers = f"127.0.0.1:{_closed_port()}"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([PYTHON, "create_topics.py", servers], cwd=workdir, env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert f"no Kafka broker answers at {servers}" in proc.stderr, proc.stderr[-2000:]
    assert "make kafka" in proc.stderr
