// SPDX-License-Identifier: Apache-2.0
// The CPU attention kernels the attention tests run, declared `extern template` so that every
// test TU that calls paged_decode / paged_prefill links to one instantiation, compiled by
// tests/attention/instantiate_kernels_*.cpp, instead of compiling its own. One instantiation is
// every head_dim x row-count specialization of the tile kernel for one KV type: compiling them
// in both the decode and the prefill test was the largest cost of a CI run (about 450 s per TU
// under ASan). Include it after the library headers, in every TU that runs a kernel.
#pragma once

#include <cstdint>
#include <inferkit/attention/attention.hpp>
#include <inferkit/attention/cpu/detail/simd.hpp>
#include <inferkit/attention/cpu/paged_attention.hpp>
#include <inferkit/core/bfloat16.hpp>
#include <inferkit/core/float16.hpp>
#include <inferkit/core/float8.hpp>

namespace inferkit::detail {

extern template void dispatch_paged_attention<SimdNative, float>(
    const PagedAttentionProblem<float>&);
extern template void dispatch_paged_attention<SimdNative, float16>(
    const PagedAttentionProblem<float16>&);
extern template void dispatch_paged_attention<SimdNative, bfloat16>(
    const PagedAttentionProblem<bfloat16>&);
extern template void dispatch_paged_attention<SimdNative, float8_e4m3>(
    const PagedAttentionProblem<float8_e4m3>&);
extern template void dispatch_paged_attention<SimdNative, float8_e5m2>(
    const PagedAttentionProblem<float8_e5m2>&);
extern template void dispatch_paged_attention<SimdNative, std::int8_t>(
    const PagedAttentionProblem<std::int8_t>&);
// The portable policy, tested on one type (on a machine without AVX-512 it is SimdNative).
extern template void dispatch_paged_attention<SimdPortable, float8_e4m3>(
    const PagedAttentionProblem<float8_e4m3>&);

}  // namespace inferkit::detail
