# SPDX-License-Identifier: Apache-2.0
# Smoke tests for examples/prefix_cache.cpp: the exercise passes the 55% bar with the bounded
# (segmented LRU) cache, the JSON form carries every figure, the default deployment fits and one
# that does not is refused, the command line, and bad values exit with 2.
inferkit_example_smoke(prefix_cache.exercise prefix_cache
  REGEX "bounded \\(segmented LRU\\) hit rate above 55%: yes"
  ARGS --requests 1000 --capacity 500)
inferkit_example_smoke(prefix_cache.json prefix_cache
  REGEX "^\\{\"workload\":\\{\"requests\":1000,.*\"bounded\":\\{\"hit_rate\":0\\.5[5-9][0-9]*,.*\"unbounded\":\\{\"hit_rate\":0\\.[0-9]+,.*\"bounded_passes\":true,\"system_prompt\":\\{\"requests\":100,.*\"gpus\":4,.*\"tokens_saved\":198000,\"hits\":99,\"full_prefill_ms\":[0-9.]+,\"ms_saved_per_request\":[0-9.]+"
  ARGS --json)
inferkit_example_smoke(prefix_cache.block_size_16 prefix_cache
  REGEX "llama-3-70b on 4 x a100-80gb, block size 16\n  prefill tokens saved: 198000 \\(99 hits of 100 requests\\)"
  ARGS --block-size 16)
inferkit_example_smoke(prefix_cache.does_not_fit prefix_cache
  REGEX "error: llama-3-70b does not fit on 1 x a100-80gb: weights 141\\.2 GB"
  EXIT_CODE 2
  ARGS --gpus 1)
inferkit_example_smoke(prefix_cache.bad_shared prefix_cache
  REGEX "error: --shared: '1\\.5' must be a number in \\[0, 1\\]"
  EXIT_CODE 2
  ARGS --shared 1.5)
inferkit_example_smoke(prefix_cache.unknown_model prefix_cache
  REGEX "error: .*model = 'gpt-5' is not a known preset"
  EXIT_CODE 2
  ARGS --model gpt-5)
inferkit_example_cli_smoke(prefix_cache INTEGER --requests RANGE 1 1000000)
