// SPDX-License-Identifier: Apache-2.0
// Chain verification for speculative decoding (Leviathan et al. 2023; Chen et al. 2023): after the
// target scores K draft tokens in one pass, accept draft x_i with probability
// min(1, p_i(x_i) / q_i(x_i)), replace the first rejected one by a sample from
// normalize(max(0, p_i - q_i)), or add a bonus token from p_{K+1}. The emitted tokens are then
// distributed exactly as the target's. Sits between the engine's logits and Scheduler.commit.
// Threads: stateless: calls from several threads are safe with distinct Rngs, outputs and stats;
// verify_chain_batch verifies its sequences on OpenMP threads itself.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <inferkit/core/config.hpp>
#include <inferkit/core/error.hpp>
#include <inferkit/core/rng.hpp>
#include <inferkit/spec/acceptance_stats.hpp>
#include <inferkit/spec/detail/row_math.hpp>
#include <inferkit/spec/sampling.hpp>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace inferkit {

/// How drafts are verified: exact rejection sampling, or greedy (accept while the draft equals the
/// target's argmax, lowest index on ties), which reproduces plain greedy decoding token for token.
enum class VerifyMode : std::uint8_t { kSample, kGreedy };

/// Probability that verification accepts one draft token drawn from `q` against target `p`:
/// alpha = sum_x min(p(x), q(x)). Throws `Error` if the sizes differ. O(vocab).
inline double acceptance_overlap(std::span<const float> p, std::span<const float> q) {
  check_arg(p.size() == q.size(), ErrorCode::kInvalidArgument, "q.size()", q.size(),
            "must equal p.size() =", p.size());
  return detail::weight_sum([&](std::size_t i) { return std::min(p[i], q[i]); }, p.size());
}

/// Expected tokens emitted per chain round with K drafts when every position accepts with
/// probability `alpha`: (1 - alpha^(K+1)) / (1 - alpha), which is K + 1 at alpha = 1.
inline double expected_tokens_per_round(double alpha, std::size_t k) noexcept {
  if (alpha >= 1.0) {
    return static_cast<double>(k + 1);
  }
  double power = 1.0;
  for (std::size_t i = 0; i <= k; ++i) {
    power *= alpha;
  }
  return (1.0 - power) / (1.0 - alpha);
}

/// How far from 1 the sum of a probability row may be before a verifier rejects the row. Rows
/// normalized in float, even over 256K tokens or rounded through fp16, sit well inside it.
inline constexpr double kProbabilitySumTolerance = 1e-3;

