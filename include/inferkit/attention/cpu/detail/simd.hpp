// SPDX-License-Identifier: Apache-2.0
// The vector vocabulary of the CPU attention kernels: one policy per instruction set, each in its
// own header. Portable (GCC/clang generic vectors, lowered to whatever SIMD the target has),
// AVX2+FMA+F16C and AVX-512 (x86: compiled in function-level target regions whatever the TU's -m
// flags, and run only when core/cpu_isa.hpp says the CPU has them) and NEON (aarch64).
//
// A policy P provides: P::kLanes floats per vector P::V, P::kRegisters vector registers and the
// register-tile shapes that fit them (qk_tokens, pv_chunks, prefill_tokens), zero / set1 / load /
// store / fma / mul / add, reduce_max / reduce_add, any_greater, keep_or / exp_shifted under a
// lane bit mask (bit i: lane i), reduce_lanes (lane j = the sum of the lanes of acc[j], j <
// kLanes) and load_kv / load_kv_full (stored KV elements -> floats, like kv_to_float).
#pragma once

#include <inferkit/attention/cpu/detail/simd_common.hpp>
#include <inferkit/attention/cpu/detail/simd_portable.hpp>
#include <inferkit/core/config.hpp>
#if INFERKIT_CPU_DISPATCH
#  include <inferkit/attention/cpu/detail/simd_avx2.hpp>
#  include <inferkit/attention/cpu/detail/simd_avx512.hpp>
#endif
#if INFERKIT_HAS_NEON
#  include <inferkit/attention/cpu/detail/simd_neon.hpp>
#endif
