"""A user's own agent on the Flink runner, run the way a user runs it.

Each test writes a user module (``my_agents.py``) and a script into a temporary directory outside
the repository and runs the script with the venv's interpreter as a subprocess: one job (one
JVM) per test. Covered: thread and process mode, ``create_stream_environment`` and a plain
``StreamExecutionEnvironment``, an agent defined in the script itself (``__main__``), the script
started from another directory, failed records kept out of the outputs, the editable install
of ``make setup`` and a plain (wheel) install, workers on another interpreter (checked before
submission: one line when it cannot work), and ``flink run -pym main -pyfs DIR`` twice in
thread mode on one standalone TaskManager.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap

import orjson
import pytest

pytest.importorskip("pyflink")

ROOT = pathlib.Path(__file__).resolve().parents[1]
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
PYTHON = str(VENV_PYTHON if VENV_PYTHON.exists() else pathlib.Path(sys.executable))

MY_AGENTS = '''
import flink_agents_py
from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action


class Shout(Agent):
    """Upper-cases the text; says where the worker imported the library and this module from."""

    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output={
            "agent": "shout", "key": ctx.key, "text": event.input["text"].upper(),
            "lib": flink_agents_py.__file__, "module": __file__}))
'''

MAIN = '''
"""Usage: main.py thread|process create|plain"""
import json
import os
import sys

from pyflink.common import Configuration, Types, WatermarkStrategy
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.connectors.number_seq import NumberSequenceSource

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents_py.flink import create_stream_environment
from my_agents import Shout

WORDS = ["hi", "yo", "hey", "hello", "bye", "ok"]


class Count(Agent):
    """Defined in the script itself (``__main__``); fails on the third record of key k1."""

    @action(InputEvent)
    @staticmethod
    def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        n = (ctx.short_term_memory.get("n") or 0) + 1
        ctx.short_term_memory.set("n", n)
        if (ctx.key, n) == ("k1", 3):
            raise ValueError("three is too many")
        ctx.send_event(OutputEvent(output={"agent": "count", "key": ctx.key, "n": n}))


def main() -> None:
    mode, kind = sys.argv[1], sys.argv[2]
    if kind == "create":
        env = create_stream_environment(execution_mode=mode, restart_attempts=0)
    else:
        cfg = Configuration()
        cfg.set_string("python.execution-mode", mode)
        cfg.set_string("restart-strategy.type", "none")
        if os.environ.get("WORKER_PYTHON"):
            cfg.set_string("python.executable", os.environ["WORKER_PYTHON"])
        env = StreamExecutionEnvironment.get_execution_environment(cfg)
        env.set_parallelism(1)
    ds = env.from_source(NumberSequenceSource(0, len(WORDS) - 1),
                         WatermarkStrategy.no_watermarks(), "numbers").map(
        lambda i: {"key": "k%d" % (i % 2), "text": WORDS[i]},
        output_type=Types.PICKLED_BYTE_ARRAY())
    agents = AgentsExecutionEnvironment.flink(env)
    out = agents.from_datastream(ds).apply(Shout()).to_datastream()
    if kind == "plain":
        out = out.union(agents.from_datastream(ds).apply(Count()).to_datastream())
    with out.execute_and_collect("user-agent") as results:
        for r in results:
            print("OUT " + json.dumps(r, sort_keys=True), flush=True)


if __name__ == "__main__":
    main()
'''


def write_user_project(folder: pathlib.Path) -> pathlib.Path:
    """``my_agents.py`` and ``main.py`` in ``folder`` (outside the repository)."""
    folder.mkdir(parents=True, exist_ok=True)
    assert ROOT not in folder.resolve().parents
    (folder / "my_agents.py").write_text(textwrap.dedent(MY_AGENTS))
    (folder / "main.py").write_text(textwrap.dedent(MAIN))
    return folder


def clean_env(**extra: str) -> dict[str, str]:
    """The environment a user's shell has: no PYTHONPATH pointing into the repository."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "FLINK_CONF_DIR")}
    env.update(extra)
    return env


def run_user(args: list[str], cwd: pathlib.Path, python: str = PYTHON,
             **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([python, *args], cwd=cwd, env=clean_env(**extra), capture_output=True,
                          text=True, timeout=300, check=False)


def outputs(res: subprocess.CompletedProcess[str]) -> list[dict]:
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-6000:]
    return [orjson.loads(line[4:]) for line in res.stdout.splitlines() if line.startswith("OUT ")]


def assert_shouts(rows: list[dict], user_dir: pathlib.Path | None) -> None:
    shouts = sorted((r["key"], r["text"]) for r in rows if r["agent"] == "shout")
    assert shouts == [("k0", "BYE"), ("k0", "HEY"), ("k0", "HI"),
                      ("k1", "HELLO"), ("k1", "OK"), ("k1", "YO")]
    if user_dir is not None:  # the worker imported the user's own module, from where it is
        assert {r["module"] for r in rows if r["agent"] == "shout"} == {
            str(user_dir / "my_agents.py")}


