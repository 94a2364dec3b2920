// SPDX-License-Identifier: Apache-2.0
// GgufValue: one metadata value of a GGUF model file (an integer, a float, a bool, a string, or
// an array of any of them, arrays of arrays included), as `GgufFile` reads it. Strings and arrays
// are views into the file's bytes, so reading the 49k-entry vocabulary of a tokenizer copies
// nothing. Accessors convert where no information is lost and otherwise throw an `Error` naming
// the key, the type found and the byte offset of the value.
// Threads: a GgufValue is immutable: its accessors may run concurrently from any number of threads.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <inferkit/core/error.hpp>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace inferkit {

/// A GGUF metadata value type, with the ids the file stores (gguf.h's `enum gguf_type`).
enum class GgufValueType : std::uint32_t {
  kUint8 = 0,     ///< unsigned 8-bit integer
  kInt8 = 1,      ///< signed 8-bit integer
  kUint16 = 2,    ///< unsigned 16-bit integer
  kInt16 = 3,     ///< signed 16-bit integer
  kUint32 = 4,    ///< unsigned 32-bit integer
  kInt32 = 5,     ///< signed 32-bit integer
  kFloat32 = 6,   ///< IEEE binary32
  kBool = 7,      ///< one byte, 0 or 1
  kString = 8,    ///< uint64 length, then that many bytes (UTF-8, not NUL-terminated)
  kArray = 9,     ///< uint32 element type, uint64 count, then the elements
  kUint64 = 10,   ///< unsigned 64-bit integer
  kInt64 = 11,    ///< signed 64-bit integer
  kFloat64 = 12,  ///< IEEE binary64
};

/// The type's name as GGUF tools print it ("uint32", "string", "array", …), or "unknown".
constexpr std::string_view to_string(GgufValueType type) noexcept {
  switch (type) {
    case GgufValueType::kUint8:
      return "uint8";
    case GgufValueType::kInt8:
      return "int8";
    case GgufValueType::kUint16:
      return "uint16";
    case GgufValueType::kInt16:
      return "int16";
    case GgufValueType::kUint32:
      return "uint32";
    case GgufValueType::kInt32:
      return "int32";
    case GgufValueType::kFloat32:
      return "float32";
    case GgufValueType::kBool:
      return "bool";
    case GgufValueType::kString:
      return "string";
    case GgufValueType::kArray:
      return "array";
    case GgufValueType::kUint64:
      return "uint64";
    case GgufValueType::kInt64:
      return "int64";
    case GgufValueType::kFloat64:
      return "float64";
  }
  return "unknown";
}

namespace detail {

/// Bytes of one scalar of `type` in a file: 1, 2, 4 or 8; 0 for strings, arrays, unknown ids.
constexpr std::size_t gguf_scalar_bytes(GgufValueType type) noexcept {
  switch (type) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kBool:
      return 1;
    case GgufValueType::kUint16:
    case GgufValueType::kInt16:
      return 2;
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kFloat32:
      return 4;
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
    case GgufValueType::kFloat64:
      return 8;
    case GgufValueType::kString:
    case GgufValueType::kArray:
      return 0;
  }
  return 0;
}

constexpr bool gguf_is_signed(GgufValueType type) noexcept {
  return type == GgufValueType::kInt8 || type == GgufValueType::kInt16 ||
         type == GgufValueType::kInt32 || type == GgufValueType::kInt64;
}

constexpr bool gguf_is_integer(GgufValueType type) noexcept {
  return gguf_is_signed(type) || type == GgufValueType::kUint8 || type == GgufValueType::kUint16 ||
         type == GgufValueType::kUint32 || type == GgufValueType::kUint64;
}

/// Reads `n` (1, 2, 4 or 8) little-endian bytes, whatever the host's byte order.
inline std::uint64_t load_le(const std::byte* p, std::size_t n) noexcept {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < n; ++i) v |= std::to_integer<std::uint64_t>(p[i]) << (8 * i);
  return v;
}

/// Sign-extends the low `n` bytes of `bits`.
inline std::int64_t sign_extend(std::uint64_t bits, std::size_t n) noexcept {
  if (n == 8) return static_cast<std::int64_t>(bits);
  const std::uint64_t sign = std::uint64_t{1} << (8 * n - 1);
  return static_cast<std::int64_t>((bits ^ sign) - sign);
}

}  // namespace detail

/// One GGUF metadata value. A `GgufFile` owns the bytes that its values view: a value (and every
/// `std::string_view` it returns) stays valid while that file, or the file it was moved into,
/// lives. Scalar accessors accept every type that converts without loss: the integer accessors
/// take any integer type whose value fits, `as_f64` takes both float types and `as_f32` takes a
/// float64 that float32 represents within its range. Every mismatch throws
/// `Error{kInvalidArgument}` (wrong type) or `Error{kOutOfRange}` (does not fit) naming the key,
/// the type found and the value's byte offset in the file.
class GgufValue {
 public:
  /// A value of `type` for metadata key `key` at byte `offset` of the file; `bits` holds a
  /// scalar's little-endian bits. Built by the reader; users get values from `GgufFile`.
  GgufValue(GgufValueType type, std::string_view key, std::uint64_t offset,
            std::uint64_t bits = 0) noexcept
      : type_(type), key_(key), offset_(offset), bits_(bits) {}

