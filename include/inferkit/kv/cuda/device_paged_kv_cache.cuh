// SPDX-License-Identifier: Apache-2.0
// DevicePagedKVCache<T>: PagedKVCache's storage in GPU memory (RAII cudaMalloc buffers, never
// managed memory), indexed by the same BlockIds as the host-side BlockAllocator and BlockTable,
// which stay on the host: the scheduler plans on the host, uploads slot mappings and page
// tables, and this cache appends K/V (append_paged_kv) and runs the block copies that
// copy-on-write reports (BlockCopy lists) on the device. Kernels take `view(layer)`.
// Threads: after construction, host calls only read the objects (moves aside), from any thread;
// device writes (append, copy_blocks) to the same blocks must be ordered by stream or event.
#pragma once

#if !defined(__CUDACC__)
#  error "inferkit/kv/cuda/device_paged_kv_cache.cuh is CUDA code: compile this file with nvcc"
#endif

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <inferkit/attention/cuda/append_paged_kv.cuh>
#include <inferkit/core/backend.hpp>
#include <inferkit/core/cuda/cuda_check.cuh>
#include <inferkit/core/cuda/device_buffer.cuh>
#include <inferkit/core/error.hpp>
#include <inferkit/kv/block_table.hpp>
#include <inferkit/kv/kv_quantization.hpp>
#include <inferkit/kv/paged_kv_cache.hpp>
#include <inferkit/kv/paged_kv_view.hpp>
#include <span>
#include <type_traits>

namespace inferkit::detail::cuda {

/// Block copies per launch (the list is a kernel argument).
inline constexpr int kMaxCopiesPerLaunch = 128;

struct BlockCopyBatch {
  BlockCopy copies[kMaxCopiesPerLaunch];
};

/// Grid: (copies in the batch, layers); copies the first num_slots slots of every head of
/// block src to block dst, K and V, and the fp8 scales (when `scales`).
template <class T>
__global__ void __launch_bounds__(256)
    copy_blocks_kernel(const __grid_constant__ BlockCopyBatch batch, T* k, T* v, float* k_scale,
                       float* v_scale, PagedKVView<T> geometry, std::int64_t layer_elements,
                       std::int64_t layer_scales) {
  const BlockCopy c = batch.copies[blockIdx.x];
  if (c.src == c.dst) return;
  const std::int64_t base = std::int64_t{blockIdx.y} * layer_elements;
  const std::int64_t per_head = std::int64_t{c.num_slots} * geometry.head_dim * sizeof(T) / 16;
  for (std::int32_t h = 0; h < geometry.num_kv_heads; ++h) {
    const auto* ks = reinterpret_cast<const uint4*>(k + base + geometry.offset(c.src, h, 0));
    const auto* vs = reinterpret_cast<const uint4*>(v + base + geometry.offset(c.src, h, 0));
    auto* kd = reinterpret_cast<uint4*>(k + base + geometry.offset(c.dst, h, 0));
    auto* vd = reinterpret_cast<uint4*>(v + base + geometry.offset(c.dst, h, 0));
    for (std::int64_t i = threadIdx.x; i < per_head; i += blockDim.x) {
      kd[i] = ks[i];
      vd[i] = vs[i];
    }
    if (k_scale != nullptr && threadIdx.x == 0) {
      const std::int64_t sb = std::int64_t{blockIdx.y} * layer_scales;
      k_scale[sb + std::int64_t{c.dst} * geometry.num_kv_heads + h] =
          k_scale[sb + std::int64_t{c.src} * geometry.num_kv_heads + h];
      v_scale[sb + std::int64_t{c.dst} * geometry.num_kv_heads + h] =
          v_scale[sb + std::int64_t{c.src} * geometry.num_kv_heads + h];
    }
  }
}

}  // namespace inferkit::detail::cuda

