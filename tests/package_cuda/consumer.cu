// SPDX-License-Identifier: Apache-2.0
// A CUDA consumer of the installed package: decode attention of one sequence over two fp16
// pages on the GPU (zeros in, zeros out), or a note when the machine has no GPU.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <inferkit/attention/cuda/paged_attention.cuh>
#include <inferkit/core/cuda/device_buffer.cuh>
#include <vector>

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("paged_decode: no CUDA device, compiled and linked only\n");
    return 0;
  }
  const std::vector<std::int32_t> indptr = {0, 2}, indices = {1, 0}, last = {5};
  inferkit::DeviceBuffer<std::int32_t> d_indptr(indptr), d_indices(indices), d_last(last);
  inferkit::DeviceBuffer<inferkit::float16> k(2 * 16 * 128), v(2 * 16 * 128);
  inferkit::DeviceBuffer<float> q(4 * 128), out(4 * 128);
  k.fill_bytes(0);
  v.fill_bytes(0);
  q.fill_bytes(0);
  inferkit::PagedDecodeArgs<inferkit::float16> args;
  args.q = q.data();
  args.out = out.data();
  args.kv.k = k.data();
  args.kv.v = v.data();
  args.kv.num_blocks = 2;
  args.kv.num_kv_heads = 1;
  args.kv.block_size = 16;
  args.kv.head_dim = 128;
  args.pages = {d_indptr.data(), d_indices.data(), d_last.data(), 1};
  args.host_pages = {indptr.data(), indices.data(), last.data(), 1};
  args.num_qo_heads = 4;
  args.head_dim = 128;
  cudaStream_t stream = nullptr;
  cudaStreamCreate(&stream);
  paged_decode(inferkit::cuda{stream}, args);
  cudaStreamSynchronize(stream);
  cudaStreamDestroy(stream);
  std::printf("paged_decode: %s\n", out.download()[0] == 0.0f ? "ok" : "wrong");
}
