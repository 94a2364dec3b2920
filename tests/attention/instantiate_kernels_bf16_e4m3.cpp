// SPDX-License-Identifier: Apache-2.0
// Compiles the CPU attention kernels for bfloat16 and float8_e4m3 once for the attention tests (see
// tests/support/attention_kernels.hpp); the kernels are split over three TUs so they build in
// parallel.
#include <tests/support/attention_kernels.hpp>

namespace inferkit::detail {

template void dispatch_paged_attention<SimdNative, bfloat16>(
    const PagedAttentionProblem<bfloat16>&);
template void dispatch_paged_attention<SimdNative, float8_e4m3>(
    const PagedAttentionProblem<float8_e4m3>&);
#if INFERKIT_HAS_AVX512  // otherwise SimdPortable is SimdNative, instantiated above
template void dispatch_paged_attention<SimdPortable, float8_e4m3>(
    const PagedAttentionProblem<float8_e4m3>&);
#endif

}  // namespace inferkit::detail