namespace detail {

/// A probability row that failed its check: its first bad entry, or its sum.
struct RowFault {
  bool failed = false;
  bool draft = false;     // in the draft rows (true) or the target rows
  std::size_t row = 0;    // row index within those rows
  std::size_t entry = 0;  // the bad entry; kSumEntry when the sum is wrong
  double value = 0.0;     // the entry or the sum
  static constexpr std::size_t kSumEntry = static_cast<std::size_t>(-1);
};

/// The largest value a single probability may take (float rounding of a normalized row).
inline constexpr float kMaxProbability = static_cast<float>(1.0 + kProbabilitySumTolerance);

/// True when `x` can be a probability: in [0, kMaxProbability] (NaN fails).
inline bool is_probability(float x) noexcept { return x >= 0.0f && x <= kMaxProbability; }

/// The fault of entry `entry` of a row, for a value read on its own.
inline RowFault entry_fault(bool draft, std::size_t row, std::size_t entry, float value) noexcept {
  return {true, draft, row, entry, static_cast<double>(value)};
}

/// The fault of row `p` [vocab] given its `SumAndMin`, if it is not a distribution: the first
/// entry that is not a probability, or a sum farther than kProbabilitySumTolerance from 1.
inline RowFault row_fault(const float* p, std::size_t vocab, const SumAndMin& stats, bool draft,
                          std::size_t row) {
  // A NaN or infinite entry makes the sum non-finite; a negative one shows in the minimum; with
  // both fine, an entry above 1 pushes the sum out of the tolerance.
  if (!std::isfinite(stats.sum) || stats.min < 0.0f) {
    for (std::size_t i = 0; i < vocab; ++i) {
      if (!is_probability(p[i])) {
        return entry_fault(draft, row, i, p[i]);
      }
    }
  }
  if (!(std::abs(stats.sum - 1.0) <= kProbabilitySumTolerance)) {
    return {true, draft, row, RowFault::kSumEntry, stats.sum};
  }
  return {};
}

/// Checks that `p` [vocab] is a distribution (see `row_fault`) in one vectorized pass.
inline RowFault check_row(const float* p, std::size_t vocab, bool draft, std::size_t row) {
  return row_fault(p, vocab, sum_and_min(p, vocab), draft, row);
}

/// Throws the `Error{kInvalidArgument}` that reports `fault`. `where` prefixes the message
/// ("sequence 3: " in a batch), `target` and `draft` name the two row buffers.
[[noreturn]] inline void throw_row_fault(const RowFault& fault, std::string_view where,
                                         std::string_view target, std::string_view draft) {
  const std::string row =
      concat({fault.draft ? draft : target, " row ", std::to_string(fault.row)});
  if (fault.entry == RowFault::kSumEntry) {
    throw_error(ErrorCode::kInvalidArgument,
                concat({where, "sum of ", row, " = ", to_message(fault.value),
                        " must be within kProbabilitySumTolerance = 1e-3 of 1"}));
  }
  throw_error(ErrorCode::kInvalidArgument,
              concat({where, row, " entry ", std::to_string(fault.entry), " = ",
                      to_message(fault.value), " must be a probability in [0, 1]"}));
}

/// "sequence s", for the messages of the batch APIs.
inline std::string sequence_name(std::size_t s) { return concat({"sequence ", std::to_string(s)}); }

/// Throws the fault of the first round (of a batch, one per sequence) that failed, naming its
/// sequence and the batch's row buffers; returns when none did.
template <class Round>
void throw_first_fault(const std::vector<Round>& rounds) {
  for (std::size_t s = 0; s < rounds.size(); ++s) {
    if (rounds[s].fault.failed) {
      throw_row_fault(rounds[s].fault, concat({sequence_name(s), ": "}), "batch.target_probs",
                      "batch.draft_probs");
    }
  }
}

/// Samples from row `p` (nonnegative, positive sum); falls back to its argmax if the row is empty.
/// Adds the row to `stats` in the same pass, for `row_fault`.
inline std::int32_t sample_row(const float* p, std::size_t vocab, Rng& rng, SumAndMin& stats) {
  const std::int64_t t = sample_weights(
      [&](std::size_t i) { return p[i]; }, vocab, rng.uniform_double(),
      [&](std::size_t begin, std::size_t end) { stats.add(p + begin, end - begin); });
  return t >= 0 ? static_cast<std::int32_t>(t) : argmax(std::span<const float>(p, vocab));
}

/// Samples the replacement after draft `x` from `q` (or one-hot at x when q is null) was rejected
/// against `p`: from normalize(max(0, p - q)). Falls back to p when rounding left no residual.
/// Adds p and q to `p_stats` and `q_stats` in the same pass, for `row_fault`.
inline std::int32_t sample_residual(const float* p, const float* q, std::int32_t x,
                                    std::size_t vocab, Rng& rng, SumAndMin& p_stats,
                                    SumAndMin& q_stats) {
  const double u = rng.uniform_double();
  std::int64_t t = -1;
  if (q != nullptr) {
    t = sample_weights([&](std::size_t i) { return std::max(0.0f, p[i] - q[i]); }, vocab, u,
                       [&](std::size_t begin, std::size_t end) {
                         p_stats.add(p + begin, end - begin);
                         q_stats.add(q + begin, end - begin);
                       });
  } else {
    const auto skip = static_cast<std::size_t>(x);
    t = sample_weights(
        [&](std::size_t i) { return i == skip ? 0.0f : p[i]; }, vocab, u,
        [&](std::size_t begin, std::size_t end) { p_stats.add(p + begin, end - begin); });
  }
  if (t < 0) {
    t = sample_weights([&](std::size_t i) { return p[i]; }, vocab, u);
  }
  return t >= 0 ? static_cast<std::int32_t>(t) : argmax(std::span<const float>(p, vocab));
}

/// What one chain verification decided: the first `accepted` drafts, then `token`; or a fault.
struct ChainRound {
  std::size_t accepted = 0;
  std::int32_t token = 0;
  RowFault fault;
};

/// The argmax of target row `i` after checking the row, or its fault.
inline std::int32_t checked_argmax(const float* p_i, std::size_t vocab, std::size_t i,
                                   RowFault& fault) {
  fault = check_row(p_i, vocab, false, i);
  return argmax(std::span<const float>(p_i, vocab));
}

/// One sequence: `draft` [k], `q` [k][vocab] or null (one-hot drafts), `p` [k+1][vocab]. Writes
/// nothing: the caller emits draft[0, accepted) and then the token. Every value it reads is
/// checked: p_i(x_i) and q_i(x_i) of each tested draft, and in full each row it reads in full.
inline ChainRound verify_chain_row(const std::int32_t* draft, std::size_t k, const float* q,
                                   const float* p, std::size_t vocab, VerifyMode mode, Rng& rng) {
  ChainRound round;
  for (std::size_t i = 0; i < k; ++i) {
    const float* p_i = p + i * vocab;
    const std::int32_t x = draft[i];
    round.accepted = i;
    if (mode == VerifyMode::kGreedy) {
      round.token = checked_argmax(p_i, vocab, i, round.fault);
      if (round.fault.failed || round.token != x) {
        return round;
      }
      continue;
    }
    const float* q_i = q != nullptr ? q + i * vocab : nullptr;
    const auto xi = static_cast<std::size_t>(x);
    const float p_x = p_i[xi];
    const float q_x = q_i != nullptr ? q_i[xi] : 1.0f;
    if (!is_probability(p_x) || !is_probability(q_x)) {
      round.fault =
          is_probability(p_x) ? entry_fault(true, i, xi, q_x) : entry_fault(false, i, xi, p_x);
      return round;
    }
    // u < p/q without the division: q_x == 0 accepts any token the target allows.
    if (rng.uniform_double() * static_cast<double>(q_x) < static_cast<double>(p_x)) {
      continue;
    }
    // The rows are checked in the pass that samples the residual; on a fault the draw is void.
    SumAndMin p_stats;
    SumAndMin q_stats;
    round.token = sample_residual(p_i, q_i, x, vocab, rng, p_stats, q_stats);
    round.fault = row_fault(p_i, vocab, p_stats, false, i);
    if (!round.fault.failed && q_i != nullptr) {
      round.fault = row_fault(q_i, vocab, q_stats, true, i);
    }
    return round;
  }
  round.accepted = k;
  const float* bonus = p + k * vocab;
  if (mode == VerifyMode::kGreedy) {
    round.token = checked_argmax(bonus, vocab, k, round.fault);
  } else {
    SumAndMin stats;
    round.token = sample_row(bonus, vocab, rng, stats);
    round.fault = row_fault(bonus, vocab, stats, false, k);
  }
  return round;
}

/// Writes a round's tokens to `out` [>= accepted + 1]: the accepted drafts, then the token.
inline std::size_t emit_chain_round(const ChainRound& round, const std::int32_t* draft,
                                    std::int32_t* out) noexcept {
  std::copy(draft, draft + round.accepted, out);
  out[round.accepted] = round.token;
  return round.accepted + 1;
}

}  // namespace detail

