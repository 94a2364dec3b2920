// SPDX-License-Identifier: Apache-2.0
// The row kernels of KV append for one instruction set: float -> fp16 / bf16 / fp8 conversion,
// fp16 / bf16 -> float widening, int8 and int4 quantization of one token-head vector, fp8
// rescaling, |x| max. No include guard:
// kv_row_kernels.hpp includes this file once per path, inside that path's target region, with
// INFERKIT_KV_ISA (the namespace), INFERKIT_KV_ISA_ID (0 baseline, 1 avx2, 2 avx512, 3 neon)
// and INFERKIT_KV_VECTOR_BYTES (the path's register width) defined; it undefines them at the end.
//
// The arithmetic is written once with GCC/clang generic vectors of the path's register width
// (so it compiles to one instruction per operation with no reliance on the auto-vectorizer or
// -O3); only the narrowing stores, which generic vectors lower badly, use the path's own
// instructions. Every kernel gives the same bits as the scalar definitions (core/float16.hpp,
// float8.hpp, bfloat16.hpp, kv/kv_quantization.hpp's formulas); the tests check each path.
// NOLINTBEGIN(bugprone-macro-parentheses)
#if !defined(INFERKIT_KV_ISA) || !defined(INFERKIT_KV_ISA_ID) || !defined(INFERKIT_KV_VECTOR_BYTES)
#  error "kv_row_kernels-inl.hpp is included by kv_row_kernels.hpp, once per instruction set"
#endif

