// SPDX-License-Identifier: Apache-2.0
// Compiles the CPU attention kernels for packed int4 KV (std::uint8_t) once, into the library of
// quantized-KV kernels that the attention and model test binaries share (see
// instantiate_kernels_fp8_int8.cpp).
#include <tests/support/attention_kernels.hpp>

INFERKIT_CPU_ATTENTION_INSTANTIATE(std::uint8_t)
