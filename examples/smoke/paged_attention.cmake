# SPDX-License-Identifier: Apache-2.0
# Smoke tests for examples/paged_attention.cpp on a small batch: paged_decode passes against the
# double reference, the JSON form carries every figure, split-KV + merge matches one full decode,
# NaN in unwritten slots stays out of the output, and bad flags exit with 2. Speed is only
# checked for format (a median and a range per ratio): the machine is noisy.
# `paged_attention_small` matches a printed error below 1e-4 (or exactly 0), as the text writes it
# ("%.2e") and `paged_attention_small_json` as nlohmann/json does (0, or 4 digits at most:
# 7.273e-08, 3e-05).
set(paged_attention_small "(0\\.0+e\\+00|[0-9]\\.[0-9]+e-(0[5-9]|[1-9][0-9]))")
set(paged_attention_small_json "(0|[0-9][.0-9]*e-(0[5-9]|[1-9][0-9]))")
inferkit_example_smoke(paged_attention.pass paged_attention
  REGEX "max abs error: output ${paged_attention_small}, LSE ${paged_attention_small} \\(bound 1e-04\\): PASS"
  ARGS --batch 2 --context 300 --runs 2)
inferkit_example_smoke(paged_attention.json paged_attention
  REGEX "^\\{\"model\":\"llama-3-8b layer\",\"q_heads\":32,\"kv_heads\":8,\"head_dim\":128,\"block_size\":16,\"batch\":2,\"context\":300,\"seed\":1,\"threads\":[0-9]+,\"pages\":38,.*\"correctness\":\\{\"sequences\":2,\"max_abs_err_out\":${paged_attention_small_json},\"max_abs_err_lse\":${paged_attention_small_json},\"bound\":0\\.0001,\"pass\":true\\},\"gqa\":\\{\"kv_bytes_per_step\":2457600,\"kv_bytes_per_step_without_gqa\":9830400,\"bytes_ratio\":4,\"decode_ms_without_gqa\":[0-9.]+,\"speedup\":[0-9.]+,\"speedup_min\":[0-9.]+,\"speedup_max\":[0-9.]+\\},\"speed\":\\{\"runs\":2,\"decode_ms\":[0-9.]+,\"decode_gb_per_s\":[0-9.]+,\"stream_gb_per_s\":[0-9.]+,\"ratio\":[0-9.]+,\"ratio_min\":[0-9.]+,\"ratio_max\":[0-9.]+,\"may_be_cached\":true\\},\"merge\":\\{\"pages\":19,\"first_half_pages\":9,\"split_tokens\":[0-9]+,\"max_abs_diff_out\":${paged_attention_small_json},\"max_abs_diff_lse\":${paged_attention_small_json}\\},\"unwritten\":\\{\"sequence\":1,\"tokens\":300,\"nan_slots\":4,\"truncated\":false,\"finite\":true,"
  ARGS --batch 2 --context 300 --runs 2 --json)
inferkit_example_smoke(paged_attention.speed paged_attention
  REGEX "GQA makes it [0-9.]+x faster \\([0-9.]+-[0-9.]+ over the runs\\).*paged_decode: [0-9.]+ ms per step \\(median\\) = [0-9.]+ GB/s of KV.*streaming read of the same bytes \\(a parallel sum\\): [0-9.]+ GB/s \\(median\\).*paged_decode / streaming read = [0-9.]+ \\(median; [0-9.]+-[0-9.]+ over the runs\\)"
  ARGS --batch 2 --context 300 --runs 2)
inferkit_example_smoke(paged_attention.merge paged_attention
  REGEX "merged vs one full decode: max abs diff output ${paged_attention_small}, LSE ${paged_attention_small}"
  ARGS --batch 2 --context 300 --runs 2)
inferkit_example_smoke(paged_attention.unwritten_nan paged_attention
  REGEX "NaN in K and V of the 8 unused slots: output finite: yes"
  ARGS --batch 2 --context 256 --runs 2)
inferkit_example_smoke(paged_attention.bad_batch paged_attention
  REGEX "error: --batch: '0' must be an integer in \\[1, 256\\]"
  EXIT_CODE 2
  ARGS --batch 0)
inferkit_example_smoke(paged_attention.too_many_tokens paged_attention
  REGEX "error: --batch x --context = 1048576 must be <= 131072 tokens"
  EXIT_CODE 2
  ARGS --batch 256 --context 4096)
inferkit_example_cli_smoke(paged_attention INTEGER --batch RANGE 1 256)