/// Verifies one sequence's chain of drafts.
/// - `draft_tokens` [K] (K may be 0), each in [0, vocab);
/// - `draft_probs` [K][vocab]: the filtered draft distributions q_i the tokens were drawn from,
///   or empty for token-only drafters (n-gram), which are verified with q one-hot (still exact);
/// - `target_probs` [K+1][vocab]: the target's filtered distributions (`logits_to_probs`);
/// - `out_tokens` [>= K+1] receives the accepted drafts and then the replacement or bonus token.
/// Returns the number of tokens written (accepted drafts + 1). Reads p_i(x_i) and q_i(x_i) per
/// accepted draft, p_i and q_i in full only at a rejection, and p_{K+1} only for the bonus
/// (greedy mode reads each p_i it reaches in full).
///
/// Rows must be distributions, and what is read is checked: each p_i(x_i) and q_i(x_i) tested
/// must lie in [0, 1], and each row read in full must also have finite entries >= 0 summing to 1
/// within `kProbabilitySumTolerance`. A row read only at its draft token is checked only there
/// (checking every row in full would read the rows verification exists to skip).
/// Throws `Error{kOutOfRange}` on tokens out of range, `Error{kInvalidArgument}` on mismatched
/// sizes or a row that fails its check (naming the row, the entry or the sum); nothing is
/// written and `rng` is not advanced then.
inline std::size_t verify_chain(std::span<const std::int32_t> draft_tokens,
                                std::span<const float> draft_probs,
                                std::span<const float> target_probs, std::size_t vocab,
                                VerifyMode mode, Rng& rng, std::span<std::int32_t> out_tokens) {
  const std::size_t k = draft_tokens.size();
  check_arg(vocab >= 1 && vocab <= kMaxVocab, ErrorCode::kOutOfRange, "vocab", vocab,
            "must be in [1, kMaxVocab] with kMaxVocab =", kMaxVocab);
  check_arg(draft_probs.empty() || draft_probs.size() == k * vocab, ErrorCode::kInvalidArgument,
            "draft_probs.size()", draft_probs.size(), "must be 0 or K * vocab =", k * vocab);
  check_arg(target_probs.size() == (k + 1) * vocab, ErrorCode::kInvalidArgument,
            "target_probs.size()", target_probs.size(),
            "must equal (K + 1) * vocab =", (k + 1) * vocab);
  check_arg(out_tokens.size() >= k + 1, ErrorCode::kInvalidArgument, "out_tokens.size()",
            out_tokens.size(), "must be >= K + 1 =", k + 1);
  for (std::size_t i = 0; i < k; ++i) {
    const std::int32_t t = draft_tokens[i];
    check_arg(
        t >= 0 && static_cast<std::size_t>(t) < vocab, ErrorCode::kOutOfRange,
        [&] {
          return detail::concat({"draft_tokens[", std::to_string(i), "]"});
        },
        t, "must be in [0, vocab) with vocab =", vocab);
  }
  Rng trial = rng;  // advanced only when the round succeeds
  const detail::ChainRound round = detail::verify_chain_row(
      draft_tokens.data(), k, draft_probs.empty() ? nullptr : draft_probs.data(),
      target_probs.data(), vocab, mode, trial);
  if (round.fault.failed) {
    detail::throw_row_fault(round.fault, "", "target_probs", "draft_probs");
  }
  rng = trial;
  return detail::emit_chain_round(round, draft_tokens.data(), out_tokens.data());
}

