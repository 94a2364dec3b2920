// SPDX-License-Identifier: Apache-2.0
// GgmlType: the tensor element types of GGUF model files (ggml's type ids, as stored on disk)
// and their block layouts: elements per block, bytes per block, bytes of a row. The GGUF reader
// validates tensors with it; the quantized linear layers dispatch on it.
// Threads: an enum and pure functions; safe from any number of threads.
#pragma once

#include <cstdint>
#include <inferkit/core/error.hpp>
#include <limits>
#include <optional>
#include <string_view>

namespace inferkit {

/// A ggml tensor type id as GGUF stores it (ggml.h's `enum ggml_type`). Only the ids inferkit
/// reads are named; others are reported by number.
enum class GgmlType : std::uint32_t {
  kF32 = 0,    ///< IEEE binary32
  kF16 = 1,    ///< IEEE binary16
  kQ4_0 = 2,   ///< blocks of 32: fp16 scale d, 16 bytes of nibbles; x = (q - 8) * d
  kQ4_1 = 3,   ///< blocks of 32: fp16 d and m, 16 bytes of nibbles; x = q * d + m
  kQ8_0 = 8,   ///< blocks of 32: fp16 scale d, 32 int8; x = q * d
  kBF16 = 30,  ///< bfloat16
};

/// The block layout of a type: `block_elements` values stored in `block_bytes` bytes.
struct GgmlTypeLayout {
  std::int64_t block_elements = 0;  ///< values per block (1 for float types)
  std::int64_t block_bytes = 0;     ///< bytes per block
  std::string_view name;            ///< "f32", "q4_1", ...
};

/// The layout of `type`, or nullopt for a type inferkit cannot read.
constexpr std::optional<GgmlTypeLayout> ggml_type_layout(GgmlType type) noexcept {
  switch (type) {
    case GgmlType::kF32:
      return GgmlTypeLayout{1, 4, "f32"};
    case GgmlType::kF16:
      return GgmlTypeLayout{1, 2, "f16"};
    case GgmlType::kBF16:
      return GgmlTypeLayout{1, 2, "bf16"};
    case GgmlType::kQ4_0:
      return GgmlTypeLayout{32, 18, "q4_0"};
    case GgmlType::kQ4_1:
      return GgmlTypeLayout{32, 20, "q4_1"};
    case GgmlType::kQ8_0:
      return GgmlTypeLayout{32, 34, "q8_0"};
  }
  return std::nullopt;
}

/// Bytes of a row of `elements` values of `type`. Throws `Error{kUnsupported}` for a type
/// inferkit cannot read, `Error{kInvalidArgument}` when `elements` is negative or not a whole
/// number of blocks, `Error{kOutOfRange}` when the size overflows int64.
inline std::int64_t ggml_row_bytes(GgmlType type, std::int64_t elements) {
  const std::optional<GgmlTypeLayout> layout = ggml_type_layout(type);
  if (!layout) {
    check_arg(false, ErrorCode::kUnsupported, "ggml type", static_cast<std::uint32_t>(type),
              "is not one of", "f32, f16, bf16, q4_0, q4_1, q8_0");
  }
  check_arg(elements >= 0 && elements % layout->block_elements == 0, ErrorCode::kInvalidArgument,
            "elements", elements, "must be a non-negative multiple of the block size",
            layout->block_elements);
  const std::int64_t blocks = elements / layout->block_elements;
  check_arg(blocks <= std::numeric_limits<std::int64_t>::max() / layout->block_bytes,
            ErrorCode::kOutOfRange, "row bytes of elements", elements, "overflow int64 for type",
            layout->name);
  return blocks * layout->block_bytes;
}

}  // namespace inferkit
