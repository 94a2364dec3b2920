// SPDX-License-Identifier: Apache-2.0
// TokenId: a token as the tokenizer produces it. Every part that holds token sequences names it:
// the prefix cache's radix tree keys, scheduler requests, drafters and verifiers, the engine.
#pragma once

#include <cstdint>

namespace inferkit {

/// A token id as the tokenizer produces it (a row of the vocabulary, >= 0).
using TokenId = std::int32_t;

}  // namespace inferkit
