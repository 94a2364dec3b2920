# SPDX-License-Identifier: Apache-2.0
# Smoke tests for examples/speculative.cpp: the study table with its sources, the --json form
# carrying the same rows (and an --alpha row), the command line, and bad values.
inferkit_example_smoke(speculative_table speculative
  REGEX "draft-target +0\\.775 .*\\| 2-3x \\[1\\]\n.*EAGLE +0\\.825 .*\\[2\\] \\[3\\]\n.*n-gram +0\\.500 .*\\[4\\].*\\[1\\] Leviathan, Kalman, Matias.*arXiv:2211\\.17192"
  ARGS --vocab 128 --rounds 500)
inferkit_example_smoke(speculative_json speculative
  REGEX "^\\{\"vocab\":128,\"rounds\":500,\"seed\":1,\"k\":5,.*\"rows\":.\\{\"method\":\"draft-target\",\"alpha_target\":0\\.775,\"acceptance\":[0-9.]+,\"tokens_per_round\":\\{\"linear\":[0-9.]+,\"linear_theory\":[0-9.]+,\"tree\":[0-9.]+,\"dynamic_tree\":[0-9.]+\\},\"speedup\":\\{\"linear\":[0-9.]+,\"tree\":[0-9.]+,\"dynamic_tree\":[0-9.]+\\},\"published_speedup\":\"2-3x\",\"source\":\"\\[1\\]\"\\},\\{\"method\":\"EAGLE\".*\\{\"method\":\"n-gram\".*\\{\"method\":\"--alpha\",\"alpha_target\":0\\.7,.*\"sources\":\\{\"\\[1\\]\":\"Leviathan"
  ARGS --vocab 128 --rounds 500 --alpha 0.7 --json)
inferkit_example_smoke(speculative_bad_value speculative
  REGEX "error: --alpha: '1\\.5' must be a number in \\[0\\.01, 0\\.99\\]" EXIT_CODE 2 ARGS --alpha 1.5)
inferkit_example_cli_smoke(speculative INTEGER --vocab RANGE 8 4096)
