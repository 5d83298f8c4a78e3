"""Warnings that point at the user's line, not at ours."""

from __future__ import annotations

import os
import sys
import warnings

__all__ = ["warn_at_user"]

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
"""This package's directory: frames in it are ours."""

_PASSED_THROUGH = ("pydantic", "pydantic_core", "yaml", "importlib", "functools")
"""Packages and modules between the user's call and ours (a model's validator runs in
pydantic, a descriptor is built by import)."""


def _ours(filename: str, module: str) -> bool:
    if os.path.abspath(filename).startswith(_PACKAGE) and not module.endswith("__main__"):
        return True
    return module.split(".")[0] in _PASSED_THROUGH or filename.startswith("<frozen")


def warn_at_user(warning: Warning) -> None:
    """``warnings.warn(warning)`` attributed to the first frame outside this package.

    Python's ``stacklevel`` counts frames, which differ by how the warning's code was
    reached (a model built directly, from a ``ResourceDescriptor``, from YAML); the
    warning names the user's file and line whichever way.

    Args:
        warning: the warning to emit.
    """
    level = 1
    frame = sys._getframe(1)
    while frame is not None and _ours(frame.f_code.co_filename,
                                      str(frame.f_globals.get("__name__", ""))):
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    warnings.warn(warning, stacklevel=level + 1 if frame is not None else 2)
