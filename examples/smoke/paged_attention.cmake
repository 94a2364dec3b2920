# SPDX-License-Identifier: Apache-2.0
# Smoke tests for examples/paged_attention.cpp on a small batch: paged_decode passes against the
# double reference, the JSON form carries every figure, split-KV + merge matches one full decode,
# NaN in unwritten slots stays out of the output, and bad flags exit with 2. Speed is only
# checked for format: the machine is noisy. `paged_attention_small` matches a printed error
# below 1e-4 (or exactly 0).
set(paged_attention_small "(0\\.0+e\\+00|[0-9]\\.[0-9]+e-(0[5-9]|[1-9][0-9]))")
inferkit_example_smoke(paged_attention.pass paged_attention
  REGEX "max abs error: output ${paged_attention_small}, LSE ${paged_attention_small} \\(bound 1e-04\\): PASS"
  ARGS --batch 2 --context 300 --runs 2)
inferkit_example_smoke(paged_attention.json paged_attention
  REGEX "^\\{\"batch\":2,\"context\":300,\"seed\":1,\"threads\":[0-9]+,\"pages\":38,.*\"correctness\":\\{\"sequences\":2,\"max_abs_err_out\":${paged_attention_small},\"max_abs_err_lse\":${paged_attention_small},\"bound\":1e-04,\"pass\":true\\},\"gqa\":\\{\"kv_bytes_per_step\":2457600,\"kv_bytes_per_step_without_gqa\":9830400\\},\"speed\":\\{\"runs\":2,\"decode_ms\":[0-9.]+,\"decode_gb_per_s\":[0-9.]+,\"stream_gb_per_s\":[0-9.]+,\"ratio\":[0-9.]+\\},\"merge\":\\{\"pages\":19,\"first_half_pages\":9,\"max_abs_diff_out\":${paged_attention_small},\"max_abs_diff_lse\":${paged_attention_small}\\},\"unwritten\":\\{\"sequence\":1,\"tokens\":300,\"nan_slots\":4,\"finite\":true,"
  ARGS --batch 2 --context 300 --runs 2 --json)
inferkit_example_smoke(paged_attention.speed paged_attention
  REGEX "paged_decode: [0-9.]+ ms per step = [0-9.]+ GB/s of KV.*streaming read \\(sum of a 256 MiB buffer\\): [0-9.]+ GB/s.*paged_decode / streaming read = [0-9.]+"
  ARGS --batch 2 --context 300 --runs 2)
inferkit_example_smoke(paged_attention.merge paged_attention
  REGEX "merged vs one full decode: max abs diff output ${paged_attention_small}, LSE ${paged_attention_small}"
  ARGS --batch 2 --context 300 --runs 2)
inferkit_example_smoke(paged_attention.unwritten_nan paged_attention
  REGEX "NaN in K and V of the 8 unused slots: output finite: yes"
  ARGS --batch 2 --context 256 --runs 2)
inferkit_example_smoke(paged_attention.bad_batch paged_attention
  REGEX "error: --batch = 0 must be in \\[1, 256\\]"
  EXIT_CODE 2
  ARGS --batch 0)
inferkit_example_smoke(paged_attention.too_many_tokens paged_attention
  REGEX "error: --batch x --context = 1048576 must be <= 131072 tokens"
  EXIT_CODE 2
  ARGS --batch 256 --context 4096)
inferkit_example_smoke(paged_attention.unknown_flag paged_attention
  REGEX "error: unknown flag '--bogus'"
  EXIT_CODE 2
  ARGS --bogus)