namespace inferkit {

/// Paged K/V for every layer in device memory, `T` = float16, bfloat16, float8_e4m3 or
/// float8_e5m2, in the `PagedKVView` layout `[num_blocks][num_kv_heads][block_size][head_dim]`
/// per layer, K and V; fp8 adds a scale per (block, head) with PagedKVCache's rule. Storage is
/// zeroed at construction. Move-only. Throws `Error{kInvalidArgument}` for a bad shape (or a
/// head_dim that is not a multiple of 16 bytes' worth of elements), `Error{kCuda}` when
/// allocation fails.
template <class T>
class DevicePagedKVCache {
 public:
  static constexpr bool kFp8 = std::is_same_v<T, float8_e4m3> || std::is_same_v<T, float8_e5m2>;
  static_assert(kFp8 || std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>,
                "DevicePagedKVCache stores float16, bfloat16, float8_e4m3 or float8_e5m2");

 private:
  PagedKVCacheShape shape_;
  std::int64_t layer_elements_ = 0;
  std::int64_t layer_scales_ = 0;
  DeviceBuffer<T> k_;
  DeviceBuffer<T> v_;
  DeviceBuffer<float> k_scale_;
  DeviceBuffer<float> v_scale_;

 public:
  explicit DevicePagedKVCache(const PagedKVCacheShape& shape) : shape_(shape) {
    check_arg(shape.num_layers >= 1 && shape.num_blocks >= 1 && shape.block_size >= 1 &&
                  shape.num_kv_heads >= 1,
              ErrorCode::kInvalidArgument, "shape", "a size < 1", "must have every size >=", 1);
    check_arg(shape.head_dim >= 1 && (shape.head_dim * sizeof(T)) % 16 == 0,
              ErrorCode::kInvalidArgument, "head_dim", shape.head_dim,
              "must fill whole 16-byte vectors: a multiple of", 16 / sizeof(T));
    layer_elements_ =
        std::int64_t{shape.num_blocks} * shape.num_kv_heads * shape.block_size * shape.head_dim;
    layer_scales_ = kFp8 ? std::int64_t{shape.num_blocks} * shape.num_kv_heads : 0;
    const auto total = static_cast<std::size_t>(layer_elements_ * shape.num_layers);
    k_ = DeviceBuffer<T>(total);
    v_ = DeviceBuffer<T>(total);
    k_.fill_bytes(0);
    v_.fill_bytes(0);
    if constexpr (kFp8) {
      k_scale_ = DeviceBuffer<float>(static_cast<std::size_t>(layer_scales_ * shape.num_layers));
      v_scale_ = DeviceBuffer<float>(k_scale_.size());
      k_scale_.fill_bytes(0);
      v_scale_.fill_bytes(0);
    }
  }

  [[nodiscard]] const PagedKVCacheShape& shape() const noexcept { return shape_; }
  /// Bytes of device memory held (K, V and scales, all layers).
  [[nodiscard]] std::int64_t memory_bytes() const noexcept {
    return static_cast<std::int64_t>(k_.bytes() + v_.bytes() + k_scale_.bytes() + v_scale_.bytes());
  }

  /// The kernel view of layer `layer` (device pointers). Throws `Error{kOutOfRange}`.
  [[nodiscard]] PagedKVView<T> view(std::int32_t layer) const {
    check_arg(layer >= 0 && layer < shape_.num_layers, ErrorCode::kOutOfRange, "layer", layer,
              "must be in [0, num_layers) with num_layers =", shape_.num_layers);
    PagedKVView<T> v = geometry();
    v.k = k_.data() + layer * layer_elements_;
    v.v = v_.data() + layer * layer_elements_;
    if constexpr (kFp8) {
      v.k_scale = k_scale_.data() + layer * layer_scales_;
      v.v_scale = v_scale_.data() + layer * layer_scales_;
    }
    return v;
  }

  /// Writes the K/V of `num_tokens` new tokens of layer `layer` (device `k`, `v`:
  /// [num_tokens][num_kv_heads][head_dim] of float, float16 or bfloat16; device
  /// `slot_mapping`, -1 = skip). See `append_paged_kv`.
  template <class In>
  void append(cuda backend, std::int32_t layer, const std::int64_t* slot_mapping,
              std::int32_t num_tokens, const In* k, const In* v) {
    append_paged_kv(backend, view(layer), slot_mapping, num_tokens, k, v);
  }