namespace inferkit::detail {
inline namespace INFERKIT_ISA_ABI {
namespace INFERKIT_KV_ISA {

inline constexpr std::size_t kBytes = INFERKIT_KV_VECTOR_BYTES;
inline constexpr std::size_t kN = kBytes / 4;  // floats per vector
using VF = float __attribute__((vector_size(kBytes)));
using VU = std::uint32_t __attribute__((vector_size(kBytes)));
using VI = std::int32_t __attribute__((vector_size(kBytes)));
using VU64 = std::uint64_t __attribute__((vector_size(kBytes)));

/// std::bit_cast defined in this path's region: std::bit_cast itself, compiled without the
/// region's target, would pass wide vectors by value against the psABI (g++ -Wpsabi).
template <class To, class From>
INFERKIT_FORCEINLINE To bits_as(const From& from) noexcept {
  return __builtin_bit_cast(To, from);
}
INFERKIT_FORCEINLINE VF load_floats(const float* p) noexcept {
  VF v;
  std::memcpy(&v, p, kBytes);
  return v;
}
INFERKIT_FORCEINLINE VF splat(float a) noexcept { return VF{} + a; }
INFERKIT_FORCEINLINE VU splat_u(std::uint32_t a) noexcept { return VU{} + a; }
/// a < b ? a : b and a > b ? a : b (b where either is NaN): one minps / maxps on x86, where
/// GCC lowers the conditional itself to a compare and a blend (up to four instructions).
INFERKIT_FORCEINLINE VF min_lanes(VF a, VF b) noexcept {
#if INFERKIT_KV_ISA_ID == 2
  return bits_as<VF>(_mm512_min_ps(bits_as<__m512>(a), bits_as<__m512>(b)));
#elif INFERKIT_KV_ISA_ID == 1
  return bits_as<VF>(_mm256_min_ps(bits_as<__m256>(a), bits_as<__m256>(b)));
#elif INFERKIT_KV_ISA_ID == 0 && INFERKIT_CPU_DISPATCH
  return bits_as<VF>(_mm_min_ps(bits_as<__m128>(a), bits_as<__m128>(b)));
#else
  return a < b ? a : b;
#endif
}
INFERKIT_FORCEINLINE VF max_lanes(VF a, VF b) noexcept {
#if INFERKIT_KV_ISA_ID == 2
  return bits_as<VF>(_mm512_max_ps(bits_as<__m512>(a), bits_as<__m512>(b)));
#elif INFERKIT_KV_ISA_ID == 1
  return bits_as<VF>(_mm256_max_ps(bits_as<__m256>(a), bits_as<__m256>(b)));
#elif INFERKIT_KV_ISA_ID == 0 && INFERKIT_CPU_DISPATCH
  return bits_as<VF>(_mm_max_ps(bits_as<__m128>(a), bits_as<__m128>(b)));
#else
  return a > b ? a : b;
#endif
}
/// The largest and the smallest lane, by halving the vector: a scan lane by lane is a chain of kN
/// dependent max (16 on AVX-512, about 60 cycles), as long as the rest of a 128-wide row's
/// quantization. The callers' lanes hold no NaN, or only NaN, so the order of the pairs does not
/// change the result.
INFERKIT_FORCEINLINE float max_of_lanes(VF v) noexcept {
#if INFERKIT_KV_ISA_ID == 2
  return _mm512_reduce_max_ps(bits_as<__m512>(v));
#elif INFERKIT_KV_ISA_ID == 1
  const auto x = bits_as<__m256>(v);
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_max_ss(m, _mm_shuffle_ps(m, m, 1)));
#else
  float best = v[0];
  for (std::size_t l = 1; l < kN; ++l) best = std::max(best, v[l]);
  return best;
#endif
}
INFERKIT_FORCEINLINE float min_of_lanes(VF v) noexcept {
#if INFERKIT_KV_ISA_ID == 2
  return _mm512_reduce_min_ps(bits_as<__m512>(v));
#elif INFERKIT_KV_ISA_ID == 1
  const auto x = bits_as<__m256>(v);
  __m128 m = _mm_min_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
  m = _mm_min_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_min_ss(m, _mm_shuffle_ps(m, m, 1)));
#else
  float least = v[0];
  for (std::size_t l = 1; l < kN; ++l) least = std::min(least, v[l]);
  return least;
#endif
}
/// Round to nearest even of |x| < 2^22 (std::rint in the default rounding mode).
INFERKIT_FORCEINLINE VF round_even(VF x) noexcept {
  constexpr float kShift = 12582912.0f;  // 1.5 * 2^23: the sum's ulp is 1, so adding it rounds
  return (x + kShift) - kShift;
}

/// Stores the low byte of each lane (every lane holds 0..255).
INFERKIT_FORCEINLINE void store_bytes(VU v, std::uint8_t* out) noexcept {
#if INFERKIT_KV_ISA_ID == 2
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm512_cvtepi32_epi8(bits_as<__m512i>(v)));
#elif INFERKIT_KV_ISA_ID == 1
  const auto x = bits_as<__m256i>(v);
  const __m128i w = _mm_packus_epi32(_mm256_castsi256_si128(x), _mm256_extracti128_si256(x, 1));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(out), _mm_packus_epi16(w, w));
#elif INFERKIT_KV_ISA_ID == 0 && INFERKIT_CPU_DISPATCH
  const auto x = bits_as<__m128i>(v);
  const __m128i w = _mm_packs_epi32(x, x);
  const int word = _mm_cvtsi128_si32(_mm_packus_epi16(w, w));
  std::memcpy(out, &word, sizeof(word));
#elif INFERKIT_KV_ISA_ID == 3
  const uint16x4_t h = vmovn_u32(bits_as<uint32x4_t>(v));
  const std::uint32_t word = vget_lane_u32(vreinterpret_u32_u8(vmovn_u16(vcombine_u16(h, h))), 0);
  std::memcpy(out, &word, sizeof(word));
#else
  for (std::size_t i = 0; i < kN; ++i) out[i] = static_cast<std::uint8_t>(v[i]);
#endif
}

/// Stores the low 16 bits of each lane (every lane holds 0..65535).
INFERKIT_FORCEINLINE void store_halves(VU v, std::uint16_t* out) noexcept {
#if INFERKIT_KV_ISA_ID == 2
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm512_cvtepi32_epi16(bits_as<__m512i>(v)));
#elif INFERKIT_KV_ISA_ID == 1
  const auto x = bits_as<__m256i>(v);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out),
                   _mm_packus_epi32(_mm256_castsi256_si128(x), _mm256_extracti128_si256(x, 1)));
