// SPDX-License-Identifier: Apache-2.0
// GgufCursor: the bounded little-endian reader under the GGUF parser. Every read checks the
// bytes left first and, past the end, throws `Error{kOutOfRange}` naming the file, what was being
// read and its byte offset, so a truncated or lying file can never read out of bounds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <inferkit/core/error.hpp>
#include <inferkit/model/gguf_value.hpp>
#include <span>
#include <string>
#include <string_view>

namespace inferkit::detail {

/// Throws `Error{code}` with "gguf '<source>': <what> at byte offset <offset>: <problem>".
[[noreturn]] inline void gguf_error(ErrorCode code, std::string_view source, std::string_view what,
                                    std::uint64_t offset, std::string_view problem) {
  throw_error(code, concat({"gguf '", source, "': ", what, " at byte offset ",
                            std::to_string(offset), ": ", problem}));
}

/// Reads a GGUF byte image front to back.
class GgufCursor {
 public:
  GgufCursor(std::span<const std::byte> bytes, std::string_view source) noexcept
      : bytes_(bytes), source_(source) {}

  [[nodiscard]] std::uint64_t pos() const noexcept { return pos_; }
  [[nodiscard]] std::uint64_t size() const noexcept { return bytes_.size(); }
  [[nodiscard]] std::uint64_t remaining() const noexcept { return bytes_.size() - pos_; }
  [[nodiscard]] std::string_view source() const noexcept { return source_; }

  /// Throws kOutOfRange unless `n` more bytes are there for `what`.
  void need(std::uint64_t n, std::string_view what) const {
    if (n > remaining()) {
      gguf_error(
          ErrorCode::kOutOfRange, source_, what, pos_,
          concat({"needs ", std::to_string(n), " bytes, the file has ", std::to_string(remaining()),
                  " left (", std::to_string(size()), " in all)"}));
    }
  }

  /// `n` raw bytes (checked), advancing past them.
  std::span<const std::byte> take(std::uint64_t n, std::string_view what) {
    need(n, what);
    const std::span<const std::byte> out =
        bytes_.subspan(static_cast<std::size_t>(pos_), static_cast<std::size_t>(n));
    pos_ += n;
    return out;
  }

  /// An unsigned little-endian integer of `n` (1, 2, 4 or 8) bytes.
  std::uint64_t read_le(std::size_t n, std::string_view what) {
    return load_le(take(n, what).data(), n);
  }
  std::uint32_t read_u32(std::string_view what) {
    return static_cast<std::uint32_t>(read_le(4, what));
  }
  std::uint64_t read_u64(std::string_view what) { return read_le(8, what); }

  /// A GGUF string: uint64 length, then the bytes, viewed in place.
  std::string_view read_string(std::string_view what) {
    const std::uint64_t at = pos_;
    const std::uint64_t length = read_u64(what);
    if (length > remaining()) {
      gguf_error(ErrorCode::kOutOfRange, source_, what, at,
                 concat({"string length ", std::to_string(length), " runs past the end (",
                         std::to_string(remaining()), " bytes left)"}));
    }
    const std::span<const std::byte> text = take(length, what);
    return {reinterpret_cast<const char*>(text.data()), text.size()};
  }

  /// Throws kOutOfRange unless `count` items of at least `min_bytes` each can fit in what is
  /// left: the guard that keeps a lying count from sizing an allocation.
  void check_count(std::uint64_t count, std::uint64_t min_bytes, std::string_view what,
                   std::uint64_t at) const {
    if (min_bytes != 0 && count > remaining() / min_bytes) {
      gguf_error(
          ErrorCode::kOutOfRange, source_, what, at,
          concat({"count ", std::to_string(count), " needs at least ", std::to_string(min_bytes),
                  " bytes each, the file has ", std::to_string(remaining()), " left"}));
    }
  }

 private:
  std::span<const std::byte> bytes_;
  std::string_view source_;
  std::uint64_t pos_ = 0;
};

}  // namespace inferkit::detail
