#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The inner loop: build and run ONE area's tests in the dev preset (scripts/test.sh runs them all,
# and everything else CI checks). It configures build/dev if it is not there, builds only
# inferkit_test_AREA, runs `ctest --preset dev -L ^AREA$`, prints the seconds it took and names
# the area's benchmark. The area serve builds the examples serve and generate and runs the pytest
# suite tests/serve as scripts/test.sh does. Further arguments go to ctest (pytest for serve).
#   scripts/check.sh AREA [ARGS…]     e.g. scripts/check.sh kv -R BlockTable
#   scripts/check.sh --list           the areas: tests/<area>/ with test_*.cpp files, and serve
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
start=$(date +%s)
seconds() { echo $(($(date +%s) - start)); }

areas() {
  for dir in tests/*/; do
    compgen -G "${dir}test_*.cpp" >/dev/null && basename "$dir"
  done
  echo serve
}

# benchmark <area>: the Release benchmark binary (and filter) that times the area, or none.
# bench_model's BM_Model_* cases need INFERKIT_MODEL (exported below for model and engine).
benchmark() {
  case $1 in
    engine) echo "inferkit_bench_model --benchmark_filter=BM_Model_" ;; # the Engine's steps
    serve) echo "scripts/bench-serve.sh" ;;
    *) if [ -f "benchmarks/bench_$1.cpp" ]; then echo "inferkit_bench_$1"; else echo none; fi ;;
  esac
}

usage() {
  echo "usage: scripts/check.sh AREA [ctest args…] | --list" >&2
  echo "$1; valid areas: $(areas | paste -sd ' ')" >&2
  exit 2
}

[ $# -ge 1 ] || usage "check.sh: no AREA given"
if [ "$1" = --list ]; then
  areas
  exit 0
fi
area=$1
shift
areas | grep -x -- "$area" >/dev/null || usage "check.sh: unknown area '$area'"
trap 'echo "check.sh $area: FAILED after $(seconds) s" >&2' ERR

inferkit_install_missing
[ -f build/dev/build.ninja ] || cmake --preset dev >/dev/null
case $area in
  model | engine | serve)
    INFERKIT_MODEL=${INFERKIT_MODEL:-$(bash scripts/fetch-model.sh | tail -1)}
    export INFERKIT_MODEL
    ;;
esac
if [ "$area" = serve ]; then
  cmake --build --preset dev --target serve generate
  inferkit_serve_pytest "$@"
else
  cmake --build --preset dev --target "inferkit_test_$area"
  CTEST_PARALLEL_LEVEL=${CTEST_PARALLEL_LEVEL:-2} ctest --preset dev -L "^$area\$" "$@"
fi

echo "check.sh $area: passed in $(seconds) s"
bench=$(benchmark "$area")
echo "benchmark: $bench"
if [[ $bench == inferkit_bench_* ]]; then
  echo "  run: cmake --preset release && cmake --build --preset release --target ${bench%% *}" \
    "&& build/release/benchmarks/$bench"
fi
