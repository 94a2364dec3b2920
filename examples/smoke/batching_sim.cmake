# SPDX-License-Identifier: Apache-2.0
# Smoke tests for examples/batching_sim.cpp: continuous batching holds slot utilization above
# 80% on the Pareto(1.5, 20) exercise, the JSON carries both systems, and bad flags exit with 2.
inferkit_example_smoke(batching_sim.exercise batching_sim
  REGEX "continuous batching holds slot utilization above 80% while requests wait: yes"
  ARGS --requests 50 --batch 8)
inferkit_example_smoke(batching_sim.json batching_sim
  REGEX "^\\{\"static\":\\{\"utilization\":0\\.[0-5][0-9]*,.*\"continuous\":\\{\"utilization\":(0\\.[89][0-9]*|1\\.0+),.*\"throughput_ratio\":[0-9.]+"
  ARGS --json)
inferkit_example_smoke(batching_sim.bad_batch batching_sim
  REGEX "error: --batch: '0' must be an integer in \\[1, 4096\\]"
  EXIT_CODE 2
  ARGS --batch 0)
inferkit_example_cli_smoke(batching_sim INTEGER --requests RANGE 1 100000)
