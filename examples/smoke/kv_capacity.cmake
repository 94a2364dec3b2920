# SPDX-License-Identifier: Apache-2.0
# Smoke tests for examples/kv_capacity.cpp: the Llama-3-70B table on 4 x A100-80GB (80 GiB each),
# the same GPUs counted as 80 * 10^9 bytes, the JSON form, the model list, the command line, and
# each bad argument exiting with 2 and a one-line error.
inferkit_example_smoke(kv_capacity.table kv_capacity
  REGEX "4 x a100-80gb: 4 x 85\\.9 GB = 343\\.6 GB \\(320\\.0 GiB\\).*fp16 +327680 +512810 +125.*int4 +81920 +2051240 +500"
  ARGS --model llama-3-70b --gpus 4 --gpu a100-80gb --context 4096)
inferkit_example_smoke(kv_capacity.decimal_gb kv_capacity
  REGEX "4 x 80 GB: 4 x 80\\.0 GB = 320\\.0 GB.*fp16 +327680 +447998 +109.*int4 +81920 +1791992 +437"
  ARGS --model llama-3-70b --gpus 4 --gpu-mem-gb 80 --context 4096)
inferkit_example_smoke(kv_capacity.json kv_capacity
  REGEX "^\\{\"model\":\"llama-3-70b\",\"estimate\":false,\"layers\":80,\"q_heads\":64,\"kv_heads\":8,\"head_dim\":128,\"parameters\":70600000000,\"gpu\":\"a100-80gb\",\"num_gpus\":4,\"gpu_memory_bytes\":85899345920,.*\"kv_pool_bytes\":168037645312,\"bytes_per_token\":\\{\"fp32\":655360,\"fp16\":327680,.*\"max_users\":\\{\"fp32\":62,\"fp16\":125,\"bf16\":125,\"fp8\":250,\"int8\":250,\"int4\":500\\},\"int4_users_vs_fp16\":4\\.0,\"gqa_ratio\":8\\}"
  ARGS --model llama-3-70b --gpus 4 --context 4096 --json)
# --kv-scales inferkit: the bytes the engine's pages take for SmolLM2 (tests/perf checks the
# format against PagedKVCache): fp8 amortizes a scale per 16-token page, int8 and int4 keep one
# (and int4 a zero point) per token.
inferkit_example_smoke(kv_capacity.inferkit_scales kv_capacity
  REGEX "fp16 +23040 .*fp8 +11565 .*int8 +12240 .*int4 +7200 "
  ARGS --model smollm2-135m --gpus 1 --gpu-mem-gb 1 --context 512 --kv-scales inferkit)
inferkit_example_smoke(kv_capacity.list_models kv_capacity
  REGEX "gpt-4-est.*estimate"
  ARGS --list-models)
inferkit_example_smoke(kv_capacity.list_models_json kv_capacity
  REGEX "^.\\{\"name\":\"llama-3-8b\",\"layers\":32,.*\"name\":\"gpt-4-est\",.*\"estimate\":true\\}"
  ARGS --list-models --json)
inferkit_example_smoke(kv_capacity.unknown_model kv_capacity
  REGEX "error: .*model = 'gpt-5' is not a known preset"
  EXIT_CODE 2
  ARGS --model gpt-5)
inferkit_example_smoke(kv_capacity.unknown_gpu kv_capacity
  REGEX "error: .*hardware = 'b200' is not a known preset \\(known: a100-40gb, a100-80gb, h100-sxm, h200\\)"
  EXIT_CODE 2
  ARGS --gpu b200)
inferkit_example_smoke(kv_capacity.zero_gpus kv_capacity
  REGEX "error: --gpus: '0' must be an integer in \\[1, 1000000\\]"
  EXIT_CODE 2
  ARGS --gpus 0)
inferkit_example_smoke(kv_capacity.huge_context kv_capacity
  REGEX "error: --context: '99999999999' must be an integer in \\[1, 16777216\\]"
  EXIT_CODE 2
  ARGS --context 99999999999)
inferkit_example_smoke(kv_capacity.negative_memory kv_capacity
  REGEX "error: --gpu-mem-gb: '-80' must be a number in \\[0, 1e\\+09\\]"
  EXIT_CODE 2
  ARGS --gpu-mem-gb -80)
inferkit_example_smoke(kv_capacity.zero_memory kv_capacity
  REGEX "error: --gpu-mem-gb = 0 must be > 0"
  EXIT_CODE 2
  ARGS --gpu-mem-gb 0)
inferkit_example_smoke(kv_capacity.bad_dtype kv_capacity
  REGEX "error: --weights-dtype: 'fp64' must be one of bf16, fp16, fp8, int8, int4"
  EXIT_CODE 2
  ARGS --weights-dtype fp64)
inferkit_example_smoke(kv_capacity.does_not_fit kv_capacity
  REGEX "error: llama-3-405b does not fit"
  EXIT_CODE 2
  ARGS --model llama-3-405b --gpus 1)
inferkit_example_cli_smoke(kv_capacity INTEGER --gpus RANGE 1 1000000)
