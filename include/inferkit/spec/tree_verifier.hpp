// SPDX-License-Identifier: Apache-2.0
// Exact verification of a token tree after the target scored every node in one pass (with the
// mask from token_tree.hpp). Sampling mode is SpecInfer's multi-step speculative sampling: try a
// node's children in order, accept one with min(1, r(x) / q(x)), and after each rejection replace
// r by normalize(max(0, r - q)); if all fail, sample from what is left. Greedy mode follows the
// longest path that matches the target's argmax. One tree at a time (TreeVerifier) or a batch
// of trees, one per sequence (verify_tree_batch). Sits where verify_chain does in the step flow.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <inferkit/core/config.hpp>
#include <inferkit/core/error.hpp>
#include <inferkit/core/rng.hpp>
#include <inferkit/spec/acceptance_stats.hpp>
#include <inferkit/spec/chain_verifier.hpp>
#include <inferkit/spec/detail/row_math.hpp>
#include <inferkit/spec/sampling.hpp>
#include <inferkit/spec/token_tree.hpp>
#include <span>
#include <vector>

namespace inferkit {

/// What one tree verification emitted: the accepted path and one replacement or bonus token.
struct TreeVerifyResult {
  std::size_t num_accepted = 0;  ///< accepted draft nodes (the path length)
  std::size_t num_tokens = 0;    ///< tokens written: num_accepted + 1
  std::size_t num_tested = 0;    ///< levels whose candidates were tested (for AcceptanceStats)
};

/// Verifies token trees; holds the residual row it updates between sibling rejections, so reuse
/// one verifier per thread to avoid allocations.
class TreeVerifier {
 public:
  /// Verifies `tree` against the target and emits tokens distributed exactly as the target's.
  /// - `target_probs` [(n+1)][vocab]: row 0 at the root, row 1+i at node i (filtered rows);
  /// - `draft_probs`: empty when candidates are deterministic (kTopK, n-gram): each is then
  ///   verified as a one-hot draft; or [(n+1)][vocab], row 0 / 1+i the q the children of the root
  ///   / node i were drawn from independently (kSampled);
  /// - `out_tokens` [>= max_depth + 1]: accepted path tokens, then the replacement or bonus;
  /// - `out_nodes` empty or [>= max_depth]: the accepted node indices (which KV rows to keep).
  /// Records the round in `stats` if given. Throws `Error` on sizes or tokens out of range
  /// (nothing is written or drawn then). O(path + rejections * vocab).
  TreeVerifyResult verify(const TokenTree& tree, std::span<const float> target_probs,
                          std::span<const float> draft_probs, std::size_t vocab, VerifyMode mode,
                          Rng& rng, std::span<std::int32_t> out_tokens,
                          std::span<std::int32_t> out_nodes = {},
                          AcceptanceStats* stats = nullptr) {
    return verify_with_rule<detail::ResidualRule::kResidual>(
        tree, target_probs, draft_probs, vocab, mode, rng, out_tokens, out_nodes, stats);
  }

  /// `verify` with a choice of residual rule; `kTargetRow` is the lesson's inexact shortcut and
  /// is meant only for tests that prove the statistics catch it.
  template <detail::ResidualRule kRule>
  TreeVerifyResult verify_with_rule(const TokenTree& tree, std::span<const float> target_probs,
                                    std::span<const float> draft_probs, std::size_t vocab,
                                    VerifyMode mode, Rng& rng, std::span<std::int32_t> out_tokens,
                                    std::span<std::int32_t> out_nodes, AcceptanceStats* stats) {
    const std::size_t rows = tree.size() + 1;
    const auto depth = static_cast<std::size_t>(tree.max_depth());
    check_arg(vocab >= 1 && vocab <= kMaxVocab, ErrorCode::kOutOfRange, "vocab", vocab,
              "must be in [1, kMaxVocab] with kMaxVocab =", kMaxVocab);
    check_arg(target_probs.size() == rows * vocab, ErrorCode::kInvalidArgument,
              "target_probs.size()", target_probs.size(),
              "must equal (nodes + 1) * vocab =", rows * vocab);
    check_arg(draft_probs.empty() || draft_probs.size() == rows * vocab,
              ErrorCode::kInvalidArgument, "draft_probs.size()", draft_probs.size(),
              "must be 0 or (nodes + 1) * vocab =", rows * vocab);
    check_arg(out_tokens.size() >= depth + 1, ErrorCode::kInvalidArgument, "out_tokens.size()",
              out_tokens.size(), "must be >= max_depth + 1 =", depth + 1);
    check_arg(out_nodes.empty() || out_nodes.size() >= depth, ErrorCode::kInvalidArgument,
              "out_nodes.size()", out_nodes.size(), "must be 0 or >= max_depth =", depth);
    for (std::int32_t t : tree.tokens()) {
      check_arg(static_cast<std::size_t>(t) < vocab, ErrorCode::kOutOfRange, "tree token", t,
                "must be < vocab =", vocab);
    }
    const float* q_rows = draft_probs.empty() ? nullptr : draft_probs.data();
    TreeVerifyResult result;
    std::int32_t node = TokenTree::kRoot;
    bool tested_last = false;
    while (true) {
      const std::size_t row = static_cast<std::size_t>(node + 1) * vocab;
      const float* p = target_probs.data() + row;
      const std::span<const std::int32_t> kids = tree.children(node);
      tested_last = !kids.empty();
      const std::int32_t next =
          mode == VerifyMode::kGreedy
              ? accept_greedy(tree, kids, p, vocab, out_tokens, result)
              : accept_sampled<kRule>(tree, kids, p, q_rows ? q_rows + row : nullptr, vocab, rng,
                                      out_tokens, result);
      if (next == TokenTree::kRoot) {
        break;
      }
      if (!out_nodes.empty()) {
        out_nodes[result.num_accepted] = next;
      }
      ++result.num_accepted;
      node = next;
    }
    result.num_tokens = result.num_accepted + 1;
    result.num_tested = result.num_accepted + (tested_last ? 1 : 0);
    if (stats != nullptr) {
      stats->record(result.num_tested, result.num_accepted);
    }
    return result;
  }

