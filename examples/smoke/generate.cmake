# SPDX-License-Identifier: Apache-2.0
# Smoke tests for examples/generate.cpp on the fetched SmolLM2 (scripts/test.sh fetches it and
# exports INFERKIT_MODEL): greedy text with its speed line, the JSON form, speculation, and the
# command line.
inferkit_example_smoke(generate.greedy generate
  REGEX "\\[[0-9]+ prompt tokens, 8 generated \\(length\\); prefill [0-9.]+ tokens/s, decode [0-9.]+ tokens/s\\]"
  ARGS --prompt "The capital of France is" --max-tokens 8)
inferkit_example_smoke(generate.json generate
  REGEX "^\\{\"prompt_tokens\":\\[[0-9,]+\\],\"tokens\":\\[[0-9,]+\\],\"text\":\".*\",\"finish_reason\":\"[a-z ]+\",\"prefill_tokens_per_s\":[0-9.]+,\"decode_tokens_per_s\":[0-9.]+"
  ARGS --prompt "1, 2, 3, 4," --max-tokens 6 --json)
inferkit_example_smoke(generate.chat_spec generate
  REGEX "drafts accepted."
  ARGS --chat --prompt "Count from one to ten." --max-tokens 24 --spec ngram)
inferkit_example_cli_smoke(generate INTEGER --max-tokens RANGE 1 8192)
inferkit_example_smoke(generate.kv_int4 generate
  REGEX "\"accepted_tokens\":0,\"kv_dtype\":\"int4\"\\}"
  ARGS --prompt "1, 2, 3, 4," --max-tokens 4 --kv-dtype int4 --json)
inferkit_example_smoke(generate.bad_kv_dtype generate
  REGEX "error: --kv-dtype: 'fp32' must be one of fp16, bf16, fp8, fp8_e4m3, fp8_e5m2, int8, int4"
  EXIT_CODE 2
  ARGS --kv-dtype fp32)
