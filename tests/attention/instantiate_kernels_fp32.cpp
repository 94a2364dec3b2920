// SPDX-License-Identifier: Apache-2.0
// Compiles the CPU attention kernels for float once for the attention tests (see
// tests/support/attention_kernels.hpp); the kernels are split over several TUs so they build in
// parallel. float16, the real model's KV type, is in tests/support/instantiate_kernels_fp16.cpp,
// shared with the model and engine tests.
#include <tests/support/attention_kernels.hpp>

INFERKIT_CPU_ATTENTION_INSTANTIATE(float)