 private:
  // Greedy: the child whose token is the target's argmax, else writes the argmax and stops.
  static std::int32_t accept_greedy(const TokenTree& tree, std::span<const std::int32_t> kids,
                                    const float* p, std::size_t vocab, std::span<std::int32_t> out,
                                    const TreeVerifyResult& result) {
    const std::int32_t best = argmax(std::span<const float>(p, vocab));
    out[result.num_accepted] = best;
    for (std::int32_t child : kids) {
      if (tree.tokens()[static_cast<std::size_t>(child)] == best) {
        return child;
      }
    }
    return TokenTree::kRoot;
  }

  // Multi-step speculative sampling over one node's children. Returns the accepted child (its
  // token written to `out`) or kRoot after writing a token sampled from the final residual.
  template <detail::ResidualRule kRule>
  std::int32_t accept_sampled(const TokenTree& tree, std::span<const std::int32_t> kids,
                              const float* p, const float* q, std::size_t vocab, Rng& rng,
                              std::span<std::int32_t> out, const TreeVerifyResult& result) {
    const float* r = p;  // current (unnormalized) residual, starts as the target row
    double r_total = 1.0;
    for (std::int32_t child : kids) {
      const std::int32_t x = tree.tokens()[static_cast<std::size_t>(child)];
      const auto xi = static_cast<std::size_t>(x);
      const double q_x = q != nullptr ? static_cast<double>(q[xi]) : 1.0;
      if (rng.uniform_double() * q_x * r_total < static_cast<double>(r[xi])) {
        out[result.num_accepted] = x;
        return child;
      }
      if constexpr (kRule == detail::ResidualRule::kResidual) {
        if (r != residual_.data()) {
          residual_.assign(p, p + vocab);
          r = residual_.data();
        }
        if (q != nullptr) {
          // w holds r_total * r: subtract q at the same scale.
          float* w = residual_.data();
          const auto scale = static_cast<float>(r_total);
          for (std::size_t i = 0; i < vocab; ++i) {
            w[i] = std::max(0.0f, w[i] - scale * q[i]);
          }
          r_total = detail::weight_sum([&](std::size_t i) { return w[i]; }, vocab);
        } else {
          r_total -= static_cast<double>(residual_[xi]);
          residual_[xi] = 0.0f;
        }
        if (!(r_total > 0.0)) {  // rounding emptied the residual: fall back to the target row
          r = p;
          r_total = 1.0;
        }
      }
    }
    if (kids.empty()) {
      out[result.num_accepted] = detail::sample_row(p, vocab, rng);
    } else {
      out[result.num_accepted] = detail::sample_row(r, vocab, rng);
    }
    return TokenTree::kRoot;
  }

