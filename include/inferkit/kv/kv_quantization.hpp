// SPDX-License-Identifier: Apache-2.0
// KV quantization: how PagedKVCache turns one token's head vector (head_dim floats) into stored
// elements and back. int8 (symmetric, a scale per token and head), int4 (asymmetric scale and
// zero point per token and head, two nibbles per byte) and fp8 (a power-of-two scale per block
// and head), plus the storage traits that say which scheme a storage type uses.
// Threads: traits and pure functions of their arguments; safe from any number of threads.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <inferkit/core/bfloat16.hpp>
#include <inferkit/core/dtype.hpp>
#include <inferkit/core/float16.hpp>
#include <inferkit/core/float8.hpp>
#include <inferkit/core/int4.hpp>
#include <inferkit/kv/detail/element_convert.hpp>
#include <inferkit/kv/detail/kv_row_kernels.hpp>
#include <span>
#include <type_traits>

namespace inferkit {

/// How stored KV elements relate to the values they represent.
enum class KVQuantization : std::uint8_t {
  kNone,                ///< value = float(element) (fp32, fp16, bf16)
  kFp8BlockScale,       ///< value = float(element) * scale[block, head]
  kInt8TokenScale,      ///< value = element * scale[block, head, slot]
  kInt4TokenScaleZero,  ///< value = (nibble - zero[block, head, slot]) * scale[block, head, slot]
};

/// Storage traits of a KV element type: the quantization scheme and the runtime `DType`.
/// `std::uint8_t` means packed int4 (two 4-bit values per byte, even element in the low nibble),
/// as in `PagedKVView<std::uint8_t>` with `packed_int4`. Each supported type has a specialization
/// with `kSupported = true`, `kScheme` and `kDType`; the fp8 ones add `kMaxFinite`.
template <class T>
struct KVStorageTraits {
  /// False: only the specializations below are KV storage types (see `KVStorage`).
  static constexpr bool kSupported = false;
};
/// fp32 storage: elements are the values, no scales.
template <>
struct KVStorageTraits<float> {
  /// True: `float` is a KV storage type.
  static constexpr bool kSupported = true;
  /// `kNone`: value = element.
  static constexpr KVQuantization kScheme = KVQuantization::kNone;
  /// The runtime tag of `float`.
  static constexpr DType kDType = DType::kFloat32;
};
/// fp16 storage: elements converted to float are the values, no scales.
template <>
struct KVStorageTraits<float16> {
  /// True: `float16` is a KV storage type.
  static constexpr bool kSupported = true;
  /// `kNone`: value = float(element).
  static constexpr KVQuantization kScheme = KVQuantization::kNone;
  /// The runtime tag of `float16`.
  static constexpr DType kDType = DType::kFloat16;
};
/// bf16 storage: elements converted to float are the values, no scales.
template <>
struct KVStorageTraits<bfloat16> {
  /// True: `bfloat16` is a KV storage type.
  static constexpr bool kSupported = true;
  /// `kNone`: value = float(element).
  static constexpr KVQuantization kScheme = KVQuantization::kNone;
  /// The runtime tag of `bfloat16`.
  static constexpr DType kDType = DType::kBFloat16;
};
/// fp8 e4m3 storage: codes times a power-of-two scale per block and head.
template <>
struct KVStorageTraits<float8_e4m3> {
  /// True: `float8_e4m3` is a KV storage type.
  static constexpr bool kSupported = true;
  /// `kFp8BlockScale`: value = float(element) * scale[block, head].
  static constexpr KVQuantization kScheme = KVQuantization::kFp8BlockScale;
  /// The runtime tag of `float8_e4m3`.
  static constexpr DType kDType = DType::kFloat8E4M3;
  /// Largest finite e4m3 magnitude (448): the block scale keeps `|x| / scale` at or below it
  /// (`fp8_block_scale`).
  static constexpr float kMaxFinite = 448.0f;
};
/// fp8 e5m2 storage: codes times a power-of-two scale per block and head.
template <>
struct KVStorageTraits<float8_e5m2> {
  /// True: `float8_e5m2` is a KV storage type.
  static constexpr bool kSupported = true;
  /// `kFp8BlockScale`: value = float(element) * scale[block, head].
  static constexpr KVQuantization kScheme = KVQuantization::kFp8BlockScale;
  /// The runtime tag of `float8_e5m2`.
  static constexpr DType kDType = DType::kFloat8E5M2;
  /// Largest finite e5m2 magnitude (57344): the block scale keeps `|x| / scale` at or below it
  /// (`fp8_block_scale`).
  static constexpr float kMaxFinite = 57344.0f;
};
/// int8 storage: symmetric codes times a scale per token and head (`quantize_int8`).
template <>
struct KVStorageTraits<std::int8_t> {
  /// True: `std::int8_t` is a KV storage type.
  static constexpr bool kSupported = true;
  /// `kInt8TokenScale`: value = element * scale[block, head, slot].
  static constexpr KVQuantization kScheme = KVQuantization::kInt8TokenScale;
  /// The runtime tag of int8.
  static constexpr DType kDType = DType::kInt8;
};
/// Packed int4 storage: one byte holds two unsigned nibbles, each with a scale and zero point
/// per token and head (`quantize_int4`).
template <>
struct KVStorageTraits<std::uint8_t> {
  /// True: `std::uint8_t` (packed int4) is a KV storage type.
  static constexpr bool kSupported = true;
  /// `kInt4TokenScaleZero`: value = (nibble - zero[block, head, slot]) * scale[block, head, slot].
  static constexpr KVQuantization kScheme = KVQuantization::kInt4TokenScaleZero;
  /// The runtime tag of packed int4 (`DType::kInt4`, not a uint8 type).
  static constexpr DType kDType = DType::kInt4;
};

/// Whether `T` is a KV storage element type (float, float16, bfloat16, float8_e4m3,
/// float8_e5m2, std::int8_t, std::uint8_t = packed int4).
template <class T>
concept KVStorage = KVStorageTraits<T>::kSupported;

/// Scale and zero point of one int4-quantized vector: value = (nibble - zero) * scale.
struct Int4Params {
  /// Value step between adjacent nibbles: `(max - min) / 15`, or 1 for a constant vector.
  float scale = 0.0f;
  /// Zero point in nibble units: `-min / scale`, the (fractional) nibble that decodes to 0.
  float zero = 0.0f;
};

/// The smallest power of two `s` with `amax / s <= max_finite` (0 for amax == 0). Powers of two
/// make rescaling exact: when a later token needs a larger scale, the stored codes are
/// multiplied by 2^-k, which only rounds for values pushed into the subnormal range. Host and
/// device (the CUDA append kernel quantizes with the same rule).
INFERKIT_HOST_DEVICE inline float fp8_block_scale(float amax, float max_finite) noexcept {
  if (amax == 0.0f) return 0.0f;
#if !defined(__CUDA_ARCH__)
  // Normal amax and max_finite, and a normal answer 2^k: amax / 2^k is then exact, so k is the
  // smallest with amax <= max_finite * 2^k, which the exponents and mantissas give directly.
  // (frexp and ldexp are library calls: about a third of an fp8 append's row on the CPU.)
  const auto a = std::bit_cast<std::uint32_t>(amax);
  const auto mf = std::bit_cast<std::uint32_t>(max_finite);
  const auto ea = static_cast<std::int32_t>(a >> 23);  // biased exponents; a sign bit makes 256+
  const auto em = static_cast<std::int32_t>(mf >> 23);
  if (ea > 0 && ea < 255 && em > 0 && em < 255) {
    const std::int32_t k = ea - em + ((a & 0x7FFFFFu) > (mf & 0x7FFFFFu) ? 1 : 0);
    if (k >= -126 && k <= 127)
      return std::bit_cast<float>(static_cast<std::uint32_t>(k + 127) << 23);
  }
#endif
  int e = 0;
  const float m = std::frexp(amax / max_finite, &e);  // amax / max = m * 2^e, m in [0.5, 1)
  float s = std::ldexp(1.0f, m == 0.5f ? e - 1 : e);
  while (amax / s > max_finite) s *= 2.0f;
  return s;
}

// The quantizers below run on the row kernels of the process's instruction-set path
// (kv/detail/kv_row_kernels.hpp; every path gives the same bits), so they live in the ISA-named
// inline namespace (core/config.hpp) with the other CPU kernels.
inline namespace INFERKIT_ISA_ABI {

/// Largest |x| of a vector (0 for an empty one). Inputs must be finite.
inline float abs_max(std::span<const float> x) noexcept {
  return detail::kv_row_kernels().abs_max(x.data(), x.size());
}

// ---- int8: symmetric, one scale per token and head ----

/// Quantizes `x` to int8 with scale `abs_max(x) / 127`: `q = rint(clamp(x / scale, -127, 127))`,
/// so `|x - q * scale| <= scale / 2` per element. Returns the scale (0 for an all-zero vector,
/// whose codes are 0). Precondition: `q.size() == x.size()`, finite inputs. O(x.size()).
inline float quantize_int8(std::span<const float> x, std::span<std::int8_t> q) noexcept {
  return detail::kv_row_kernels().quantize_int8(x.data(), q.data(), x.size());
}

/// `out[i] = q[i] * scale`. Precondition: equal sizes.
inline void dequantize_int8(std::span<const std::int8_t> q, float scale,
                            std::span<float> out) noexcept {
  for (std::size_t i = 0; i < q.size(); ++i) out[i] = static_cast<float>(q[i]) * scale;
}

// ---- int4: asymmetric, scale and zero point per token and head ----

/// Quantizes `x` (even length) to unsigned nibbles over [min, max]: `scale = (max - min) / 15`,
/// `zero = -min / scale`, nibble = `clamp(rint(x / scale + zero), 0, 15)`, packed two per byte
/// (element 2i in the low nibble of `packed[i]`). `|x - (q - zero) * scale| <= scale / 2` up to
/// float rounding. A constant vector gets scale 1 and zero = -x[0] (exact). Precondition:
/// `packed.size() == x.size() / 2`, x.size() even, finite inputs. O(x.size()).
inline Int4Params quantize_int4(std::span<const float> x, std::span<std::uint8_t> packed) noexcept {
  Int4Params p;
  detail::kv_row_kernels().quantize_int4(x.data(), packed.data(), x.size(), &p.scale, &p.zero);
  return p;
}

/// `out[2i] = (low_nibble(packed[i]) - zero) * scale`, `out[2i+1]` from the high nibble.
inline void dequantize_int4(std::span<const std::uint8_t> packed, Int4Params p,
                            std::span<float> out) noexcept {
  for (std::size_t i = 0; i < packed.size(); ++i) {
    out[2 * i] = (static_cast<float>(low_nibble(packed[i])) - p.zero) * p.scale;
    out[2 * i + 1] = (static_cast<float>(high_nibble(packed[i])) - p.zero) * p.scale;
  }
}

// ---- fp8: a power-of-two scale per block and head ----

/// `q[i] = F8(x[i] / scale)` (round to nearest even; scale 0 stores zeros).
template <class F8>
inline void quantize_fp8(std::span<const float> x, float scale, std::span<F8> q) noexcept {
  const float inv = scale == 0.0f ? 0.0f : 1.0f / scale;  // exact: scale is a power of two
  detail::convert_from_float(detail::kv_row_kernels(), x.data(), inv, q.data(), x.size());
}

/// `out[i] = float(q[i]) * scale`.
template <class F8>
inline void dequantize_fp8(std::span<const F8> q, float scale, std::span<float> out) noexcept {
  for (std::size_t i = 0; i < q.size(); ++i) out[i] = static_cast<float>(q[i]) * scale;
}

/// Re-expresses codes stored with `old_scale` under `new_scale` (both powers of two,
/// new >= old, or old == 0 when the codes are all zero).
template <class F8>
inline void rescale_fp8(std::span<F8> q, float old_scale, float new_scale) noexcept {
  detail::rescale_fp8_codes(detail::kv_row_kernels(), q.data(), q.size(), old_scale, new_scale);
}

}  // namespace INFERKIT_ISA_ABI
}  // namespace inferkit
