// SPDX-License-Identifier: Apache-2.0
// Forced into the examples that run the CPU attention kernels (examples/CMakeLists.txt), so that
// they link to one instantiation of each KV type the engine serves (examples/support/
// attention_kernels*.cpp) instead of each compiling its own: the build's choice, so each
// example's source stays a program that also builds alone
// (inferkit/attention/cpu/kernel_instances.hpp).
#pragma once

#include <inferkit/attention/cpu/kernel_instances.hpp>

INFERKIT_CPU_ATTENTION_ENGINE_KV_TYPES(INFERKIT_CPU_ATTENTION_EXTERN)
