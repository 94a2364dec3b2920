// SPDX-License-Identifier: Apache-2.0
// The CPU backend for the CUDA tests (see cpu_backend.hpp); fp16 KV only, to keep the CUDA test
// build short.
#include <tests/cuda/cpu_backend.hpp>

namespace inferkit::test {

void cpu_paged_decode(const PagedDecodeArgs<float16>& args) { paged_decode(cpu{}, args); }
void cpu_paged_prefill(const PagedPrefillArgs<float16>& args) { paged_prefill(cpu{}, args); }

}  // namespace inferkit::test
