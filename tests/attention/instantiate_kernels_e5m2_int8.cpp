// SPDX-License-Identifier: Apache-2.0
// Compiles the CPU attention kernels for float8_e5m2 and std::int8_t once for the attention tests
// (see tests/support/attention_kernels.hpp); the kernels are split over three TUs so they build in
// parallel.
#include <tests/support/attention_kernels.hpp>

INFERKIT_CPU_ATTENTION_INSTANTIATE(float8_e5m2)
INFERKIT_CPU_ATTENTION_INSTANTIATE(std::int8_t)
