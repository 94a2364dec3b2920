#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Cross-builds a subset of the attention, KV and linear-layer tests for aarch64 (where the CPU kernels take
# the NEON path, chosen at compile time) with Debian's g++-aarch64-linux-gnu, and runs them under
# qemu-aarch64 on the NEON path and, forced by INFERKIT_CPU_ISA, the portable baseline.
# Correctness only (qemu's timing means nothing). Prints one "<binary> <path>: ok|FAILED" line
# per run and exits 1 if any failed. scripts/test.sh runs it as a phase.
set -euo pipefail
cd "$(dirname "$0")/.."
cxx=aarch64-linux-gnu-g++
sysroot=/usr/aarch64-linux-gnu
out=build/aarch64
mkdir -p "$out/obj" "$out/include"
# Catch2 is header-only for us (Debian's prebuilt main is x86): a link to its header alone, so
# the cross compiler sees no other host header.
ln -sfn /usr/include/catch2 "$out/include/catch2"
flags=(-std=c++20 -O2 -fopenmp -Wall -Wextra -Wpedantic -Wundef -Wshadow -Wconversion -Werror
  -Iinclude -I. -I"$out/include")

# The white-box tests of every kernel (SIMD policies, the tile kernel on all row counts, head
# dims and masks) and of the KV row kernels and cache: the code that differs per path. The
# drivers above them are the same C++ on every architecture and run in the x86 builds.
attention_sources=(tests/attention/test_simd.cpp tests/attention/test_attention_tile.cpp)
kv_sources=(tests/kv/test_kv_quantization.cpp tests/kv/test_paged_kv_cache.cpp)
# The linear layers' portable paths (fp32 and int8 activations), which aarch64 runs.
model_sources=(tests/model/test_quantized_linear.cpp tests/model/test_int8_linear.cpp)

printf '#define CATCH_CONFIG_MAIN\n#include <catch2/catch.hpp>\n' >"$out/catch_main.cpp"
obj_of() { echo "$out/obj/$(basename "${1%.cpp}").o"; }
# Every TU in parallel: pairs of (source, object) to xargs.
export cxx flags_str="${flags[*]}"
for src in "$out/catch_main.cpp" "${attention_sources[@]}" "${kv_sources[@]}" \
  "${model_sources[@]}"; do
  printf '%s\0%s\0' "$src" "$(obj_of "$src")"
done | xargs -0 -n 2 -P "$(nproc)" bash -c '"$cxx" $flags_str -c "$0" -o "$1"'
attention_objs=("$out/obj/catch_main.o")
for s in "${attention_sources[@]}"; do attention_objs+=("$(obj_of "$s")"); done
kv_objs=("$out/obj/catch_main.o")
for s in "${kv_sources[@]}"; do kv_objs+=("$(obj_of "$s")"); done
"$cxx" -fopenmp "${attention_objs[@]}" -o "$out/inferkit_test_attention"
"$cxx" -fopenmp "${kv_objs[@]}" -o "$out/inferkit_test_kv"
model_objs=("$out/obj/catch_main.o")
for s in "${model_sources[@]}"; do model_objs+=("$(obj_of "$s")"); done
"$cxx" -fopenmp "${model_objs[@]}" -o "$out/inferkit_test_model"

status=0
for bin in inferkit_test_attention inferkit_test_kv inferkit_test_model; do
  for isa in neon baseline; do
    log="$out/$bin.$isa.log"
    if INFERKIT_CPU_ISA=$isa OMP_NUM_THREADS=2 qemu-aarch64 -L "$sysroot" "$out/$bin" >"$log" 2>&1; then
      echo "$bin $isa: ok ($(tail -2 "$log" | tr -s '\n' ' '))"
    else
      echo "$bin $isa: FAILED"
      tail -40 "$log"
      status=1
    fi
  done
done
exit $status
