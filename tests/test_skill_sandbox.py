"""Skill commands contained by the kernel (issue 26, section 1): the bubblewrap sandbox.

Every hostile command the issue lists is a scripted model's ``run_skill_command`` tool call
on the local runner (a ReAct agent), and the assertions are on what the model read back and
on the host: the host's ``/etc/passwd`` never shows, nothing is written in the host's
``/tmp``, a ``127.0.0.1`` listener the test opens gets no connection, and a leftover
``sleep`` is gone from the process table after the timeout. The programs that run programs
(``find -exec``, sed's ``e``, awk's ``system()``, ``git -c alias.x=!...``, ``xargs``) do run
their payload, contained; the same payload with ``sandbox="none"`` does reach the host (the
checks can see an escape). One MiniCluster job runs several of them from a user's own module
in a temporary directory; another user module measures the memory a huge output costs.

These tests need bubblewrap: they skip, naming why, where it cannot run, except under CI.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import tracemalloc
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.sandbox import require_bubblewrap

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.agents import ReActAgent
from flink_agents_py.api import ChatModelSetup, ResourceDescriptor, ResourceType
from flink_agents_py.skills import (
    MAX_FILE_CHARS,
    CommandRefusedError,
    LoadSkillTool,
    RunSkillCommandTool,
    SandboxUnavailableError,
    ShellEquivalentCommandWarning,
    SkillError,
)
from flink_agents_py.testing import ScriptedRequest, model_from_function, tool_call, tool_calls

ROOT = Path(__file__).resolve().parents[1]
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
PYTHON = str(VENV_PYTHON if VENV_PYTHON.exists() else Path(sys.executable))

SKILL_MD = """---
name: tricky
description: A skill whose folder and commands try to get out.
---
Run the commands you are given.
"""

PAYLOAD = """id
cat /etc/passwd
touch {marker}
bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port}' && echo CONNECTED
echo payload-done
"""

FAKE_CAT = "#!/bin/sh\necho PWNED-BY-THE-SKILL-S-OWN-CAT\n"

COMMANDS = ["cat", "sed", "sort", "find", "awk", "git", "xargs", "echo", "seq", "wc", "sleep",
            "yes", "head", "tee", "ls"]


@pytest.fixture()
def listener() -> Iterator[socket.socket]:
    """A TCP listener on the host's 127.0.0.1 (non-blocking: ``accept`` answers at once)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    srv.setblocking(False)
    yield srv
    srv.close()


@pytest.fixture()
def marker() -> Iterator[Path]:
    """A path in the host's /tmp that a contained command must not be able to create."""
    path = Path("/tmp") / f"flink-agents-py-sandbox-{uuid.uuid4().hex}"
    yield path
    path.unlink(missing_ok=True)


@pytest.fixture()
def skills(tmp_path: Path, listener: socket.socket, marker: Path) -> Path:
    """A skill folder with a symlink to /etc, payload scripts and executables named ``cat``."""
    skill = tmp_path / "skills" / "tricky"
    (skill / "bin").mkdir(parents=True)
    (skill / "SKILL.md").write_text(SKILL_MD)
    (skill / "notes.txt").write_text("b\na\n")
    (skill / "sys").symlink_to("/etc")
    (skill / "payload.sh").write_text(PAYLOAD.format(marker=marker,
                                                     port=listener.getsockname()[1]))
    (skill / "limits.sh").write_text("cat /proc/self/limits\n")
    for fake in (skill / "cat", skill / "bin" / "cat"):
        fake.write_text(FAKE_CAT)
        fake.chmod(0o755)
    return tmp_path / "skills"


def tool(skills: Path, **options: object) -> RunSkillCommandTool:
    """The command tool over ``skills``, allowing ``COMMANDS`` (shell-equivalent: warned)."""
    options = {"allowed_commands": COMMANDS, **options}
    with warnings.catch_warnings():  # warned once per allow-list in a process
        warnings.simplefilter("ignore", ShellEquivalentCommandWarning)
        return RunSkillCommandTool(paths=[str(skills)], **options)  # type: ignore[arg-type]


def ask(command_tool: RunSkillCommandTool | LoadSkillTool, **arguments: object) -> object:
    """What the model read back after one tool call with ``arguments`` (on the local runner).

    A result is the tool's value decoded from JSON (a text result is sent as itself); a failed
    call is the ``Error: ...`` text.
    """
    def script(request: ScriptedRequest) -> object:
        done = [m for m in request.messages if m.role == "tool"]
        if not done:
            return tool_calls(tool_call(command_tool.name, "c1", **arguments))
        return json.dumps({"read": done[0].content})

    agent = ReActAgent(chat_model=ResourceDescriptor(ChatModelSetup, connection="conn"),
                       tools=[command_tool])
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, model_from_function(script))
    job = AgentsExecutionEnvironment.local().from_list(["go"]).apply(agent)
    outputs = job.collect()
    assert job.result.errors == []
    read = json.loads(outputs[0])["read"]
    if read.startswith("Error: "):
        return read
    try:
        return json.loads(read)
    except ValueError:  # a text result
        return read


def host_passwd_lines() -> list[str]:
    """Lines of the host's /etc/passwd the sandbox's two-line fake does not have."""
    lines = [ln for ln in Path("/etc/passwd").read_text().splitlines()
             if ln and not ln.endswith(":/tmp:/usr/sbin/nologin")]
    assert lines, "the host's /etc/passwd has lines to look for"
    return lines


def assert_no_host_secrets(text: str) -> None:
    """``text`` shows no line of the host's /etc/passwd."""
    leaked = [ln for ln in host_passwd_lines() if ln in text]
    assert leaked == [], leaked


def assert_contained(result: object, listener: socket.socket, marker: Path) -> None:
    """The payload ran to its end, and read, wrote and connected nothing of the host's."""
    assert isinstance(result, dict), result
    out = result["output"]
    assert "uid=" in out and "payload-done" in out, out  # it ran
    assert_no_host_secrets(out)
    assert not marker.exists(), "the command wrote in the host's /tmp"
    assert "CONNECTED" not in out
    with pytest.raises(BlockingIOError):
        listener.accept()  # nothing connected to the host's listener


