"""No socket or FIFO of a skill's folder reaches the host process at its other end.

A Unix socket is reached by its path, whatever the network namespace. The top entries of a
read-only skill's folder that are not files, folders or symlinks were never bound, but a
subfolder was bound whole: ``sub/agent.sock`` (a host service's socket, hard-linked into
the folder, or one a host process binds there) let a command ``connect`` to the host
listener from the sandbox, and the same at any depth of a writable skill's folder or of a
folder bound whole. Each socket, FIFO and device node of the tree is now covered by
``/dev/null`` in the sandbox (``_special``).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import warnings
from pathlib import Path

import pytest
from support.sandbox import require_bubblewrap

from flink_agents_py.skills import RunSkillCommandTool, ShellEquivalentCommandWarning, _special

ROOT = Path(__file__).resolve().parents[1]
SKILL_MD = "---\nname: box\ndescription: a box\n---\nx\n"
CONNECT = """\
import socket, sys
for path in sys.argv[1:]:
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(path)
        print(path, "CONNECTED", s.recv(100))
    except OSError as e:
        print(path, "refused", e.errno)
"""
USER_MODULE = """
import json, sys, warnings
from flink_agents_py.skills import RunSkillCommandTool
warnings.simplefilter("ignore")  # python3 warns as a shell equivalent
out = {}
for writable in ([], ["box"]):
    tool = RunSkillCommandTool(paths=["skills"], allowed_commands=["python3", "cat"],
                               writable_skills=writable, timeout_s=20)
    out["connect" + "-writable" * bool(writable)] = tool.run(
        "box", "python3 connect.py sub/host.sock sub/deeper/host.sock")
    out["fifo" + "-writable" * bool(writable)] = tool.run("box", "cat sub/host.fifo")
print(json.dumps(out))
"""


def _python3() -> None:
    if not Path("/usr/bin/python3").exists():
        pytest.skip("no /usr/bin/python3 to connect with in the sandbox")


class _Listener:
    """Host listeners on Unix sockets, counting the connections they accept."""

    def __init__(self, paths: list[Path]) -> None:
        self.accepted: list[str] = []
        self.socks = []
        for path in paths:
            sock = socket.socket(socket.AF_UNIX)
            sock.bind(str(path))
            sock.listen(8)
            sock.settimeout(0.2)
            self.socks.append(sock)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            for sock in self.socks:
                try:
                    conn, _ = sock.accept()
                except OSError:
                    continue
                self.accepted.append(sock.getsockname())
                conn.sendall(b"HOST-SERVICE")
                conn.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        for sock in self.socks:
            sock.close()


def _skill(folder: Path) -> Path:
    skill = folder / "skills" / "box"
    (skill / "sub" / "deeper").mkdir(parents=True)
    (skill / "SKILL.md").write_text(SKILL_MD)
    (skill / "connect.py").write_text(CONNECT)
    return skill


def test_a_socket_below_a_skills_folder_does_not_reach_its_host_listener_user_module():
    """A user's module, in a folder outside the repository, runs a read-only and a writable
    skill whose subfolders hold sockets a host process listens on, and a FIFO: the command's
    ``connect`` is refused and the host accepts nothing; the FIFO cannot be opened (no host
    writer reached, nothing blocks)."""
    require_bubblewrap()
    _python3()
    work = Path(tempfile.mkdtemp(prefix="flink-agents-py-sockets-"))
    listener = None
    try:
        skill = _skill(work)
        os.mkfifo(skill / "sub" / "host.fifo")
        listener = _Listener([skill / "sub" / "host.sock", skill / "sub" / "deeper" / "host.sock"])
        (work / "run_box.py").write_text(USER_MODULE)
        proc = subprocess.run(
            [sys.executable, "run_box.py"],
            cwd=work,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        results = json.loads(proc.stdout.strip().splitlines()[-1])
        for name in ("connect", "connect-writable"):
            out = results[name]["output"]
            assert "CONNECTED" not in out and out.count("refused") == 2, (name, results[name])
        for name in ("fifo", "fifo-writable"):
            result = results[name]  # the cover, a device on a nodev mount, opens for no one
            assert result["exit_code"] == 1 and "Permission denied" in result["output"], result
        assert listener.accepted == []
    finally:
        if listener is not None:
            listener.close()
        shutil.rmtree(work)


def _tool(skills: Path, **options) -> RunSkillCommandTool:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ShellEquivalentCommandWarning)
        return RunSkillCommandTool(paths=[str(skills)], allowed_commands=["python3"], **options)


def test_a_socket_at_the_top_of_a_folder_bound_whole_is_covered_too(tmp_path):
    """A folder of more than ``MAX_BOUND_ENTRIES`` entries is bound whole: its top entries
    are shown as they are, a socket among them covered."""
    require_bubblewrap()
    _python3()
    from flink_agents_py.skills._sandbox import MAX_BOUND_ENTRIES

    skill = _skill(tmp_path)
    for i in range(MAX_BOUND_ENTRIES + 1):
        (skill / f"f{i}").write_text("x")
    listener = _Listener([skill / "top.sock"])
    try:
        result = _tool(tmp_path / "skills").run("box", "python3 connect.py top.sock")
    finally:
        listener.close()
    assert "refused" in result["output"] and "CONNECTED" not in result["output"], result
    assert listener.accepted == []


def test_a_commands_own_sockets_still_work(tmp_path):
    """Sockets a command makes (in ``/tmp``, in a writable skill's folder) are its own."""
    require_bubblewrap()
    _python3()
    skill = _skill(tmp_path)
    (skill / "pair.py").write_text(
        "import socket, sys\n"
        "for path in sys.argv[1:]:\n"
        "    srv = socket.socket(socket.AF_UNIX); srv.bind(path); srv.listen(1)\n"
        "    cli = socket.socket(socket.AF_UNIX); cli.connect(path)\n"
        "    conn, _ = srv.accept(); cli.sendall(b'own'); print(conn.recv(3).decode())\n"
    )
    for writable in ([], ["box"]):
        tool = _tool(tmp_path / "skills", writable_skills=writable)
        result = tool.run("box", f"python3 pair.py made{len(writable)}.sock")
        assert result == {"exit_code": 0, "output": "own\n"}, result


def test_a_folder_too_big_to_check_is_refused_naming_the_bound(tmp_path, monkeypatch):
    require_bubblewrap()
    skill = _skill(tmp_path)
    for i in range(12):
        (skill / "sub" / f"f{i}").write_text("x")
    monkeypatch.setattr(_special, "MAX_CHECKED_ENTRIES", 10)
    tool = RunSkillCommandTool(paths=[str(tmp_path / "skills")], allowed_commands=["cat"])
    with pytest.raises(Exception, match="holds more than 10 entries") as raised:
        tool.run("box", "cat SKILL.md")
    assert "skill 'box'" in str(raised.value) and "cat SKILL.md" in str(raised.value)
