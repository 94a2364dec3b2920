// SPDX-License-Identifier: Apache-2.0
// Forced into the examples that run the float16 attention kernels (examples/CMakeLists.txt), so
// that they link to one instantiation (examples/support/attention_kernels.cpp) instead of each
// compiling its own: the build's choice, so each example's source stays a program that also
// builds alone (inferkit/attention/cpu/kernel_instances.hpp).
#pragma once

#include <inferkit/attention/cpu/kernel_instances.hpp>
#include <inferkit/core/float16.hpp>

INFERKIT_CPU_ATTENTION_EXTERN(inferkit::float16)
