"""Each job's own modules in a TaskManager's long-lived thread-mode interpreter.

In thread mode a TaskManager embeds one Python interpreter for its whole life, shared by
every job it runs. Flink unpacks a job's shipped Python files (``-pyfs``, ``add_python_file``;
an editable ``flink_agents_py`` is shipped that way) into a ``python-dist-*`` folder and
deletes it when the job ends, but the modules imported from it stay in ``sys.modules``. A
later job then runs the first job's copy of a module instead of its own, and cannot import a
submodule the first job never imported from such a package (its folder is gone): the
packages import their submodules lazily, so which ones a job imported depends on what it ran.

Every function this package hands to PyFlink is pickled so that, when a worker unpickles it,
the modules imported from deleted ``python-dist-*`` folders are dropped from ``sys.modules``
first; the function, its class and everything its state refers to are then imported again,
from this job's files. Modules whose files still exist (those of a job still running, the
installed packages) are left alone. Which of a job's functions a worker unpickles first
depends on the order its tasks open, so each of them forgets first:

- ``shipped(fn)`` wraps a plain callable (a function, a ``functools.partial``, a callable
  object) given to ``map``, ``flat_map`` or ``key_by``;
- ``fresh_reduce(self)`` is the ``__reduce__`` of a function class PyFlink type-checks (a
  ``KeyedProcessFunction``: the agent operator, the file reader).

Both unpickle through builtins only (``operator.getitem`` on a triple whose first item
forgets), so nothing of ours is looked up before the forgetting.

The imports that follow run with the interpreter's heap frozen (``gc.freeze``), and the
triple's last item unfreezes it. A TaskManager's interpreter holds PyFlink, Beam, pandas and
NumPy (about 150,000 objects) when it first unpickles a function of this package, and
importing this package's 200 modules made CPython run a full collection over all of them:
70-110 ms of the 250-300 ms that import took on a MiniCluster's critical path, before the
first record (2026-12-06; 156-190 ms of CPU instead of 236-286 ms in a plain interpreter
holding the same modules). Frozen, a collection during the imports looks at the new objects
only; unfrozen, every object is collected as before. Nothing is frozen when the collector
is disabled or the heap is frozen already (by the process itself, or by an agent operator
holding ``_gc``'s settings, whose release unfreezes it), and nothing is unfrozen while an
agent operator holds those settings. An unpickling that fails before its last item leaves
the heap frozen until the next agent operator of the interpreter closes (its objects of
that moment are collected then).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["FORGET_STALE_MODULES", "UNFREEZE_AFTER_IMPORTS", "fresh_reduce", "shipped"]

_F = TypeVar("_F", bound=Callable[..., Any])

FORGET_STALE_MODULES = """
import gc as _gc, os as _os, sys as _sys
for _name, _module in _sys.modules.copy().items():
    _file = getattr(_module, "__file__", None) or ""
    if "python-dist-" in _file and not _os.path.exists(_file):
        del _sys.modules[_name]
_froze = _gc.isenabled() and not _gc.get_freeze_count()
if _froze:
    _gc.freeze()
"""
"""Drops from ``sys.modules`` what was imported from a finished job's deleted files. Run by
the unpickler through ``exec``, a builtin, so it runs before any module of ours is looked up
for the object's state. It walks a copy: a worker unpickles on several threads, and while
``list(sys.modules.items())`` allocates its pairs the cyclic collector may run Python code
and let another thread import ("dictionary changed size during iteration"); ``dict.copy``
allocates one object before it copies, so nothing runs while it does. It then freezes the
heap for the imports that follow (see the module doc), noting in ``_froze`` whether it did."""

UNFREEZE_AFTER_IMPORTS = """
if _froze and not getattr(_sys.modules.get("flink_agents_py.flink._gc"), "_gc_holders", None):
    _gc.unfreeze()
"""
"""Run by the unpickler through ``exec`` after the object (and what it imports) is loaded, in
the namespace ``FORGET_STALE_MODULES`` ran in: unfreezes the heap it froze, unless an agent
operator of this interpreter holds the GC settings meanwhile (its release unfreezes)."""


class _Exec:
    """Unpickled as ``exec(code, namespace)``, i.e. as ``None`` after running ``code``."""

    __slots__ = ("code", "namespace")

    def __init__(self, code: str, namespace: dict[str, Any]) -> None:
        self.code, self.namespace = code, namespace

    def __reduce__(self) -> tuple[Any, ...]:
        return (exec, (self.code, self.namespace))


def _forget_first(value: Any) -> tuple[Any, ...]:
    """A ``__reduce__`` value that unpickles as ``value``, stale modules forgotten first.

    Returns:
        ``operator.getitem`` on a triple whose items are unpickled in order: the forgetting
        (which freezes the heap), ``value`` (importing what it needs), the unfreezing. Both
        ``exec`` calls get the same namespace (one dict: the pickle's memo keeps it one
        object when unpickled).
    """
    namespace: dict[str, Any] = {}
    return (
        operator.getitem,
        (
            (
                _Exec(FORGET_STALE_MODULES, namespace),
                value,
                _Exec(UNFREEZE_AFTER_IMPORTS, namespace),
            ),
            1,
        ),
    )


def _instance(cls: Any, state: dict[str, Any]) -> Any:
    """A new ``cls`` (``__init__`` not called) with ``state`` as its attributes."""
    obj = cls.__new__(cls)
    obj.__dict__.update(state)
    return obj


class _Instance:
    """Pickles as its object would without that object's own ``__reduce__``."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any) -> None:
        self.obj = obj

    def __reduce__(self) -> tuple[Any, ...]:
        return (_instance, (type(self.obj), self.obj.__dict__))


def fresh_reduce(obj: Any) -> tuple[Any, ...]:
    """A ``__reduce__`` value for ``obj`` that forgets stale modules before its class loads.

    Args:
        obj: an instance whose state is its ``__dict__``.

    Returns:
        A value that unpickles as a new instance of ``obj``'s class (imported after the
        forgetting; ``__init__`` not called) with ``obj``'s ``__dict__``.
    """
    return _forget_first(_Instance(obj))


class _Shipped:
    """A callable on its way to a worker: unpickles as the callable itself, forgetting first."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn

    def __call__(self, *args: Any, **kwargs: Any) -> Any:  # PyFlink checks callable()
        return self.fn(*args, **kwargs)

    def __reduce__(self) -> tuple[Any, ...]:
        return _forget_first(self.fn)


def shipped(fn: _F) -> _F:
    """``fn`` as handed to PyFlink (``map``, ``flat_map``, ``key_by``): see the module doc.

    Args:
        fn: a picklable callable.

    Returns:
        A callable that calls ``fn``; a worker unpickles it as ``fn`` itself (no wrapper on
        the record path), after forgetting the modules of finished jobs.
    """
    return _Shipped(fn)  # type: ignore[return-value]
