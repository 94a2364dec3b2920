// SPDX-License-Identifier: Apache-2.0
// Chain verification for speculative decoding (Leviathan et al. 2023; Chen et al. 2023): after the
// target scores K draft tokens in one pass, accept draft x_i with probability
// min(1, p_i(x_i) / q_i(x_i)), replace the first rejected one by a sample from
// normalize(max(0, p_i - q_i)), or add a bonus token from p_{K+1}. The emitted tokens are then
// distributed exactly as the target's. Sits between the engine's logits and Scheduler.commit.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <inferkit/core/config.hpp>
#include <inferkit/core/error.hpp>
#include <inferkit/core/rng.hpp>
#include <inferkit/spec/acceptance_stats.hpp>
#include <inferkit/spec/detail/row_math.hpp>
#include <inferkit/spec/sampling.hpp>
#include <span>

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

namespace detail {

/// Which distribution replaces a rejected draft. Only `kResidual` is exact; `kTargetRow`
/// resamples from p_i as the lesson's simulator does, and exists so tests can show their
/// chi-square threshold rejects that mistake.
enum class ResidualRule : std::uint8_t { kResidual, kTargetRow };

/// Samples from row `p` (nonnegative, positive sum); falls back to its argmax if the row is empty.
inline std::int32_t sample_row(const float* p, std::size_t vocab, Rng& rng) {
  const std::int64_t t =
      sample_weights([&](std::size_t i) { return p[i]; }, vocab, rng.uniform_double());
  return t >= 0 ? static_cast<std::int32_t>(t) : argmax(std::span<const float>(p, vocab));
}

/// Samples the replacement after draft `x` from `q` (or one-hot at x when q is null) was rejected
/// against `p`: from normalize(max(0, p - q)). Falls back to p when rounding left no residual.
template <ResidualRule kRule>
inline std::int32_t sample_residual(const float* p, const float* q, std::int32_t x,
                                    std::size_t vocab, Rng& rng) {
  const double u = rng.uniform_double();
  std::int64_t t = -1;
  if constexpr (kRule == ResidualRule::kResidual) {
    if (q != nullptr) {
      t = sample_weights([&](std::size_t i) { return std::max(0.0f, p[i] - q[i]); }, vocab, u);
    } else {
      const auto skip = static_cast<std::size_t>(x);
      t = sample_weights([&](std::size_t i) { return i == skip ? 0.0f : p[i]; }, vocab, u);
    }
  }
  if (t < 0) {
    t = sample_weights([&](std::size_t i) { return p[i]; }, vocab, u);
  }
  return t >= 0 ? static_cast<std::int32_t>(t) : argmax(std::span<const float>(p, vocab));
}

/// One sequence: `draft` [k], `q` [k][vocab] or null (one-hot drafts), `p` [k+1][vocab].
/// Writes the emitted tokens to `out` [k+1] and returns how many (accepted + 1).
template <ResidualRule kRule = ResidualRule::kResidual>
inline std::size_t verify_chain_row(const std::int32_t* draft, std::size_t k, const float* q,
                                    const float* p, std::size_t vocab, VerifyMode mode, Rng& rng,
                                    std::int32_t* out) {
  for (std::size_t i = 0; i < k; ++i) {
    const float* p_i = p + i * vocab;
    const std::int32_t x = draft[i];
    if (mode == VerifyMode::kGreedy) {
      out[i] = argmax(std::span<const float>(p_i, vocab));
      if (out[i] != x) {
        return i + 1;
      }
      continue;
    }
    const float* q_i = q != nullptr ? q + i * vocab : nullptr;
    const float p_x = p_i[x];
    const float q_x = q_i != nullptr ? q_i[x] : 1.0f;
    // u < p/q without the division: q_x == 0 accepts any token the target allows.
    if (rng.uniform_double() * static_cast<double>(q_x) < static_cast<double>(p_x)) {
      out[i] = x;
      continue;
    }
    out[i] = sample_residual<kRule>(p_i, q_i, x, vocab, rng);
    return i + 1;
  }
  const float* bonus = p + k * vocab;
  out[k] = mode == VerifyMode::kGreedy ? argmax(std::span<const float>(bonus, vocab))
                                       : sample_row(bonus, vocab, rng);
  return k + 1;
}

}  // namespace detail

