// SPDX-License-Identifier: Apache-2.0
// Internal: a copy with non-temporal stores for PagedKVCache's appends. A decode step scatters
// small token chunks over thousands of pages that are read again only much later, so skipping
// each line's read-for-ownership is several times faster than memcpy (measured in bench_kv).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <inferkit/core/config.hpp>

#if INFERKIT_ARCH_X86 && !INFERKIT_CUDA_COMPILER
#  include <emmintrin.h>  // SSE2: part of every x86-64 CPU, no -m flag or dispatch needed
#  define INFERKIT_STREAM_STORES 1
#else
#  define INFERKIT_STREAM_STORES 0
#endif

namespace inferkit::detail {
inline namespace INFERKIT_ISA_ABI {

/// Copies `bytes` from `src` to `dst`; with non-temporal stores on x86 (SSE2 movntdq) when `dst`
/// is 16-byte aligned and `bytes` a multiple of 16, else memcpy. Call `stream_fence` before
/// other threads read the data.
inline void stream_copy(void* dst, const void* src, std::size_t bytes) noexcept {
#if INFERKIT_STREAM_STORES
  if ((reinterpret_cast<std::uintptr_t>(dst) % 16) == 0 && bytes % 16 == 0) {
    auto* d = static_cast<unsigned char*>(dst);
    const auto* s = static_cast<const unsigned char*>(src);
    for (std::size_t i = 0; i < bytes; i += 16) {
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i),
                       _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i)));
    }
    return;
  }
#endif
  std::memcpy(dst, src, bytes);
}

/// Orders earlier `stream_copy` stores before later stores (a no-op without them).
inline void stream_fence() noexcept {
#if INFERKIT_STREAM_STORES
  _mm_sfence();
#endif
}

}  // namespace INFERKIT_ISA_ABI
}  // namespace inferkit::detail

#undef INFERKIT_STREAM_STORES