def test_a_symlink_to_etc_in_a_skill_folder_reads_the_sandbox_etc_not_the_hosts(skills):
    require_bubblewrap()
    result = ask(tool(skills), skill="tricky", command="cat sys/passwd")
    assert isinstance(result, dict)
    assert result["output"].startswith("root:x:0:0:root:/tmp:/usr/sbin/nologin\n")
    assert_no_host_secrets(result["output"])
    # load_skill refuses the symlink outright
    read = ask(LoadSkillTool(paths=[str(skills)]), name="tricky", file="sys/passwd")
    assert isinstance(read, str) and "has no file 'sys/passwd'" in read


def test_every_kind_of_symlink_out_of_a_skill_folder_stays_inside_the_sandbox(skills,
                                                                              tmp_path):
    """A file symlink, one in a subfolder, and a relative one climbing out: none reach out."""
    require_bubblewrap()
    secret = tmp_path / "host-secret.txt"
    secret.write_text("host-secret-4711\n")
    skill = skills / "tricky"
    (skill / "sub").mkdir()
    (skill / "leak.txt").symlink_to(secret)
    (skill / "sub" / "leak.txt").symlink_to(secret)
    (skill / "up").symlink_to("../../../../../../../..")
    t = tool(skills)
    climbed = "up" + str(secret)
    for command in ("cat leak.txt", "cat sub/leak.txt", f"cat {climbed}",
                    "find -L sub -name leak.txt -exec cat {} +"):
        result = ask(t, skill="tricky", command=command)
        assert isinstance(result, dict), (command, result)
        assert "host-secret-4711" not in result["output"], command
        assert result["exit_code"] != 0, (command, result)  # no such file in the sandbox


def test_an_outside_path_inside_an_argument_reads_and_writes_only_the_sandbox(skills, marker):
    require_bubblewrap()
    t = tool(skills)
    result = ask(t, skill="tricky", command="sed -n '1r /etc/passwd' SKILL.md")
    assert isinstance(result, dict) and "root:x:0:0:root:/tmp" in result["output"]
    assert_no_host_secrets(result["output"])
    result = ask(t, skill="tricky", command=f"sort -o{marker} notes.txt")
    assert result == {"exit_code": 0, "output": ""}  # written in the sandbox's own /tmp
    assert not marker.exists()
    # the skill's files are read-only; new files go to the private scratch, then vanish
    result = ask(t, skill="tricky", command="sort -onotes.txt notes.txt")
    assert isinstance(result, dict) and result["exit_code"] != 0
    assert "Read-only file system" in result["output"]
    assert ask(t, skill="tricky", command="sort -osorted.txt notes.txt") == {
        "exit_code": 0, "output": ""}
    assert (skills / "tricky" / "notes.txt").read_text() == "b\na\n"
    assert not (skills / "tricky" / "sorted.txt").exists()


@pytest.mark.parametrize("sandbox", ["bubblewrap", "none"])
def test_the_hosts_environment_never_reaches_a_command(skills, monkeypatch, sandbox):
    if sandbox == "bubblewrap":
        require_bubblewrap()
    monkeypatch.setenv("MY_PROVIDER_API_KEY", "sk-do-not-leak")
    t = tool(skills, sandbox=sandbox, allowed_commands=[*COMMANDS, "env"])
    result = ask(t, skill="tricky", command="env")
    assert isinstance(result, dict) and result["exit_code"] == 0
    names = sorted(line.split("=", 1)[0] for line in result["output"].splitlines())
    assert names == (["HOME", "LANG", "PATH", "PWD"] if sandbox == "bubblewrap"
                     else ["LANG", "PATH"])
    assert "sk-do-not-leak" not in result["output"]


@pytest.mark.parametrize("sandbox", ["bubblewrap", "none"])
def test_out_of_memory_the_kernel_kills_a_commands_processes_first(skills, sandbox):
    """Where no ``memory`` cgroup bounds a command (a job not run as root, or
    ``sandbox="none"``), its processes together can still take the host's memory; the
    kernel's OOM killer then picks the process with the highest score, which was the
    TaskManager's (the biggest). A command's processes, and those they start, score first."""
    if sandbox == "bubblewrap":
        require_bubblewrap()
    if shutil.which("choom") is None:
        pytest.skip("choom (util-linux 2.33+) is not installed here")
    t = tool(skills, sandbox=sandbox, allowed_commands=["sh"])
    result = ask(t, skill="tricky", command="sh -c 'cat /proc/self/oom_score_adj; "
                                            "sh -c \"cat /proc/self/oom_score_adj\"'")
    assert result == {"exit_code": 0, "output": "1000\n1000\n"}, result
    assert Path("/proc/self/oom_score_adj").read_text().strip() != "1000"  # not this process


@pytest.mark.parametrize("sandbox", ["bubblewrap", "none"])
def test_a_commands_busy_processes_get_only_the_cpu_left_over(skills, sandbox):
    """A command may start ``max_processes`` processes spinning for ``timeout_s``: at the
    priority of the TaskManager's threads they took their share of the CPU from it, most of
    it on a small machine, long enough to miss heartbeats with a long timeout. They run at
    nice 19 (``nice`` with no argument prints it), their children too."""
    if sandbox == "bubblewrap":
        require_bubblewrap()
    t = tool(skills, sandbox=sandbox, allowed_commands=["sh"])
    result = ask(t, skill="tricky", command="sh -c 'nice; sh -c nice'")
    assert result == {"exit_code": 0, "output": "19\n19\n"}, result


def test_find_exec_runs_id_inside_the_sandbox(skills):
    require_bubblewrap()
    result = ask(tool(skills), skill="tricky", command="find . -exec sh -c 'id' {} +")
    assert isinstance(result, dict) and result["exit_code"] == 0
    assert result["output"].startswith("uid=")


ESCAPES = {
    "find -exec": "find . -maxdepth 0 -exec sh payload.sh {} +",
    "sed e": "sed -n '1e sh payload.sh' SKILL.md",
    "awk system()": "awk 'BEGIN { system(\"sh payload.sh\") }'",
    "git alias": "git -c alias.x='!sh payload.sh' x",
    "xargs": "echo payload.sh | xargs sh",
}


@pytest.mark.parametrize("command", list(ESCAPES.values()), ids=list(ESCAPES))
def test_programs_that_run_programs_stay_contained(skills, listener, marker, command):
    require_bubblewrap()
    if command.startswith("git") and shutil.which("git") is None:
        pytest.skip("git is not installed")
    assert_contained(ask(tool(skills), skill="tricky", command=command), listener, marker)