  std::vector<float> residual_;
};

/// A batch of token trees, one per sequence, for one verification step. Sequence s owns rows
/// [row_offsets[s], row_offsets[s+1]) of the probability buffers: its root row, then one row per
/// node, so row_offsets[s+1] - row_offsets[s] == trees[s].size() + 1.
struct TreeBatch {
  std::size_t vocab = 0;
  std::span<const TokenTree> trees;           ///< [num_seqs]
  std::span<const std::int32_t> row_offsets;  ///< [num_seqs + 1], row_offsets[0] == 0
  std::span<const float> target_probs;        ///< [row_offsets.back()][vocab]
  std::span<const float> draft_probs;         ///< empty (one-hot candidates) or like target_probs
};

/// Where `verify_tree_batch` writes: sequence s from index row_offsets[s] (a tree of n nodes has
/// n + 1 slots, enough for any path plus one token).
struct TreeOutput {
  std::span<std::int32_t> tokens;      ///< [row_offsets.back()]: accepted path, then one token
  std::span<std::int32_t> nodes;       ///< empty or [row_offsets.back()]: accepted node indices
  std::span<std::int32_t> num_tokens;  ///< [num_seqs]: accepted nodes + 1
};

/// Verifies every tree of `batch` (see `TreeVerifier::verify`), sequence s with `rngs[s]`, so the
/// result never depends on the thread count; records each round in `stats` if given. Throws
/// `Error` on malformed offsets, sizes or tokens; nothing is written or drawn then. Sequences run
/// in parallel under OpenMP when the batch is large.
inline void verify_tree_batch(const TreeBatch& batch, VerifyMode mode, std::span<Rng> rngs,
                              const TreeOutput& out, AcceptanceStats* stats = nullptr) {
  const std::size_t vocab = batch.vocab;
  const std::size_t num_seqs = batch.trees.size();
  check_arg(vocab >= 1 && vocab <= kMaxVocab, ErrorCode::kOutOfRange, "batch.vocab", vocab,
            "must be in [1, kMaxVocab] with kMaxVocab =", kMaxVocab);
  check_arg(batch.row_offsets.size() == num_seqs + 1, ErrorCode::kInvalidArgument,
            "batch.row_offsets.size()", batch.row_offsets.size(),
            "must equal num_seqs + 1 =", num_seqs + 1);
  check_arg(batch.row_offsets[0] == 0, ErrorCode::kInvalidArgument, "batch.row_offsets[0]",
            batch.row_offsets[0], "must equal", 0);
  for (std::size_t s = 0; s < num_seqs; ++s) {
    const auto rows = static_cast<std::int64_t>(batch.trees[s].size()) + 1;
    check_arg(batch.row_offsets[s + 1] - batch.row_offsets[s] == rows, ErrorCode::kInvalidArgument,
              "batch.row_offsets[s + 1] - row_offsets[s]",
              batch.row_offsets[s + 1] - batch.row_offsets[s],
              "must equal trees[s].size() + 1 =", rows);
    for (std::int32_t t : batch.trees[s].tokens()) {
      check_arg(static_cast<std::size_t>(t) < vocab, ErrorCode::kOutOfRange, "tree token", t,
                "must be < vocab =", vocab);
    }
  }
  const auto total = static_cast<std::size_t>(batch.row_offsets[num_seqs]);
  check_arg(batch.target_probs.size() == total * vocab, ErrorCode::kInvalidArgument,
            "batch.target_probs.size()", batch.target_probs.size(),
            "must equal total rows * vocab =", total * vocab);
  check_arg(batch.draft_probs.empty() || batch.draft_probs.size() == total * vocab,
            ErrorCode::kInvalidArgument, "batch.draft_probs.size()", batch.draft_probs.size(),
            "must be 0 or total rows * vocab =", total * vocab);
  check_arg(rngs.size() == num_seqs, ErrorCode::kInvalidArgument, "rngs.size()", rngs.size(),
            "must equal num_seqs =", num_seqs);
  check_arg(out.tokens.size() >= total, ErrorCode::kInvalidArgument, "out.tokens.size()",
            out.tokens.size(), "must be >= total rows =", total);
  check_arg(out.nodes.empty() || out.nodes.size() >= total, ErrorCode::kInvalidArgument,
            "out.nodes.size()", out.nodes.size(), "must be 0 or >= total rows =", total);
  check_arg(out.num_tokens.size() == num_seqs, ErrorCode::kInvalidArgument, "out.num_tokens.size()",
            out.num_tokens.size(), "must equal num_seqs =", num_seqs);
  std::vector<std::int32_t> tested(num_seqs);
  const auto n = static_cast<std::int64_t>(num_seqs);
  [[maybe_unused]] const bool parallel = num_seqs > 1 && total * vocab >= (1u << 18);
#if INFERKIT_HAS_OPENMP
#  pragma omp parallel if (parallel)
#endif
  {
    TreeVerifier verifier;  // one residual buffer per thread
#if INFERKIT_HAS_OPENMP
#  pragma omp for schedule(dynamic)
#endif
    for (std::int64_t si = 0; si < n; ++si) {
      const auto s = static_cast<std::size_t>(si);
      const auto begin = static_cast<std::size_t>(batch.row_offsets[s]);
      const std::size_t rows = batch.trees[s].size() + 1;
      const auto result = verifier.verify(
          batch.trees[s], batch.target_probs.subspan(begin * vocab, rows * vocab),
          batch.draft_probs.empty() ? std::span<const float>()
                                    : batch.draft_probs.subspan(begin * vocab, rows * vocab),
          vocab, mode, rngs[s], out.tokens.subspan(begin, rows),
          out.nodes.empty() ? std::span<std::int32_t>() : out.nodes.subspan(begin, rows));
      out.num_tokens[s] = static_cast<std::int32_t>(result.num_tokens);
      tested[s] = static_cast<std::int32_t>(result.num_tested);
    }
  }
  if (stats != nullptr) {
    for (std::size_t s = 0; s < num_seqs; ++s) {
      stats->record(static_cast<std::size_t>(tested[s]),
                    static_cast<std::size_t>(out.num_tokens[s] - 1));
    }
  }
}

}  // namespace inferkit
