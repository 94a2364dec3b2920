# SPDX-License-Identifier: Apache-2.0
# Smoke tests for examples/paged_memory.cpp: the default table (paged waste under 4%, the
# max-length reservation inside 20-40%), the JSON form, and bad arguments exiting with 2.
inferkit_example_smoke(paged_memory.table paged_memory
  REGEX "contiguous_max +(2[0-9]|3[0-9])\\.[0-9]%.*paged +9[6-9]\\.[0-9]%.*paged wastes [0-3]\\.[0-9]%"
  ARGS --requests 500)
inferkit_example_smoke(paged_memory.json paged_memory
  REGEX "^\\{\"contiguous_max\":\\{\"used_fraction\":0\\.[23][0-9]*,\"peak_requests\":32\\},\"contiguous_exact\":\\{\"used_fraction\":0\\.[0-9]+,\"peak_requests\":[0-9]+\\},\"paged\":\\{\"used_fraction\":0\\.9[6-9][0-9]*,\"peak_requests\":[0-9]+\\}\\}"
  ARGS --requests 500 --json)
inferkit_example_smoke(paged_memory.budget_too_small paged_memory
  REGEX "error: --kv-tokens must be >= --max-len"
  EXIT_CODE 2
  ARGS --kv-tokens 100)
inferkit_example_smoke(paged_memory.unknown_flag paged_memory
  REGEX "error: unknown flag '--bogus'"
  EXIT_CODE 2
  ARGS --bogus)
inferkit_example_smoke(paged_memory.bad_policy paged_memory
  REGEX "error: --max-tokens must be pow2 or exact"
  EXIT_CODE 2
  ARGS --max-tokens often)
