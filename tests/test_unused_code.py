"""The unused-code gate of ``make lint`` (scripts/unused_code.py): clean here, and it finds
dead code that a bare vulture run misses (a helper listed in a private ``__all__``, a
leftover re-export, an unused private module-level name) without reporting what tests use
or what the public API exports."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("vulture")

ROOT = Path(__file__).resolve().parents[1]
GATE = ROOT / "scripts" / "unused_code.py"


def run_gate(cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(GATE)], cwd=cwd, capture_output=True, text=True,
                          timeout=300, check=False)


def test_the_repository_has_no_unused_code():
    res = run_gate(ROOT)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout == ""


def write(folder: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(textwrap.dedent(text))


PROJECT = {
    "pyproject.toml": """
        [tool.vulture]
        paths = ["pkg"]
        ignore_decorators = ["@hook"]
    """,
    "pkg/__init__.py": """
        from ._impl import PublicThing, public_function

        __all__ = ["PublicThing", "public_function"]
    """,
    "pkg/_helpers.py": """
        __all__ = ["shared"]


        def shared():
            return 1
    """,
    "pkg/_impl.py": """
        from ._helpers import shared

        __all__ = ["PublicThing", "public_function", "dead_helper", "tested_helper", "shared",
                   "hooked"]


        class PublicThing:
            pass


        def public_function():
            _ignored, used = 1, shared()  # a function's private local: vulture's convention
            return used


        _leftover_alias = public_function


        def dead_helper():
            return 2


        def tested_helper():
            return 3


        def hook(fn):
            return fn


        @hook
        def hooked():
            return 4
    """,
    "tests/test_pkg.py": """
        from pkg._impl import tested_helper


        def test_it():  # the type: comment below is prose, not a type comment
            assert tested_helper() == 3  # type: a number
    """,
}


def test_dead_code_behind_a_private_all_and_a_leftover_reexport_are_reported(tmp_path):
    write(tmp_path, PROJECT)
    res = run_gate(tmp_path)
    assert res.returncode == 3, res.stdout + res.stderr
    lines = res.stdout.splitlines()
    assert any(line.startswith("pkg/_impl.py:") and "unused function 'dead_helper'" in line
               for line in lines), lines
    assert any(line.startswith("pkg/_impl.py:") and "re-export 'shared'" in line
               and "never imported from pkg._impl" in line for line in lines), lines
    assert any(line.startswith("pkg/_impl.py:") and "unused variable '_leftover_alias'" in line
               for line in lines), lines
    # used by the tests, exported by the package, called by a hook, a function's private
    # local: not reported; nothing in tests/ is reported either
    assert len(lines) == 3, lines
    assert res.stderr == ""


def test_a_project_without_dead_code_passes(tmp_path):
    project = dict(PROJECT)
    project["pkg/_impl.py"] = (project["pkg/_impl.py"]
                               .replace('"dead_helper", ', "").replace('"shared",\n', "\n")
                               .replace("def dead_helper():\n            return 2\n", "")
                               .replace("_leftover_alias = public_function\n", ""))
    write(tmp_path, project)
    res = run_gate(tmp_path)
    assert (res.returncode, res.stdout) == (0, ""), res.stdout + res.stderr
