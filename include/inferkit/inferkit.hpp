// SPDX-License-Identifier: Apache-2.0
// Umbrella header: every public inferkit header except the CUDA ones (.cuh, nvcc only) and the
// CPU kernel internals under attention/cpu/ (attention.hpp brings in what it dispatches to; of
// that folder only kernel_instances.hpp, for compiling the kernels once per program, is API).
// Library code, tests and examples include exactly what they use; this header is for users.
// Threads: includes only; each header it includes states its own rule.
#pragma once

// IWYU pragma: begin_exports
#include <inferkit/attention/attention.hpp>
#include <inferkit/attention/attention_params.hpp>
#include <inferkit/attention/cpu/kernel_instances.hpp>
#include <inferkit/attention/merge_states.hpp>
#include <inferkit/attention/reference.hpp>
#include <inferkit/core/backend.hpp>
#include <inferkit/core/bfloat16.hpp>
#include <inferkit/core/config.hpp>
#include <inferkit/core/dtype.hpp>
#include <inferkit/core/error.hpp>
#include <inferkit/core/float16.hpp>
#include <inferkit/core/float8.hpp>
#include <inferkit/core/int4.hpp>
#include <inferkit/core/model_shape.hpp>
#include <inferkit/core/request_id.hpp>
#include <inferkit/core/rng.hpp>
#include <inferkit/core/token_id.hpp>
#include <inferkit/engine/async_engine.hpp>
#include <inferkit/engine/engine.hpp>
#include <inferkit/engine/latency_histogram.hpp>
#include <inferkit/engine/stop_string_matcher.hpp>
#include <inferkit/kv/block_allocator.hpp>
#include <inferkit/kv/block_table.hpp>
#include <inferkit/kv/kv_cache.hpp>
#include <inferkit/kv/kv_quantization.hpp>
#include <inferkit/kv/paged_kv_cache.hpp>
#include <inferkit/kv/paged_kv_view.hpp>
#include <inferkit/model/bpe_tokenizer.hpp>
#include <inferkit/model/chat_template.hpp>
#include <inferkit/model/ggml_type.hpp>
#include <inferkit/model/gguf.hpp>
#include <inferkit/model/gguf_tensor_info.hpp>
#include <inferkit/model/gguf_value.hpp>
#include <inferkit/model/int8_linear.hpp>
#include <inferkit/model/llama_config.hpp>
#include <inferkit/model/llama_model.hpp>
#include <inferkit/model/quantized_linear.hpp>
#include <inferkit/model/stream_decoder.hpp>
#include <inferkit/perf/hardware.hpp>
#include <inferkit/perf/kv_memory_planner.hpp>
#include <inferkit/perf/roofline.hpp>
#include <inferkit/plan/step_plan.hpp>
#include <inferkit/prefix/radix_tree.hpp>
#include <inferkit/sched/continuous_scheduler.hpp>
#include <inferkit/sched/request.hpp>
#include <inferkit/sched/scheduler_config.hpp>
#include <inferkit/sched/scheduling_policy.hpp>
#include <inferkit/sched/serving_metrics.hpp>
#include <inferkit/sched/static_scheduler.hpp>
#include <inferkit/sim/cost_model.hpp>
#include <inferkit/sim/linear_cost_model.hpp>
#include <inferkit/sim/simulator.hpp>
#include <inferkit/sim/trace_csv.hpp>
#include <inferkit/sim/workload.hpp>
#include <inferkit/spec/acceptance_stats.hpp>
#include <inferkit/spec/chain_verifier.hpp>
#include <inferkit/spec/goodness_of_fit.hpp>
#include <inferkit/spec/logprobs.hpp>
#include <inferkit/spec/ngram_drafter.hpp>
#include <inferkit/spec/sampling.hpp>
#include <inferkit/spec/simulated_drafter.hpp>
#include <inferkit/spec/token_tree.hpp>
#include <inferkit/spec/tree_verifier.hpp>
// IWYU pragma: end_exports

/// inferkit: header-only C++20 parts of LLM inference. Every public name is in this flat
/// namespace (folders organize files, not names); `inferkit::detail` holds internals users never
/// name. The API reference is built from these `///` comments by `scripts/docs.sh`.
namespace inferkit {}
