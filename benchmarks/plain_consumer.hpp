// SPDX-License-Identifier: Apache-2.0
// The CPU attention entry points as a user's TU compiled without any -m flag calls them:
// plain_consumer.cpp is always built with -O2 -DNDEBUG and no -m flag (benchmarks/CMakeLists.txt),
// whatever the benchmark build's own flags, and linked into bench_attention beside it. Its
// kernels live in the ISA-named namespace of those flags, so they are its own copies.
#pragma once

#include <inferkit/attention/attention.hpp>
#include <inferkit/core/float16.hpp>

namespace plain_consumer {

/// inferkit::paged_decode(cpu{}, args), compiled without -m flags.
void paged_decode(const inferkit::PagedDecodeArgs<inferkit::float16>& args);
/// inferkit::paged_prefill(cpu{}, args), compiled without -m flags.
void paged_prefill(const inferkit::PagedPrefillArgs<inferkit::float16>& args);
/// The TU's ISA-named namespace (core/config.hpp's INFERKIT_ISA_ABI).
const char* isa_abi();

}  // namespace plain_consumer
