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
