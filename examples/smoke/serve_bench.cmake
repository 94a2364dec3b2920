# SPDX-License-Identifier: Apache-2.0
# Smoke tests for examples/serve_bench.cpp on the fetched SmolLM2: a small run prints every
# configuration beside its simulated prediction; the JSON form; the command line.
inferkit_example_smoke(serve_bench.table serve_bench
  REGEX "continuous\\+prefix\\+ngram +[0-9.]+ .*\\| +[0-9.]+"
  ARGS --requests 4 --rate 50 --max-tokens 6)
inferkit_example_smoke(serve_bench.json serve_bench
  REGEX "^\\{\"requests\":3,\"rate\":50,\"max_tokens\":4,\"cost_model\":\\{\"fixed_s\":[-0-9.e]+,.*\"configs\":.\\{\"name\":\"static\",\"throughput\":[0-9.]+"
  ARGS --requests 3 --rate 50 --max-tokens 4 --json)
inferkit_example_cli_smoke(serve_bench INTEGER --requests RANGE 1 4096)
# --kv-sweep in 8 MB of KV: each format's bytes per token are the engine's pages' (SmolLM2: 30
# layers x 3 KV heads x 64 dims, K and V: fp16 23,040; fp8 11,520 + a scale per 16-token page;
# int8 11,520 + a scale per token; int4 5,760 + a scale and a zero point per token).
inferkit_example_smoke(serve_bench.kv_sweep serve_bench
  REGEX "fp16 +23040 +22 .*fp8_e4m3 +11565 +45 .*int8 +12240 +42 .*int4 +7200 +72 .*same as fp16"
  ARGS --kv-sweep --kv-memory-mb 8 --requests 3 --rate 1000 --max-tokens 3)
