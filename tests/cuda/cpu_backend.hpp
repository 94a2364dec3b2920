// SPDX-License-Identifier: Apache-2.0
// The CPU backend as the CUDA tests' second oracle: compiled by g++ in cpu_backend.cpp (the CPU
// kernels are host-only), called from the .cu tests on the same fixtures.
#pragma once

#include <inferkit/attention/attention.hpp>
#include <inferkit/core/float16.hpp>

namespace inferkit::test {

void cpu_paged_decode(const PagedDecodeArgs<float16>& args);
void cpu_paged_prefill(const PagedPrefillArgs<float16>& args);

}  // namespace inferkit::test
