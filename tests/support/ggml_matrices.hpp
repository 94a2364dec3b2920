// SPDX-License-Identifier: Apache-2.0
// Random GGUF weight matrices for the linear-layer tests (model/quantized_linear.hpp,
// model/int8_linear.hpp), and a double-precision decoder of their elements written from the block
// formats as ggml documents them (ggml-common.h: block_q4_0 {fp16 d; 16 bytes}, x = ((q & 15) - 8)
// d for element j and ((q >> 4) - 8) d for j + 16; block_q4_1 {fp16 d, m; 16 bytes}, x = q d + m;
// block_q8_0 {fp16 d; 32 int8}, x = q d), independently of the library's decoders.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <inferkit/core/bfloat16.hpp>
#include <inferkit/core/float16.hpp>
#include <inferkit/core/rng.hpp>
#include <inferkit/model/ggml_type.hpp>
#include <inferkit/model/quantized_linear.hpp>
#include <tests/support/float_reference.hpp>
#include <vector>

#if INFERKIT_HAS_OPENMP
#  include <omp.h>
#endif

namespace inferkit::test {

inline bool is_block_type(GgmlType t) {
  return t == GgmlType::kQ4_0 || t == GgmlType::kQ4_1 || t == GgmlType::kQ8_0;
}

inline std::uint16_t load_u16(const std::byte* p) {
  return static_cast<std::uint16_t>(static_cast<unsigned>(p[0]) |
                                    (static_cast<unsigned>(p[1]) << 8));
}
inline void store_u16(std::byte* p, std::uint16_t v) {
  p[0] = static_cast<std::byte>(v & 0xFFu);
  p[1] = static_cast<std::byte>(v >> 8);
}

/// fp16 bits of a random scale: sign random, exponent field in [1, 18] (2^-14 .. 2^3: scales of
/// very different magnitude, all normal), one in 16 subnormal.
inline std::uint16_t random_scale_bits(Rng& rng) {
  const std::uint32_t sign = rng.below(2) << 15;
  const std::uint32_t man = rng.below(1024);
  const std::uint32_t exp = rng.below(16) == 0 ? 0u : 1u + rng.below(18);
  return static_cast<std::uint16_t>(sign | (exp << 10) | man);
}

/// A random matrix of `type`: block scales from random_scale_bits, quant bytes uniformly random
/// (the first rows run through all 256 byte values in order), float elements finite values of
/// varied magnitude.
inline std::vector<std::byte> random_matrix(GgmlType type, std::int64_t rows, std::int64_t cols,
                                            std::uint64_t seed) {
  Rng rng(seed);
  const std::int64_t row_bytes = ggml_row_bytes(type, cols);
  std::vector<std::byte> data(static_cast<std::size_t>(rows * row_bytes));
  std::uint32_t counter = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    std::byte* row = data.data() + r * row_bytes;
    if (is_block_type(type)) {
      const std::int64_t block_bytes = ggml_type_layout(type)->block_bytes;
      const std::int64_t scales = type == GgmlType::kQ4_1 ? 2 : 1;
      for (std::int64_t b = 0; b < cols / 32; ++b) {
        std::byte* block = row + b * block_bytes;
        for (std::int64_t s = 0; s < scales; ++s) store_u16(block + 2 * s, random_scale_bits(rng));
        for (std::int64_t i = 2 * scales; i < block_bytes; ++i) {
          const std::uint32_t v = counter < 256 ? counter++ : rng.below(256);
          block[i] = static_cast<std::byte>(v);
        }
      }
    } else {
      for (std::int64_t i = 0; i < cols; ++i) {
        const float value =
            (rng.uniform() * 2.0f - 1.0f) * std::ldexp(1.0f, -8 + static_cast<int>(rng.below(12)));
        if (type == GgmlType::kF32) {
          std::memcpy(row + 4 * i, &value, 4);
        } else if (type == GgmlType::kF16) {
          store_u16(row + 2 * i, float16(value).bits);
        } else {
          store_u16(row + 2 * i, bfloat16(value).bits);
        }
      }
    }
  }
  return data;
}

/// Element `i` of a row, decoded in double from the format description (independently of the
/// library's decoders).
inline double reference_element(GgmlType type, const std::byte* row, std::int64_t i) {
  const auto half = [](const std::byte* p) { return reference_decode(kFloat16Spec, load_u16(p)); };
  switch (type) {
    case GgmlType::kQ4_0:
    case GgmlType::kQ4_1: {
      const std::int64_t block_bytes = type == GgmlType::kQ4_0 ? 18 : 20;
      const std::byte* block = row + (i / 32) * block_bytes;
      const std::byte* qs = block + (type == GgmlType::kQ4_0 ? 2 : 4);
      const std::int64_t j = i % 32;
      const auto byte = static_cast<unsigned>(qs[j % 16]);
      const auto q = static_cast<double>(j < 16 ? (byte & 15u) : (byte >> 4));
      return type == GgmlType::kQ4_0 ? (q - 8.0) * half(block) : q * half(block) + half(block + 2);
    }
    case GgmlType::kQ8_0: {
      const std::byte* block = row + (i / 32) * 34;
      return static_cast<double>(static_cast<std::int8_t>(block[2 + i % 32])) * half(block);
    }
    case GgmlType::kF16:
      return half(row + 2 * i);
    case GgmlType::kBF16:
      return reference_decode(kBFloat16Spec, load_u16(row + 2 * i));
    case GgmlType::kF32: {
      float f = 0.0f;
      std::memcpy(&f, row + 4 * i, 4);
      return f;
    }
  }
  return 0.0;
}

inline std::vector<float> random_activations(std::int64_t count, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<float> x(static_cast<std::size_t>(count));
  for (float& v : x)
    v = (rng.uniform() * 2.0f - 1.0f) * std::ldexp(1.0f, static_cast<int>(rng.below(6)) - 3);
  return x;
}

struct Matrix {
  GgmlType type;
  std::int64_t rows;
  std::int64_t cols;
  std::vector<std::byte> data;

  Matrix(GgmlType t, std::int64_t r, std::int64_t c, std::uint64_t seed)
      : type(t), rows(r), cols(c), data(random_matrix(t, r, c, seed)) {}
  [[nodiscard]] LinearWeights weights() const { return {type, rows, cols, data.data()}; }
  [[nodiscard]] const std::byte* row(std::int64_t r) const {
    return data.data() + r * ggml_row_bytes(type, cols);
  }
};

inline void set_threads(int threads) {
#if INFERKIT_HAS_OPENMP
  omp_set_num_threads(threads);
#else
  (void)threads;
#endif
}

/// Bit-for-bit equality (the batch-invariance contract), which == would not give for NaN or -0.
inline bool same_bits(const float* a, const float* b, std::int64_t count) {
  // NOLINTNEXTLINE(bugprone-suspicious-memory-comparison): the bits are what is compared
  return std::memcmp(a, b, static_cast<std::size_t>(count) * sizeof(float)) == 0;
}

}  // namespace inferkit::test