#elif INFERKIT_KV_ISA_ID == 0 && INFERKIT_CPU_DISPATCH
  // SSE2 has only a signed 32 -> 16 pack: shift the range down by 2^15, pack, shift it back.
  const __m128i bias = _mm_set1_epi32(0x8000);
  const __m128i x = _mm_sub_epi32(bits_as<__m128i>(v), bias);
  const __m128i w = _mm_xor_si128(_mm_packs_epi32(x, x), _mm_set1_epi16(-0x8000));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(out), w);
#elif INFERKIT_KV_ISA_ID == 3
  vst1_u16(out, vmovn_u32(bits_as<uint32x4_t>(v)));
#else
  for (std::size_t i = 0; i < kN; ++i) out[i] = static_cast<std::uint16_t>(v[i]);
#endif
}

/// Stores the low byte of each 64-bit lane (kN / 2 bytes; every lane holds 0..255).
INFERKIT_FORCEINLINE void store_pair_bytes(VU64 v, std::uint8_t* out) noexcept {
#if INFERKIT_KV_ISA_ID == 2
  _mm_storel_epi64(reinterpret_cast<__m128i*>(out), _mm512_cvtepi64_epi8(bits_as<__m512i>(v)));
#elif INFERKIT_KV_ISA_ID == 1
  const __m256i even =
      _mm256_permutevar8x32_epi32(bits_as<__m256i>(v), _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6));
  const __m128i w = _mm_packus_epi32(_mm256_castsi256_si128(even), _mm256_castsi256_si128(even));
  const int word = _mm_cvtsi128_si32(_mm_packus_epi16(w, w));
  std::memcpy(out, &word, sizeof(word));
#else
  for (std::size_t i = 0; i < kN / 2; ++i) out[i] = static_cast<std::uint8_t>(v[i]);
#endif
}

/// The largest |x[i]| (0 for n == 0); finite inputs.
inline float abs_max(const float* x, std::size_t n) noexcept {
  const auto abs = [x](std::size_t i) {
    return bits_as<VF>(bits_as<VU>(load_floats(x + i)) & 0x7FFFFFFFu);
  };
  // Two running maxima: one chain would wait a max latency per vector.
  VF m = VF{};
  VF m2 = VF{};
  std::size_t i = 0;
  for (; i + 2 * kN <= n; i += 2 * kN) {
    m = max_lanes(abs(i), m);
    m2 = max_lanes(abs(i + kN), m2);
  }
  for (; i + kN <= n; i += kN) m = max_lanes(abs(i), m);
  float best = max_of_lanes(max_lanes(m2, m));
  for (; i < n; ++i) best = std::max(best, std::fabs(x[i]));
  return best;
}

/// int8 codes of x[0, n) with scale abs_max / 127 (kv_quantization.hpp's quantize_int8).
inline float quantize_int8(const float* x, std::int8_t* q, std::size_t n) noexcept {
  const float amax = abs_max(x, n);
  if (amax == 0.0f) {
    std::fill_n(q, n, std::int8_t{0});
    return 0.0f;
  }
  const float inv = 127.0f / amax;
  std::size_t i = 0;
  for (; i + kN <= n; i += kN) {
    // max(-127, r) is r < -127 ? -127 : r, NaN included (as is min(127, r) for the top).
    const VF r = min_lanes(splat(127.0f), max_lanes(splat(-127.0f), load_floats(x + i) * inv));
    const VI code = __builtin_convertvector(round_even(r), VI);
    store_bytes(bits_as<VU>(code) & 0xFFu, reinterpret_cast<std::uint8_t*>(q + i));
  }
  for (; i < n; ++i) {
    const float r = std::clamp(x[i] * inv, -127.0f, 127.0f);
    q[i] = static_cast<std::int8_t>(static_cast<int>(std::rint(r)));
  }
  return amax / 127.0f;
}

