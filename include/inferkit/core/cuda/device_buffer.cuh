// SPDX-License-Identifier: Apache-2.0
// DeviceBuffer<T>: an RAII array in device memory (cudaMalloc / cudaFree, never managed memory)
// with host<->device copies, the owner behind DevicePagedKVCache and the tests' device tensors.
// Threads: one thread at a time per buffer for upload, fill_bytes and moves; const calls (data,
// size, download) may run concurrently with each other; distinct buffers are independent.
#pragma once

#if !defined(__CUDACC__)
#  error "inferkit/core/cuda/device_buffer.cuh is CUDA code: compile this file with nvcc (a .cu TU)"
#endif

#include <cuda_runtime.h>

#include <cstddef>
#include <inferkit/core/cuda/cuda_check.cuh>
#include <inferkit/core/error.hpp>
#include <span>
#include <utility>
#include <vector>

namespace inferkit {

/// `count` elements of trivially copyable `T` in device memory. Move-only. Contents start
/// unspecified (`zero()` clears them). Throws `Error{kCuda}` when allocation or a copy fails.
template <class T>
class DeviceBuffer {
  T* data_ = nullptr;
  std::size_t size_ = 0;

 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t count) : size_(count) {
    if (count > 0) INFERKIT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&data_), bytes()));
  }
  /// A device copy of `host` (synchronous).
  explicit DeviceBuffer(std::span<const T> host) : DeviceBuffer(host.size()) { upload(host); }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(std::span<const T>(host)) {}
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      release();
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { release(); }

  [[nodiscard]] T* data() const noexcept { return data_; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] std::size_t bytes() const noexcept { return size_ * sizeof(T); }

  /// Copies `host` (exactly size() elements) to the device (synchronous).
  void upload(std::span<const T> host) {
    check_arg(host.size() == size_, ErrorCode::kInvalidArgument, "host.size()", host.size(),
              "must equal the buffer size", size_);
    if (size_ > 0) {
      INFERKIT_CUDA_CHECK(cudaMemcpy(data_, host.data(), bytes(), cudaMemcpyHostToDevice));
    }
  }
  /// The contents, copied to the host (synchronous).
  [[nodiscard]] std::vector<T> download() const {
    std::vector<T> host(size_);
    if (size_ > 0) {
      INFERKIT_CUDA_CHECK(cudaMemcpy(host.data(), data_, bytes(), cudaMemcpyDeviceToHost));
    }
    return host;
  }
  /// Sets every byte to `byte` (0xFF fills floats with NaN), synchronously.
  void fill_bytes(int byte) {
    if (size_ > 0) INFERKIT_CUDA_CHECK(cudaMemset(data_, byte, bytes()));
  }

 private:
  void release() noexcept {
    if (data_ != nullptr) cudaFree(data_);  // errors here are sticky ones reported elsewhere
    data_ = nullptr;
    size_ = 0;
  }
};

}  // namespace inferkit
