// SPDX-License-Identifier: Apache-2.0
// Compiles the CPU attention kernels for bfloat16 and float8_e5m2 once for the attention tests
// (see tests/support/attention_kernels.hpp); the kernels are split over several TUs so they build
// in parallel.
#include <tests/support/attention_kernels.hpp>

INFERKIT_CPU_ATTENTION_INSTANTIATE(bfloat16)
INFERKIT_CPU_ATTENTION_INSTANTIATE(float8_e5m2)