  /// Runs a step's block copies (host list, as BlockTable::append_tokens reports them) on the
  /// device, every layer, K, V and scales, in order; asynchronous on `backend.stream`. Throws
  /// `Error{kOutOfRange}` for a bad id or slot count (nothing is launched then).
  void copy_blocks(cuda backend, std::span<const BlockCopy> copies) {
    for (const BlockCopy& c : copies) {
      check_arg(c.src >= 0 && c.src < shape_.num_blocks && c.dst >= 0 && c.dst < shape_.num_blocks,
                ErrorCode::kOutOfRange, "BlockCopy src/dst",
                c.src < 0 || c.src >= shape_.num_blocks ? c.src : c.dst,
                "must be in [0, num_blocks) with num_blocks =", shape_.num_blocks);
      check_arg(c.num_slots >= 0 && c.num_slots <= shape_.block_size, ErrorCode::kOutOfRange,
                "BlockCopy num_slots", c.num_slots,
                "must be in [0, block_size] =", shape_.block_size);
    }
    for (std::size_t first = 0; first < copies.size(); first += detail::cuda::kMaxCopiesPerLaunch) {
      const std::size_t n =
          std::min<std::size_t>(detail::cuda::kMaxCopiesPerLaunch, copies.size() - first);
      detail::cuda::BlockCopyBatch batch;
      std::copy_n(copies.begin() + static_cast<std::ptrdiff_t>(first), n, batch.copies);
      const dim3 grid(static_cast<unsigned>(n), static_cast<unsigned>(shape_.num_layers));
      detail::cuda::copy_blocks_kernel<T><<<grid, 256, 0, backend.stream>>>(
          batch, k_.data(), v_.data(), kFp8 ? k_scale_.data() : nullptr,
          kFp8 ? v_scale_.data() : nullptr, geometry(), layer_elements_, layer_scales_);
      detail::check_launch("copy_blocks_kernel");
    }
  }

 private:
  [[nodiscard]] PagedKVView<T> geometry() const noexcept {
    PagedKVView<T> v;
    v.num_blocks = shape_.num_blocks;
    v.num_kv_heads = shape_.num_kv_heads;
    v.block_size = shape_.block_size;
    v.head_dim = shape_.head_dim;
    return v;
  }
};

/// A batch's page tables on the device with their host copy (the CUDA attention calls take
/// both: `view()` for the kernels, `host_view()` for planning).
class DevicePageTable {
  PageTableBuffers host_;
  DeviceBuffer<std::int32_t> indptr_;
  DeviceBuffer<std::int32_t> indices_;
  DeviceBuffer<std::int32_t> last_page_len_;

 public:
  DevicePageTable() = default;
  /// Uploads `tables` (synchronously; a serving loop would upload asynchronously from pinned
  /// memory). Throws as build_page_table, `Error{kCuda}`.
  explicit DevicePageTable(std::span<const BlockTable* const> tables) {
    build_page_table(tables, host_);
    upload();
  }
  /// Uploads existing host buffers.
  explicit DevicePageTable(PageTableBuffers host) : host_(std::move(host)) { upload(); }

  [[nodiscard]] PageTableView view() const noexcept {
    return {indptr_.data(), indices_.data(), last_page_len_.data(),
            static_cast<std::int32_t>(host_.last_page_len.size())};
  }
  [[nodiscard]] PageTableView host_view() const noexcept { return host_.view(); }

 private:
  void upload() {
    indptr_ = DeviceBuffer<std::int32_t>(host_.indptr);
    indices_ = DeviceBuffer<std::int32_t>(host_.indices);
    last_page_len_ = DeviceBuffer<std::int32_t>(host_.last_page_len);
  }
};

}  // namespace inferkit
