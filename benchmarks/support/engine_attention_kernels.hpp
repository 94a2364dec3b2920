// SPDX-License-Identifier: Apache-2.0
// Forced into bench_model (benchmarks/CMakeLists.txt), which builds Engines: the attention kernels
// of the six KV types an engine serves are declared extern there and compiled once, in three TUs
// that build in parallel (benchmarks/support/engine_attention_kernels*.cpp), instead of serially in
// bench_model.cpp (inferkit/attention/cpu/kernel_instances.hpp).
#pragma once

#include <inferkit/attention/cpu/kernel_instances.hpp>

INFERKIT_CPU_ATTENTION_ENGINE_KV_TYPES(INFERKIT_CPU_ATTENTION_EXTERN)