/// Packed int4 codes of x[0, n) (n even) over [min, max] (kv_quantization.hpp's quantize_int4).
inline void quantize_int4(const float* x, std::uint8_t* packed, std::size_t n, float* scale,
                          float* zero) noexcept {
  float lo = n == 0 ? 0.0f : x[0];
  float hi = lo;
  std::size_t i = 0;
  VF lo_v = splat(lo);
  VF hi_v = lo_v;
  VF lo_v2 = lo_v;  // two chains of each, as in abs_max
  VF hi_v2 = lo_v;
  for (; i + 2 * kN <= n; i += 2 * kN) {
    const VF v = load_floats(x + i);
    const VF v2 = load_floats(x + i + kN);
    lo_v = min_lanes(v, lo_v);
    hi_v = max_lanes(v, hi_v);
    lo_v2 = min_lanes(v2, lo_v2);
    hi_v2 = max_lanes(v2, hi_v2);
  }
  for (; i + kN <= n; i += kN) {
    const VF v = load_floats(x + i);
    lo_v = min_lanes(v, lo_v);
    hi_v = max_lanes(v, hi_v);
  }
  lo = min_of_lanes(min_lanes(lo_v2, lo_v));
  hi = max_of_lanes(max_lanes(hi_v2, hi_v));
  for (std::size_t t = i; t < n; ++t) {
    lo = std::min(lo, x[t]);
    hi = std::max(hi, x[t]);
  }
  float s = 1.0f;
  float z = -lo;
  if (hi != lo) {
    s = (hi - lo) / 15.0f;
    z = -lo / s;
  }
  *scale = s;
  *zero = z;
  const float inv = 1.0f / s;
  i = 0;
  for (; i + kN <= n; i += kN) {
    const VF r = min_lanes(splat(15.0f), max_lanes(splat(0.0f), (load_floats(x + i) - lo) * inv));
    const auto codes = bits_as<VU64>(__builtin_convertvector(round_even(r), VI));
    // Each 64-bit lane holds an (even, odd) code pair: even | odd << 4 in its low byte.
    store_pair_bytes((codes & 0xFu) | ((codes >> 28) & 0xF0u), packed + i / 2);
  }
  const auto code = [&](float v) {
    return static_cast<std::uint32_t>(
        static_cast<int>(std::rint(std::clamp((v - lo) * inv, 0.0f, 15.0f))));
  };
  for (; i + 2 <= n; i += 2) {
    packed[i / 2] = static_cast<std::uint8_t>(code(x[i]) | (code(x[i + 1]) << 4));
  }
}

/// Format bits (magnitude and sign in the low 1 + E + M bits) of x, round to nearest even, as
/// detail::encode_minifloat<Format> gives them. The rounding is the FPU's own: adding 1.5 *
/// 2^(e + 23 - M), e the exponent of |x| (at least the smallest normal's), leaves |x| in units
/// of its ulp in the low mantissa bits. Min/max run on floats and compares on signed lanes
/// (every value is below 2^31): one instruction each down to SSE2. A binary32 subnormal input
/// gives code 0 with or without FTZ/DAZ, and no other step makes one.
template <class Format>
INFERKIT_FORCEINLINE VU encode_minifloat_lanes(VF x) noexcept {
  constexpr int kMan = Format::kMantissaBits;
  constexpr int kDropped = 23 - kMan;
  constexpr auto kMinNormalBits = static_cast<std::int32_t>(127 + Format::kMinNormalExp) << 23;
  // The largest magnitude to round: the largest finite value where overflow saturates, else
  // 2^(emax + 1), which rounds to the Inf code (so do the values that round up to it).
  constexpr std::uint32_t kTopExp =
      Format::kIeee ? (Format::kExpMask >> kMan) : (Format::kMaxFinite >> kMan);
  constexpr std::uint32_t kTopMan = Format::kIeee ? 0u : (Format::kMaxFinite & Format::kManMask);
  constexpr std::uint32_t kClampBits =
      ((kTopExp + 127u - static_cast<std::uint32_t>(Format::kBias)) << 23) | (kTopMan << kDropped);
  const VU u = bits_as<VU>(x);
  const VU sign = (u >> 31) << (Format::kExponentBits + kMan);
  const VI a = bits_as<VI>(u & 0x7FFFFFFFu);
  const VF clamp = splat(std::bit_cast<float>(kClampBits));
  const VF m = min_lanes(bits_as<VF>(a), clamp);  // NaN lanes: replaced below
  const VF e = max_lanes(bits_as<VF>(bits_as<VI>(m) & 0x7F800000),
                         splat(std::bit_cast<float>(kMinNormalBits)));
  const VI magic = bits_as<VI>(e) + ((kDropped << 23) | 0x400000);
  const VI units = bits_as<VI>(m + bits_as<VF>(magic)) - magic;  // |x| / ulp, rounded
  // units counts the leading 1 of a normal, so a carry into the next binade comes out right.
  VI code = ((bits_as<VI>(e) - kMinNormalBits) >> kDropped) + units;
  VI nan = VI{} + static_cast<std::int32_t>(Format::kNan);
  if constexpr (Format::kIeee) nan = nan | ((a & 0x007FFFFF) >> kDropped);
  // A NaN lane went through the steps above as the clamp, whose code (Inf, or the largest
  // finite) has only bits the NaN code has: OR-ing the NaN code in is the select.
  static_assert(((Format::kIeee ? Format::kExpMask : Format::kMaxFinite) & ~Format::kNan) == 0);
  code = code | ((a > 0x7F800000) & nan);
  return sign | bits_as<VU>(code);
}

