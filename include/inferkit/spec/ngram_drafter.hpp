// SPDX-License-Identifier: Apache-2.0
// N-gram prompt lookup drafting: find the longest earlier occurrence (min_n..max_n tokens) of the
// sequence's suffix in its own tokens and propose the k tokens that followed it. No draft model,
// no draft distribution: the proposals are verified with q one-hot (chain_verifier.hpp), which
// keeps the output exact. Runs before the target's verification pass, once per sequence per step.
// Threads: propose reuses the drafter's scratch buffers: one thread at a time per NgramDrafter
// (one per thread or engine).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <inferkit/core/error.hpp>
#include <span>
#include <vector>

namespace inferkit {

/// Prompt-lookup drafter (one per thread: it keeps scratch buffers).
class NgramDrafter {
 public:
  /// Matches suffixes of `min_n`..`max_n` tokens and proposes up to `max_k` tokens.
  /// Throws `Error{kInvalidArgument}` unless 1 <= min_n <= max_n and max_k >= 1.
  NgramDrafter(std::size_t min_n, std::size_t max_n, std::size_t max_k)
      : min_n_(min_n), max_n_(max_n), max_k_(max_k) {
    check_arg(min_n >= 1, ErrorCode::kInvalidArgument, "min_n", min_n, "must be >=", 1);
    check_arg(max_n >= min_n, ErrorCode::kInvalidArgument, "max_n", max_n,
              "must be >= min_n =", min_n);
    check_arg(max_k >= 1, ErrorCode::kInvalidArgument, "max_k", max_k, "must be >=", 1);
  }

  /// The shortest n-gram a draft may match.
  [[nodiscard]] std::size_t min_n() const noexcept { return min_n_; }
  /// The longest n-gram tried first.
  [[nodiscard]] std::size_t max_n() const noexcept { return max_n_; }
  /// The most draft tokens one proposal returns.
  [[nodiscard]] std::size_t max_k() const noexcept { return max_k_; }

  /// Proposes draft tokens for the sequence `context` (prompt + generated tokens) into `out`:
  /// the tokens that followed the earlier occurrence sharing the longest suffix with `context`
  /// (capped at max_n, at least min_n), preferring the occurrence with the most continuation
  /// tokens (up to max_k), then the most recent. Writes at most min(max_k, out.size()) tokens
  /// and returns how many; 0 when no earlier occurrence matches. O(context.size()).
  std::size_t propose(std::span<const std::int32_t> context, std::span<std::int32_t> out) {
    const std::size_t n = context.size();
    const std::size_t k = std::min(max_k_, out.size());
    if (n < min_n_ + 1 || k == 0) {
      return 0;
    }
    // Z-function of the reversed context: z[j] is the length of the common suffix of
    // context[0 .. n-1-j] and the whole context, for every earlier end position at once.
    reversed_.assign(context.rbegin(), context.rend());
    z_.assign(n, 0);
    std::size_t left = 0;
    std::size_t right = 0;  // [left, right) is the rightmost match window found so far
    for (std::size_t j = 1; j < n; ++j) {
      std::size_t len = j < right ? std::min(right - j, z_[j - left]) : 0;
      while (j + len < n && reversed_[len] == reversed_[j + len]) {
        ++len;
      }
      z_[j] = len;
      if (j + len > right) {
        left = j;
        right = j + len;
      }
    }
    std::size_t best_j = 0;
    std::size_t best_match = 0;
    std::size_t best_follow = 0;
    for (std::size_t j = 1; j < n; ++j) {  // j = tokens after the occurrence's end, nearest first
      const std::size_t match = std::min(z_[j], max_n_);
      const std::size_t follow = std::min(j, k);
      if (match >= min_n_ &&
          (match > best_match || (match == best_match && follow > best_follow))) {
        best_j = j;
        best_match = match;
        best_follow = follow;
      }
    }
    if (best_match == 0) {
      return 0;
    }
    const std::size_t start = n - best_j;  // first token after the occurrence
    std::copy_n(context.begin() + static_cast<std::ptrdiff_t>(start), best_follow, out.begin());
    return best_follow;
  }

 private:
  std::size_t min_n_;
  std::size_t max_n_;
  std::size_t max_k_;
  std::vector<std::int32_t> reversed_;
  std::vector<std::size_t> z_;
};

}  // namespace inferkit
