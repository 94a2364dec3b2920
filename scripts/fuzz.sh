#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds every tests/fuzz/fuzz_<name>.cpp with clang's libFuzzer, AddressSanitizer and UBSan and
# runs each for SECONDS (default 20), starting from tests/fuzz/corpus/<name>/ (copied, so the
# committed seeds never change). A crash or sanitizer report fails the script and leaves the
# reproducer in build/fuzz/.
#   scripts/fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20}
cxx=$(command -v clang++-14 || command -v clang++ || true)
[ -n "$cxx" ] || { echo "fuzz.sh: clang++ not found (install clang-14 libclang-rt-14-dev)"; exit 1; }
mkdir -p build/fuzz
rm -f build/fuzz/crash-* build/fuzz/leak-* build/fuzz/timeout-*  # from an earlier run
for src in tests/fuzz/fuzz_*.cpp; do
  name=$(basename "$src" .cpp)
  name=${name#fuzz_}
  bin=build/fuzz/fuzz_$name
  "$cxx" -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
    -Iinclude "$src" -o "$bin"
  corpus=build/fuzz/corpus_$name
  rm -rf "$corpus"
  mkdir -p "$corpus"
  if [ -d "tests/fuzz/corpus/$name" ]; then cp "tests/fuzz/corpus/$name"/* "$corpus"/; fi
  echo "== fuzz $name for ${seconds}s"
  (cd build/fuzz && "./fuzz_$name" -max_total_time="$seconds" -max_len=4096 \
    -print_final_stats=1 "corpus_$name" 2>&1 | grep -E "^(#[0-9]+.*DONE|stat::number_of_executed_units|stat::new_units_added)|ERROR|SUMMARY" || true)
  # libFuzzer writes crash-*/leak-*/timeout-* files next to the binary on failure.
  if ls build/fuzz/crash-* build/fuzz/leak-* build/fuzz/timeout-* >/dev/null 2>&1; then
    echo "fuzz.sh: $name found a failing input (build/fuzz/)"
    exit 1
  fi
done