/// Format bits -> floats, exact (detail::decode_minifloat<Format>).
template <class Format>
INFERKIT_FORCEINLINE VF decode_minifloat_lanes(VU bits) noexcept {
  constexpr int kDropped = 23 - Format::kMantissaBits;
  const VU sign = (bits & Format::kSignBit) != 0u ? splat_u(0x80000000u) : splat_u(0u);
  const VU mag = bits & (Format::kExpMask | Format::kManMask);
  constexpr float kRebias = static_cast<float>(1ull << (127 - Format::kBias - 64)) * 0x1.0p64f;
  const VU finite = bits_as<VU>(bits_as<VF>(mag << kDropped) * kRebias);
  const VU man = mag & Format::kManMask;
  VU special = splat_u(0x7FC00000u);
  if constexpr (Format::kIeee) {
    special = man == 0u ? splat_u(0x7F800000u) : (0x7FC00000u | (man << kDropped));
  }
  return bits_as<VF>(sign | (mag > Format::kMaxFinite ? special : finite));
}

/// out[i] = Format(x[i] * inv) bits, for an 8- or 16-bit `Bits` output.
template <class Format, class Bits>
inline void encode_row(const float* x, float inv, Bits* out, std::size_t n) noexcept {
  std::size_t i = 0;
#if INFERKIT_KV_ISA_ID != 0
  if constexpr (std::is_same_v<Format, Float16Format>) {
    // The hardware conversion (F16C, NEON): round to nearest even, NaN quieted with its payload,
    // the bits of encode_minifloat<Float16Format>.
    for (; i + kN <= n; i += kN) {
      const VF y = load_floats(x + i) * inv;
#  if INFERKIT_KV_ISA_ID == 2
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i),
                          _mm512_cvtps_ph(bits_as<__m512>(y), _MM_FROUND_TO_NEAREST_INT));
#  elif INFERKIT_KV_ISA_ID == 1
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                       _mm256_cvtps_ph(bits_as<__m256>(y), _MM_FROUND_TO_NEAREST_INT));
#  else
      vst1_u16(out + i, vreinterpret_u16_f16(vcvt_f16_f32(bits_as<float32x4_t>(y))));
#  endif
    }
  }
#endif
  for (; i + kN <= n; i += kN) {
    const VU code = encode_minifloat_lanes<Format>(load_floats(x + i) * inv);
    if constexpr (sizeof(Bits) == 1) {
      store_bytes(code, out + i);
    } else {
      store_halves(code, out + i);
    }
  }
  for (; i < n; ++i) out[i] = static_cast<Bits>(encode_minifloat<Format>(x[i] * inv));
}

