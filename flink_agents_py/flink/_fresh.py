"""Each job's own modules in a TaskManager's long-lived thread-mode interpreter.

In thread mode a TaskManager embeds one Python interpreter for its whole life, shared by
every job it runs. Flink unpacks a job's shipped Python files (``-pyfs``, ``add_python_file``;
an editable ``flink_agents_py`` is shipped that way) into a ``python-dist-*`` folder and
deletes it when the job ends, but the modules imported from it stay in ``sys.modules``. A
later job then runs the first job's copy of a module instead of its own, and cannot import a
submodule the first job never imported from such a package (its folder is gone).

``fresh_reduce`` pickles an object (the agent operator) so that, when a worker unpickles it,
the modules imported from deleted ``python-dist-*`` folders are dropped from ``sys.modules``
first; the object's class and everything its state refers to are then imported again, from
this job's files. Modules whose files still exist (those of a job still running, the
installed packages) are left alone.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["FORGET_STALE_MODULES", "fresh_reduce", "rebuild"]

FORGET_STALE_MODULES = """
import os as _os, sys as _sys
for _name, _module in list(_sys.modules.items()):
    _file = getattr(_module, "__file__", None) or ""
    if "python-dist-" in _file and not _os.path.exists(_file):
        del _sys.modules[_name]
"""
"""Drops from ``sys.modules`` what was imported from a finished job's deleted files. Run by
the unpickler through ``exec``, a builtin, so it runs before any module of ours is looked up
for the object's state."""


class _ForgetStaleModules:
    """Unpickled as ``exec(FORGET_STALE_MODULES, {})``, i.e. as ``None`` after forgetting."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (exec, (FORGET_STALE_MODULES, {}))


def rebuild(module: str, qualname: str, _forgotten: None, state: dict[str, Any]) -> Any:
    """Make an instance of ``module.qualname`` (imported now) with ``state`` as its attributes.

    Args:
        module: the class's module.
        qualname: the class's qualified name in it.
        _forgotten: the result of forgetting stale modules (unpickled just before ``state``).
        state: the instance's ``__dict__``.

    Returns:
        The new instance (``__init__`` is not called).
    """
    cls: Any = importlib.import_module(module)
    for part in qualname.split("."):
        cls = getattr(cls, part)
    obj = cls.__new__(cls)
    obj.__dict__.update(state)
    return obj


def fresh_reduce(obj: Any) -> tuple[Any, ...]:
    """A ``__reduce__`` value for ``obj`` that forgets stale modules before its state loads.

    Args:
        obj: an instance whose state is its ``__dict__``.

    Returns:
        ``(rebuild, (module, qualname, <forget stale modules>, obj.__dict__))``.
    """
    cls = type(obj)
    return (rebuild, (cls.__module__, cls.__qualname__, _ForgetStaleModules(), obj.__dict__))
