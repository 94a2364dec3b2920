# SPDX-License-Identifier: Apache-2.0
# Smoke tests for examples/kv_capacity.cpp: the lesson's 4xA100-80GB Llama-3-70B table, the JSON
# form, the model list, and each bad argument exiting with 2 and a one-line error.
inferkit_example_smoke(kv_capacity.table kv_capacity
  REGEX "int4 +81920 +1791992 +437"
  ARGS --model llama-3-70b --gpus 4 --gpu-mem-gb 80 --context 4096)
inferkit_example_smoke(kv_capacity.json kv_capacity
  REGEX "\"bytes_per_token\":{\"fp32\":655360,\"fp16\":327680,.*\"max_users\":{\"fp32\":54,\"fp16\":109,\"bf16\":109,\"fp8\":218,\"int8\":218,\"int4\":437}"
  ARGS --model llama-3-70b --gpus 4 --gpu-mem-gb 80 --context 4096 --json)
inferkit_example_smoke(kv_capacity.list_models kv_capacity
  REGEX "gpt-4-est.*estimate"
  ARGS --list-models)
inferkit_example_smoke(kv_capacity.unknown_model kv_capacity
  REGEX "error: .*model = 'gpt-5' is not a known preset"
  EXIT_CODE 2
  ARGS --model gpt-5)
inferkit_example_smoke(kv_capacity.zero_gpus kv_capacity
  REGEX "error: --gpus = 0 must be"
  EXIT_CODE 2
  ARGS --gpus 0)
inferkit_example_smoke(kv_capacity.negative_memory kv_capacity
  REGEX "error: --gpu-mem-gb = -80.* must be > 0"
  EXIT_CODE 2
  ARGS --gpu-mem-gb -80)
inferkit_example_smoke(kv_capacity.does_not_fit kv_capacity
  REGEX "error: llama-3-405b does not fit"
  EXIT_CODE 2
  ARGS --model llama-3-405b --gpus 1 --gpu-mem-gb 80)
