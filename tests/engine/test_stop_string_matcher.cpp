// SPDX-License-Identifier: Apache-2.0
// Tests for engine/stop_string_matcher.hpp: random texts over a small alphabet (so stop strings
// occur, overlap and straddle chunk boundaries), cut into random chunks, against a brute-force
// search of each growing prefix; and the promise a streaming server needs: text shown is never
// part of a stop string, and at most the longest stop string less one byte is held back.
#include <algorithm>
#include <catch2/catch.hpp>
#include <inferkit/core/rng.hpp>
#include <inferkit/engine/stop_string_matcher.hpp>
#include <string>
#include <tests/support/error_code.hpp>
#include <vector>

namespace {

using namespace inferkit;

std::string random_text(Rng& rng, std::size_t n) {
  static constexpr char kAlphabet[] = {'a', 'b', 'c', '\n'};
  std::string s;
  for (std::size_t i = 0; i < n; ++i) s += kAlphabet[rng.next_u32() % 4];
  return s;
}

}  // namespace

TEST_CASE("StopStringMatcher: streamed text equals a brute-force search of each prefix",
          "[engine][stop_string_matcher]") {
  Rng rng(11, 0);
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<std::string> stops(rng.next_u32() % 4);
    for (std::string& s : stops) s = random_text(rng, 1 + rng.next_u32() % 5);
    const std::string text = random_text(rng, rng.next_u32() % 40);
    std::vector<std::string> chunks;
    for (std::size_t at = 0; at < text.size();) {
      const std::size_t len = std::min<std::size_t>(text.size() - at, rng.next_u32() % 6);
      chunks.push_back(text.substr(at, len));  // empty chunks too
      at += len;
    }
    // Reference: the first chunk after which some stop string occurs in the text so far; the
    // output ends where the earliest-starting occurrence begins.
    std::string expected = text;
    bool expect_stop = false;
    std::string so_far;
    for (const std::string& c : chunks) {
      so_far += c;
      std::size_t first = std::string::npos;
      for (const std::string& s : stops) first = std::min(first, so_far.find(s));
      if (first != std::string::npos) {
        expected = so_far.substr(0, first);
        expect_stop = true;
        break;
      }
    }
    StopStringMatcher m(stops);
    std::string shown;
    std::size_t longest = 0;
    for (const std::string& s : stops) longest = std::max(longest, s.size());
    for (const std::string& c : chunks) {
      shown += m.push(c);
      // Never more than the expected output, and nothing held that cannot begin a stop.
      REQUIRE(expected.compare(0, shown.size(), shown) == 0);
      if (!m.stopped()) CHECK(m.held_bytes() <= (longest > 0 ? longest - 1 : 0));
    }
    if (!m.stopped()) shown += m.finish();
    INFO("text '" << text << "'");
    CHECK(shown == expected);
    CHECK(m.stopped() == expect_stop);
    if (expect_stop) {
      const std::string matched(*m.matched());
      CHECK(std::find(stops.begin(), stops.end(), matched) != stops.end());
      CHECK(text.compare(expected.size(), matched.size(), matched) == 0);
    }
  }
}

TEST_CASE("StopStringMatcher: multi-byte characters and pushes after the stop",
          "[engine][stop_string_matcher]") {
  StopStringMatcher m({"\xE4\xB8\x96\xE7\x95\x8C", "END"});  // "世界"
  CHECK(m.push("hello \xE4\xB8") == "hello ");               // a prefix of the stop is held
  CHECK(m.push("\x96") == "");
  CHECK(m.push("\xE7\x95\x8C and more") == "");
  CHECK(m.stopped());
  CHECK(*m.matched() == "\xE4\xB8\x96\xE7\x95\x8C");
  CHECK(m.push("END") == "");
  StopStringMatcher none;
  CHECK(none.push("anything") == "anything");
  CHECK(none.finish().empty());
}

TEST_CASE("StopStringMatcher: bad stop strings are an Error", "[engine][stop_string_matcher]") {
  CHECK(test::code_of([] { StopStringMatcher m({""}); }) == ErrorCode::kInvalidArgument);
  CHECK(test::code_of([] { StopStringMatcher m({std::string(kMaxStopStringBytes + 1, 'x')}); }) ==
        ErrorCode::kInvalidArgument);
  CHECK(test::code_of([] {
          StopStringMatcher m(std::vector<std::string>(kMaxStopStrings + 1, "x"));
        }) == ErrorCode::kInvalidArgument);
  StopStringMatcher ok({std::string(kMaxStopStringBytes, 'x')});
  CHECK(ok.push("y") == "y");
}
