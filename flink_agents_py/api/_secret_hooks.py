"""Python's own reports of exceptions nobody handled, printed with known secrets masked.

Python prints three reports to stderr itself, bypassing ``logging``: an exception nobody
caught (``sys.excepthook``), one that ended a thread (``threading.excepthook``), and one it
could not raise (``sys.unraisablehook``: "Exception ignored in ...", raised by a ``__del__``,
such as an SDK client's closing its session at garbage collection, a weak reference's
callback, an async generator's clean-up). ``_secrets`` installs these in place of Python's
own, with the first secret registered; each prints Python's report with the known secrets
masked (``mask_secrets``), the inputs a pydantic ``ValidationError`` quotes too.
"""

from __future__ import annotations

import sys
import threading
import traceback
from types import TracebackType
from typing import Any

from ._secret_scrub import quoted_inputs_masked
from ._secrets import mask_secrets

__all__ = ["masked_excepthook", "masked_thread_excepthook", "masked_unraisablehook"]


def _print_masked(lines: list[str]) -> None:
    if sys.stderr is not None:
        sys.stderr.write(mask_secrets("".join(lines)))
        sys.stderr.flush()


def masked_excepthook(exc_type: type[BaseException], exc: BaseException,
                      tb: TracebackType | None) -> None:
    """``sys.excepthook`` that prints Python's traceback, masked."""
    _print_masked(traceback.format_exception(*quoted_inputs_masked((exc_type, exc, tb))))


def masked_thread_excepthook(args: threading.ExceptHookArgs) -> None:
    """``threading.excepthook`` that prints Python's report, masked."""
    if args.exc_type is SystemExit:
        return
    name = args.thread.name if args.thread is not None else threading.get_ident()
    exc_info = quoted_inputs_masked((args.exc_type, args.exc_value, args.exc_traceback))
    _print_masked([f"Exception in thread {name}:\n", *traceback.format_exception(*exc_info)])


def masked_unraisablehook(unraisable: Any) -> None:
    """``sys.unraisablehook`` that prints Python's report (``Exception ignored in``), masked.

    Args:
        unraisable: Python's ``UnraisableHookArgs`` (``exc_type``, ``exc_value``,
            ``exc_traceback``, ``err_msg``, ``object``).
    """
    what = unraisable.err_msg or "Exception ignored in"
    try:
        shown = f"{what}: {unraisable.object!r}\n" if unraisable.object is not None \
            else f"{what}:\n"
    except Exception:  # noqa: BLE001 - an object whose repr fails, as Python says
        shown = f"{what}: <object repr() failed>\n"
    lines = [shown]
    if unraisable.exc_type is not None:
        exc_info = quoted_inputs_masked((unraisable.exc_type, unraisable.exc_value,
                                         unraisable.exc_traceback))
        lines += traceback.format_exception(*exc_info)
    _print_masked(lines)
