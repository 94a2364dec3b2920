// SPDX-License-Identifier: Apache-2.0
// The CPU attention kernels of the KV types the engine serves, compiled once for every example
// that runs them (examples/CMakeLists.txt; inferkit/attention/cpu/kernel_instances.hpp): float16
// (the real model's default) and bfloat16 here, the fp8 and integer types beside, so that the
// three TUs build in parallel.
#include <inferkit/attention/cpu/kernel_instances.hpp>

INFERKIT_CPU_ATTENTION_INSTANTIATE(inferkit::float16)
INFERKIT_CPU_ATTENTION_INSTANTIATE(inferkit::bfloat16)
