// SPDX-License-Identifier: Apache-2.0
// See plain_consumer.hpp: compiled with -O2 -DNDEBUG and no -m flag, as a distribution's or
// CMake-default user build compiles inferkit.
#include "plain_consumer.hpp"

#include <inferkit/attention/cpu/paged_attention.hpp>
#include <inferkit/core/config.hpp>

static_assert(INFERKIT_HAS_AVX2 == 0 && INFERKIT_HAS_AVX512 == 0,
              "plain_consumer.cpp must be compiled without -m flags (benchmarks/CMakeLists.txt)");

namespace plain_consumer {

void paged_decode(const inferkit::PagedDecodeArgs<inferkit::float16>& args) {
  inferkit::paged_decode(inferkit::cpu{}, args);
}

void paged_prefill(const inferkit::PagedPrefillArgs<inferkit::float16>& args) {
  inferkit::paged_prefill(inferkit::cpu{}, args);
}

const char* isa_abi() { return INFERKIT_PP_STR(INFERKIT_ISA_ABI); }

}  // namespace plain_consumer