/// bfloat16 bits of x[i] (round to nearest even; NaN quiet, payload kept).
inline void encode_bf16_row(const float* x, std::uint16_t* out, std::size_t n) noexcept {
  std::size_t i = 0;
  for (; i + kN <= n; i += kN) {
    const VU u = bits_as<VU>(load_floats(x + i));
    const VU rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
    store_halves((u & 0x7FFFFFFFu) > 0x7F800000u ? ((u >> 16) | 0x40u) : rounded, out + i);
  }
  for (; i < n; ++i) out[i] = bfloat16(x[i]).bits;
}

/// Floats of the float16 bits in[i], exact (decode_minifloat<Float16Format>: NaN quieted with
/// its payload kept, as the F16C / NEON conversions do).
inline void decode_f16_row(const std::uint16_t* in, float* out, std::size_t n) noexcept {
  std::size_t i = 0;
#if INFERKIT_KV_ISA_ID == 2
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(out + i,
                     _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i))));
  }
#elif INFERKIT_KV_ISA_ID == 1
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(out + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))));
  }
#endif
  for (; i + kN <= n; i += kN) {
    VU b;
    for (std::size_t l = 0; l < kN; ++l) b[l] = in[i + l];
    const VF y = decode_minifloat_lanes<Float16Format>(b);
    std::memcpy(out + i, &y, kBytes);
  }
  for (; i < n; ++i) out[i] = decode_minifloat<Float16Format>(in[i]);
}

/// Floats of the bfloat16 bits in[i]: the bits shifted into the top half (exact, NaN as is).
inline void decode_bf16_row(const std::uint16_t* in, float* out, std::size_t n) noexcept {
  std::size_t i = 0;
#if INFERKIT_KV_ISA_ID == 2
  for (; i + 16 <= n; i += 16) {
    const __m512i w =
        _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i)));
    _mm512_storeu_si512(out + i, _mm512_slli_epi32(w, 16));
  }
#elif INFERKIT_KV_ISA_ID == 1
  for (; i + 8 <= n; i += 8) {
    const __m256i w =
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm256_slli_epi32(w, 16));
  }
#endif
  for (; i + kN <= n; i += kN) {
    VU b;
    for (std::size_t l = 0; l < kN; ++l) b[l] = in[i + l];
    const VU y = b << 16;
    std::memcpy(out + i, &y, kBytes);
  }
  for (; i < n; ++i) {
    const std::uint32_t y = std::uint32_t{in[i]} << 16;
    std::memcpy(out + i, &y, sizeof(y));
  }
}

/// Re-encodes fp8 codes q[0, n) as Format(float(q) * ratio) (a power-of-two rescale).
template <class Format>
inline void rescale_row(std::uint8_t* q, float ratio, std::size_t n) noexcept {
  std::size_t i = 0;
  for (; i + kN <= n; i += kN) {
    VU b;
    for (std::size_t l = 0; l < kN; ++l) b[l] = q[i + l];
    store_bytes(encode_minifloat_lanes<Format>(decode_minifloat_lanes<Format>(b) * ratio), q + i);
  }
  for (; i < n; ++i) {
    q[i] =
        static_cast<std::uint8_t>(encode_minifloat<Format>(decode_minifloat<Format>(q[i]) * ratio));
  }
}

/// This path's kernels, as a table KvRowKernels of function pointers.
inline constexpr KvRowKernels kKvRowKernels = {
    CpuIsa::INFERKIT_KV_ISA_CPU_ISA,
    &abs_max,
    &quantize_int8,
    &quantize_int4,
    &encode_row<Float16Format, std::uint16_t>,
    &encode_bf16_row,
    &encode_row<Float8E4M3Format, std::uint8_t>,
    &encode_row<Float8E5M2Format, std::uint8_t>,
    &rescale_row<Float8E4M3Format>,
    &rescale_row<Float8E5M2Format>,
    &decode_f16_row,
    &decode_bf16_row,
};

}  // namespace INFERKIT_KV_ISA
}  // namespace INFERKIT_ISA_ABI
}  // namespace inferkit::detail

#undef INFERKIT_KV_ISA
#undef INFERKIT_KV_ISA_ID
#undef INFERKIT_KV_ISA_CPU_ISA
#undef INFERKIT_KV_VECTOR_BYTES
// NOLINTEND(bugprone-macro-parentheses)
