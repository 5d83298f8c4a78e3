"""The unused-code gate of ``make lint``: vulture, plus a check of private re-exports.

    .venv/bin/python scripts/unused_code.py

Runs vulture (pinned in the ``test`` extra) with its ``[tool.vulture]`` settings from
pyproject.toml: the paths it reports on (the library, the main job and the allow-list
``scripts/vulture_allowlist.py``, which names public API and framework hooks nothing here
calls), the names and decorators it ignores. Four rules go beyond a bare ``vulture`` run:

- A private module's ``__all__`` is not a use. vulture counts every name of every ``__all__``
  as used, which hid helpers listed in ``runtime/_context.py`` and imported nowhere; a
  package ``__init__``'s ``__all__`` (the public API) still counts.
- A name a private module imports and lists in its ``__all__`` (a re-export) must be imported
  from that module somewhere; otherwise it is reported as a leftover re-export.
- A private name bound at module or class level (``_TABLE = ...``, an alias ``_f = f``) is
  checked like any other; vulture skips every ``_name`` variable, which suits only function
  locals and arguments.
- ``tests/``, ``bench/``, ``examples/`` and ``scripts/`` are read for uses only: what they call
  is used, and nothing in them is reported.

Exit status: 0 when nothing is unused, 3 when something is (vulture's), 1 on bad input.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from vulture import core, noqa
from vulture.config import InputError, make_config

USES_ONLY = ("tests", "bench", "examples", "scripts")
"""Folders read for uses only (relative to the working directory, the repository's root)."""


def _private(path: Path) -> bool:
    return path.name.startswith("_") and path.name != "__init__.py"


def _is_all(node: ast.Assign) -> bool:
    return any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)


def _module_of(path: Path) -> str:
    parts = list(path.resolve().relative_to(Path.cwd()).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


class _Check(core.Vulture):
    """vulture, with the rules of this module's docstring."""

    def __init__(self, reported: list[str], **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.reported = [Path(p).resolve() for p in reported]
        self.reexports: dict[tuple[str, str], tuple[Path, int]] = {}
        self.imported_from: set[tuple[str, str]] = set()
        self.in_function = 0

    def uses_only(self, path: Path) -> bool:
        """Whether ``path`` is read for uses only (outside the configured paths)."""
        path = path.resolve()
        return not any(path == r or path.is_relative_to(r) for r in self.reported)

    def scan(self, code: str, filename: str | Path = "") -> None:
        path = Path(filename)
        if not self.uses_only(path):
            super().scan(code, filename)
            self._note_imports(path, code)
            return
        # read for uses only, without type comments: a test's "# type: ..." may be prose
        try:
            tree = ast.parse(code, filename=str(path))
        except SyntaxError as e:
            print(f"{path}:{e.lineno}: {e.msg}", file=sys.stderr)
            self.exit_code = core.ExitCode.InvalidInput
            return
        self.filename, self.code = path, code.splitlines()
        self.noqa_lines = noqa.parse_noqa(self.code)
        self.visit(tree)
        self.reachability.reset()
        self._note_imports(path, code, tree)

    def visit(self, node: ast.AST) -> None:
        """Visit ``node``, counting how deep in functions it is."""
        scope = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        self.in_function += scope
        try:
            super().visit(node)
        finally:
            self.in_function -= scope

    def _define_variable(self, name: str, node: ast.AST,
                         confidence: int = core.DEFAULT_CONFIDENCE) -> None:
        if (not self.in_function and name.startswith("_") and not name.startswith("__")
                and name != "_"):
            self._define(self.defined_vars, name, node, confidence=confidence)
        else:
            super()._define_variable(name, node, confidence)

    def visit_Assign(self, node: ast.Assign) -> None:
        if _private(self.filename) and _is_all(node) and not self.uses_only(self.filename):
            return
        super().visit_Assign(node)

    def _note_imports(self, path: Path, code: str, tree: ast.Module | None = None) -> None:
        """Record ``from M import name`` pairs and the re-exports of a private module."""
        if not path.resolve().is_relative_to(Path.cwd()):
            return
        try:
            tree = tree or ast.parse(code)
        except SyntaxError:  # vulture has reported it
            return
        module = _module_of(path)
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        imported: dict[str, int] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([node.module] if node.module else []))
                for alias in node.names:
                    self.imported_from.add((base, alias.name))
                    imported[alias.asname or alias.name] = node.lineno
        if not _private(path) or self.uses_only(path):
            return
        for node in tree.body:
            if isinstance(node, ast.Assign) and _is_all(node) and isinstance(
                    node.value, (ast.List, ast.Tuple)):
                for elt in node.value.elts:
                    if isinstance(elt, ast.Constant) and elt.value in imported:
                        self.reexports[(module, elt.value)] = (path, node.lineno)

    def leftover_reexports(self) -> list[str]:
        """Report lines of re-exports nothing imports from the module that re-exports them."""
        return [f"{path.resolve().relative_to(Path.cwd())}:{line}: re-export {name!r} (in "
                f"__all__) is never imported from {module}: drop it, import it from where it "
                "is defined"
                for (module, name), (path, line) in sorted(self.reexports.items())
                if (module, name) not in self.imported_from]


def main() -> int:
    """Run the gate; print one line per finding.

    Returns:
        The exit status (0 clean, 3 findings, 1 bad input).
    """
    try:
        config = make_config()
    except InputError as e:
        print(e.message, file=sys.stderr)
        return 1
    check = _Check(config["paths"], ignore_names=config["ignore_names"],
                   ignore_decorators=config["ignore_decorators"])
    check.scavenge([*config["paths"], *(d for d in USES_ONLY if Path(d).is_dir())],
                   exclude=config["exclude"])
    found = [item.get_report() for item in check.get_unused_code(
        min_confidence=config["min_confidence"]) if not check.uses_only(Path(item.filename))]
    found += check.leftover_reexports()
    for line in found:
        print(line)
    if check.exit_code:
        return 1
    return 3 if found else 0


if __name__ == "__main__":
    sys.exit(main())
