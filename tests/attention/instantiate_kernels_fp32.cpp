// SPDX-License-Identifier: Apache-2.0
// Compiles the CPU attention kernels for float once for the attention tests (see
// tests/support/attention_kernels.hpp); the kernels are split over several TUs so they build in
// parallel. float16, the real model's KV type, is in tests/support/instantiate_kernels_fp16.cpp,
// and the KV types the model's quality tests also run (fp8 e4m3, int8, int4) in
// tests/support/instantiate_kernels_fp8_int8.cpp and instantiate_kernels_int4.cpp.
#include <tests/support/attention_kernels.hpp>

INFERKIT_CPU_ATTENTION_INSTANTIATE(float)
