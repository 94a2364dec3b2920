#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The CPU kernels' figures on every instruction-set path. Builds bench_attention and bench_kv
# twice: -march=native (the release preset) and as a user builds them (release-plain: -O2
# -DNDEBUG, no -m flag, kernels chosen at run time), runs the decode, prefill and append cases
# on the native build and on every path of the plain build (INFERKIT_CPU_ISA), and prints one
# table. Every figure is a ratio against a baseline timed in the same run (stream read, paged
# read, Eigen GEMM, memcpy; PlainConsumer: a TU built without -m flags against its own build).
# Each run holds /tmp/inferkit-bench.lock so that benchmarks on a shared machine never overlap.
# With INFERKIT_MODEL set (scripts/fetch-model.sh), also the whole model: bench_model's decode at
# batch 1 and 512-token prefill on both builds, alternated twice, as tokens/s (two processes:
# the only figures here not timed against a same-run baseline).
# Options (environment): MIN_TIME (default 0.1 s per case), PATHS (default "avx512 avx2 baseline").
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
inferkit_install_missing
for preset in release release-plain; do
  cmake --preset "$preset" >/dev/null
  targets=(inferkit_bench_attention inferkit_bench_kv)
  [ -n "${INFERKIT_MODEL:-}" ] && targets+=(inferkit_bench_model)
  cmake --build --preset "$preset" --target "${targets[@]}"
done
out=bench-results/isa
mkdir -p "$out"
attention='BM_StreamRead|BM_PagedDecode/batch:(8|32)/ctx:(4096|16384)/shuffled:1/group:(4|8)/|'
attention+='BM_PagedDecode_(fp8_e4m3|int8)|BM_PagedPrefill|BM_PlainConsumer'
small='BM_StreamRead|BM_PagedDecode/batch:8/ctx:4096/shuffled:1/group:(4|8)/|'
small+='BM_PagedDecode_(fp8_e4m3|int8)/batch:8/ctx:4096/|BM_PagedPrefill'  # baseline is slow
kv='AppendDecode256'
# run <name> <binary> <filter> [VAR=value…]: one locked benchmark run into $out/<name>.json.
run() {
  local name=$1 bin=$2 filter=$3
  shift 3
  echo "== $name ($(uptime | sed 's/.*load/load/'))"
  env OMP_NUM_THREADS=2 "$@" flock /tmp/inferkit-bench.lock "$bin" --benchmark_filter="$filter" \
    --benchmark_min_time="${MIN_TIME:-0.1}" --benchmark_out="$out/$name.json" \
    --benchmark_out_format=json >/dev/null
}
run native.attention build/release/benchmarks/inferkit_bench_attention "$attention"
run native.kv build/release/benchmarks/inferkit_bench_kv "$kv"
for isa in ${PATHS:-avx512 avx2 baseline}; do
  filter=$attention
  [ "$isa" = baseline ] && filter=$small
  run "plain-$isa.attention" build/release-plain/benchmarks/inferkit_bench_attention "$filter" \
    INFERKIT_CPU_ISA="$isa"
  run "plain-$isa.kv" build/release-plain/benchmarks/inferkit_bench_kv "$kv" INFERKIT_CPU_ISA="$isa"
done
if [ -n "${INFERKIT_MODEL:-}" ]; then
  # On the first listed path, forced: the table shows the plain build's figures in its column.
  paths=(${PATHS:-avx512 avx2 baseline})
  for round in 1 2; do
    for preset in release release-plain; do
      run "model-$preset-$round" "build/$preset/benchmarks/inferkit_bench_model" \
        'BM_Model_Decode/batch:1/|BM_Model_Prefill/tokens:512/' INFERKIT_CPU_ISA="${paths[0]}"
    done
  done
fi
echo "== done ($(uptime | sed 's/.*load/load/'))"
python3 - "$out" ${PATHS:-avx512 avx2 baseline} <<'PY'
import json, sys, os
out, paths = sys.argv[1], sys.argv[2:]
builds = ["native"] + ["plain-" + p for p in paths]
keys = {"BM_PagedDecode": "ratio_vs_stream", "BM_PagedPrefill": "ratio_vs_eigen_gemm",
        "BM_PlainConsumer": "ratio_plain_vs_this_build", "BM_PagedKVCache": "vs_memcpy_cold"}
table, order = {}, []
for b in builds:
    for part in ("attention", "kv"):
        path = os.path.join(out, f"{b}.{part}.json")
        if not os.path.exists(path):
            continue
        for r in json.load(open(path)).get("benchmarks", []):
            name = r["name"].replace("/min_time:0.300", "").replace("/min_time:0.500", "")
            name = name.replace("/real_time", "").replace("/manual_time", "")
            for prefix, key in keys.items():
                if name.startswith(prefix) and key in r:
                    rows = [(name, key)]
                    if prefix == "BM_PagedDecode" and "ratio_vs_paged_read" in r:
                        rows += [(name, "ratio_vs_paged_read"), (name, "paged_read_vs_stream")]
                    if prefix == "BM_PagedKVCache":
                        rows.append((name, "vs_memcpy_hot"))
                        if "vs_memcpy_input" in r:
                            rows.append((name, "vs_memcpy_input"))
                    for row in rows:
                        if row not in table:
                            table[row] = {}
                            order.append(row)
                        table[row][b] = r[row[1]]
            if name.startswith("BM_StreamRead"):
                row = ("stream GB/s", "")
                if row not in table:
                    table[row] = {}
                    order.insert(0, row)
                table[row][b] = r.get("stream_bytes_per_second", 0) / 1e9
model = {}
for b in ("release", "release-plain"):
    for rnd in (1, 2):
        path = os.path.join(out, f"model-{b}-{rnd}.json")
        if not os.path.exists(path):
            continue
        for r in json.load(open(path)).get("benchmarks", []):
            name = r["name"].split("/min_time")[0].replace("/real_time", "")
            model.setdefault(name, {}).setdefault(b, []).append(r["tokens_per_s"])
for name, runs in model.items():
    native, plain = max(runs.get("release", [0])), max(runs.get("release-plain", [0]))
    row = (f"{name} tokens/s", "")
    order.append(row)
    table[row] = {"native": native, "plain-" + paths[0]: plain}
    row = (f"{name} plain/native", "")
    order.append(row)
    table[row] = {"plain-" + paths[0]: plain / native if native else 0}
width = max(len(f"{n} {k}") for n, k in order)
print(f"\n{'case':<{width}}  " + "  ".join(f"{b:>15}" for b in builds))
for row in order:
    cells = [f"{table[row][b]:15.3f}" if b in table[row] else f"{'-':>15}" for b in builds]
    print(f"{row[0] + ' ' + row[1]:<{width}}  " + "  ".join(cells))
PY
