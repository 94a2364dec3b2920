// SPDX-License-Identifier: Apache-2.0
// Compiles the CPU attention kernels for float and float16 once for the attention tests (see
// tests/support/attention_kernels.hpp); the kernels are split over three TUs so they build in
// parallel.
#include <tests/support/attention_kernels.hpp>

namespace inferkit::detail {

template void dispatch_paged_attention<SimdNative, float>(const PagedAttentionProblem<float>&);
template void dispatch_paged_attention<SimdNative, float16>(const PagedAttentionProblem<float16>&);

}  // namespace inferkit::detail
