#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The one command for a machine with an NVIDIA GPU: configures the cuda preset for the device it
# finds, builds only the CUDA tests and benchmarks, checks that no inferkit kernel uses local
# memory (cuobjdump --dump-resource-usage: STACK or LOCAL > 0 fails) and prints registers and
# shared memory per kernel, runs the CUDA tests, then a short benchmark whose results go to the
# JSON file it names. Within 8 minutes on one GPU.
#   scripts/gpu-check.sh [--build-only] [--out FILE]
# --build-only (no GPU needed; scripts/test.sh runs it): the sm_80 + sm_90 build and the
# resource check only.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
build_only=0
out=build/gpu-check.json
while [ $# -gt 0 ]; do
  case "$1" in
    --build-only) build_only=1 ;;
    --out) out=$2; shift ;;
    *) echo "usage: scripts/gpu-check.sh [--build-only] [--out FILE]"; exit 2 ;;
  esac
  shift
done
start=$(date +%s)
inferkit_find_nvcc || { echo "gpu-check: no nvcc"; exit 1; }

if [ "$build_only" -eq 1 ]; then
  preset_dir=build/cuda
  cmake --preset cuda >/dev/null
else
  nvidia-smi --query-gpu=name,memory.total,compute_cap --format=csv,noheader
  arch=${INFERKIT_CUDA_ARCH:-$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader |
    head -1 | tr -d '. ')}
  preset_dir=build/gpu
  cmake --preset cuda -B "$preset_dir" -DCMAKE_CUDA_ARCHITECTURES="$arch" >/dev/null
fi
cmake --build "$preset_dir" --target inferkit_cuda_all

# No kernel may spill: local memory in any inferkit kernel fails the check.
inferkit_find_cuobjdump || { echo "gpu-check: no cuobjdump (pip install nvidia-cuda-cuobjdump)"; exit 1; }
usage=$(mktemp)
for bin in "$preset_dir"/tests/cuda/inferkit_test_cuda "$preset_dir"/benchmarks/inferkit_bench_cuda_*; do
  [ -x "$bin" ] && cuobjdump --dump-resource-usage "$bin"
done >"$usage"
awk '
  /^arch = / { arch = $3 }
  /Function .*inferkit/ { name = $2; sub(/:$/, "", name); next }
  name != "" && /REG:/ {
    for (i = 1; i <= NF; ++i) { split($i, kv, ":"); v[kv[1]] = kv[2] }
    cmd = "c++filt -p " name; cmd | getline pretty; close(cmd)
    printf "%-6s REG %3d  SHARED %6d  STACK %3d  LOCAL %3d  %s\n", arch, v["REG"], v["SHARED"],
           v["STACK"], v["LOCAL"], substr(pretty, 1, 110)
    if ((v["STACK"] > 0 || v["LOCAL"] > 0) && pretty ~ /^inferkit::/) bad = bad "\n  " arch " " pretty
    name = ""
  }
  END { if (bad != "") { print "gpu-check: kernels using local memory:" bad > "/dev/stderr"; exit 1 } }
' "$usage" >"$usage.table" || { sort -u "$usage.table"; rm -f "$usage" "$usage.table"; exit 1; }
sort -u "$usage.table"
rm -f "$usage" "$usage.table"
echo "gpu-check: build and resource check passed in $(($(date +%s) - start)) s"
[ "$build_only" -eq 1 ] && exit 0

timeout 300 ctest --test-dir "$preset_dir" -L cuda --output-on-failure
timeout 150 "$preset_dir"/benchmarks/inferkit_bench_cuda_attention --benchmark_out="$out" \
  --benchmark_out_format=json
python3 - "$out" <<'PY'
import json, sys
for b in json.load(open(sys.argv[1]))["benchmarks"]:
    ratio = b.get("fraction_of_memcpy", b.get("fraction_of_cublas"))
    print(f"{b['name']:<60} {ratio:6.3f}")
PY
echo "gpu-check: results in $out; done in $(($(date +%s) - start)) s"
