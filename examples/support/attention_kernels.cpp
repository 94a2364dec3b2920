// SPDX-License-Identifier: Apache-2.0
// The float16 CPU attention kernels (the real model's KV type), compiled once for every example
// that runs them (examples/CMakeLists.txt; inferkit/attention/cpu/kernel_instances.hpp).
#include <inferkit/attention/cpu/kernel_instances.hpp>
#include <inferkit/core/float16.hpp>

INFERKIT_CPU_ATTENTION_INSTANTIATE(inferkit::float16)
