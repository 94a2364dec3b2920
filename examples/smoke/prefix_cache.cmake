# SPDX-License-Identifier: Apache-2.0
# Smoke tests for examples/prefix_cache.cpp: the lesson's exercise passes the 55% bar with the
# bounded (segmented LRU) cache, the JSON form carries every figure, and bad flags exit with 2.
inferkit_example_smoke(prefix_cache.exercise prefix_cache
  REGEX "bounded \\(segmented LRU\\) hit rate above 55%: yes"
  ARGS --requests 1000 --capacity 500)
inferkit_example_smoke(prefix_cache.json prefix_cache
  REGEX "^\\{\"bounded\":\\{\"hit_rate\":0\\.5[5-9][0-9]*,.*\"unbounded\":\\{\"hit_rate\":0\\.[0-9]+,.*\"system_prompt\":\\{\"tokens_saved\":198000,\"ms_saved_per_request\":[0-9.]+"
  ARGS --json)
inferkit_example_smoke(prefix_cache.block_size_16 prefix_cache
  REGEX "prefill tokens saved: 198000 \\(99 hits of 100 requests\\)"
  ARGS --block-size 16)
inferkit_example_smoke(prefix_cache.bad_shared prefix_cache
  REGEX "error: --shared = 1.5.* must be in \\[0, 1\\]"
  EXIT_CODE 2
  ARGS --shared 1.5)
inferkit_example_smoke(prefix_cache.unknown_model prefix_cache
  REGEX "error: .*model = 'gpt-5' is not a known preset"
  EXIT_CODE 2
  ARGS --model gpt-5)
inferkit_example_smoke(prefix_cache.unknown_flag prefix_cache
  REGEX "error: unknown flag --frobnicate"
  EXIT_CODE 2
  ARGS --frobnicate 1)
