// SPDX-License-Identifier: Apache-2.0
// Internal: whether a span passed in points into an object's own storage. BlockTable, KVCache
// and PagedKVCache hand out views of their storage, and a caller may pass such a view back
// (append a table's own blocks, append K/V read from the cache): these tell them so, using
// std::less, which orders pointers into unrelated arrays too.
#pragma once

#include <cstddef>
#include <functional>
#include <span>

namespace inferkit::detail {

/// Whether the memory of `a` and `b` intersects (false when either is empty).
template <class T, class U>
[[nodiscard]] bool overlaps(std::span<T> a, std::span<U> b) noexcept {
  if (a.empty() || b.empty()) return false;
  const std::less<> less;
  const void* a_begin = a.data();
  const void* a_end = a.data() + a.size();
  const void* b_begin = b.data();
  const void* b_end = b.data() + b.size();
  return less(a_begin, b_end) && less(b_begin, a_end);
}

/// The index in `storage` at which `view` starts, or -1 when `view` does not start inside it.
template <class T>
[[nodiscard]] std::ptrdiff_t offset_in(std::span<const T> view,
                                       std::span<const T> storage) noexcept {
  const std::less<> less;
  if (view.empty() || less(view.data(), storage.data()) ||
      !less(view.data(), storage.data() + storage.size())) {
    return -1;
  }
  return view.data() - storage.data();
}

}  // namespace inferkit::detail
