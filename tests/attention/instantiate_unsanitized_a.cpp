// SPDX-License-Identifier: Apache-2.0
// Under the sanitizers: the CPU attention kernels of the paths other than the best one, for
// float, float16 and bfloat16, compiled without instrumentation (tests/CMakeLists.txt; see
// tests/support/attention_kernels.hpp). Empty in every other build.
#include <tests/support/attention_kernels.hpp>

namespace inferkit::detail {

INFERKIT_TEST_FOR_EACH_UNSANITIZED_PATH(INFERKIT_TEST_DEFINE_KERNEL, float)
INFERKIT_TEST_FOR_EACH_UNSANITIZED_PATH(INFERKIT_TEST_DEFINE_KERNEL, float16)
INFERKIT_TEST_FOR_EACH_UNSANITIZED_PATH(INFERKIT_TEST_DEFINE_KERNEL, bfloat16)

}  // namespace inferkit::detail
