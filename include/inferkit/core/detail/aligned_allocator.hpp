// SPDX-License-Identifier: Apache-2.0
// Internal: a std::allocator that aligns every allocation, for storage that SIMD code reads in
// whole vectors (KV pages, the attention kernels' scratch rows). malloc aligns to 16 bytes only,
// so a 64-byte vector load from a std::vector<float> row straddles two cache lines and costs two.
#pragma once

#include <cstddef>
#include <inferkit/core/config.hpp>
#include <new>

namespace inferkit::detail {
inline namespace INFERKIT_ISA_ABI {

/// A std::allocator that aligns every allocation to `kAlign` bytes.
template <class T, std::size_t kAlign>
struct AlignedAllocator {
  static_assert(kAlign >= alignof(T) && (kAlign & (kAlign - 1)) == 0,
                "kAlign must be a power of two no smaller than alignof(T)");
  using value_type = T;
  template <class U>
  struct rebind {  // NOLINT(readability-identifier-naming): the allocator protocol's name
    using other = AlignedAllocator<U, kAlign>;
  };

  AlignedAllocator() = default;
  template <class U>
  explicit AlignedAllocator(const AlignedAllocator<U, kAlign>& /*other*/) noexcept {}

  T* allocate(std::size_t n) {
    return static_cast<T*>(::operator new (n * sizeof(T), std::align_val_t{kAlign}));
  }
  void deallocate(T* p, std::size_t /*n*/) noexcept {
    ::operator delete (p, std::align_val_t{kAlign});
  }
  friend bool operator==(const AlignedAllocator&, const AlignedAllocator&) noexcept { return true; }
};

}  // namespace INFERKIT_ISA_ABI
}  // namespace inferkit::detail
