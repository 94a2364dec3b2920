// SPDX-License-Identifier: Apache-2.0
// The int8 and packed int4 KV attention kernels of bench_model (engine_attention_kernels.hpp).
#include <cstdint>
#include <inferkit/attention/cpu/kernel_instances.hpp>

INFERKIT_CPU_ATTENTION_INSTANTIATE(std::int8_t)
INFERKIT_CPU_ATTENTION_INSTANTIATE(std::uint8_t)
