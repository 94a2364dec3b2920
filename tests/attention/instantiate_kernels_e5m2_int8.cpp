// SPDX-License-Identifier: Apache-2.0
// Compiles the CPU attention kernels for float8_e5m2 and std::int8_t once for the attention tests
// (see tests/support/attention_kernels.hpp); the kernels are split over three TUs so they build in
// parallel.
#include <tests/support/attention_kernels.hpp>

namespace inferkit::detail {

INFERKIT_TEST_FOR_EACH_PATH(INFERKIT_TEST_DEFINE_KERNEL, float8_e5m2)
INFERKIT_TEST_FOR_EACH_PATH(INFERKIT_TEST_DEFINE_KERNEL, std::int8_t)

}  // namespace inferkit::detail