def assert_counts(rows: list[dict]) -> None:
    counts = sorted((r["key"], r["n"]) for r in rows if r["agent"] == "count")
    # the failed record is an error record, not an output (errors_datastream() is not taken)
    assert counts == [("k0", 1), ("k0", 2), ("k0", 3), ("k1", 1), ("k1", 2)]


@pytest.mark.flink
def test_thread_mode_with_create_stream_environment_from_the_user_directory(tmp_path):
    user = write_user_project(tmp_path / "user")
    rows = outputs(run_user(["main.py", "thread", "create"], cwd=user))
    assert_shouts(rows, user)
    # the editable install of make setup: the worker ran the repository's code
    assert {os.path.realpath(r["lib"]) for r in rows} == {
        str(ROOT / "flink_agents_py" / "__init__.py")}


@pytest.mark.flink
def test_thread_mode_plain_environment_agent_in_main_started_from_elsewhere(tmp_path):
    user = write_user_project(tmp_path / "user")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    rows = outputs(run_user([str(user / "main.py"), "thread", "plain"], cwd=elsewhere))
    assert_shouts(rows, user)
    assert_counts(rows)


@pytest.mark.flink
def test_process_mode_plain_environment_agent_in_main_started_from_elsewhere(tmp_path):
    user = write_user_project(tmp_path / "user")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    rows = outputs(run_user([str(user / "main.py"), "process", "plain"], cwd=elsewhere))
    assert_shouts(rows, user)
    assert_counts(rows)


@pytest.mark.flink
def test_a_workers_interpreter_without_the_library_fails_before_submission(tmp_path):
    user = write_user_project(tmp_path / "user")
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    base = pathlib.Path(sys.base_prefix) / "bin" / f"python{version}"
    if not base.exists() or sys.prefix == sys.base_prefix:
        pytest.skip("needs a venv over a base interpreter without apache-flink")
    res = run_user(["main.py", "process", "plain"], cwd=user, WORKER_PYTHON=str(base))
    assert res.returncode != 0
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith("flink_agents_py.flink.WorkerSetupError: python.executable")
    assert "cannot import pyflink" in last and "set python.executable" in last
    assert "Py4JJavaError" not in res.stderr and "OUT " not in res.stdout


def test_a_resource_class_defined_in_main_is_refused_with_what_to_do():
    pytest.importorskip("pyflink")
    from flink_agents_py.api import Agent, InputEvent, ResourceDescriptor, ResourceType, action
    from flink_agents_py.flink import WorkerSetupError
    from flink_agents_py.flink._builder import plan_modules
    from flink_agents_py.integrations.chat_models import ScriptedChatModel
    from flink_agents_py.plan import AgentPlan

    class Local(ScriptedChatModel):
        pass

    Local.__module__ = "__main__"

    class UsesLocal(Agent):
        @action(InputEvent)
        @staticmethod
        def on_input(event, ctx) -> None:
            pass

    agent = UsesLocal().add_resource("model", ResourceType.CHAT_MODEL_CONNECTION,
                                     ResourceDescriptor(Local))
    plan = AgentPlan.from_agent(agent)
    with pytest.raises(WorkerSetupError, match=r"resource 'model' .*__main__.*move the class"):
        plan_modules(plan)


