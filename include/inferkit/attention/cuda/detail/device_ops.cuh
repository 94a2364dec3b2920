// SPDX-License-Identifier: Apache-2.0
// The few device primitives the attention kernels are built from, each a thin wrapper over one
// PTX instruction or a short conversion: cp.async (16-byte global -> shared copies, zero-filled
// when the source is out of range), ldmatrix and mma.sync m16n8k16 for the tensor-core prefill,
// and element conversions between the storage types and float (the bit math behind the fp8
// and packed int4 ones is in attention/detail/kv_element_math.hpp, tested on the CPU).
#pragma once

#if !defined(__CUDACC__)
#  error "inferkit/attention/cuda/detail/device_ops.cuh is CUDA code: compile it with nvcc"
#endif

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <inferkit/attention/detail/kv_element_math.hpp>
#include <inferkit/core/bfloat16.hpp>
#include <inferkit/core/float16.hpp>
#include <inferkit/core/float8.hpp>
#include <type_traits>

namespace inferkit::detail::cuda {

/// Shared-memory address of a pointer, as the cp.async / ldmatrix operands take it.
__device__ __forceinline__ std::uint32_t smem_address(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

/// Copies 16 bytes from global `src` to shared `dst` asynchronously; `valid = false` writes 16
/// zero bytes instead and reads nothing (src may then be any address).
__device__ __forceinline__ void cp_async_16(void* dst, const void* src, bool valid) {
  const int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_address(dst)), "l"(src),
               "r"(src_bytes)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
/// Waits until at most `kPending` of this thread's committed groups are still in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

/// Four 8x8 b16 matrices from shared memory (lane l gives the address of row l % 8 of matrix
/// l / 8); register i of each lane holds matrix i, row lane / 4, columns 2 (lane % 4) + {0, 1}.
__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_address(row)));
}
/// As ldmatrix_x4, each matrix transposed: register i holds rows 2 (lane % 4) + {0, 1},
/// column lane / 4.
__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t (&r)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_address(row)));
}

/// D = A B + D for one m16n8k16 tile, fp32 accumulators; `KV` (float16 or bfloat16) names the
/// operand type. Fragment layouts are the PTX ISA's (lane = 4 group + thread_in_group):
/// A: a[0] rows g, cols 2t..2t+1; a[1] rows g+8; a[2] rows g, cols 8+2t; a[3] rows g+8, cols 8+2t.
/// B: b[0] rows (k) 2t..2t+1, col (n) g; b[1] rows 8+2t.. . D: d[0..1] row g, cols 2t..2t+1;
/// d[2..3] row g+8.
template <class KV>
__device__ __forceinline__ void mma_16x8x16(float (&d)[4], const std::uint32_t (&a)[4],
                                            std::uint32_t b0, std::uint32_t b1) {
  if constexpr (std::is_same_v<KV, float16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    static_assert(std::is_same_v<KV, bfloat16>, "mma_16x8x16: float16 or bfloat16 operands");
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

/// Two floats packed into one register of two 16-bit `KV` values (low = x).
template <class KV>
__device__ __forceinline__ std::uint32_t pack2(float x, float y) {
  if constexpr (std::is_same_v<KV, float16>) {
    const __half2 h = __floats2half2_rn(x, y);
    return *reinterpret_cast<const std::uint32_t*>(&h);
  } else {
    const __nv_bfloat162 h = __floats2bfloat162_rn(x, y);
    return *reinterpret_cast<const std::uint32_t*>(&h);
  }
}

/// The two values of one 32-bit word of stored `KV` elements (two 16-bit or, for fp8, the low
/// two codes), as floats; fp8 e4m3 comes out scaled by 2^-8 (see kDequantFold).
template <class KV>
__device__ __forceinline__ float2 word_to_float2(std::uint32_t w) {
  if constexpr (std::is_same_v<KV, float16>) {
    return __half22float2(*reinterpret_cast<const __half2*>(&w));
  } else if constexpr (std::is_same_v<KV, bfloat16>) {
    return make_float2(__uint_as_float(w << 16), __uint_as_float(w & 0xFFFF0000u));
  } else {
    const std::uint32_t h = fp8x2_to_half2_bits<KV>(w & 0xFFFFu);
    return __half22float2(*reinterpret_cast<const __half2*>(&h));
  }
}

/// The 16 bytes at `v` (kVec = 16 / sizeof(KV) stored elements) as floats.
template <class KV>
__device__ __forceinline__ void word_to_float(std::uint32_t w, float* out) {
  if constexpr (sizeof(KV) == 2) {
    const float2 f = word_to_float2<KV>(w);
    out[0] = f.x;
    out[1] = f.y;
  } else {
    const float2 lo = word_to_float2<KV>(w);
    const float2 hi = word_to_float2<KV>(w >> 16);
    out[0] = lo.x;
    out[1] = lo.y;
    out[2] = hi.x;
    out[3] = hi.y;
  }
}
template <class KV>
__device__ __forceinline__ void vec16_to_float(const uint4& v, float* out) {
  constexpr int kPer = 4 / static_cast<int>(sizeof(KV));  // elements per 32-bit word
  word_to_float<KV>(v.x, out);
  word_to_float<KV>(v.y, out + kPer);
  word_to_float<KV>(v.z, out + 2 * kPer);
  word_to_float<KV>(v.w, out + 3 * kPer);
}

/// The 8 packed int4 codes of a 32-bit word (dims in order, int4_nibble) as code - `zero`: the
/// value before the token's scale, rounded as the CPU kernels round it.
__device__ __forceinline__ void int4x8_to_float(std::uint32_t w, float zero, float* out) {
#pragma unroll
  for (int i = 0; i < 8; ++i) out[i] = __uint2float_rn(int4_nibble(w, i)) - zero;
}

/// A query/output element as float, and back (round to nearest even).
template <class QO>
__device__ __forceinline__ float to_f32(QO x) {
  if constexpr (std::is_same_v<QO, float>) {
    return x;
  } else if constexpr (std::is_same_v<QO, float16>) {
    return __half2float(__ushort_as_half(x.bits));
  } else {
    return __uint_as_float(std::uint32_t{x.bits} << 16);
  }
}
template <class QO>
__device__ __forceinline__ QO from_f32(float x) {
  if constexpr (std::is_same_v<QO, float>) {
    return x;
  } else if constexpr (std::is_same_v<QO, float16>) {
    return QO::from_bits(__half_as_ushort(__float2half_rn(x)));
  } else {
    return QO::from_bits(__bfloat16_as_ushort(__float2bfloat16_rn(x)));
  }
}

}  // namespace inferkit::detail::cuda
