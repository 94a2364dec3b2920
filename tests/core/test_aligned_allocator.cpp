// SPDX-License-Identifier: Apache-2.0
// Tests for core/detail/aligned_allocator.hpp: every allocation is aligned, whatever the size,
// element type or alignment, through std::vector's growth and after rebinding.
#include <catch2/catch.hpp>
#include <cstddef>
#include <cstdint>
#include <inferkit/core/detail/aligned_allocator.hpp>
#include <memory>
#include <numeric>
#include <type_traits>
#include <vector>

using inferkit::detail::AlignedAllocator;

namespace {

template <std::size_t kAlign>
bool aligned(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % kAlign == 0;
}

template <class T, std::size_t kAlign>
void check_vector_sizes() {
  for (std::size_t n :
       {std::size_t{1}, std::size_t{2}, std::size_t{3}, std::size_t{15}, std::size_t{16},
        std::size_t{17}, std::size_t{1000}, std::size_t{1} << 20}) {
    std::vector<T, AlignedAllocator<T, kAlign>> v(n, T{1});
    INFO("n = " << n << ", alignment " << kAlign);
    CHECK(aligned<kAlign>(v.data()));
    CHECK(v.back() == T{1});
  }
}

}  // namespace

TEST_CASE("AlignedAllocator: vectors of any size are aligned", "[core][aligned_allocator]") {
  check_vector_sizes<float, 64>();
  check_vector_sizes<char, 64>();
  check_vector_sizes<double, 128>();
  check_vector_sizes<std::int16_t, 4096>();
}

TEST_CASE("AlignedAllocator: growth and copies keep the alignment and the contents",
          "[core][aligned_allocator]") {
  std::vector<int, AlignedAllocator<int, 64>> v;
  for (int i = 0; i < 5000; ++i) {
    v.push_back(i);
    if ((i & (i + 1)) == 0) {  // each buffer of a doubling vector, once it is full
      INFO("size " << v.size());
      REQUIRE(aligned<64>(v.data()));
    }
  }
  std::vector<int> expected(5000);
  std::iota(expected.begin(), expected.end(), 0);
  CHECK(std::vector<int>(v.begin(), v.end()) == expected);
  const auto copy = v;
  CHECK(aligned<64>(copy.data()));
  CHECK(copy == v);
}

TEST_CASE("AlignedAllocator: a rebound allocator keeps the alignment",
          "[core][aligned_allocator]") {
  using Rebound = std::allocator_traits<AlignedAllocator<char, 256>>::rebind_alloc<double>;
  static_assert(std::is_same_v<Rebound, AlignedAllocator<double, 256>>);
  Rebound alloc{AlignedAllocator<char, 256>{}};
  for (std::size_t n : {std::size_t{1}, std::size_t{7}, std::size_t{513}}) {
    double* p = std::allocator_traits<Rebound>::allocate(alloc, n);
    CHECK(aligned<256>(p));
    std::allocator_traits<Rebound>::deallocate(alloc, p, n);
  }
  CHECK(AlignedAllocator<float, 64>{} == AlignedAllocator<float, 64>{});
}