/// Verifies one sequence's chain of drafts.
/// - `draft_tokens` [K] (K may be 0), each in [0, vocab);
/// - `draft_probs` [K][vocab]: the filtered draft distributions q_i the tokens were drawn from,
///   or empty for token-only drafters (n-gram), which are verified with q one-hot (still exact);
/// - `target_probs` [K+1][vocab]: the target's filtered distributions (`logits_to_probs`);
/// - `out_tokens` [>= K+1] receives the accepted drafts and then the replacement or bonus token.
/// Returns the number of tokens written (accepted drafts + 1). Reads p_i(x_i) and q_i(x_i) per
/// accepted draft, p_i and q_i in full only at a rejection, and p_{K+1} only for the bonus.
/// Throws `Error` on mismatched sizes or tokens out of range (nothing is changed then).
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
  for (std::int32_t t : draft_tokens) {
    check_arg(t >= 0 && static_cast<std::size_t>(t) < vocab, ErrorCode::kOutOfRange, "draft token",
              t, "must be in [0, vocab) with vocab =", vocab);
  }
  return detail::verify_chain_row(draft_tokens.data(), k,
                                  draft_probs.empty() ? nullptr : draft_probs.data(),
                                  target_probs.data(), vocab, mode, rng, out_tokens.data());
}

/// A batch of chains with a different K per sequence, in CSR form. Sequence s owns drafts
/// [draft_offsets[s], draft_offsets[s+1]) and the K_s + 1 target rows starting at row
/// draft_offsets[s] + s (its drafts' rows plus one bonus row).
struct ChainBatch {
  std::size_t vocab = 0;
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

/// Verifies every sequence of `batch` (see `verify_chain`), sequence s with `rngs[s]`, so the
/// result never depends on the thread count. If `stats` is given, each round is recorded there.
/// Throws `Error` on malformed offsets, sizes or tokens; nothing is written or drawn then.
/// O(total_drafts + rejections * vocab); sequences in parallel under OpenMP.
inline void verify_chain_batch(const ChainBatch& batch, VerifyMode mode, std::span<Rng> rngs,
                               const ChainOutput& out, AcceptanceStats* stats = nullptr) {
  const std::size_t vocab = batch.vocab;
  check_arg(vocab >= 1 && vocab <= kMaxVocab, ErrorCode::kOutOfRange, "batch.vocab", vocab,
            "must be in [1, kMaxVocab] with kMaxVocab =", kMaxVocab);
  check_arg(!batch.draft_offsets.empty() && batch.draft_offsets[0] == 0,
            ErrorCode::kInvalidArgument, "batch.draft_offsets.size()", batch.draft_offsets.size(),
            "must be >= 1 with draft_offsets[0] == 0, minimum", 1);
  const std::size_t num_seqs = batch.num_seqs();
  for (std::size_t s = 0; s < num_seqs; ++s) {
    check_arg(batch.draft_offsets[s + 1] >= batch.draft_offsets[s], ErrorCode::kInvalidArgument,
              "batch.draft_offsets[s + 1]", batch.draft_offsets[s + 1],
              "must be >= draft_offsets[s] =", batch.draft_offsets[s]);
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
  for (std::int32_t t : batch.draft_tokens) {
    check_arg(t >= 0 && static_cast<std::size_t>(t) < vocab, ErrorCode::kOutOfRange, "draft token",
              t, "must be in [0, vocab) with vocab =", vocab);
  }
  const float* q = batch.draft_probs.empty() ? nullptr : batch.draft_probs.data();
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
    const std::size_t emitted = detail::verify_chain_row(
        batch.draft_tokens.data() + begin, k, q != nullptr ? q + begin * vocab : nullptr,
        batch.target_probs.data() + (begin + s) * vocab, vocab, mode, rngs[s],
        out.tokens.data() + begin + s);
    out.num_tokens[s] = static_cast<std::int32_t>(emitted);
  }
  if (stats != nullptr) {
    for (std::size_t s = 0; s < num_seqs; ++s) {
      const auto k = static_cast<std::size_t>(batch.draft_offsets[s + 1] - batch.draft_offsets[s]);
      const auto accepted = static_cast<std::size_t>(out.num_tokens[s] - 1);
      stats->record(std::min(k, accepted + 1), accepted);
    }
  }
}

}  // namespace inferkit
