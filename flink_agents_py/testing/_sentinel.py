"""The I/O sentinel: side effects and nondeterministic reads in action code outside durable calls.

While the checker runs an agent, an audit hook (``sys.addaudithook``, installed once per
process and idle outside a check) and wrappers of ``time``, ``random``, ``uuid``,
``secrets`` and ``os.urandom`` (installed only for the duration of a check) note what an
action does **between** its durable calls: socket connects and sends, file writes and
removals, subprocess starts, clock and random reads. Only code the runtime's core steps as
an action is watched (the nearest frame of ours on the stack is the core stepping it, with
its stand-in event loop running): a durable call's function (inline on the operator thread,
or on the I/O executor), a tool, a model call, the framework's own code and observers are
not. Each sighting names the user frame (file and line) that made it.

This is a test-time check in the spirit of Temporal's workflow sandbox, which refuses such
calls in workflow code; ours lets them run and reports them.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import linecache
import os
import random
import secrets
import sys
import sysconfig
import tempfile
import threading
import time
import types
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from .. import runtime as _runtime

__all__ = ["Sighting", "watching", "temp_roots"]

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_CORE_FILE = os.path.abspath(sys.modules[_runtime.AgentCore.__module__].__file__ or "")
_LIBRARY = tuple(sorted({os.path.abspath(p) + os.sep for k in ("stdlib", "platstdlib",
                                                                "purelib", "platlib")
                         if (p := sysconfig.get_paths().get(k))}))

EFFECT_EVENTS = frozenset({
    "socket.connect", "socket.sendto", "socket.sendmsg", "open", "subprocess.Popen",
    "os.system", "os.posix_spawn", "os.spawn", "os.exec", "os.fork", "os.remove",
    "os.rename", "os.rmdir", "os.mkdir", "os.truncate", "shutil.rmtree",
})
"""Audit events that make a side effect (``open`` only with a write mode)."""

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC


@dataclass(frozen=True)
class Sighting:
    """One side effect or nondeterministic read seen in action code outside durable calls.

    Attributes:
        kind: ``socket``, ``file``, ``subprocess``, ``clock`` or ``random``.
        what: what was done, e.g. ``socket.connect to ('127.0.0.1', 8025)`` or
            ``time.time()``.
        file: the user source file that did it.
        line: the line in ``file``.
        action: the action function being stepped (``module:qualname``).
        temporary: a file effect inside a temporary directory (reported only when a
            recovery repeats it).
        code: the source line, stripped ('' when unknown).
    """

    kind: str
    what: str
    file: str
    line: int
    action: str
    temporary: bool = False
    code: str = ""

    @property
    def where(self) -> str:
        """``file:line`` of the user frame."""
        return f"{self.file}:{self.line}"

    @property
    def site(self) -> tuple[str, str, int]:
        """What was done and where: sightings with the same site are the same finding."""
        return (self.what, self.file, self.line)

    def describe(self) -> str:
        """One line for a report: where, what, in which action, and the fix."""
        if self.kind in ("clock", "random"):
            fix = ("its value differs on replay: read it inside a durable call "
                   "(ctx.durable_execute(...)) or take it from the event")
        else:
            fix = ("it runs again each time the action is replayed after a failure: "
                   "make it a durable call (ctx.durable_execute(...))")
        return f"{self.where}: {self.what} in action {self.action}: {fix}"


def temp_roots() -> tuple[str, ...]:
    """The temporary directories (resolved) whose file writes count as scratch.

    Returns:
        ``tempfile.gettempdir()`` and ``/tmp``, resolved, each ending with a separator.
    """
    roots = {os.path.realpath(tempfile.gettempdir()), os.path.realpath("/tmp")}
    return tuple(sorted(r.rstrip(os.sep) + os.sep for r in roots))


class _Watch:
    """What one check collects; ``clock()`` stamps each sighting (e.g. the host callback)."""

    def __init__(self, clock: Callable[[], int], actions: frozenset[types.CodeType]) -> None:
        self.clock = clock
        self.actions = actions
        self.seen: list[tuple[int, Sighting]] = []
        self.lock = threading.Lock()
        self.temp = temp_roots()

    def add(self, sighting: Sighting) -> None:
        with self.lock:
            self.seen.append((self.clock(), sighting))


_ACTIVE: _Watch | None = None
_HOOKED = False
_GUARD = threading.local()


def _is_library(filename: str) -> bool:
    return (filename.startswith("<") or filename.startswith(_PACKAGE)
            or filename.startswith(_LIBRARY))


def _locate(frame: types.FrameType | None, direct: bool, actions: frozenset[types.CodeType]
            ) -> tuple[types.FrameType, types.FrameType] | None:
    """The user frame that did it and the action frame, when an action is being stepped.

    Walking outward from ``frame``, the nearest frame of this package must be the runtime
    stepping an action (not a durable call, the context, a tool or an observer): the frame
    it called is one of the agent's action functions (``actions``), or it is the core's.
    With ``direct``, ``frame`` itself must be user code (a clock read by ``logging`` is
    not one).

    Returns:
        ``(user frame, action frame)``, or ``None`` when no action is being stepped.
    """
    user: types.FrameType | None = None
    below: types.FrameType | None = None  # the frame the runtime called: the action
    f = frame
    if direct and (f is None or _is_library(f.f_code.co_filename)):
        return None
    while f is not None:
        name = f.f_code.co_filename
        if name.startswith("<frozen importlib"):
            return None  # an import (a .pyc written, a module's own top level): once per process
        if name.startswith(_PACKAGE):
            if below is None or (below.f_code not in actions and not (
                    os.path.abspath(name) == _CORE_FILE and _stepping())):
                return None
            return (user or below), below
        if user is None and not _is_library(name):
            user = f
        below = f
        f = f.f_back
    return None


def _stepping() -> bool:
    # the core steps actions with its stand-in loop running; its own calls into user code
    # that are not the action (a deferred sub-agent's preparation) run with no loop
    return asyncio._get_running_loop() is not None


def _note(kind: str, what: str, frame: types.FrameType | None, direct: bool,
          path: str | None = None) -> None:
    watch = _ACTIVE
    if watch is None or getattr(_GUARD, "busy", False):
        return
    _GUARD.busy = True
    try:
        found = _locate(frame, direct, watch.actions)
        if found is None:
            return
        user, act = found
        code = act.f_code
        qualname = getattr(code, "co_qualname", code.co_name)
        action = f"{act.f_globals.get('__name__', '?')}:{qualname}"
        temporary = path is not None and os.path.realpath(path).startswith(watch.temp)
        line = user.f_lineno or 0
        text = linecache.getline(user.f_code.co_filename, line).strip()
        watch.add(Sighting(kind, what, user.f_code.co_filename, line, action, temporary, text))
    finally:
        _GUARD.busy = False


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _ACTIVE is None or event not in EFFECT_EVENTS:
        return
    path: str | None = None
    if event == "open":
        target, mode, flags = (tuple(args) + (None, None, 0))[:3]
        writes = any(c in mode for c in "wax+") if isinstance(mode, str) \
            else isinstance(flags, int) and bool(flags & _WRITE_FLAGS)
        if not writes or not isinstance(target, (str, bytes, os.PathLike)):
            return
        path = os.fsdecode(target)
        if path == os.devnull:
            return
        what, kind = f"open({path!r}, {mode or 'flags ' + hex(flags)!s}) for writing", "file"
    elif event.startswith("socket."):
        what, kind = f"{event} to {args[1]!r}" if len(args) > 1 else event, "socket"
    elif event in ("os.remove", "os.rename", "os.rmdir", "os.mkdir", "os.truncate",
                   "shutil.rmtree"):
        target = args[0] if args else None
        path = os.fsdecode(target) if isinstance(target, (str, bytes, os.PathLike)) else None
        what, kind = f"{event}({path!r})", "file"
    else:
        shown = args[1] if event == "subprocess.Popen" and len(args) > 1 else \
            args[0] if args else ""
        what, kind = f"{event}({_cut(shown)})", "subprocess"
    _note(kind, what, sys._getframe(1), direct=False, path=path)


def _cut(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _wrap(module: Any, name: str, kind: str, clock_arg: int | None) -> Callable[..., Any]:
    """``module.name``, noting each call from action code.

    With ``clock_arg``, only calls that leave that positional argument out are noted
    (``time.localtime()``, not ``time.localtime(secs)``).

    Returns:
        The wrapper.
    """
    original = getattr(module, name)
    label = f"{module.__name__}.{name}()"

    def watched(*args: Any, **kwargs: Any) -> Any:
        if _ACTIVE is not None and (clock_arg is None or len(args) <= clock_arg):
            _note(kind, label, sys._getframe(1), direct=True)
        return original(*args, **kwargs)

    watched.__wrapped__ = original  # type: ignore[attr-defined]
    watched.__name__ = name
    return watched


_READS: tuple[tuple[Any, tuple[str, ...], str, int | None], ...] = (
    (time, ("time", "time_ns", "monotonic", "monotonic_ns", "perf_counter",
            "perf_counter_ns"), "clock", None),
    (time, ("localtime", "gmtime", "ctime"), "clock", 0),
    (time, ("strftime",), "clock", 1),
    (random, ("random", "uniform", "randint", "randrange", "choice", "choices", "sample",
              "shuffle", "getrandbits", "gauss", "normalvariate", "randbytes"), "random",
     None),
    (uuid, ("uuid1", "uuid4"), "random", None),
    (secrets, ("token_bytes", "token_hex", "token_urlsafe", "choice", "randbelow",
               "randbits"), "random", None),
    (os, ("urandom",), "random", None),
)


_DATETIME, _DATE = datetime.datetime, datetime.date


class _Standing(type):
    """The metaclass of a watched class: it stands in for the class it watches.

    What it makes (``datetime(2024, 1, 1)``, ``datetime.fromtimestamp(0)``) is of the
    watched class itself (``_new``), and an object of the watched class is an instance of it:
    before, such values were of the stand-in, whose type has no stored form, so the checker
    failed a durable call that returns ``datetime(...)`` where a job does not.
    """

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, cls.__mro__[1])

    def __subclasscheck__(cls, sub: type) -> bool:
        return issubclass(sub, cls.__mro__[1])


def _new(cls: type, *args: Any, **kwargs: Any) -> Any:
    """``__new__`` of a watched class: an object of the class it watches.

    Returns:
        The object (of its own class for a subclass made of the stand-in while it stood in).
    """
    base = next(c for c in cls.__mro__ if type(c) is not _Standing)
    if type(cls) is _Standing:
        return base(*args, **kwargs)
    return base.__new__(cls, *args, **kwargs)


class _WatchedDatetime(datetime.datetime, metaclass=_Standing):
    """``datetime.datetime`` whose clock reads (``now``, ``utcnow``, ``today``) are noted."""

    __new__ = _new

    @classmethod
    def now(cls, tz: datetime.tzinfo | None = None) -> Any:
        if _ACTIVE is not None:
            _note("clock", "datetime.now()", sys._getframe(1), direct=True)
        return _DATETIME.now(tz)

    @classmethod
    def utcnow(cls) -> Any:
        if _ACTIVE is not None:
            _note("clock", "datetime.utcnow()", sys._getframe(1), direct=True)
        return _DATETIME.utcnow()

    @classmethod
    def today(cls) -> Any:
        if _ACTIVE is not None:
            _note("clock", "datetime.today()", sys._getframe(1), direct=True)
        return _DATETIME.today()


class _WatchedDate(datetime.date, metaclass=_Standing):
    """``datetime.date`` whose ``today()`` is noted."""

    __new__ = _new

    @classmethod
    def today(cls) -> Any:
        if _ACTIVE is not None:
            _note("clock", "date.today()", sys._getframe(1), direct=True)
        return _DATE.today()


_CLASSES = ((_DATETIME, _WatchedDatetime), (_DATE, _WatchedDate))

for _original, _watched in _CLASSES:  # named as the class and methods they stand in for: a
    _watched.__module__, _watched.__qualname__ = "datetime", _original.__qualname__  # durable
    for _name, _method in vars(_watched).items():  # call of ``datetime.now`` has the name
        if isinstance(_method, classmethod):  # and identity it has in a job
            _method.__func__.__module__ = "datetime"
            _method.__func__.__qualname__ = f"{_original.__qualname__}.{_name}"


@contextlib.contextmanager
def _reads_wrapped(namespaces: Iterable[dict[str, Any]]) -> Iterator[None]:
    """Wrap the clock and random functions for the block.

    In their modules, and where the agent's modules imported them by name (``from time
    import time``, ``from datetime import datetime``).

    Yields:
        Nothing.
    """
    saved: list[tuple[Any, str, Any]] = []
    swaps: dict[int, Any] = {}
    put: list[tuple[dict[str, Any], str, Any, Any]] = []
    try:
        for module, names, kind, clock_arg in _READS:
            for name in names:
                if hasattr(module, name):
                    original = getattr(module, name)
                    saved.append((module, name, original))
                    swaps[id(original)] = _wrap(module, name, kind, clock_arg)
                    setattr(module, name, swaps[id(original)])
        for original, watched in _CLASSES:
            swaps[id(original)] = watched
            saved.append((datetime, original.__name__, original))
            setattr(datetime, original.__name__, watched)
        originals = {id(o): o for _, _, o in saved}
        for ns in namespaces:
            for name, value in list(ns.items()):
                if id(value) in swaps and originals.get(id(value)) is value:
                    ns[name] = swaps[id(value)]
                    put.append((ns, name, value, ns[name]))
        yield
    finally:
        for ns, name, value, watched in reversed(put):
            if ns.get(name) is watched:
                ns[name] = value
        for module, name, original in reversed(saved):
            setattr(module, name, original)


@contextlib.contextmanager
def watching(clock: Callable[[], int] = lambda: 0, namespaces: Iterable[dict[str, Any]] = (),
             actions: Iterable[types.CodeType] = ()) -> Iterator[list[tuple[int, Sighting]]]:
    """Watch action code outside durable calls for the block; yields the sightings list.

    Not re-entrant across threads: one check at a time per process (the checker's runs are
    sequential). The audit hook stays installed after the block (audit hooks cannot be
    removed) but does nothing then.

    Args:
        clock: stamps each sighting (the checker passes its host callback count).
        namespaces: the globals of the agent's modules: names bound there to a watched
            function or class (``from time import time``) are watched too.
        actions: the code of the agent's action functions (wrappers included): what the
            runtime calls to step an action.

    Yields:
        ``[(stamp, Sighting), ...]``, filled while the block runs.
    """
    global _ACTIVE, _HOOKED
    if not _HOOKED:
        sys.addaudithook(_audit)
        _HOOKED = True
    outer = _ACTIVE
    watch = _Watch(clock, frozenset(actions))
    _ACTIVE = watch
    try:
        if outer is None:
            with _reads_wrapped(namespaces):
                yield watch.seen
        else:
            yield watch.seen
    finally:
        _ACTIVE = outer
