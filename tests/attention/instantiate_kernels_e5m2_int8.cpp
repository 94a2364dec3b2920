// SPDX-License-Identifier: Apache-2.0
// Compiles the CPU attention kernels for float8_e5m2 and std::int8_t once for the attention tests
// (see tests/support/attention_kernels.hpp); the kernels are split over three TUs so they build in
// parallel.
#include <tests/support/attention_kernels.hpp>

namespace inferkit::detail {

template void dispatch_paged_attention<SimdNative, float8_e5m2>(
    const PagedAttentionProblem<float8_e5m2>&);
template void dispatch_paged_attention<SimdNative, std::int8_t>(
    const PagedAttentionProblem<std::int8_t>&);

}  // namespace inferkit::detail