  /// A string value viewing `text`.
  static GgufValue of_string(std::string_view key, std::uint64_t offset, std::string_view text) {
    GgufValue v(GgufValueType::kString, key, offset);
    v.text_ = text;
    return v;
  }

  /// An array of `count` scalars of `element_type` whose little-endian bytes are `raw`.
  static GgufValue of_scalar_array(std::string_view key, std::uint64_t offset,
                                   GgufValueType element_type, std::uint64_t count,
                                   std::span<const std::byte> raw) {
    GgufValue v(GgufValueType::kArray, key, offset);
    v.element_type_ = element_type;
    v.count_ = count;
    v.raw_ = raw;
    return v;
  }

  /// An array of strings.
  static GgufValue of_string_array(std::string_view key, std::uint64_t offset,
                                   std::vector<std::string_view> strings) {
    GgufValue v(GgufValueType::kArray, key, offset);
    v.element_type_ = GgufValueType::kString;
    v.count_ = strings.size();
    v.strings_ = std::move(strings);
    return v;
  }

  /// An array of arrays (GGUF allows nesting; llama.cpp's files do not use it).
  static GgufValue of_nested_array(std::string_view key, std::uint64_t offset,
                                   std::vector<GgufValue> arrays) {
    GgufValue v(GgufValueType::kArray, key, offset);
    v.element_type_ = GgufValueType::kArray;
    v.count_ = arrays.size();
    v.arrays_ = std::move(arrays);
    return v;
  }

  /// The value's type.
  [[nodiscard]] GgufValueType type() const noexcept { return type_; }
  /// The metadata key the value belongs to (array elements report their array's key).
  [[nodiscard]] std::string_view key() const noexcept { return key_; }
  /// Byte offset of the value (after its type id) in the file.
  [[nodiscard]] std::uint64_t offset() const noexcept { return offset_; }
  /// True for arrays.
  [[nodiscard]] bool is_array() const noexcept { return type_ == GgufValueType::kArray; }

  /// The value as uint64: any integer type with a value >= 0.
  [[nodiscard]] std::uint64_t as_u64() const {
    require_integer("an integer (for uint64)");
    if (detail::gguf_is_signed(type_) && signed_bits() < 0) out_of_range("uint64");
    return detail::gguf_is_signed(type_) ? static_cast<std::uint64_t>(signed_bits()) : bits_;
  }
  /// The value as int64: any integer type with a value <= INT64_MAX.
  [[nodiscard]] std::int64_t as_i64() const {
    require_integer("an integer (for int64)");
    if (detail::gguf_is_signed(type_)) return signed_bits();
    if (bits_ > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      out_of_range("int64");
    }
    return static_cast<std::int64_t>(bits_);
  }
  /// The value as uint32: any integer type with a value in [0, 2^32).
  [[nodiscard]] std::uint32_t as_u32() const {
    const std::uint64_t v = as_u64();
    if (v > std::numeric_limits<std::uint32_t>::max()) out_of_range("uint32");
    return static_cast<std::uint32_t>(v);
  }
  /// The value as int32: any integer type with a value in [-2^31, 2^31).
  [[nodiscard]] std::int32_t as_i32() const {
    const std::int64_t v = as_i64();
    if (v < std::numeric_limits<std::int32_t>::min() ||
        v > std::numeric_limits<std::int32_t>::max()) {
      out_of_range("int32");
    }
    return static_cast<std::int32_t>(v);
  }
  /// The value as float64: float32 or float64.
  [[nodiscard]] double as_f64() const {
    if (type_ == GgufValueType::kFloat32) {
      float f = 0.0f;
      const auto bits = static_cast<std::uint32_t>(bits_);
      std::memcpy(&f, &bits, sizeof f);
      return f;
    }
    if (type_ != GgufValueType::kFloat64) wrong_type("a float32 or float64");
    double d = 0.0;
    std::memcpy(&d, &bits_, sizeof d);
    return d;
  }
  /// The value as float32: float32, or a float64 inside float32's range (rounded), or not finite.
  [[nodiscard]] float as_f32() const {
    const double d = as_f64();
    if (std::isfinite(d) && std::fabs(d) > static_cast<double>(std::numeric_limits<float>::max())) {
      out_of_range("float32");
    }
    return static_cast<float>(d);
  }
  /// The value as bool (type bool only).
  [[nodiscard]] bool as_bool() const {
    if (type_ != GgufValueType::kBool) wrong_type("a bool");
    return bits_ != 0;
  }
  /// The value as a string view into the file (type string only).
  [[nodiscard]] std::string_view as_string() const {
    if (type_ != GgufValueType::kString) wrong_type("a string");
    return text_;
  }

