// SPDX-License-Identifier: Apache-2.0
// The CPU attention kernels the tests run, declared extern (attention/cpu/kernel_instances.hpp)
// so that every test TU that calls paged_decode / paged_prefill links to one instantiation,
// compiled by tests/attention/instantiate_kernels_*.cpp and tests/support/instantiate_kernels_*.cpp
// (the KV types the model tests also run), instead of compiling its own: compiling them in both
// the decode and the prefill test was once the largest cost of a CI run (about 450 s per TU under
// ASan).
#pragma once

#include <cstdint>
#include <inferkit/attention/cpu/kernel_instances.hpp>
#include <inferkit/core/bfloat16.hpp>
#include <inferkit/core/float16.hpp>
#include <inferkit/core/float8.hpp>

INFERKIT_CPU_ATTENTION_EXTERN(float)
INFERKIT_CPU_ATTENTION_EXTERN(float16)
INFERKIT_CPU_ATTENTION_EXTERN(bfloat16)
INFERKIT_CPU_ATTENTION_EXTERN(float8_e4m3)
INFERKIT_CPU_ATTENTION_EXTERN(float8_e5m2)
INFERKIT_CPU_ATTENTION_EXTERN(std::int8_t)
INFERKIT_CPU_ATTENTION_EXTERN(std::uint8_t)