/// A batch of chains with a different K per sequence, in CSR form. Sequence s owns drafts
/// [draft_offsets[s], draft_offsets[s+1]) and the K_s + 1 target rows starting at row
/// draft_offsets[s] + s (its drafts' rows plus one bonus row).
struct ChainBatch {
  std::size_t vocab = 0;                        ///< entries per probability row
  std::span<const std::int32_t> draft_offsets;  ///< [num_seqs + 1], draft_offsets[0] == 0
  std::span<const std::int32_t> draft_tokens;   ///< [total_drafts]
  std::span<const float> draft_probs;           ///< [total_drafts][vocab], or empty: one-hot q
  std::span<const float> target_probs;          ///< [total_drafts + num_seqs][vocab]

  /// Number of sequences (0 for empty offsets).
  [[nodiscard]] std::size_t num_seqs() const noexcept {
    return draft_offsets.empty() ? 0 : draft_offsets.size() - 1;
  }
};

/// Where `verify_chain_batch` writes. Sequence s writes its tokens from index
/// draft_offsets[s] + s of `tokens` (room for K_s + 1) and their count to `num_tokens[s]`.
struct ChainOutput {
  std::span<std::int32_t> tokens;      ///< [total_drafts + num_seqs]
  std::span<std::int32_t> num_tokens;  ///< [num_seqs]: accepted drafts + 1
};

