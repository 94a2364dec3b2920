#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# llama.cpp as the reference no one here wrote: regenerates the SmolLM2 golden files in tests/data/
# (tokens, teacher-forced top-20 log-probabilities, greedy generations) and measures llama.cpp's
# speed on the same GGUF. NOT run by CI: building llama-cpp-python from source takes ~12 minutes
# on 2 cores; CI and the tests only read the committed files.
#
#   scripts/reference-llamacpp.sh [goldens]     rewrite tests/data/smollm2_*.jsonl (deterministic:
#                                               a rerun gives byte-identical files)
#   scripts/reference-llamacpp.sh check         regenerate into a temporary folder and compare
#                                               byte for byte with tests/data/
#   scripts/reference-llamacpp.sh bench [ARGS]  prefill / decode / batched tokens/s at 2 and 1
#                                               threads, under flock /tmp/inferkit-bench.lock
#                                               (ARGS go to reference_llamacpp.py bench)
#   scripts/reference-llamacpp.sh tools [N]     llama.cpp's own tools, llama-bench (pp512, tg128)
#                                               and llama-batched-bench (64-token prompts, 128
#                                               tokens, 1 and 32 sequences) at N threads (default
#                                               2), built in the llama.cpp tree that
#                                               scripts/bench-serve.sh builds for llama-server
#                                               (the same vendored sources and flags), under the
#                                               same lock
#
# The model: $INFERKIT_MODEL, else the last line printed by scripts/fetch-model.sh.
# The venv: $INFERKIT_LLAMACPP_VENV (default: .venv-llamacpp beside the checkout, never inside
# it); llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION is built there when missing, with native
# detection and AMX off (the native AMX build segfaulted on a 241-token prompt on this machine
# and ran seconds per token) and AVX-512 (+VNNI, BF16) on, so it needs an AVX-512 CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

LLAMA_CPP_PYTHON_VERSION=0.3.36
CMAKE_ARGS_PINNED="-DGGML_NATIVE=OFF -DGGML_AVX512=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON \
-DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
venv=${INFERKIT_LLAMACPP_VENV:-$(dirname "$root")/.venv-llamacpp}
mode=${1:-goldens}
[ $# -gt 0 ] && shift

case "$venv/" in
  "$root"/*) echo "the venv must live outside the checkout: $venv" >&2; exit 2 ;;
esac

have_llamacpp() {
  [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import llama_cpp, sys
sys.exit(llama_cpp.__version__ != '$LLAMA_CPP_PYTHON_VERSION')" 2>/dev/null
}

if [ "$mode" != tools ] && ! have_llamacpp; then
  echo "== building llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION into $venv (about 12 minutes)"
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  log="$venv/build.log"
  start=$(date +%s)
  CMAKE_ARGS="$CMAKE_ARGS_PINNED" CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) \
    nice -n 10 "$venv/bin/pip" install -v --no-cache-dir \
    "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION" >"$log" 2>&1 ||
    { tail -30 "$log" >&2; echo "build failed, see $log" >&2; exit 1; }
  echo "== built in $(($(date +%s) - start)) s (log: $log)"
fi
export INFERKIT_LLAMACPP_CMAKE_ARGS="$CMAKE_ARGS_PINNED"

model=${INFERKIT_MODEL:-}
if [ -z "$model" ]; then
  [ -x scripts/fetch-model.sh ] ||
    { echo "set INFERKIT_MODEL to the SmolLM2-135M-Instruct.Q4_1.gguf path" >&2; exit 2; }
  model=$(scripts/fetch-model.sh | tail -n 1)
fi
[ -f "$model" ] || { echo "no model file: $model" >&2; exit 2; }

py=("$venv/bin/python" scripts/reference_llamacpp.py)
case "$mode" in
  goldens)
    "${py[@]}" goldens --model "$model" --out-dir tests/data
    ;;
  check)
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    cp tests/data/smollm2_*.jsonl "$tmp"/ # so the kept dates match
    "${py[@]}" goldens --model "$model" --out-dir "$tmp"
    status=0
    for f in tests/data/smollm2_*.jsonl; do
      if cmp -s "$f" "$tmp/$(basename "$f")"; then echo "same: $f"; else
        echo "DIFFERS: $f"; status=1; fi
    done
    exit $status
    ;;
  bench)
    mkdir -p bench-results
    out=bench-results/llamacpp.json
    echo "== waiting for /tmp/inferkit-bench.lock"
    # shellcheck disable=SC2016  # expanded by the inner bash
    flock /tmp/inferkit-bench.lock bash -c '
      echo "uptime before: $(uptime)"
      "$@"
      echo "uptime after: $(uptime)"' _ "${py[@]}" bench --model "$model" --json-out "$out" "$@"
    echo "== wrote $out"
    ;;
  tools)
    llama_dir=${INFERKIT_LLAMA_SERVER_DIR:-$(dirname "$root")/.llamacpp-server}
    [ -d "$llama_dir/build" ] ||
      { echo "no $llama_dir/build: run scripts/bench-serve.sh once, which builds it" >&2; exit 2; }
    echo "== building llama-bench and llama-batched-bench in $llama_dir/build"
    nice -n 10 cmake --build "$llama_dir/build" --target llama-bench llama-batched-bench >/dev/null
    threads=${1:-2}
    bin=$llama_dir/build/bin
    echo "== waiting for /tmp/inferkit-bench.lock"
    # shellcheck disable=SC2016  # expanded by the inner bash
    flock /tmp/inferkit-bench.lock bash -c '
      echo "uptime before: $(uptime)"
      "$1/llama-bench" -m "$2" -t "$3" -p 512 -n 128 -r 3
      "$1/llama-batched-bench" -m "$2" -t "$3" -tb "$3" -c 16384 -b 2048 -ub 512 \
        -npp 64 -ntg 128 -npl 1,32 2>&1 | grep -E "^\||^main"
      echo "uptime after: $(uptime)"' _ "$bin" "$model" "$threads"
    ;;
  *)
    echo "usage: $0 [goldens|check|bench [ARGS]|tools [THREADS]]" >&2
    exit 2
    ;;
esac
