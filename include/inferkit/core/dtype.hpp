// SPDX-License-Identifier: Apache-2.0
// The element types inferkit stores weights and KV in, as a runtime enum: bits per element (int4
// is 4), names as a user types them ("fp16", "int4"), and parsing. Memory planning (perf/) and
// KV quantization (kv/) speak this enum; the storage types themselves are in float16.hpp etc.
// Threads: an enum and pure functions; safe from any number of threads.
#pragma once

#include <array>
#include <cstdint>
#include <inferkit/core/config.hpp>
#include <inferkit/core/error.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace inferkit {

/// A storage element type.
enum class DType : std::uint8_t {
  kFloat32,     ///< IEEE binary32
  kFloat16,     ///< IEEE binary16
  kBFloat16,    ///< bfloat16 (8 exponent bits, 7 mantissa bits)
  kFloat8E4M3,  ///< OCP fp8 e4m3 "fn" (no Inf, max 448, NaN = 0x7F/0xFF)
  kFloat8E5M2,  ///< OCP fp8 e5m2 (IEEE-like, has Inf)
  kInt8,        ///< signed 8-bit integer (quantized with a scale)
  kInt4,        ///< signed or unsigned 4-bit integer, two per byte (quantized with scale/zero)
};

/// Every DType, in declaration order.
inline constexpr std::array<DType, 7> kAllDTypes = {
    DType::kFloat32,    DType::kFloat16, DType::kBFloat16, DType::kFloat8E4M3,
    DType::kFloat8E5M2, DType::kInt8,    DType::kInt4};

/// Bits one element occupies in storage (int4 = 4).
INFERKIT_HOST_DEVICE constexpr int bits_per_element(DType dtype) noexcept {
  switch (dtype) {
    case DType::kFloat32:
      return 32;
    case DType::kFloat16:
    case DType::kBFloat16:
      return 16;
    case DType::kFloat8E4M3:
    case DType::kFloat8E5M2:
    case DType::kInt8:
      return 8;
    case DType::kInt4:
      return 4;
  }
  return 0;
}

/// The short name a user types: fp32, fp16, bf16, fp8_e4m3, fp8_e5m2, int8, int4.
constexpr std::string_view to_string(DType dtype) noexcept {
  switch (dtype) {
    case DType::kFloat32:
      return "fp32";
    case DType::kFloat16:
      return "fp16";
    case DType::kBFloat16:
      return "bf16";
    case DType::kFloat8E4M3:
      return "fp8_e4m3";
    case DType::kFloat8E5M2:
      return "fp8_e5m2";
    case DType::kInt8:
      return "int8";
    case DType::kInt4:
      return "int4";
  }
  return "unknown";
}

/// Parses a DType name (the names of `to_string`, plus "fp8" for fp8_e4m3, "float32",
/// "float16", "bfloat16"); `std::nullopt` for an unknown name.
constexpr std::optional<DType> try_parse_dtype(std::string_view name) noexcept {
  for (DType dtype : kAllDTypes) {
    if (name == to_string(dtype)) return dtype;
  }
  if (name == "fp8") return DType::kFloat8E4M3;
  if (name == "float32") return DType::kFloat32;
  if (name == "float16") return DType::kFloat16;
  if (name == "bfloat16") return DType::kBFloat16;
  return std::nullopt;
}

/// Parses a DType name; throws `Error{kInvalidArgument}` naming the unknown name.
inline DType parse_dtype(std::string_view name) {
  const std::optional<DType> dtype = try_parse_dtype(name);
  check_arg(dtype.has_value(), ErrorCode::kInvalidArgument, "dtype", name, "is not one of",
            "fp32, fp16, bf16, fp8, fp8_e4m3, fp8_e5m2, int8, int4");
  return *dtype;
}

}  // namespace inferkit
