# SPDX-License-Identifier: Apache-2.0
# Smoke tests for examples/paged_memory.cpp: the default table (paged waste under 4%, the
# max-length reservation inside 20-40%), the JSON form with every figure, the command line, and
# bad arguments exiting with 2.
inferkit_example_smoke(paged_memory.table paged_memory
  REGEX "contiguous_max +(2[0-9]|3[0-9])\\.[0-9]%.*paged +9[6-9]\\.[0-9]%.*paged wastes [0-3]\\.[0-9]%"
  ARGS --requests 500)
inferkit_example_smoke(paged_memory.json paged_memory
  REGEX "^\\{\"requests\":500,\"seed\":1,\"prompt_mean\":[0-9.]+,\"output_mean\":[0-9.]+,.*\"contiguous_max\":\\{\"used_fraction\":0\\.[23][0-9]*,\"peak_requests\":32,\"mean_requests\":[0-9.]+,\"steps\":[0-9]+,\"preemptions\":0\\},\"contiguous_exact\":\\{\"used_fraction\":0\\.[0-9]+,.*\"paged\":\\{\"used_fraction\":0\\.9[6-9][0-9]*,.*\"paged_waste\":0\\.0[0-3][0-9]*,\"paper_contiguous_range\":\\{\"low\":0\\.204,\"high\":0\\.382,\"contiguous_max_inside\":true\\}"
  ARGS --requests 500 --json)
inferkit_example_smoke(paged_memory.budget_too_small paged_memory
  REGEX "error: --kv-tokens = 100 must be >= --max-len = 2048"
  EXIT_CODE 2
  ARGS --kv-tokens 100)
inferkit_example_smoke(paged_memory.bad_policy paged_memory
  REGEX "error: --max-tokens: 'often' must be one of pow2, exact"
  EXIT_CODE 2
  ARGS --max-tokens often)
inferkit_example_cli_smoke(paged_memory INTEGER --requests RANGE 1 1000000)
