"""The starter (``flink-agents-py new DIR``), used the way a user uses it.

The starter is written into a temporary folder outside the repository, and its own tests,
its local run and (marked ``flink``) its Flink run on a MiniCluster are run there with the
venv's interpreter, without the repository on ``PYTHONPATH``.
"""

from __future__ import annotations

import fnmatch
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from flink_agents_py.cli import STARTER_SUFFIXES, main

try:  # the fixture that installs flink-agents-py from its wheel into a fresh venv
    from test_user_module_flink import plain_install as wheel_venv
except pytest.skip.Exception:  # that module needs apache-flink

    @pytest.fixture
    def wheel_venv():
        pytest.skip("needs apache-flink (the flink extra)")

ROOT = Path(__file__).resolve().parents[1]
VENV_PY = ROOT / ".venv" / "bin" / "python"
PYTHON = str(VENV_PY if VENV_PY.exists() else Path(sys.executable))
STARTER = ROOT / "flink_agents_py" / "starter"
FILES = {"main.py", "my_agent.py", "questions.jsonl", "test_my_agent.py"}
ANSWERS = [
    {"user": "ana", "question": "What is the weather in Paris?",
     "answer": "Paris: sunny, 21 degrees."},
    {"user": "bo", "question": "Do I need a coat in Oslo?", "answer": "Oslo: snowing, -3 degrees."},
    {"user": "ana", "question": "And in Lima?", "answer": "Lima: unknown."},
]


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``args`` run by the venv's Python in ``cwd``, as from a user's shell."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "FLINK_CONF_DIR")}
    return subprocess.run([PYTHON, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600, check=False)


def new_project(tmp_path: Path) -> Path:
    """``flink-agents-py new`` (as a command) into a folder outside the repository."""
    assert ROOT not in tmp_path.resolve().parents
    res = run(["-m", "flink_agents_py.cli", "new", "weather"], cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    folder = tmp_path / "weather"
    assert {p.name for p in folder.iterdir()} == FILES
    assert "python main.py flink" in res.stdout
    return folder


def answers(res: subprocess.CompletedProcess[str]) -> list[dict]:
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-6000:]
    return [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]


def by_user(rows: list[dict]) -> dict[str, list[dict]]:
    """Rows per user, in order (one user's questions are answered in input order)."""
    out: dict[str, list[dict]] = {}
    for row in rows:
        out.setdefault(row["user"], []).append(row)
    return out


def test_the_starter_s_tests_pass_and_it_runs_on_the_local_runner(tmp_path):
    folder = new_project(tmp_path)
    tests = run(["-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=folder)
    assert tests.returncode == 0, tests.stdout + tests.stderr
    assert "2 passed" in tests.stdout  # the answers, and the crash checker's replay safety
    assert by_user(answers(run(["main.py"], cwd=folder))) == by_user(ANSWERS)
    # the page shows what it prints
    page = (ROOT / "docs" / "getting-started" / "starter.md").read_text()
    shown = page.split("```text\n", 1)[1].split("```", 1)[0]
    assert [json.loads(line) for line in shown.splitlines()] == ANSWERS


def break_on_coats(agent: Path) -> None:
    """The user's edit: the action raises for questions about coats."""
    text = agent.read_text()
    edited = text.replace('question = event.input["text"]\n', 'question = event.input["text"]\n'
                          '        if "coat" in question:\n'
                          '            raise ValueError("no coats here")\n')
    assert edited != text
    agent.write_text(edited)


def add_bad_input(questions: Path) -> None:
    """A line that is not JSON, a record without its key, a record without its text."""
    with questions.open("a") as f:
        f.write('{"user": "cy", "text": "Paris?"\n{"text": "Oslo?"}\n{"user": "dee"}\n')


def assert_bad_input_shown(res: subprocess.CompletedProcess[str]) -> None:
    shown = [line for line in res.stderr.splitlines() if line.startswith(("bad", "failed"))]
    assert sorted(shown) == [
        "bad input in questions.jsonl: line 3: not JSON (unexpected end of data: line 1 column "
        "32 (char 31))",
        "failed (key 'bo'): ValueError: no coats here",
        "failed (key 'dee'): KeyError: 'text'",
        "failed (key None): KeyError: 'user'"], res.stderr[-4000:]


def test_a_broken_agent_fails_its_tests_and_bad_input_and_failures_are_shown(tmp_path):
    folder = new_project(tmp_path)
    break_on_coats(folder / "my_agent.py")
    add_bad_input(folder / "questions.jsonl")
    tests = run(["-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=folder)
    assert tests.returncode == 1, tests.stdout + tests.stderr
    assert "1 failed, 1 passed" in tests.stdout
    res = run(["main.py"], cwd=folder)
    assert by_user(answers(res)) == by_user([a for a in ANSWERS if a["user"] != "bo"])
    assert_bad_input_shown(res)


def test_new_never_overwrites_a_file_unless_forced(tmp_path, capsys):
    folder = tmp_path / "mine"
    assert main(["new", str(folder)]) == 0
    (folder / "my_agent.py").write_text("# my edits\n")
    capsys.readouterr()
    assert main(["new", str(folder)]) == 2
    err = capsys.readouterr().err
    assert f"would overwrite {folder / 'main.py'}" in err and "--force" in err
    assert (folder / "my_agent.py").read_text() == "# my edits\n"  # nothing was written
    assert main(["new", str(folder), "--force"]) == 0
    assert (folder / "my_agent.py").read_bytes() == (STARTER / "my_agent.py").read_bytes()
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    assert main(["new", str(a_file)]) == 2
    assert f"{a_file} exists and is not a folder" in capsys.readouterr().err


def test_the_starter_s_files_ship_in_the_package():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    shipped = {p.name for p in STARTER.iterdir() if p.name.endswith(STARTER_SUFFIXES)}
    assert shipped == FILES
    assert (ROOT / "examples" / "starter").resolve() == STARTER  # one copy, seen from examples/
    with open(ROOT / "pyproject.toml", "rb") as f:
        package_data = tomllib.load(f)["tool"]["setuptools"]["package-data"]["flink_agents_py"]
    for name in shipped:  # a wheel holds them: pyproject's package-data names each one
        assert any(fnmatch.fnmatch(f"starter/{name}", p) for p in package_data), name


@pytest.mark.flink
def test_the_starter_runs_on_a_minicluster_with_the_user_s_own_module(tmp_path):
    folder = new_project(tmp_path)
    agent = folder / "my_agent.py"  # the user's edits: the workers must import this copy
    agent.write_text(agent.read_text().replace('"oslo": ', '"lima": "cloudy, 17 degrees", '
                                                           '"oslo": '))
    break_on_coats(agent)
    add_bad_input(folder / "questions.jsonl")
    res = run(["main.py", "flink"], cwd=folder)
    expected = [dict(a) for a in ANSWERS if a["user"] != "bo"]
    expected[1]["answer"] = "Lima: cloudy, 17 degrees."
    assert by_user(answers(res)) == by_user(expected)
    # failed records come out of errors_datastream(), bad lines out of read_lines_file's
    # errors: all are shown, none is lost
    assert_bad_input_shown(res)


def test_new_from_a_wheel_install_writes_the_same_starter(tmp_path, wheel_venv):  # noqa: F811
    python, site = wheel_venv  # a venv with flink-agents-py installed from its wheel
    res = subprocess.run([str(python), "-m", "flink_agents_py.cli", "new", "w"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300, check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    for name in FILES:  # read from the installed package, not from the repository
        assert (tmp_path / "w" / name).read_bytes() == (site / "flink_agents_py" / "starter" /
                                                        name).read_bytes()
    tests = subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider"],
                           cwd=tmp_path / "w", capture_output=True, text=True, timeout=300,
                           check=False)
    assert tests.returncode == 0 and "2 passed" in tests.stdout, tests.stdout + tests.stderr


def test_new_names_a_missing_folder_and_quotes_the_cd_it_prints(tmp_path, capsys,
                                                                monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["new", ""]) == 2  # never the current folder by accident
    assert "DIR is empty" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())
    assert main(["new", "my agent's dir"]) == 0
    [cd] = [line.strip() for line in capsys.readouterr().out.splitlines()
            if line.strip().startswith("cd ")]
    went = subprocess.run(["sh", "-c", f"{cd} && pwd"], capture_output=True, text=True,
                          check=True)  # the line works pasted into a shell
    assert Path(went.stdout.strip()) == tmp_path / "my agent's dir"
    assert (tmp_path / "my agent's dir" / "my_agent.py").is_file()


def test_a_renamed_or_failing_tool_is_named_not_a_json_error(tmp_path):
    """The page's first edit, renaming the tool, names what to change in scripted_model; a
    tool that raises is answered with its error (never a JSONDecodeError from the script)."""
    folder = new_project(tmp_path)
    agent = folder / "my_agent.py"
    text = agent.read_text()
    failing = text.replace('        return {"city": city, "weather"',
                           '        if city == "Oslo":\n'
                           '            raise LookupError("the Oslo station is down")\n'
                           '        return {"city": city, "weather"')
    assert failing != text
    agent.write_text(failing)
    rows = by_user(answers(run(["main.py"], cwd=folder)))
    [oslo] = rows["bo"]
    assert oslo["answer"].startswith("get_weather failed:")
    assert "the Oslo station is down" in oslo["answer"]
    renamed = text.replace("def get_weather(", "def get_forecast(").replace(
        'tools=["get_weather"]', 'tools=["get_forecast"]')
    assert renamed.count("get_forecast") == 2
    agent.write_text(renamed)
    res = run(["main.py"], cwd=folder)
    failed = [line for line in res.stderr.splitlines() if line.startswith("failed")]
    assert len(failed) == 3 and all(
        "scripted_model calls get_weather, but the chat offers ['get_forecast']" in line
        for line in failed), res.stderr[-3000:]
    assert "JSONDecodeError" not in res.stderr


def test_python_dash_m_flink_agents_py_is_the_command(tmp_path):
    # the docs say to run the venv's python instead of activating it; before, that way had
    # no command: "No module named flink_agents_py.__main__; 'flink_agents_py' is a package
    # and cannot be directly executed"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # this checkout's (the venv's is editable)

    def command(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([PYTHON, "-m", "flink_agents_py", *args], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=120, check=False)

    res = command("--help")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("usage: flink-agents-py") and "{trace,new}" in res.stdout
    res = command("new", "weather")
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "weather" / "my_agent.py").is_file()
    res = command()  # no command: the commands, with what each does (test_cli_version_and_help)
    assert res.returncode == 2 and "write a starter agent project" in res.stderr, res.stderr


def _new_with_path(tmp_path: Path, path: str) -> list[str]:
    """``flink-agents-py new`` (the venv's console script) under ``PATH=path``: its commands."""
    env = {k: v for k, v in os.environ.items() if k != "FLINK_CONF_DIR"}  # PYTHONPATH kept:
    env["PATH"] = path  # the checkout under test, as the other tests' venv install is
    res = subprocess.run([PYTHON, "-m", "flink_agents_py.cli", "new", "w"], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=120, check=True)
    return [line.split("#")[0].strip() for line in res.stdout.splitlines()
            if line.startswith("  ") and ("main.py" in line or "pytest" in line)]


def test_new_prints_commands_that_run_when_the_venv_is_not_activated(tmp_path):
    # `python` on PATH is another interpreter (pyenv's, the system's): the printed commands
    # said `python -m pytest -q`, which failed with "No module named 'flink_agents_py'"
    other = tmp_path / "bin"
    other.mkdir()
    (other / "python").write_text("#!/bin/sh\necho 'not the venv' >&2\nexit 3\n")
    (other / "python").chmod(0o755)
    commands = _new_with_path(tmp_path, f"{other}{os.pathsep}/usr/bin{os.pathsep}/bin")
    assert commands == [f"{PYTHON} -m pytest -q", f"{PYTHON} main.py", f"{PYTHON} main.py flink"]
    env = {k: v for k, v in os.environ.items() if k != "FLINK_CONF_DIR"}
    env["PATH"] = f"{other}{os.pathsep}/usr/bin{os.pathsep}/bin"
    tests = subprocess.run([*commands[0].split(), "-p", "no:cacheprovider"], cwd=tmp_path / "w",
                           env=env, capture_output=True, text=True, timeout=300)
    assert "2 passed" in tests.stdout, tests.stdout + tests.stderr


def test_new_prints_plain_python_when_the_venv_is_activated(tmp_path):
    commands = _new_with_path(tmp_path, f"{Path(PYTHON).parent}{os.pathsep}/usr/bin")
    assert commands == ["python -m pytest -q", "python main.py", "python main.py flink"]