/// Verifies every sequence of `batch` (see `verify_chain`, which also says how rows are
/// checked), sequence s with `rngs[s]`, so the result never depends on the thread count. If
/// `stats` is given, each round is recorded there. Throws `Error` on malformed offsets, sizes or
/// tokens, or a row that fails its check (the message names the sequence); nothing is written or
/// drawn then. O(total_drafts + rejections * vocab); sequences in parallel under OpenMP.
inline void verify_chain_batch(const ChainBatch& batch, VerifyMode mode, std::span<Rng> rngs,
                               const ChainOutput& out, AcceptanceStats* stats = nullptr) {
  const std::size_t vocab = batch.vocab;
  check_arg(vocab >= 1 && vocab <= kMaxVocab, ErrorCode::kOutOfRange, "batch.vocab", vocab,
            "must be in [1, kMaxVocab] with kMaxVocab =", kMaxVocab);
  check_arg(!batch.draft_offsets.empty(), ErrorCode::kInvalidArgument, "batch.draft_offsets.size()",
            0, "must be num_seqs + 1 >=", 1);
  check_arg(batch.draft_offsets[0] == 0, ErrorCode::kInvalidArgument, "batch.draft_offsets[0]",
            batch.draft_offsets[0], "must equal", 0);
  const std::size_t num_seqs = batch.num_seqs();
  for (std::size_t s = 0; s < num_seqs; ++s) {
    if (batch.draft_offsets[s + 1] < batch.draft_offsets[s]) [[unlikely]] {
      check_arg(false, ErrorCode::kInvalidArgument,
                detail::concat({"batch.draft_offsets[", std::to_string(s + 1), "] (end of ",
                                detail::sequence_name(s), ")"}),
                batch.draft_offsets[s + 1],
                detail::concat({"must be >= its start draft_offsets[", std::to_string(s), "] ="}),
                batch.draft_offsets[s]);
    }
  }
  const auto total = static_cast<std::size_t>(batch.draft_offsets[num_seqs]);
  check_arg(batch.draft_tokens.size() == total, ErrorCode::kInvalidArgument,
            "batch.draft_tokens.size()", batch.draft_tokens.size(),
            "must equal draft_offsets.back() =", total);
  check_arg(batch.draft_probs.empty() || batch.draft_probs.size() == total * vocab,
            ErrorCode::kInvalidArgument, "batch.draft_probs.size()", batch.draft_probs.size(),
            "must be 0 or total_drafts * vocab =", total * vocab);
  check_arg(batch.target_probs.size() == (total + num_seqs) * vocab, ErrorCode::kInvalidArgument,
            "batch.target_probs.size()", batch.target_probs.size(),
            "must equal (total_drafts + num_seqs) * vocab =", (total + num_seqs) * vocab);
  check_arg(rngs.size() == num_seqs, ErrorCode::kInvalidArgument, "rngs.size()", rngs.size(),
            "must equal num_seqs =", num_seqs);
  check_arg(out.tokens.size() >= total + num_seqs, ErrorCode::kInvalidArgument, "out.tokens.size()",
            out.tokens.size(), "must be >= total_drafts + num_seqs =", total + num_seqs);
  check_arg(out.num_tokens.size() == num_seqs, ErrorCode::kInvalidArgument, "out.num_tokens.size()",
            out.num_tokens.size(), "must equal num_seqs =", num_seqs);
  for (std::size_t s = 0; s < num_seqs; ++s) {
    for (auto i = static_cast<std::size_t>(batch.draft_offsets[s]);
         i < static_cast<std::size_t>(batch.draft_offsets[s + 1]); ++i) {
      const std::int32_t t = batch.draft_tokens[i];
      check_arg(
          t >= 0 && static_cast<std::size_t>(t) < vocab, ErrorCode::kOutOfRange,
          [&] {
            return detail::concat(
                {"batch.draft_tokens[", std::to_string(i), "] (", detail::sequence_name(s), ")"});
          },
          t, "must be in [0, vocab) with vocab =", vocab);
    }
  }
  const float* q = batch.draft_probs.empty() ? nullptr : batch.draft_probs.data();
  // Every round runs on a copy of its sequence's Rng and is written only once all succeeded, so
  // a bad row anywhere leaves every output and every Rng as it was.
  std::vector<Rng> trials(rngs.begin(), rngs.end());
  std::vector<detail::ChainRound> rounds(num_seqs);
  const auto n = static_cast<std::int64_t>(num_seqs);
  // Threads pay off only when rejections can touch enough rows; small batches stay serial.
  [[maybe_unused]] const bool parallel = num_seqs > 1 && (total + num_seqs) * vocab >= (1u << 18);
#if INFERKIT_HAS_OPENMP
#  pragma omp parallel for schedule(dynamic) if (parallel)
#endif
  for (std::int64_t si = 0; si < n; ++si) {
    const auto s = static_cast<std::size_t>(si);
    const auto begin = static_cast<std::size_t>(batch.draft_offsets[s]);
    const std::size_t k = static_cast<std::size_t>(batch.draft_offsets[s + 1]) - begin;
    rounds[s] = detail::verify_chain_row(
        batch.draft_tokens.data() + begin, k, q != nullptr ? q + begin * vocab : nullptr,
        batch.target_probs.data() + (begin + s) * vocab, vocab, mode, trials[s]);
    // Name rows by their index in the batch's buffers.
    rounds[s].fault.row += rounds[s].fault.draft ? begin : begin + s;
  }
  detail::throw_first_fault(rounds);
  for (std::size_t s = 0; s < num_seqs; ++s) {
    const auto begin = static_cast<std::size_t>(batch.draft_offsets[s]);
    const std::size_t emitted = detail::emit_chain_round(
        rounds[s], batch.draft_tokens.data() + begin, out.tokens.data() + begin + s);
    out.num_tokens[s] = static_cast<std::int32_t>(emitted);
    rngs[s] = trials[s];
    if (stats != nullptr) {
      const auto k = static_cast<std::size_t>(batch.draft_offsets[s + 1]) - begin;
      stats->record(std::min(k, rounds[s].accepted + 1), rounds[s].accepted);
    }
  }
}

}  // namespace inferkit
