# SPDX-License-Identifier: Apache-2.0
# Smoke tests for examples/serving_step.cpp (the program docs/serving_step.md walks through): a
# step that accepts every draft (seed 1), one that rejects and truncates (seed 2), the second
# request's prefix hit, the pool at the end, the JSON form, and the command line.
inferkit_example_smoke(serving_step.accept_all serving_step
  REGEX "admit: +40-token prompt, 0 cached, 40 prefilled into 3 blocks of 16\n.*4 n-gram drafts verified in one paged_decode pass: 4 accepted, emitted 4 11 18 2 9\n.*the sequence holds K/V of 44 tokens; the prefix cache adopted 32\n.*request 2, same prompt: 32 tokens cached \\(2 blocks shared\\), 8 prefilled\n.*pool has 62 free and 2 evictable \\(cached\\) blocks"
  ARGS --seed 1)
inferkit_example_smoke(serving_step.reject serving_step
  REGEX "4 n-gram drafts verified in one paged_decode pass: 1 accepted, emitted 4 [0-9]+\n.*the sequence holds K/V of 41 tokens"
  ARGS --seed 2)
inferkit_example_smoke(serving_step.json serving_step
  REGEX "^\\{\"seed\":1,\"prompt_tokens\":40,\"first_hit_tokens\":0,\"prefill_tokens\":40,\"blocks_after_prefill\":3,\"drafts\":4,\"accepted\":4,\"emitted\":.4,11,18,2,9.,\"tokens_after_commit\":44,\"inserted_tokens\":32,\"second_hit_tokens\":32,\"second_prefill_tokens\":8,\"shared_blocks\":2,\"free_blocks_at_end\":62,\"evictable_blocks_at_end\":2\\}"
  ARGS --json)
inferkit_example_cli_smoke(serving_step INTEGER --seed RANGE 0 18446744073709551615)
