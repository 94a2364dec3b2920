// SPDX-License-Identifier: Apache-2.0
// Per-position acceptance counters for speculative decoding. The chain and tree verifiers record
// every verification round here: how many draft positions were reached and how many accepted, so
// a scheduler or a study can read the acceptance rate per position and the tokens per round.
// Threads: one thread at a time per AcceptanceStats while it records (record, merge, reset); keep
// one per thread and merge them.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace inferkit {

/// Counters over verification rounds. Position i (0-based) is *reached* in a round when the
/// drafts before it were all accepted and a draft exists at i; `accepted[i] / reached[i]` is then
/// the conditional acceptance rate at i (the per-position alpha of the theory).
struct AcceptanceStats {
  std::vector<std::uint64_t> reached;   ///< [position] rounds that tested a draft at position
  std::vector<std::uint64_t> accepted;  ///< [position] rounds that accepted the draft there
  std::uint64_t rounds = 0;             ///< verification rounds (one per sequence per step)
  std::uint64_t emitted_tokens = 0;     ///< tokens emitted: accepted drafts + one per round

  /// Records one round that tested `num_reached` positions and accepted the first
  /// `num_accepted` of them (num_accepted <= num_reached). O(num_reached).
  void record(std::size_t num_reached, std::size_t num_accepted) {
    num_accepted = std::min(num_accepted, num_reached);
    if (reached.size() < num_reached) {
      reached.resize(num_reached, 0);
      accepted.resize(num_reached, 0);
    }
    for (std::size_t i = 0; i < num_reached; ++i) {
      ++reached[i];
      accepted[i] += i < num_accepted ? 1 : 0;
    }
    ++rounds;
    emitted_tokens += num_accepted + 1;
  }

  /// Adds another set of counters (for example one per thread) into this one.
  void merge(const AcceptanceStats& other) {
    if (reached.size() < other.reached.size()) {
      reached.resize(other.reached.size(), 0);
      accepted.resize(other.reached.size(), 0);
    }
    for (std::size_t i = 0; i < other.reached.size(); ++i) {
      reached[i] += other.reached[i];
      accepted[i] += other.accepted[i];
    }
    rounds += other.rounds;
    emitted_tokens += other.emitted_tokens;
  }

  /// Accepted drafts over tested drafts, all positions; 0 when nothing was tested.
  [[nodiscard]] double acceptance_rate() const noexcept {
    std::uint64_t r = 0;
    std::uint64_t a = 0;
    for (std::size_t i = 0; i < reached.size(); ++i) {
      r += reached[i];
      a += accepted[i];
    }
    return r == 0 ? 0.0 : static_cast<double>(a) / static_cast<double>(r);
  }

  /// Conditional acceptance rate at `position`; 0 when that position was never reached.
  [[nodiscard]] double acceptance_rate(std::size_t position) const noexcept {
    if (position >= reached.size() || reached[position] == 0) {
      return 0.0;
    }
    return static_cast<double>(accepted[position]) / static_cast<double>(reached[position]);
  }

  /// Mean tokens emitted per round (accepted drafts + the replacement or bonus token).
  [[nodiscard]] double tokens_per_round() const noexcept {
    return rounds == 0 ? 0.0 : static_cast<double>(emitted_tokens) / static_cast<double>(rounds);
  }

  /// Clears every counter.
  void reset() noexcept {
    reached.clear();
    accepted.clear();
    rounds = 0;
    emitted_tokens = 0;
  }
};

}  // namespace inferkit