def test_the_same_payload_without_the_sandbox_reaches_the_host(skills, listener, marker):
    """The checks above can fail: with ``sandbox="none"`` the payload gets out."""
    result = ask(tool(skills, sandbox="none"), skill="tricky", command=ESCAPES["find -exec"])
    assert isinstance(result, dict) and "CONNECTED" in result["output"]
    assert marker.exists()
    listener.setblocking(True)
    listener.settimeout(30)
    listener.accept()[0].close()


def _sleeps(seconds: bytes = b"300") -> set[int]:
    """The pids of ``sleep <seconds>`` processes in the host's process table."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if len(argv) >= 2 and argv[0].rsplit(b"/", 1)[-1] == b"sleep" and argv[1] == seconds:
            found.add(int(entry.name))
    return found


@pytest.mark.parametrize("sandbox", ["bubblewrap", "none"])
def test_a_timeout_kills_every_process_the_command_started(skills, sandbox):
    if sandbox == "bubblewrap":
        require_bubblewrap()
    before = _sleeps()
    t = tool(skills, timeout_s=5, sandbox=sandbox)
    answer: list[object] = []
    run = threading.Thread(target=lambda: answer.append(
        ask(t, skill="tricky", command="echo 300 | xargs sleep")))
    run.start()
    seen: set[int] = set()
    while run.is_alive():  # the sleep xargs started shows in the host's process table
        seen |= _sleeps() - before
        run.join(0.05)
    assert seen, "the command's sleep was never seen running"
    assert answer and isinstance(answer[0], str)
    assert "ran past 5.0 s and was stopped" in answer[0]
    limit = time.monotonic() + 30
    while seen & _sleeps() and time.monotonic() < limit:
        time.sleep(0.05)
    assert not seen & _sleeps(), "the sleep outlived the timeout"


def test_when_the_python_process_dies_the_commands_processes_die_too(tmp_path, skills):
    """A TaskManager (here a user's script) killed mid-command leaves no process behind."""
    require_bubblewrap()
    work = tmp_path / "user"
    work.mkdir()
    (work / "runner.py").write_text(textwrap.dedent(f"""
        import warnings
        from flink_agents_py.skills import RunSkillCommandTool
        warnings.simplefilter("ignore")
        tool = RunSkillCommandTool(paths=[{str(skills)!r}], allowed_commands=["echo", "xargs"],
                                   timeout_s=600)
        tool.run("tricky", "echo 300 | xargs sleep")
    """))
    before = _sleeps()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    runner = subprocess.Popen([PYTHON, "runner.py"], cwd=work, env=env)
    try:
        limit = time.monotonic() + 120
        while not _sleeps() - before and runner.poll() is None and time.monotonic() < limit:
            time.sleep(0.05)
        started = _sleeps() - before
        assert started, "the command's sleep was never seen running"
    finally:
        runner.kill()
        runner.wait()
    limit = time.monotonic() + 30
    while started & _sleeps() and time.monotonic() < limit:
        time.sleep(0.05)
    assert not started & _sleeps(), "the sleep outlived the process that started it"


def test_a_pipeline_stage_reads_the_whole_stream(skills):
    require_bubblewrap()
    assert ask(tool(skills), skill="tricky", command="seq 1 100000 | wc -l") == {
        "exit_code": 0, "output": "100000\n"}


def test_a_pipeline_passes_every_word_literally_to_its_stage(skills):
    """The pipeline's ``/bin/sh`` gets quoted words: no globbing, braces or splitting."""
    require_bubblewrap()
    command = """echo '*' 'a  b' "it's" '{a,b}' 'x|y' '#z' | cat"""
    assert ask(tool(skills), skill="tricky", command=command) == {
        "exit_code": 0, "output": "* a  b it's {a,b} x|y #z\n"}


def test_resource_limits_stop_a_command_and_say_which(skills):
    require_bubblewrap()
    t = tool(skills, timeout_s=120, max_cpu_s=1, max_file_mb=1, max_memory_mb=64,
             max_processes=20, allowed_commands=[*COMMANDS, "awk"])
    limits = ask(t, skill="tricky", command="find limits.sh -exec sh {} +")
    assert isinstance(limits, dict)
    rows = {" ".join(line.split()[:-3]): line.split()[-3:-1]
            for line in limits["output"].splitlines()[1:]}
    assert rows["Max cpu time"] == ["1", "2"]
    assert rows["Max file size"] == [str(1 << 20)] * 2
    assert rows["Max processes"] == ["20", "20"]
    assert rows["Max address space"] == [str(64 << 20)] * 2
    busy = ask(t, skill="tricky", command="awk 'BEGIN { while (1) n++ }'")
    assert isinstance(busy, dict) and busy["exit_code"] == 128 + 24  # SIGXCPU, not the timeout
    assert "used up its CPU time limit (CPU 1 s" in busy["stopped"]
    big = ask(t, skill="tricky", command="yes | head -c 3000000 | tee big.txt")
    assert isinstance(big, dict) and big["exit_code"] == 128 + 25  # SIGXFSZ
    assert "reached the file size limit" in big["stopped"]
    hungry = ask(t, skill="tricky", command="awk 'BEGIN { s = \"x\"; while (1) s = s s }'")
    assert isinstance(hungry, dict) and hungry["exit_code"] != 0
    assert "memory" in hungry["output"].lower()  # mawk: "out of memory"; gawk: "cannot allocate"


FORKS_MODULE = """
import json
import warnings

from flink_agents_py.skills import RunSkillCommandTool

warnings.simplefilter("ignore")
tool = RunSkillCommandTool(paths=["skills"], allowed_commands=["find"], max_processes=8,
                           timeout_s=60)
print(json.dumps(tool.run("", "find forks.sh -exec sh {} +")))
"""


def _skill_cgroups() -> set[str]:
    """The ``pids`` cgroups of skill commands left on the host (v1 and v2 layouts)."""
    found: set[str] = set()
    for root in (Path("/sys/fs/cgroup/pids"), Path("/sys/fs/cgroup/memory"),
                 Path("/sys/fs/cgroup")):
        if root.is_dir():
            found |= {str(p) for p in root.rglob("flink-agents-py-skill-*")}
    return found


@pytest.mark.parametrize("user", ["nobody", "root"])
def test_the_process_limit_stops_a_fork_loop_from_a_user_module(user):
    """``max_processes`` holds for a normal user (``RLIMIT_NPROC``) and for root, whom the
    kernel exempts from it: there a ``pids`` cgroup holds the sandbox, and is removed after."""
    require_bubblewrap()
    if user == "root":
        if os.geteuid() != 0:
            pytest.skip("the job is not run as root here")
        from flink_agents_py.skills._cgroup import open_command_cgroup

        probe = open_command_cgroup(8, 64 << 20)
        if probe is None:
            pytest.skip("this host lets root make no pids cgroup (the log says why)")
        probe.close()
    work = Path(tempfile.mkdtemp(prefix="flink-agents-py-forks-"))  # readable by nobody
    before = _skill_cgroups()
    try:
        work.chmod(0o755)
        (work / "skills").mkdir()
        (work / "skills" / "SKILL.md").write_text(SKILL_MD)
        (work / "skills" / "forks.sh").write_text(
            "for i in $(seq 1 30); do sleep 5 & done\necho started-all-30\n")
        (work / "forks_agent.py").write_text(FORKS_MODULE)
        for p in [work / "skills", *work.rglob("*")]:
            p.chmod(0o755 if p.is_dir() else 0o644)
        as_nobody = (["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups"]
                     if os.getuid() == 0 and user == "nobody" else [])
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        proc = subprocess.run([*as_nobody, PYTHON, "forks_agent.py"], cwd=work, env=env,
                              capture_output=True, text=True, timeout=300, check=False)
        assert proc.returncode == 0, proc.stderr[-3000:]
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        assert "started-all-30" not in result["output"]
        assert "Cannot fork" in result["output"] or "unavailable" in result["output"]
        # (a subset: a command's process sweeps the empty cgroups of dead processes)
        left = _skill_cgroups() - before
        assert not left, f"a skill command's cgroup was left behind: {left}"
    finally:
        shutil.rmtree(work)


@pytest.mark.parametrize("sandbox", ["bubblewrap", "none"])
def test_a_relative_path_entry_never_runs_the_skills_own_program(skills, monkeypatch, sandbox):
    if sandbox == "bubblewrap":
        require_bubblewrap()
    monkeypatch.chdir(skills / "tricky")
    monkeypatch.setenv("PATH", os.pathsep.join([".", "bin", os.environ.get("PATH", "")]))
    result = ask(tool(skills, sandbox=sandbox), skill="tricky", command="cat notes.txt")
    assert result == {"exit_code": 0, "output": "b\na\n"}


def test_load_skill_reads_at_most_its_cap_of_a_huge_file(skills):
    big = skills / "tricky" / "big.txt"
    with big.open("wb") as f:
        f.write(b"start of a huge file\n")
        f.truncate(300 << 20)  # 300 MB, sparse
    tracemalloc.start()
    try:
        read = ask(LoadSkillTool(paths=[str(skills)]), name="tricky", file="big.txt")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert isinstance(read, dict) and read["text"].startswith("start of a huge file\n")
    assert len(read["text"]) == MAX_FILE_CHARS
    assert read["cut"] == {"kept_characters": MAX_FILE_CHARS, "file_bytes": 300 << 20}
    assert peak < 30 << 20, f"{peak} bytes allocated at the peak"


def test_a_huge_skill_md_is_read_up_to_the_cap_and_said_cut(tmp_path):
    skill = tmp_path / "huge"
    skill.mkdir()
    with (skill / "SKILL.md").open("wb") as f:
        f.write(SKILL_MD.replace("tricky", "huge").encode())
        f.truncate(300 << 20)
    tracemalloc.start()
    try:
        loaded = ask(LoadSkillTool(paths=[str(skill)]), name="huge")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert isinstance(loaded, dict)
    assert loaded["instructions"].startswith("Run the commands you are given.")
    assert loaded["instructions_cut"] == {"kept_characters": len(loaded["instructions"]),
                                          "file_bytes": 300 << 20}
    assert peak < 30 << 20, f"{peak} bytes allocated at the peak"


def test_without_bubblewrap_a_command_is_refused_saying_what_to_install(skills, monkeypatch,
                                                                        caplog):
    from flink_agents_py.skills import _sandbox

    real_find = _sandbox._find
    monkeypatch.setattr(_sandbox, "_find", lambda name: None if name == "bwrap"
                        else real_find(name))
    _sandbox._bubblewrap_status.cache_clear()
    try:
        configured = tool(skills)
        assert "bubblewrap (bwrap) is not installed" in caplog.text  # said at configuration
        read = ask(configured, skill="tricky", command="cat notes.txt")
        assert isinstance(read, str)
        assert "bubblewrap (bwrap) is not installed" in read
        assert "apt-get install bubblewrap" in read and 'sandbox="none"' in read
        with pytest.raises(SandboxUnavailableError):
            tool(skills).run("tricky", "cat notes.txt")
        # the explicit opt-out trusts the model like a shell user
        trusting = tool(skills, sandbox="none")
        assert trusting.run("tricky", "cat notes.txt") == {"exit_code": 0, "output": "b\na\n"}
    finally:
        _sandbox._bubblewrap_status.cache_clear()


def test_without_prlimit_sandbox_none_still_runs_a_command(skills, monkeypatch, caplog):
    """Where util-linux is absent (macOS), the trusting mode runs without limits, saying so."""
    from flink_agents_py.skills import _sandbox

    real_find = _sandbox._find
    monkeypatch.setattr(_sandbox, "_find", lambda name: None if name == "prlimit"
                        else real_find(name))
    _sandbox._warn_no_limits.cache_clear()
    trusting = tool(skills, sandbox="none")
    assert trusting.run("tricky", "seq 1 100000 | wc -l") == {"exit_code": 0,
                                                              "output": "100000\n"}
    assert "get no CPU, memory, file or process limits" in caplog.text
    with pytest.raises(CommandRefusedError, match=r"prlimit \(util-linux\) is not installed"):
        tool(skills).run("tricky", "cat notes.txt")


def test_where_bubblewrap_cannot_make_namespaces_a_command_is_refused_saying_why(
        skills, monkeypatch):
    """The probe's failure (user namespaces refused, here an option bwrap rejects) is named."""
    require_bubblewrap()
    from flink_agents_py.skills import _sandbox

    real_args = _sandbox._base_args
    monkeypatch.setattr(_sandbox, "_base_args",
                        lambda bwrap: [*real_args(bwrap), "--no-such-bwrap-option"])
    _sandbox._bubblewrap_status.cache_clear()
    try:
        read = ask(tool(skills), skill="tricky", command="cat notes.txt")
        assert isinstance(read, str) and "cannot create its namespaces here" in read
        assert "--no-such-bwrap-option" in read  # bwrap's own words
        assert 'sandbox="none"' in read
    finally:
        _sandbox._bubblewrap_status.cache_clear()


def test_an_allowed_program_that_is_not_installed_is_named_at_configuration_and_refused(
        skills, caplog):
    t = RunSkillCommandTool(paths=[str(skills)], allowed_commands=["cat", "no-such-program"])
    assert "allowed_commands: 'no-such-program' is not installed (looked in" in caplog.text
    read = ask(t, skill="tricky", command="no-such-program --help")
    assert isinstance(read, str) and "'no-such-program' is not installed" in read


def test_an_allow_list_naming_a_program_that_runs_programs_warns_at_configuration(
        skills, caplog, monkeypatch):
    """Once per allow-list, at the user's line (here: this file), and not logged again."""
    from flink_agents_py.skills import _commands

    monkeypatch.setattr(_commands, "_warned", set())
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for _ in range(2):
            RunSkillCommandTool(paths=[str(skills)],
                                allowed_commands=["cat", "find", "python3.12"])
        ResourceDescriptor(clazz="flink_agents_py.skills.RunSkillCommandTool",
                           paths=[str(skills)], allowed_commands=["find"]).build()
    shown = [w for w in seen if issubclass(w.category, ShellEquivalentCommandWarning)]
    assert [str(w.message).split(" can run")[0] for w in shown] == [
        "run_skill_command: allowed_commands ['find', 'python3.12']",
        "run_skill_command: allowed_commands ['find']"]
    assert {w.filename for w in shown} == {__file__}
    assert "can run other programs" not in caplog.text  # the warning only, not a log line too

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        RunSkillCommandTool(paths=[str(skills)], allowed_commands=["cat", "echo", "bc", "wc"])


def _seq_bytes(n: int) -> int:
    """The bytes ``seq 1 n`` writes."""
    total, digits, low = 0, 1, 1
    while low <= n:
        high = min(n, 10 ** digits - 1)
        total += (high - low + 1) * (digits + 1)
        digits, low = digits + 1, 10 ** digits
    return total


HUGE_OUTPUT_MODULE = '''
import json
import resource

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.agents import ReActAgent
from flink_agents_py.api import ChatModelSetup, ResourceDescriptor, ResourceType
from flink_agents_py.skills import skill_tools
from flink_agents_py.testing import model_from_function, tool_call, tool_calls


def script(request):
    done = [m for m in request.messages if m.role == "tool"]
    if not done:
        return tool_calls(tool_call("run_skill_command", "c1", command="seq 1 30000000"))
    return done[0].content


agent = ReActAgent(chat_model=ResourceDescriptor(ChatModelSetup, connection="conn"),
                   tools=skill_tools(["skills"], allowed_commands=["seq"], timeout_s=120))
agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, model_from_function(script))
job = AgentsExecutionEnvironment.local().from_list(["go"]).apply(agent)
job.collect()  # warm up: imports, the runner, the sandbox probe
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
job = AgentsExecutionEnvironment.local().from_list(["go"]).apply(agent)
outputs = job.collect()
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"result": json.loads(outputs[0]), "grew_kib": after - before}))
'''


def test_a_huge_output_is_streamed_and_cut_from_a_user_module(tmp_path, skills):
    """``seq 1 30000000`` (259 MB) from a user's script: the memory held stays near the cap."""
    require_bubblewrap()
    work = tmp_path / "user"
    work.mkdir()
    assert ROOT not in work.resolve().parents
    (work / "skills").mkdir()
    (work / "skills" / "SKILL.md").write_text(SKILL_MD)
    (work / "my_agent.py").write_text(HUGE_OUTPUT_MODULE)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # this tree's package, as installed
    proc = subprocess.run([PYTHON, "my_agent.py"], cwd=work, env=env, capture_output=True,
                          text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    out = got["result"]["output"]
    assert got["result"]["exit_code"] == 0
    assert out.startswith("1\n2\n3\n")
    assert len(out) == 8000
    assert got["result"]["output_cut"] == {"kept_characters": 8000,
                                           "bytes_written": _seq_bytes(30_000_000)}
    assert got["grew_kib"] < 64 * 1024, f"the run grew by {got['grew_kib']} KiB"


FLINK_MODULE = '''
import json
from pathlib import Path

from flink_agents_py.agents import ReActAgent
from flink_agents_py.api import ChatModelSetup, ResourceDescriptor, ResourceType
from flink_agents_py.skills import skill_tools
from flink_agents_py.testing import ScriptedChatModel, tool_call, tool_calls

HERE = Path(__file__).resolve().parent
COMMANDS = {COMMANDS!r}


def script(request):
    command = next(m.content for m in request.messages if m.role == "user")
    done = [m for m in request.messages if m.role == "tool"]
    if not done:
        return tool_calls(tool_call("run_skill_command", "c1", command=command))
    return json.dumps({{"command": command, "read": done[0].content}})


def record_of(n):
    return {{"key": f"k{{n}}", "input": COMMANDS[n]}}


def build():
    agent = ReActAgent(chat_model=ResourceDescriptor(ChatModelSetup, connection="conn"),
                       tools=skill_tools([str(HERE / "skills")], timeout_s=5,
                                         allowed_commands=["cat", "find", "seq", "wc", "echo",
                                                           "xargs", "sleep"]))
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ResourceDescriptor(
        ScriptedChatModel, function=f"{{__name__}}:script"))
    return agent
'''

FLINK_MAIN = '''
from pyflink.common import Types, WatermarkStrategy
from pyflink.datastream.connectors.number_seq import NumberSequenceSource

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.flink import create_stream_environment
from my_skills import COMMANDS, build, record_of

env = create_stream_environment()
agents = AgentsExecutionEnvironment.flink(env)
ds = env.from_source(NumberSequenceSource(0, len(COMMANDS) - 1),
                     WatermarkStrategy.no_watermarks(), "commands").map(
    record_of, output_type=Types.PICKLED_BYTE_ARRAY())
out = agents.from_datastream(ds).apply(build(), name="skilled").to_datastream()
with out.execute_and_collect("skill-sandbox") as results:
    for row in results:
        print("OUT " + row)
'''


@pytest.mark.flink
def test_hostile_commands_stay_contained_on_a_minicluster(tmp_path, skills, listener, marker):
    """One MiniCluster job, a user's module from a temporary folder, four hostile commands."""
    require_bubblewrap()
    pytest.importorskip("pyflink")
    commands = ["cat sys/passwd", ESCAPES["find -exec"], "seq 1 100000 | wc -l",
                "echo 300 | xargs sleep"]
    work = tmp_path / "user"
    work.mkdir()
    assert ROOT not in work.resolve().parents
    (work / "skills").symlink_to(skills / "tricky")
    (work / "my_skills.py").write_text(FLINK_MODULE.format(COMMANDS=commands))
    (work / "main.py").write_text(textwrap.dedent(FLINK_MAIN))
    before = _sleeps()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "FLINK_CONF_DIR")}
    proc = subprocess.run([PYTHON, "main.py"], cwd=work, env=env, capture_output=True,
                          text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    rows = [json.loads(line[4:]) for line in proc.stdout.splitlines() if line.startswith("OUT ")]
    read = {row["command"]: row["read"] for row in rows}
    assert sorted(read) == sorted(commands)
    passwd = json.loads(read["cat sys/passwd"])["output"]
    assert passwd.startswith("root:x:0:0:root:/tmp:")
    assert_no_host_secrets(passwd)
    assert_contained(json.loads(read[ESCAPES["find -exec"]]), listener, marker)
    assert json.loads(read["seq 1 100000 | wc -l"]) == {"exit_code": 0, "output": "100000\n"}
    assert read["echo 300 | xargs sleep"].startswith("Error: ")
    assert "ran past 5.0 s and was stopped" in read["echo 300 | xargs sleep"]
    assert not _sleeps() - before, "a sleep outlived the job's timeout"


def test_a_writable_skill_keeps_what_its_commands_write_and_others_do_not(skills, tmp_path):
    require_bubblewrap()
    other = skills / "other"
    other.mkdir()
    (other / "SKILL.md").write_text("---\nname: other\ndescription: x\n---\nx\n")
    t = tool(skills, writable_skills=["tricky"])
    assert ask(t, skill="tricky", command="sort -osorted.txt notes.txt") == {
        "exit_code": 0, "output": ""}
    assert (skills / "tricky" / "sorted.txt").read_text() == "a\nb\n"
    assert ask(t, skill="other", command="sort -ocopy.txt SKILL.md")["exit_code"] == 0
    assert not (other / "copy.txt").exists()
    with pytest.raises(SkillError, match=r"writable_skills: no skill named \['nope'\]"):
        RunSkillCommandTool(paths=[str(skills)], allowed_commands=["cat"],
                            writable_skills=["nope"])


def test_only_the_scratch_tmp_and_a_capped_dev_shm_take_writes_never_ram_without_bound(
        skills):
    """bubblewrap's own ``/`` and ``/dev`` are tmpfs without a size: a command filling
    ``/``, ``/etc`` or ``/dev`` would fill the host's RAM. They are read-only; ``/dev/shm``,
    ``/tmp`` and the scratch are capped at ``max_scratch_mb``."""
    require_bubblewrap()
    (skills / "tricky" / "fill.sh").write_text(
        "for d in / /etc /dev /dev/shm /tmp /skill; do\n"
        "  dd if=/dev/zero of=$d/fill bs=1M count=40 2>/dev/null && echo wrote $d\n"
        "  dd if=/dev/zero of=$d/more bs=1M count=40 2>/dev/null && echo wrote more $d\n"
        "done\necho fill-done\n")
    tools = tool(skills, allowed_commands=["sh", "dd"], max_scratch_mb=64, max_file_mb=100)
    result = ask(tools, skill="tricky", command="sh fill.sh")
    assert isinstance(result, dict), result
    out = result["output"].splitlines()
    assert out[-1] == "fill-done"  # it ran to its end
    # 40 MiB fits in each capped tmpfs, 80 does not; nothing else is writable
    assert out[:-1] == ["wrote /dev/shm", "wrote /tmp", "wrote /skill"], out


def test_a_command_cannot_set_the_hosts_sysctls_even_when_the_job_runs_as_root(skills):
    """bubblewrap leaves ``/proc/sys`` writable; uid 0 in the sandbox's user namespace is
    the host's root when the job runs as root (containers often do), and sysctls check the
    uid only. The command writes back the value it read (no change if it got through)."""
    require_bubblewrap()
    sysctl = "/proc/sys/kernel/printk_ratelimit"
    (skills / "tricky" / "sysctl.sh").write_text(
        f"v=$(cat {sysctl})\necho read $v\n"
        f"if echo $v > {sysctl}; then echo WROTE; else echo refused; fi\n")
    result = ask(tool(skills, allowed_commands=["sh"]), skill="tricky",
                 command="sh sysctl.sh")
    assert isinstance(result, dict), result
    out = result["output"]
    assert out.startswith("read ") and "refused" in out and "WROTE" not in out, out
    assert "Read-only file system" in out or "Permission denied" in out, out


@pytest.mark.parametrize("command", [
    "sh -c 'cp /usr/bin/id idcopy; chmod 6755 idcopy; stat -c %a idcopy'",
    "sh -c 'install -m 4755 /usr/bin/id idcopy; stat -c %a idcopy'",
    "python3 -c 'import os; os.close(os.open(\"idcopy\", os.O_CREAT | os.O_WRONLY, 0o4755)); "
    "print(oct(os.stat(\"idcopy\").st_mode & 0o7777))'",
])
def test_a_writable_skill_cannot_make_a_setuid_file_even_while_its_command_runs(skills,
                                                                                command):
    """The folder is the host's own: a setuid file made there (a program copied and
    ``chmod u+s``, ``install -m 4755``, a file created with the bit) runs on the host with
    the job user's rights (root's, for a job run as root) for as long as it exists, not only
    after the command: the kernel refuses the bit (the command reads back its own file's
    mode while it runs)."""
    require_bubblewrap()
    t = tool(skills, allowed_commands=["sh", "python3"], writable_skills=["tricky"])
    made = ask(t, skill="tricky", command=command)
    assert isinstance(made, dict), made
    out = made["output"]
    assert "Operation not permitted" in out, out  # said to the command, which goes on
    modes = [int(line, 8) for line in out.split() if re.fullmatch(r"(0o)?[0-7]{3,4}", line)]
    assert all(mode & 0o6000 == 0 for mode in modes), out  # never set, even meanwhile
    copied = skills / "tricky" / "idcopy"
    assert not copied.exists() or copied.stat().st_mode & (stat.S_ISUID | stat.S_ISGID) == 0


@pytest.mark.parametrize(("command", "why"), [
    ("sh -c id", "'sh' is not an allowed command"),
    ("cat ../../secret.txt", "leaves the skill's folder"),
    ("echo x > out", "no redirections"),
    ("sleep 30", "ran past 0.5 s and was stopped"),
])
def test_a_refused_or_stopped_command_names_the_skill_the_command_and_why(skills, command,
                                                                          why):
    """What the model (and a reader of the job's records) sees says which skill's command
    was refused and why, so that one among many keys' calls can be told apart."""
    require_bubblewrap()
    read = ask(tool(skills, timeout_s=0.5), skill="tricky", command=command)
    assert isinstance(read, str) and read.startswith("Error: "), read
    assert "skill 'tricky'" in read and f"command {command!r}" in read and why in read, read


def test_no_process_of_the_sandbox_shows_the_jobs_environment_or_working_directory(
        skills, monkeypatch, tmp_path):
    """Every process's environment in the sandbox (``/proc/*/environ``: the command's, and
    bubblewrap's own as pid 1) holds nothing of the job's: no variable, no working folder."""
    require_bubblewrap()
    job_dir = tmp_path / "job-working-dir-8d1c"
    job_dir.mkdir()
    monkeypatch.chdir(job_dir)
    monkeypatch.setenv("FLINK_AGENTS_SECRET_TOKEN", "sk-do-not-leak-5551")
    (skills / "tricky" / "environ.sh").write_text(
        "for f in /proc/[0-9]*/environ; do echo \"== $f\"; tr '\\000' '\\n' < $f; done\n")
    result = ask(tool(skills, allowed_commands=["sh"]), skill="tricky", command="sh environ.sh")
    assert isinstance(result, dict), result
    out = result["output"]
    assert "== /proc/1/environ" in out, out  # it read them
    assert "sk-do-not-leak-5551" not in out and "job-working-dir-8d1c" not in out, out


MEMORY_HOG = """import os, sys, time
kids = []
for i in range(6):
    pid = os.fork()
    if pid == 0:
        block = b"x" * (300 << 20)  # touched: resident
        print("allocated", i, flush=True)
        time.sleep(2)
        os._exit(0)
    kids.append(pid)
killed = sum(os.WEXITSTATUS(s) != 0 or os.WIFSIGNALED(s) for s in
             (os.waitpid(k, 0)[1] for k in kids))
print("killed", killed, flush=True)
"""


def test_a_commands_processes_together_are_held_to_its_total_memory_when_run_as_root(skills):
    """``max_memory_mb`` bounds one process: six processes of 300 MiB each (1.8 GiB) would
    all live. The whole command is held to ``max_total_memory_mb`` (a ``memory`` cgroup, for
    a root job: a normal user's job cannot make one); the job and the next command go on."""
    require_bubblewrap()
    if os.geteuid() != 0:
        pytest.skip("the job is not run as root here")
    from flink_agents_py.skills._cgroup import open_command_cgroup

    probe = open_command_cgroup(8, 64 << 20)
    if probe is None or not any("memory" in str(p) or (p / "memory.max").exists()
                                for p in probe.paths):
        pytest.skip("this host lets root make no memory cgroup (the log says why)")
    probe.close()
    (skills / "tricky" / "hog.py").write_text(MEMORY_HOG)
    mine = f"{os.sep}flink-agents-py-skill-{os.getpid()}-"  # not another run's, meanwhile
    t = tool(skills, allowed_commands=["python3", "echo"], max_total_memory_mb=512,
             max_memory_mb=1024, timeout_s=30)
    result = ask(t, skill="tricky", command="python3 hog.py")
    assert isinstance(result, dict), result
    out = result["output"]
    allocated = out.count("allocated")
    assert allocated < 6 or "killed 0" not in out, out
    assert ask(t, skill="tricky", command="echo still-here")["output"] == "still-here\n"
    assert not [c for c in _skill_cgroups() if mine in c], "a command's cgroup was left"


def test_a_skill_folder_swapped_by_a_writable_skills_command_is_refused_not_followed(
        tmp_path):
    """Skill ``inner`` lives inside writable skill ``outer``'s folder: ``outer``'s command
    can swap ``inner``'s folder for a symlink to a host folder. Reading ``inner``, running a
    command on it, and clearing setuid bits after a writable command all go through the
    folder checked to be the one loaded: the swapped one is refused, naming the skill."""
    require_bubblewrap()
    outside = tmp_path / "host-folder"
    outside.mkdir()
    (outside / "secret.txt").write_text("host-secret-7731\n")
    outer = tmp_path / "outer"
    (outer / "inner").mkdir(parents=True)
    (outer / "SKILL.md").write_text("---\nname: outer\ndescription: o\n---\nx\n")
    (outer / "inner" / "SKILL.md").write_text("---\nname: inner\ndescription: i\n---\nx\n")
    paths = [str(outer), str(outer / "inner")]
    run = RunSkillCommandTool(paths=paths, allowed_commands=["cat", "mv", "ln"],
                              writable_skills=["outer", "inner"])
    load = LoadSkillTool(paths=paths)
    assert run.run("outer", "mv inner inner-real")["exit_code"] == 0
    (outer / "inner").symlink_to(outside)  # as a command allowed 'sh' could: ln -s /... inner
    with pytest.raises(SkillError, match=r"skill 'inner'.*no longer the folder loaded"):
        load.skill("inner").read("secret.txt")
    with pytest.raises(CommandRefusedError, match=r"skill 'inner'.*no longer the folder"):
        run.run("inner", "cat secret.txt")
    assert (outside / "secret.txt").read_text() == "host-secret-7731\n"


KEYS_MODULE = """
import json
import warnings

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.agents import ReActAgent
from flink_agents_py.api import ChatModelSetup, ResourceDescriptor, ResourceType
from flink_agents_py.skills import RunSkillCommandTool
from flink_agents_py.testing import model_from_function, tool_call, tool_calls

warnings.simplefilter("ignore")
COMMANDS = {
    "setuid": "sh -c 'cp /usr/bin/id idcopy; chmod 4755 idcopy; stat -c %a idcopy'",
    "plain": "echo plain-key-fine",
    "refused": "bash -c id",
    "stuck": "sh -c 'sleep 311 & sleep 311'",
}


def script(request):
    done = [m for m in request.messages if m.role == "tool"]
    if not done:
        which = next(k for k in COMMANDS if k in request.last_user_text)
        return tool_calls(tool_call("run_skill_command", "c1", skill="box",
                                    command=COMMANDS[which]))
    return json.dumps({"read": done[0].content})


tool = RunSkillCommandTool(paths=["skills"], allowed_commands=["sh", "echo"],
                           writable_skills=["box"], timeout_s=3)
agent = ReActAgent(chat_model=ResourceDescriptor(ChatModelSetup, connection="conn"),
                   tools=[tool])
agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, model_from_function(script))
job = AgentsExecutionEnvironment.local().from_list(
    [{"key": k, "input": k} for k in COMMANDS]).apply(agent)
outs = job.collect()
print(json.dumps({"errors": [str(e) for e in job.result.errors],
                  "read": sorted(json.loads(o)["read"] for o in outs)}))
"""


def test_hostile_commands_of_some_keys_leave_the_others_and_the_job_running_user_module():
    """A user's module, in a folder outside the repository, runs one job whose keys each
    send one command: a setuid attempt (refused by the kernel), a refused program (a failed
    call naming the skill and the command), a command that leaves a process and outlives
    its timeout (stopped, nothing left), and a plain one, which answers as if alone."""
    require_bubblewrap()
    work = Path(tempfile.mkdtemp(prefix="flink-agents-py-keys-"))
    try:
        (work / "skills" / "box").mkdir(parents=True)
        (work / "skills" / "box" / "SKILL.md").write_text(
            "---\nname: box\ndescription: a writable box\n---\nx\n")
        (work / "keys_agent.py").write_text(KEYS_MODULE)
        before = _sleeps(b"311")  # a duration of its own: other runs' sleeps are not counted
        env = {**os.environ, "PYTHONPATH": str(ROOT)}  # this checkout's code, not another's
        proc = subprocess.run([PYTHON, "keys_agent.py"], cwd=work, env=env,
                              capture_output=True, text=True, timeout=300, check=False)
        assert proc.returncode == 0, proc.stderr[-3000:]
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        assert result["errors"] == []
        setuid, plain, refused, stuck = (
            next(r for r in result["read"] if marker in r) for marker in
            ("idcopy", "plain-key-fine", "'bash -c id'", "sleep 311 &"))
        assert "Operation not permitted" in setuid and "4755" not in setuid, setuid
        assert json.loads(plain) == {"exit_code": 0, "output": "plain-key-fine\n"}
        assert refused.startswith("Error: ") and "skill 'box'" in refused, refused
        assert "'bash' is not an allowed command" in refused, refused
        assert stuck.startswith("Error: ") and "ran past 3.0 s" in stuck, stuck
        assert not _sleeps(b"311") - before, "a sleep outlived the command's timeout"
        copied = work / "skills" / "box" / "idcopy"
        assert copied.stat().st_mode & (stat.S_ISUID | stat.S_ISGID) == 0
    finally:
        shutil.rmtree(work)


def test_no_file_descriptor_of_a_host_file_reaches_the_command(skills, tmp_path):
    """The skill's entries are opened to be bound by their fd; one that is not bound (a
    FIFO, a socket: never shown) must not stay open in the command, where its
    ``/proc/self/fd`` link would reach the host's file (a device node even past ``nodev``)."""
    require_bubblewrap()
    os.mkfifo(skills / "tricky" / "host-fifo")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(skills / "tricky" / "host-socket"))
    try:
        for writable in ([], ["tricky"]):
            result = ask(tool(skills, allowed_commands=["sh"], writable_skills=writable),
                         skill="tricky", command="sh -c 'ls -l /proc/self/fd/'")
            assert isinstance(result, dict), result
            links = [line.split(" -> ")[-1] for line in result["output"].splitlines()
                     if " -> " in line]
            assert links and all(link.startswith(("/dev/null", "pipe:", "/proc/"))
                                 for link in links), result["output"]
    finally:
        sock.close()


