// SPDX-License-Identifier: Apache-2.0
// Compiles the CPU attention kernels for float16 KV (the real model's) once, into a library the
// attention, model and engine test binaries share (tests/CMakeLists.txt): the model and engine
// tests reach these kernels through LlamaModel's forward and, declared `extern template` by
// tests/support/attention_kernels.hpp (forced into their TUs: tests/CMakeLists.txt), no longer
// compile their own copy in every TU.
#include <tests/support/attention_kernels.hpp>

INFERKIT_CPU_ATTENTION_INSTANTIATE(float16)
