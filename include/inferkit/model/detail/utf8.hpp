// SPDX-License-Identifier: Apache-2.0
// Strict UTF-8 (RFC 3629: no overlongs, no surrogates, nothing past U+10FFFF) for the tokenizer:
// decoding one code point, encoding one, and telling an incomplete sequence (hold it, more bytes
// may come) from an invalid one (it never becomes valid). The pre-tokenizer and the streaming
// decoder are built on these.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace inferkit::detail {

/// The code point at `p` (n >= 1 bytes available) and its length in bytes, or length 0 when the
/// bytes there are not a complete, valid sequence.
struct Utf8Decoded {
  std::uint32_t cp = 0;
  std::size_t length = 0;
};

/// Valid second bytes for a lead byte, [lo, hi]; {1, 0} (empty) when `lead` cannot start a
/// multi-byte sequence. Continuation bytes past the second are always 0x80..0xBF.
struct Utf8SecondRange {
  unsigned char lo = 1;
  unsigned char hi = 0;
};

inline Utf8SecondRange utf8_second_range(unsigned char lead) noexcept {
  if (lead >= 0xC2 && lead <= 0xF4) {
    if (lead == 0xE0) return {0xA0, 0xBF};  // no overlong 3-byte forms
    if (lead == 0xED) return {0x80, 0x9F};  // no surrogates
    if (lead == 0xF0) return {0x90, 0xBF};  // no overlong 4-byte forms
    if (lead == 0xF4) return {0x80, 0x8F};  // nothing past U+10FFFF
    return {0x80, 0xBF};
  }
  return {};
}

/// Bytes of the sequence that `lead` starts: 1..4, or 0 when it cannot start one.
inline std::size_t utf8_sequence_length(unsigned char lead) noexcept {
  if (lead < 0x80) return 1;
  if (lead < 0xC2) return 0;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  if (lead <= 0xF4) return 4;
  return 0;
}

/// How many bytes from `p` (n available) are a valid prefix of one sequence: the full length
/// for a complete sequence, less when the bytes stop early, 0 when the first byte is invalid.
/// `*complete` says whether the sequence is whole.
inline std::size_t utf8_valid_prefix(const unsigned char* p, std::size_t n,
                                     bool* complete) noexcept {
  *complete = false;
  const std::size_t want = utf8_sequence_length(p[0]);
  if (want == 0) return 0;
  if (want == 1) {
    *complete = true;
    return 1;
  }
  const Utf8SecondRange second = utf8_second_range(p[0]);
  std::size_t k = 1;
  for (; k < want && k < n; ++k) {
    const unsigned char lo = k == 1 ? second.lo : 0x80;
    const unsigned char hi = k == 1 ? second.hi : 0xBF;
    if (p[k] < lo || p[k] > hi) return k;  // invalid here: the first k bytes were a prefix
  }
  *complete = k == want;
  return k;
}

/// Decodes the sequence at `p` (n >= 1 bytes available).
inline Utf8Decoded utf8_decode(const unsigned char* p, std::size_t n) noexcept {
  bool complete = false;
  const std::size_t k = utf8_valid_prefix(p, n, &complete);
  if (!complete) return {};
  switch (k) {
    case 1:
      return {p[0], 1};
    case 2:
      return {(std::uint32_t{p[0]} & 0x1F) << 6 | (p[1] & 0x3Fu), 2};
    case 3:
      return {(std::uint32_t{p[0]} & 0x0F) << 12 | (p[1] & 0x3Fu) << 6 | (p[2] & 0x3Fu), 3};
    default:
      return {(std::uint32_t{p[0]} & 0x07) << 18 | (p[1] & 0x3Fu) << 12 | (p[2] & 0x3Fu) << 6 |
                  (p[3] & 0x3Fu),
              4};
  }
}

/// Appends the UTF-8 encoding of `cp` (< 0x110000, not a surrogate).
inline void utf8_append(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace inferkit::detail