def test_proc_files_root_could_write_are_bound_read_only_where_the_host_has_them(
        monkeypatch):
    """``/proc/sysrq-trigger`` checks only the file's owner (root): a job run as root is uid
    0 in the sandbox's user namespace, and bubblewrap did not cover ``/proc/sys`` here, so
    it is not trusted to cover this one either (one write of ``b`` reboots the host). This
    kernel may not have the file: the test gives the sandbox a host that has it."""
    from flink_agents_py.skills import _sandbox

    real = os.path.lexists
    monkeypatch.setattr(_sandbox.os.path, "lexists",
                        lambda p: p == "/proc/sysrq-trigger" or real(p))
    args = _sandbox._system_binds()
    pairs = list(zip(args, args[1:], args[2:], strict=False))
    for path in ("/proc/sys", "/proc/sysrq-trigger"):
        assert ("--ro-bind", path, path) in pairs, args
        assert args.index(path) > args.index("--proc"), args  # over the sandbox's /proc


def test_a_command_cannot_make_user_namespaces_of_its_own(skills):
    """A nested user namespace gives a command every capability inside it: mounts, netfilter
    and the other kernel code behind them, where local privilege escalations are found.
    The sandbox allows none (the seccomp filter refuses ``CLONE_NEWUSER``; without it,
    bubblewrap's ``--disable-userns``, 0.8+)."""
    require_bubblewrap()
    from flink_agents_py.skills import _sandbox

    if not _sandbox._bubblewrap_status()[1].disable_userns:
        pytest.skip("this bubblewrap is older than 0.8 (no --disable-userns)")
    result = ask(tool(skills, allowed_commands=["unshare"]), skill="tricky",
                 command="unshare --user --net id")
    assert isinstance(result, dict), result
    assert result["exit_code"] != 0 and "uid=" not in result["output"], result
