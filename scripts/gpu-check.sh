#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The one prepared script for a machine with an NVIDIA GPU: builds every CUDA target with the
# cuda preset, runs the CUDA tests (against the CPU oracle on the same seeds) and the CUDA
# benchmarks. Needs nvcc and a GPU; prints a short summary.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
inferkit_find_nvcc || { echo "gpu-check: no nvcc"; exit 1; }
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
arch=${INFERKIT_CUDA_ARCH:-90}
cmake --preset cuda -DCMAKE_CUDA_ARCHITECTURES="$arch" -DINFERKIT_BUILD_BENCHMARKS=ON >/dev/null
cmake --build --preset cuda --target inferkit_cuda_all
ctest --preset cuda -L cuda --output-on-failure
for bin in build/cuda/benchmarks/inferkit_bench_cuda_*; do
  [ -x "$bin" ] && "$bin" --benchmark_min_time=0.2
done
echo "gpu-check: done"
