# SPDX-License-Identifier: Apache-2.0
# Smoke tests for examples/serve_sim.cpp: the chat scenario's table and JSON at a small user
# count, the vLLM-paper sweep's JSON, and bad flags exiting with 2.
inferkit_example_smoke(serve_sim.chat serve_sim
  REGEX "tokens/s per user, 8 users +[0-9.]+ +[0-9.]+"
  ARGS --users 8 --requests-per-user 2)
inferkit_example_smoke(serve_sim.chat_json serve_sim
  REGEX "^\\{\"users\":8,\"naive\":\\{\"tps_per_user_at_1\":[0-9.]+,\"tps_per_user_at_8\":[0-9.]+"
  ARGS --users 8 --requests-per-user 2 --json)
inferkit_example_smoke(serve_sim.vllm_paper serve_sim
  REGEX "^\\{\"threshold_s_per_token\":[0-9.]+,\"low_load_s_per_token\":[0-9.]+,\"systems\":\\{\"orca_max\":\\{\"max_rate\":[0-9.]+\\},\"orca_pow2\":\\{\"max_rate\":[0-9.]+\\},\"orca_oracle\":\\{\"max_rate\":[0-9.]+\\},\"paged\":\\{\"max_rate\":[0-9.]+\\}\\}"
  ARGS --scenario vllm-paper --json)
inferkit_example_smoke(serve_sim.bad_scenario serve_sim
  REGEX "error: --scenario: 'mystery' must be one of chat, vllm-paper"
  EXIT_CODE 2
  ARGS --scenario mystery)
inferkit_example_cli_smoke(serve_sim INTEGER --users RANGE 1 1024)
