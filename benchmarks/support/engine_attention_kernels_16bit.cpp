// SPDX-License-Identifier: Apache-2.0
// The float16 and bfloat16 KV attention kernels of bench_model (engine_attention_kernels.hpp).
#include <inferkit/attention/cpu/kernel_instances.hpp>

INFERKIT_CPU_ATTENTION_INSTANTIATE(inferkit::float16)
INFERKIT_CPU_ATTENTION_INSTANTIATE(inferkit::bfloat16)
