// SPDX-License-Identifier: Apache-2.0
// Tests for model/stream_decoder.hpp: characters split across tokens come out whole, once; the
// stream equals decode() for valid text; invalid bytes become U+FFFD and the output stays valid.
#include <catch2/catch.hpp>
#include <inferkit/model/detail/utf8.hpp>
#include <inferkit/model/stream_decoder.hpp>
#include <random>
#include <string>
#include <tests/support/error_code.hpp>
#include <tests/support/tiny_bpe.hpp>
#include <vector>

using namespace inferkit;
using inferkit::test::code_of;

namespace {

const BpeTokenizer& tiny() {
  static const BpeTokenizer t(test::tiny_bpe_config());
  return t;
}

TokenId byte(unsigned char b) { return b; }  // tiny: byte b is token b

bool valid_utf8(const std::string& s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  for (std::size_t i = 0; i < s.size();) {
    const detail::Utf8Decoded d = detail::utf8_decode(p + i, s.size() - i);
    if (d.length == 0) return false;
    i += d.length;
  }
  return true;
}

}  // namespace

TEST_CASE("StreamDecoder: holds a character until its last byte arrives",
          "[model][stream_decoder]") {
  StreamDecoder d(tiny());
  // "é" = C3 A9, "中" = E4 B8 AD, "😀" = F0 9F 98 80, one byte token each.
  CHECK(d.push(byte('a')) == "a");
  CHECK(d.push(0xC3).empty());
  CHECK(d.pending_bytes() == 1);
  CHECK(d.push(0xA9) == "\xc3\xa9");
  CHECK(d.push(0xE4).empty());
  CHECK(d.push(0xB8).empty());
  CHECK(d.push(0xAD) == "\xe4\xb8\xad");
  CHECK(d.push(0xF0).empty());
  CHECK(d.push(0x9F).empty());
  CHECK(d.push(0x98).empty());
  CHECK(d.pending_bytes() == 3);
  CHECK(d.push(0x80) == "\xf0\x9f\x98\x80");
  CHECK(d.push(259) == "hello");  // a multi-byte token
  CHECK(d.finish().empty());
}

TEST_CASE("StreamDecoder: invalid bytes become U+FFFD", "[model][stream_decoder]") {
  StreamDecoder d(tiny());
  const std::string fffd = "\xef\xbf\xbd";
  CHECK(d.push(0xFF) == fffd);  // never valid
  CHECK(d.push(0x80) == fffd);  // a lone continuation byte
  CHECK(d.push(0xE4).empty());
  CHECK(d.push(byte('x')) == fffd + "x");  // the sequence broke off
  CHECK(d.push(0xED).empty());
  CHECK(d.push(0xA0) == fffd + fffd);  // ED A0: a surrogate, invalid at its 2nd byte
  CHECK(d.push(0xF0).empty());
  CHECK(d.finish() == fffd);  // cut off at the end
  CHECK(d.pending_bytes() == 0);
  CHECK(d.push(267).empty() == false);  // control tokens render by default
  StreamDecoder quiet(tiny(), false);
  CHECK(quiet.push(267).empty());
  CHECK(code_of([&] { (void)quiet.push(100000); }) == ErrorCode::kOutOfRange);
  quiet.reset();
  CHECK(quiet.pending_bytes() == 0);
}

TEST_CASE("StreamDecoder: the stream equals decode() for valid text, any split",
          "[model][stream_decoder]") {
  std::mt19937 rng(3);
  const std::vector<std::uint32_t> cps = {'a', ' ', 0xe9, 0x4e2d, 0x1f600, 0x10ffff, '\n', 0x7ff};
  for (int trial = 0; trial < 200; ++trial) {
    std::string text;
    for (int i = static_cast<int>(rng() % 20); i > 0; --i)
      detail::utf8_append(text, cps[rng() % cps.size()]);
    const std::vector<TokenId> ids = tiny().encode(text);
    StreamDecoder d(tiny());
    std::string streamed;
    for (const TokenId id : ids) {
      const std::string part = d.push(id);
      CHECK(valid_utf8(part));
      streamed += part;
    }
    streamed += d.finish();
    CHECK(streamed == tiny().decode(ids));
    CHECK(streamed == text);
  }
  // Random bytes: whatever comes out is valid UTF-8.
  for (int trial = 0; trial < 200; ++trial) {
    StreamDecoder d(tiny());
    std::string out;
    for (int i = 0; i < 30; ++i) out += d.push(static_cast<TokenId>(rng() % 256));
    out += d.finish();
    CHECK(valid_utf8(out));
  }
}
