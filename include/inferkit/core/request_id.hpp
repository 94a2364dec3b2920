// SPDX-License-Identifier: Apache-2.0
// RequestId: the key every step-flow type names a request by (a scheduler's requests, the
// StepPlan's sequences and the SequenceResults handed back to commit, the engine's completions).
// In core so that the plan, which stands below the scheduler, can name a request without it.
// Threads: a type alias only.
#pragma once

#include <cstdint>

namespace inferkit {

/// A request id chosen by the caller; unique among the requests a scheduler holds.
using RequestId = std::int64_t;

}  // namespace inferkit
