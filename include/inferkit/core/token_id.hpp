// SPDX-License-Identifier: Apache-2.0
// TokenId and CacheNamespace: the two keys a prefix cache matches on. TokenId is a token as the
// tokenizer produces it (radix tree keys, scheduler requests, drafters and verifiers, the
// engine); CacheNamespace partitions the cache between tenants or adapters.
// Threads: type aliases only.
#pragma once

#include <cstdint>

namespace inferkit {

/// A token id as the tokenizer produces it (a row of the vocabulary, >= 0).
using TokenId = std::int32_t;

/// A prefix-cache partition (tenant, LoRA adapter, cache salt). Matches never cross namespaces:
/// a shared cache would otherwise leak one tenant's prompts to another through timing (the
/// reason vLLM added `cache_salt`). 0 is the default namespace.
using CacheNamespace = std::uint64_t;

}  // namespace inferkit
