// SPDX-License-Identifier: Apache-2.0
// Umbrella header: every public inferkit header except the CUDA ones (.cuh, nvcc only).
// Library code, tests and examples include exactly what they use; this header is for users.
#pragma once

// IWYU pragma: begin_exports
#include <inferkit/core/backend.hpp>
#include <inferkit/core/config.hpp>
#include <inferkit/core/error.hpp>
#include <inferkit/core/rng.hpp>
// IWYU pragma: end_exports