@pytest.fixture(scope="module")
def plain_install(tmp_path_factory):
    """A venv with flink-agents-py installed from a wheel (not editable); its other packages
    come from the project's venv through a plain path line (whose ``.pth`` hooks, among them
    the editable install's, are not run)."""
    if not VENV_PYTHON.exists():
        pytest.skip("needs the project's .venv (make setup)")
    work = tmp_path_factory.mktemp("plain-install")
    src = work / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        (src / name).write_bytes((ROOT / name).read_bytes())
    subprocess.run(["cp", "-r", str(ROOT / "flink_agents_py"), str(src)], check=True)
    wheels = work / "wheels"
    build = subprocess.run([PYTHON, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels),
                            str(src)], capture_output=True, text=True, timeout=300, check=False)
    if build.returncode != 0:
        pytest.skip(f"could not build a wheel (build backend from PyPI?): {build.stderr[-500:]}")
    venv = work / "venv"
    subprocess.run([sys.base_prefix + "/bin/python3", "-m", "venv", "--without-pip", str(venv)],
                   check=True, timeout=120)
    site = venv / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    project_site = subprocess.run(
        [PYTHON, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True).stdout.strip()
    (site / "zz_project_venv.pth").write_text(project_site + "\n")
    # the user's shell's environment: a PYTHONPATH into the repository would make pip see
    # the editable install (through the .pth above) as this version and install nothing
    subprocess.run([PYTHON, "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
                    "-q", "--no-deps", *map(str, wheels.glob("*.whl"))], check=True, timeout=300,
                   env=clean_env())
    return venv / "bin" / "python", site


@pytest.mark.flink
@pytest.mark.cluster
@pytest.mark.parametrize("mode", ["thread", "process"])
def test_a_plain_pip_install(tmp_path, plain_install, mode):
    python, site = plain_install
    user = write_user_project(tmp_path / "user")
    rows = outputs(run_user(["main.py", mode, "create"], cwd=user, python=str(python)))
    assert_shouts(rows, user)
    assert {r["lib"] for r in rows} == {str(site / "flink_agents_py" / "__init__.py")}


@pytest.mark.flink
@pytest.mark.cluster
def test_workers_on_another_interpreter_that_has_the_library_pass_the_check(tmp_path,
                                                                           plain_install):
    python, _ = plain_install  # the client runs the project's venv, the workers this one
    user = write_user_project(tmp_path / "user")
    rows = outputs(run_user(["main.py", "process", "plain"], cwd=user,
                            WORKER_PYTHON=str(python)))
    assert_shouts(rows, user)
    assert_counts(rows)
    # the workers run the client's flink_agents_py (the editable one), the code that pickled
    # the plan, through the link directory put first on their path
    assert {os.path.realpath(r["lib"]) for r in rows if r["agent"] == "shout"} == {
        str(ROOT / "flink_agents_py" / "__init__.py")}


def pemja_once_cluster(workdir: pathlib.Path):
    """A standalone cluster whose TaskManager loads pemja once, from its own class path.

    With ``flink run`` the flink-python jar (and pemja in it) comes with each job's class
    loader; a second thread-mode job then loads pemja's native library again and pemja's
    fallback reads ``ClassLoader.loadedLibraryNames``, gone since JDK 15 (NoSuchFieldException).
    ``FlinkCluster`` puts the jar in the TaskManager's ``lib/`` and loads ``pemja``
    parent-first by default, so every job shares the one loaded library.
    """
    from flink_cluster import FlinkCluster

    return FlinkCluster(workdir)


@pytest.mark.flink
@pytest.mark.cluster
def test_flink_run_with_the_user_module_shipped_by_pyfs_twice_on_one_taskmanager(tmp_path):
    user = write_user_project(tmp_path / "user")
    cluster = pemja_once_cluster(tmp_path / "cluster").start()
    runs = []
    try:
        env = cluster.env()
        env.pop("PYTHONPATH", None)  # the client is a user's shell: nothing of the repository
        for _ in range(2):  # two thread-mode jobs in a row on the same TaskManager process
            runs.append(subprocess.run(
                ["bash", str(cluster.home / "bin" / "flink"), "run", "-pym", "main", "-pyfs",
                 str(user), "-pyclientexec", PYTHON, "-pyexec", PYTHON, "thread", "create"],
                cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
                check=False))
        jobs = cluster.rest_retried("/jobs/overview")["jobs"]
    finally:
        cluster.stop()
    for res in runs:
        rows = outputs(res)
        assert_shouts(rows, None)
        # the TaskManager imported the shipped copy of the user's module (python.files)
        assert all("python-files" in r["module"] for r in rows), rows
    assert [j["state"] for j in jobs] == ["FINISHED", "FINISHED"]


@pytest.mark.flink
@pytest.mark.cluster
def test_flink_run_on_a_taskmanager_started_without_pythonpath(tmp_path):
    """The cluster as the docs start it (``start-cluster.sh``: no ``PYTHONPATH``), the job
    submitted with ``flink run -pym main -pyfs DIR -pyexec <the venv's python>``.

    Before: thread mode embeds the venv's *base* CPython in the TaskManager, which saw no
    venv ``site-packages``: every task failed with "No module named 'pemja'", and the job
    with it. Now the job puts this venv's ``site-packages`` on ``python.pythonpath``.
    """
    from flink_cluster import FlinkCluster

    class PlainCluster(FlinkCluster):
        def env(self) -> dict[str, str]:
            env = super().env()
            env.pop("PYTHONPATH")  # the TaskManager's shell, as start-cluster.sh has it
            return env

    user = write_user_project(tmp_path / "user")
    cluster = PlainCluster(tmp_path / "cluster").start()
    try:
        # the client: this checkout's library (what the venv's editable install points at)
        client = {**cluster.env(), "PYTHONPATH": str(ROOT)}
        res = cluster.flink(
            "run", "-pym", "main", "-pyfs", str(user), "-pyclientexec", PYTHON, "-pyexec",
            PYTHON, "thread", "create", cwd=tmp_path, env=client)
        out, _ = res.communicate(timeout=300)
    finally:
        cluster.stop()
    assert res.returncode == 0, out[-4000:]
    assert_shouts([orjson.loads(line[4:]) for line in out.splitlines()
                   if line.startswith("OUT ")], None)
