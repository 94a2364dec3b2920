// SPDX-License-Identifier: Apache-2.0
// Runtime value -> compile-time constant dispatch without macros (replaces FlashInfer's
// DISPATCH_* macros): `dispatch_value<64, 128>(head_dim, [&](auto k) { kernel<k.value>(…); },
// [&] { generic(…); })`.
#pragma once

#include <type_traits>

namespace inferkit::detail {

/// Calls `fn(std::integral_constant<int, V>{})` for the first V in `kValues` equal to `value`;
/// otherwise calls `fallback()`. Both must return the same type.
template <int... kValues, class Fn, class Fallback>
constexpr decltype(auto) dispatch_value(int value, Fn&& fn, Fallback&& fallback) {
  using Result = decltype(fallback());
  if constexpr (std::is_void_v<Result>) {
    const bool hit =
        ((value == kValues ? (fn(std::integral_constant<int, kValues>{}), true) : false) || ...);
    if (!hit) {
      fallback();
    }
  } else {
    Result result{};
    const bool hit =
        ((value == kValues ? (result = fn(std::integral_constant<int, kValues>{}), true) : false) ||
         ...);
    if (!hit) {
      result = fallback();
    }
    return result;
  }
}

/// A `false` that depends on T, for `static_assert` in a template that must not be instantiated.
template <class... T>
inline constexpr bool dependent_false_v = false;

}  // namespace inferkit::detail
