// SPDX-License-Identifier: Apache-2.0
// Shared by the CUDA tests: the CPU paged-KV fixture (tests/support/paged_fixture.hpp) copied to
// the device, device copies of host vectors, and the launch-and-wait check. The same seeds and
// fixtures as the CPU tests, so both backends meet the same double reference.
#pragma once

#include <cuda_runtime.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <inferkit/core/cuda/device_buffer.cuh>
#include <inferkit/kv/paged_kv_view.hpp>
#include <tests/support/paged_fixture.hpp>
#include <vector>

namespace inferkit::test {

/// Waits for the device and fails the test on any CUDA error.
inline void finish_device() {
  const cudaError_t status = cudaDeviceSynchronize();
  INFO("CUDA: " << cudaGetErrorString(status));
  REQUIRE(status == cudaSuccess);
}

/// A PagedKVFixture uploaded to the device (NaN-filled unwritten slots included).
template <class KV>
struct DevicePagedFixture {
  DeviceBuffer<KV> k, v;
  DeviceBuffer<float> k_scale, v_scale;
  DeviceBuffer<float> k_zero, v_zero;  // packed int4's zero points; empty otherwise
  DeviceBuffer<std::int32_t> indptr, indices, last_page_len;
  PagedKVView<const KV> host_geometry;
  PageTableView host_pages;

  explicit DevicePagedFixture(const PagedKVFixture<KV>& f)
      : k(f.k),
        v(f.v),
        k_scale(f.k_scale),
        v_scale(f.v_scale),
        k_zero(f.k_zero),
        v_zero(f.v_zero),
        indptr(f.indptr),
        indices(f.indices),
        last_page_len(f.last_page_len),
        host_geometry(f.view()),
        host_pages(f.table()) {}

  [[nodiscard]] PagedKVView<const KV> view() const {
    PagedKVView<const KV> out = host_geometry;
    out.k = k.data();
    out.v = v.data();
    out.k_scale = k_scale.size() > 0 ? k_scale.data() : nullptr;
    out.v_scale = v_scale.size() > 0 ? v_scale.data() : nullptr;
    out.k_zero = k_zero.size() > 0 ? k_zero.data() : nullptr;
    out.v_zero = v_zero.size() > 0 ? v_zero.data() : nullptr;
    return out;
  }
  [[nodiscard]] PageTableView pages() const {
    return {indptr.data(), indices.data(), last_page_len.data(), host_pages.num_seqs};
  }
};

/// Host values of a vector of 16-bit or float elements, as floats.
template <class T>
std::vector<float> as_floats(const std::vector<T>& x) {
  std::vector<float> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = static_cast<float>(x[i]);
  return out;
}

/// x rounded to T and back (what a kernel sees of an fp32 input it converts to T).
template <class T>
std::vector<float> rounded_to(const std::vector<float>& x) {
  std::vector<float> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = static_cast<float>(T(x[i]));
  return out;
}

}  // namespace inferkit::test
