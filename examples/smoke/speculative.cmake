# SPDX-License-Identifier: Apache-2.0
# Smoke tests for examples/speculative.cpp: the study table, its --json form, and a bad flag.
inferkit_example_smoke(speculative_table speculative
  REGEX "draft-target +70-85%.*\n.*EAGLE.*\n.*n-gram" ARGS --vocab 128 --rounds 500)
inferkit_example_smoke(speculative_json speculative
  REGEX "^\\{\"linear\":\\{\"tokens_per_round\":[0-9.]+,\"acceptance\":[0-9.]+,\"speedup\":[0-9.]+\\},\"tree\":\\{.*\\},\"dynamic_tree\":\\{.*\\}\\}"
  ARGS --vocab 128 --rounds 500 --alpha 0.7 --json)
inferkit_example_smoke(speculative_bad_flag speculative
  REGEX "error: unknown flag" EXIT_CODE 2 ARGS --bogus 1)
inferkit_example_smoke(speculative_bad_value speculative
  REGEX "error: --alpha" EXIT_CODE 2 ARGS --alpha 1.5)
