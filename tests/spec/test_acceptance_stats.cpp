// SPDX-License-Identifier: Apache-2.0
// Tests for spec/acceptance_stats.hpp: per-position counters, rates, merge and reset.
#include <catch2/catch.hpp>
#include <cstdint>
#include <inferkit/spec/acceptance_stats.hpp>
#include <vector>

using inferkit::AcceptanceStats;

TEST_CASE("AcceptanceStats: records reached and accepted positions per round",
          "[spec][acceptance_stats]") {
  AcceptanceStats stats;
  CHECK(stats.acceptance_rate() == 0.0);
  CHECK(stats.tokens_per_round() == 0.0);
  stats.record(3, 2);  // accepted positions 0 and 1, rejected at 2
  stats.record(1, 0);  // rejected at 0
  stats.record(2, 2);  // both accepted, bonus token
  stats.record(0, 0);  // no drafts: one token
  REQUIRE(stats.reached.size() == 3);
  CHECK(stats.reached[0] == 3);
  CHECK(stats.reached[1] == 2);
  CHECK(stats.reached[2] == 1);
  CHECK(stats.accepted[0] == 2);
  CHECK(stats.accepted[1] == 2);
  CHECK(stats.accepted[2] == 0);
  CHECK(stats.rounds == 4);
  CHECK(stats.emitted_tokens == 3 + 1 + 3 + 1);
  CHECK(stats.tokens_per_round() == Approx(2.0));
  CHECK(stats.acceptance_rate() == Approx(4.0 / 6.0));
  CHECK(stats.acceptance_rate(0) == Approx(2.0 / 3.0));
  CHECK(stats.acceptance_rate(1) == Approx(1.0));
  CHECK(stats.acceptance_rate(7) == 0.0);
}

TEST_CASE("AcceptanceStats: merge adds counters and reset clears them",
          "[spec][acceptance_stats]") {
  AcceptanceStats a;
  AcceptanceStats b;
  a.record(1, 1);
  b.record(4, 3);
  b.record(2, 1);
  a.merge(b);
  CHECK(a.reached == std::vector<std::uint64_t>{3, 2, 1, 1});
  CHECK(a.accepted == std::vector<std::uint64_t>{3, 1, 1, 0});
  CHECK(a.rounds == 3);
  CHECK(a.emitted_tokens == 2 + 4 + 2);
  a.reset();
  CHECK(a.rounds == 0);
  CHECK(a.reached.empty());
  CHECK(a.emitted_tokens == 0);
}
