// SPDX-License-Identifier: Apache-2.0
// The fp8 KV types' CPU attention kernels for the examples (see attention_kernels.cpp).
#include <inferkit/attention/cpu/kernel_instances.hpp>

INFERKIT_CPU_ATTENTION_INSTANTIATE(inferkit::float8_e4m3)
INFERKIT_CPU_ATTENTION_INSTANTIATE(inferkit::float8_e5m2)
