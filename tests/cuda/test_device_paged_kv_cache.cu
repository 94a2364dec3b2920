// SPDX-License-Identifier: Apache-2.0
// Device tests of kv/cuda/device_paged_kv_cache.cuh and attention/cuda/append_paged_kv.cuh:
// the same appends (a prefill chunk, then decode steps whose growing fp8 scales rescale earlier
// slots) and the same copy-on-write block copies on the CPU PagedKVCache and on the device give
// bit-identical pages and scales, for fp16, bf16, fp8 e4m3 and fp8 e5m2; the slot mapping
// comes from BlockTable on a shared BlockAllocator.
#include <cuda_runtime.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <inferkit/core/cuda/device_buffer.cuh>
#include <inferkit/core/rng.hpp>
#include <inferkit/kv/block_allocator.hpp>
#include <inferkit/kv/block_table.hpp>
#include <inferkit/kv/cuda/device_paged_kv_cache.cuh>
#include <inferkit/kv/paged_kv_cache.hpp>
#include <tests/cuda/cuda_test_support.cuh>
#include <vector>

namespace {

using namespace inferkit;

/// Raw bytes of `count` elements at `p`.
template <class T>
std::vector<std::uint8_t> bytes_of(const T* p, std::size_t count) {
  std::vector<std::uint8_t> out(count * sizeof(T));
  std::memcpy(out.data(), p, out.size());
  return out;
}

template <class T>
void check_same_storage(const PagedKVCache<T>& host, const DevicePagedKVCache<T>& dev) {
  const PagedKVView<const T> h = host.view(0);
  const PagedKVView<T> d = dev.view(0);
  const auto n = static_cast<std::size_t>(h.block_stride() * h.num_blocks);
  std::vector<T> k(n);
  std::vector<T> v(n);
  REQUIRE(cudaMemcpy(k.data(), d.k, n * sizeof(T), cudaMemcpyDeviceToHost) == cudaSuccess);
  REQUIRE(cudaMemcpy(v.data(), d.v, n * sizeof(T), cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(bytes_of(k.data(), n) == bytes_of(h.k, n));
  CHECK(bytes_of(v.data(), n) == bytes_of(h.v, n));
  if constexpr (DevicePagedKVCache<T>::kFp8) {
    const auto ns = static_cast<std::size_t>(h.num_blocks * h.num_kv_heads);
    std::vector<float> ks(ns);
    REQUIRE(cudaMemcpy(ks.data(), d.k_scale, ns * sizeof(float), cudaMemcpyDeviceToHost) ==
            cudaSuccess);
    CHECK(std::vector<float>(h.k_scale, h.k_scale + ns) == ks);
  }
}

}  // namespace

TEMPLATE_TEST_CASE("DevicePagedKVCache: appends and block copies match the CPU cache bit for bit",
                   "[cuda][device_paged_kv_cache]", float16, bfloat16, float8_e4m3, float8_e5m2) {
  using T = TestType;
  PagedKVCacheShape shape;
  shape.num_layers = 1;
  shape.num_blocks = 12;
  shape.block_size = 16;
  shape.num_kv_heads = 2;
  shape.head_dim = 64;
  PagedKVCache<T> host(shape);
  DevicePagedKVCache<T> dev(shape);
  BlockAllocator pool(shape.num_blocks, shape.block_size);
  BlockTable table(shape.block_size);
  Rng rng(42);
  const std::int64_t per_token = std::int64_t{shape.num_kv_heads} * shape.head_dim;
  const auto append = [&](BlockTable& t, std::int64_t n, float amplitude) {
    std::vector<std::int64_t> slots(static_cast<std::size_t>(n));
    std::vector<BlockCopy> copies;
    REQUIRE(t.append_tokens(pool, n, slots, copies));
    host.copy_blocks(copies);
    dev.copy_blocks(cuda{}, copies);
    const auto k =
        test::random_floats(rng, static_cast<std::size_t>(n * per_token), -amplitude, amplitude);
    const auto v = test::random_floats(rng, k.size(), -amplitude, amplitude);
    host.append(0, slots, k, v);
    const DeviceBuffer<std::int64_t> dslots(slots);
    const DeviceBuffer<float> dk(k);
    const DeviceBuffer<float> dv(v);
    dev.append(cuda{}, 0, dslots.data(), static_cast<std::int32_t>(n), dk.data(), dv.data());
    test::finish_device();
  };
  append(table, 37, 1.0f);  // prefill chunk: two full blocks and 5 tokens
  for (int step = 0; step < 20; ++step) append(table, 1, 0.5f + 0.3f * static_cast<float>(step));
  check_same_storage(host, dev);
  // A fork shares the partial last block; its first append copies it (copy-on-write).
  BlockTable child = table.fork(pool);
  append(child, 3, 4.0f);
  append(table, 2, 0.1f);
  check_same_storage(host, dev);
  CHECK(dev.memory_bytes() > 0);
}
