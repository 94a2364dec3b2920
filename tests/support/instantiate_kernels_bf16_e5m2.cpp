// SPDX-License-Identifier: Apache-2.0
// Compiles the CPU attention kernels for bfloat16 and float8_e5m2 KV once, into the library of
// other-KV kernels that the attention, model and engine test binaries share (tests/CMakeLists.txt;
// see tests/support/attention_kernels.hpp): the engine serves every KV format but fp32.
#include <tests/support/attention_kernels.hpp>

INFERKIT_CPU_ATTENTION_INSTANTIATE(bfloat16)
INFERKIT_CPU_ATTENTION_INSTANTIATE(float8_e5m2)
