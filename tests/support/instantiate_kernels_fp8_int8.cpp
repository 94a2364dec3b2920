// SPDX-License-Identifier: Apache-2.0
// Compiles the CPU attention kernels for float8_e4m3 and std::int8_t KV once, into the library of
// other-KV kernels that the attention, model and engine test binaries share (tests/CMakeLists.txt):
// the model's tests measure the quality cost of these KV formats through LlamaModel's forward, the
// engine's serve them.
#include <tests/support/attention_kernels.hpp>

INFERKIT_CPU_ATTENTION_INSTANTIATE(float8_e4m3)
INFERKIT_CPU_ATTENTION_INSTANTIATE(std::int8_t)
