#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs every benchmark binary (Release build) with JSON output into bench-results/, then prints a
# table of the ratio counters: each is measured against a baseline in the same run, so it holds on
# a noisy shared machine where absolute times drift. Extra arguments go to every binary
# (e.g. --benchmark_filter=Decode).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
inferkit_install_missing
cmake --preset release >/dev/null
cmake --build --preset release
mkdir -p bench-results
for bin in build/release/benchmarks/inferkit_bench_*; do
  [ -x "$bin" ] || continue
  name=$(basename "$bin")
  echo "== $name"
  "$bin" --benchmark_out="bench-results/$name.json" --benchmark_out_format=json \
    --benchmark_min_time=0.2 "$@"
done
python3 - <<'PY'
import glob, json
rows = []
for path in sorted(glob.glob("bench-results/*.json")):
    for b in json.load(open(path)).get("benchmarks", []):
        for key, value in b.items():
            if isinstance(value, (int, float)) and ("ratio" in key or key.endswith("_vs_baseline")):
                rows.append((b["name"], key, value))
if rows:
    width = max(len(r[0]) for r in rows)
    print(f"\n{'benchmark':<{width}}  {'counter':<28} value")
    for name, key, value in rows:
        print(f"{name:<{width}}  {key:<28} {value:.3f}")
PY