  /// The element type of an array. Throws `Error{kInvalidArgument}` when this is not one.
  [[nodiscard]] GgufValueType array_type() const {
    if (!is_array()) wrong_type("an array");
    return element_type_;
  }
  /// Elements of an array. Throws `Error{kInvalidArgument}` when this is not one.
  [[nodiscard]] std::size_t array_size() const {
    if (!is_array()) wrong_type("an array");
    return static_cast<std::size_t>(count_);
  }
  /// Element `i` of an array, as a value of the element type (its key is the array's). Throws
  /// `Error{kOutOfRange}` when `i >= array_size()`.
  [[nodiscard]] GgufValue array_element(std::size_t i) const {
    if (i >= array_size()) {  // the message is built only on failure
      check_arg(false, ErrorCode::kOutOfRange, describe("array index"), i,
                "must be < the array size", count_);
    }
    if (element_type_ == GgufValueType::kString) return of_string(key_, offset_, strings_[i]);
    if (element_type_ == GgufValueType::kArray) return arrays_[i];
    const std::size_t n = detail::gguf_scalar_bytes(element_type_);
    return {element_type_, key_, offset_, detail::load_le(raw_.data() + i * n, n)};
  }
  /// An array of strings, as views into the file.
  [[nodiscard]] std::span<const std::string_view> as_string_array() const {
    require_array_of(GgufValueType::kString, "an array of string");
    return strings_;
  }
  /// An array of float32 (or of float64 within float32's range), converted.
  [[nodiscard]] std::vector<float> as_f32_array() const {
    if (array_type() != GgufValueType::kFloat32 && element_type_ != GgufValueType::kFloat64) {
      wrong_type("an array of float32");
    }
    return convert_elements<float>([](const GgufValue& e) { return e.as_f32(); });
  }
  /// An array of any integer type whose elements all fit int32, converted.
  [[nodiscard]] std::vector<std::int32_t> as_i32_array() const {
    if (!detail::gguf_is_integer(array_type())) wrong_type("an array of integers");
    return convert_elements<std::int32_t>([](const GgufValue& e) { return e.as_i32(); });
  }

  /// "metadata 'key' (int32 at byte offset 123)": the context the reader's messages start with.
  [[nodiscard]] std::string describe(std::string_view what = "metadata") const {
    return detail::concat(
        {what, " '", key_, "' (", type_name(), " at byte offset ", std::to_string(offset_), ")"});
  }

 private:
  [[nodiscard]] std::string type_name() const {
    if (!is_array()) return std::string(to_string(type_));
    return detail::concat({"array of ", std::to_string(count_), " ", to_string(element_type_)});
  }
  [[nodiscard]] std::int64_t signed_bits() const noexcept {
    return detail::sign_extend(bits_, detail::gguf_scalar_bytes(type_));
  }
  void require_integer(std::string_view wanted) const {
    if (!detail::gguf_is_integer(type_)) wrong_type(wanted);
  }
  void require_array_of(GgufValueType element, std::string_view wanted) const {
    if (!is_array() || element_type_ != element) wrong_type(wanted);
  }
  [[noreturn]] void wrong_type(std::string_view wanted) const {
    detail::throw_error(ErrorCode::kInvalidArgument,
                        detail::concat({"gguf ", describe(), " is not ", wanted}));
  }
  [[noreturn]] void out_of_range(std::string_view wanted) const {
    const std::string value = detail::gguf_is_integer(type_)
                                  ? (detail::gguf_is_signed(type_) ? std::to_string(signed_bits())
                                                                   : std::to_string(bits_))
                                  : std::to_string(as_f64());
    detail::throw_error(ErrorCode::kOutOfRange, detail::concat({"gguf ", describe(), " = ", value,
                                                                " does not fit ", wanted}));
  }
  template <class T, class Convert>
  [[nodiscard]] std::vector<T> convert_elements(Convert convert) const {
    std::vector<T> out;
    out.reserve(static_cast<std::size_t>(count_));
    for (std::size_t i = 0; i < count_; ++i) out.push_back(convert(array_element(i)));
    return out;
  }

  GgufValueType type_;
  GgufValueType element_type_ = GgufValueType::kUint8;
  std::string_view key_;
  std::uint64_t offset_ = 0;
  std::uint64_t bits_ = 0;  // a scalar's bits, zero-extended
  std::uint64_t count_ = 0;
  std::string_view text_;
  std::span<const std::byte> raw_;
  std::vector<std::string_view> strings_;
  std::vector<GgufValue> arrays_;
};

}  // namespace inferkit
