// SPDX-License-Identifier: Apache-2.0
// Exact verification of a token tree after the target scored every node in one pass (with the
// mask from token_tree.hpp). Sampling mode is SpecInfer's multi-step speculative sampling: try a
// node's children in order, accept one with min(1, r(x) / q(x)), and after each rejection replace
// r by normalize(max(0, r - q)); if all fail, sample from what is left. Greedy mode follows the
// longest path that matches the target's argmax (a search: siblings may repeat a token). One tree
// at a time (TreeVerifier) or a batch of trees, one per sequence (verify_tree_batch). Sits where
// verify_chain does in the step flow.
// Threads: a TreeVerifier keeps scratch: one thread at a time per verifier (one per thread);
// verify_tree_batch verifies its trees on OpenMP threads itself, each with its own scratch.
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
#include <string>
#include <string_view>
#include <vector>

namespace inferkit {

/// What one tree verification emitted: the accepted path and one replacement or bonus token.
struct TreeVerifyResult {
  std::size_t num_accepted = 0;  ///< accepted draft nodes (the path length)
  std::size_t num_tokens = 0;    ///< tokens written: num_accepted + 1
  std::size_t num_tested = 0;    ///< levels whose candidates were tested (for AcceptanceStats)
};

namespace detail {

/// The row of `node` in the verification pass ([root, node 0, ...]): node + 1, kRoot -> 0.
inline std::size_t tree_row(std::int32_t node) noexcept {
  return static_cast<std::size_t>(std::int64_t{node} + 1);
}

/// Scratch a tree walk reuses between calls, so a verifier per thread allocates once.
struct TreeScratch {
  std::vector<float> residual;       // [vocab] sampled mode: the residual after rejections
  std::vector<std::int32_t> best;    // [rows] greedy mode: argmax of each reached row, else -1
  std::vector<std::int32_t> length;  // [rows] greedy mode: longest matching path below the row
  std::vector<std::int32_t> next;    // [rows] greedy mode: the first child on that path
  std::vector<std::int32_t> path;    // the accepted nodes, root first
};

/// What one tree walk decided: the nodes in `TreeScratch::path`, then `token`; or a fault.
struct TreeRound {
  std::int32_t token = 0;
  bool tested_last = false;  // the last accepted node (or the root) had children to test
  RowFault fault;
};

/// Greedy: the longest path on which every node's token is the argmax of its parent's target
/// row, the first in child order among equally long ones; then the argmax after its last node.
/// Duplicate siblings (trees merged from several drafters) are why it is a search and not a walk.
/// Reads in full, and checks, only the rows of nodes such a path reaches. O(reached * vocab + n).
inline TreeRound walk_greedy(const TokenTree& tree, const float* p, std::size_t vocab,
                             TreeScratch& scratch) {
  TreeRound round;
  const std::size_t n = tree.size();
  scratch.best.assign(n + 1, -1);
  scratch.length.assign(n + 1, 0);
  scratch.next.assign(n + 1, TokenTree::kRoot);
  scratch.path.clear();
  const auto parents = tree.parents();
  const auto tokens = tree.tokens();
  // Parents precede children, so one pass in node order finds every node some matching path
  // reaches: its parent is reached and its token is the parent's argmax.
  scratch.best[0] = checked_argmax(p, vocab, 0, round.fault);
  for (std::size_t i = 0; i < n && !round.fault.failed; ++i) {
    const auto parent_row = tree_row(parents[i]);
    if (scratch.best[parent_row] >= 0 && tokens[i] == scratch.best[parent_row]) {
      scratch.best[i + 1] = checked_argmax(p + (i + 1) * vocab, vocab, i + 1, round.fault);
    }
  }
  if (round.fault.failed) {
    return round;
  }
  // A reverse pass sees every child before its parent; `>=` lets the lower-numbered (earlier
  // inserted) child win a tie.
  for (std::size_t i = n; i-- > 0;) {
    if (scratch.best[i + 1] < 0) {
      continue;
    }
    const auto parent_row = tree_row(parents[i]);
    const std::int32_t length = scratch.length[i + 1] + 1;
    if (length >= scratch.length[parent_row]) {
      scratch.length[parent_row] = length;
      scratch.next[parent_row] = static_cast<std::int32_t>(i);
    }
  }
  std::int32_t node = TokenTree::kRoot;
  while (scratch.next[tree_row(node)] != TokenTree::kRoot) {
    node = scratch.next[tree_row(node)];
    scratch.path.push_back(node);
  }
  round.token = scratch.best[tree_row(node)];
  round.tested_last = !tree.children(node).empty();
  return round;
}

/// Multi-step speculative sampling over the children of the node at target row `row` (p, and q
/// or null for one-hot candidates). Returns the accepted child, or kRoot after setting
/// `round.token` from the final residual (or `round.fault`).
inline std::int32_t accept_child(const TokenTree& tree, std::span<const std::int32_t> kids,
                                 const float* p, const float* q, std::size_t row, std::size_t vocab,
                                 Rng& rng, TreeScratch& scratch, TreeRound& round) {
  const float* r = p;  // current (unnormalized) residual, starts as the target row
  double r_total = 1.0;
  for (std::int32_t child : kids) {
    const std::int32_t x = tree.tokens()[static_cast<std::size_t>(child)];
    const auto xi = static_cast<std::size_t>(x);
    // The first test reads p at x alone; later ones read the residual of checked rows.
    if (r == p && !is_probability(p[xi])) {
      round.fault = entry_fault(false, row, xi, p[xi]);
      return TokenTree::kRoot;
    }
    if (q != nullptr && !is_probability(q[xi])) {
      round.fault = entry_fault(true, row, xi, q[xi]);
      return TokenTree::kRoot;
    }
    const double q_x = q != nullptr ? static_cast<double>(q[xi]) : 1.0;
    if (rng.uniform_double() * q_x * r_total < static_cast<double>(r[xi])) {
      round.token = x;
      return child;
    }
    if (r != scratch.residual.data()) {
      round.fault = check_row(p, vocab, false, row);
      if (!round.fault.failed && q != nullptr) {
        round.fault = check_row(q, vocab, true, row);
      }
      if (round.fault.failed) {
        return TokenTree::kRoot;
      }
      scratch.residual.assign(p, p + vocab);
      r = scratch.residual.data();
    }
    if (q != nullptr) {
      // w holds r_total * r: subtract q at the same scale.
      float* w = scratch.residual.data();
      const auto scale = static_cast<float>(r_total);
      for (std::size_t i = 0; i < vocab; ++i) {
        w[i] = std::max(0.0f, w[i] - scale * q[i]);
      }
      r_total = weight_sum([&](std::size_t i) { return w[i]; }, vocab);
    } else {
      r_total -= static_cast<double>(scratch.residual[xi]);
      scratch.residual[xi] = 0.0f;
    }
    if (!(r_total > 0.0)) {  // rounding emptied the residual: fall back to the target row
      r = p;
      r_total = 1.0;
    }
  }
  // A leaf's row is read in full here for the first time: check it in the sampling pass.
  SumAndMin stats;
  round.token = sample_row(r, vocab, rng, stats);
  if (kids.empty()) {
    round.fault = row_fault(p, vocab, stats, false, row);
  }
  return TokenTree::kRoot;
}

/// Sampled mode: SpecInfer's walk from the root, one `accept_child` per level. Every value it
/// reads is checked as `verify_chain` checks it.
inline TreeRound walk_sampled(const TokenTree& tree, const float* p_rows, const float* q_rows,
                              std::size_t vocab, Rng& rng, TreeScratch& scratch) {
  TreeRound round;
  scratch.path.clear();
  std::int32_t node = TokenTree::kRoot;
  while (true) {
    const auto row = tree_row(node);
    const std::span<const std::int32_t> kids = tree.children(node);
    round.tested_last = !kids.empty();
    const std::int32_t next = accept_child(tree, kids, p_rows + row * vocab,
                                           q_rows != nullptr ? q_rows + row * vocab : nullptr, row,
                                           vocab, rng, scratch, round);
    if (next == TokenTree::kRoot) {
      return round;
    }
    scratch.path.push_back(next);
    node = next;
  }
}

/// Throws `Error{kOutOfRange}` naming the first node of `tree` whose token is >= vocab.
inline void check_tree_tokens(const TokenTree& tree, std::size_t vocab, std::string_view where) {
  const auto tokens = tree.tokens();
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    check_arg(
        static_cast<std::size_t>(tokens[i]) < vocab, ErrorCode::kOutOfRange,
        [&] {
          return concat({where, "tree token of node ", std::to_string(i)});
        },
        tokens[i], "must be < vocab =", vocab);
  }
}

/// Writes a round to `out_tokens` (the path's tokens, then the token) and `out_nodes` (the path,
/// if not empty), and says what it wrote.
inline TreeVerifyResult emit_tree_round(const TokenTree& tree, const TreeRound& round,
                                        std::span<const std::int32_t> path,
                                        std::span<std::int32_t> out_tokens,
                                        std::span<std::int32_t> out_nodes) {
  for (std::size_t d = 0; d < path.size(); ++d) {
    out_tokens[d] = tree.tokens()[static_cast<std::size_t>(path[d])];
    if (!out_nodes.empty()) {
      out_nodes[d] = path[d];
    }
  }
  out_tokens[path.size()] = round.token;
  TreeVerifyResult result;
  result.num_accepted = path.size();
  result.num_tokens = path.size() + 1;
  result.num_tested = path.size() + (round.tested_last ? 1 : 0);
  return result;
}

}  // namespace detail

/// Verifies token trees; holds the rows it updates between sibling rejections and the scratch of
/// the greedy search, so reuse one verifier per thread to avoid allocations.
class TreeVerifier {
 public:
  /// Verifies `tree` against the target and emits tokens distributed exactly as the target's.
  /// - `target_probs` [(n+1)][vocab]: row 0 at the root, row 1+i at node i (filtered rows);
  /// - `draft_probs`: empty when candidates are deterministic (kTopK, n-gram): each is then
  ///   verified as a one-hot draft; or [(n+1)][vocab], row 0 / 1+i the q the children of the root
  ///   / node i were drawn from independently (kSampled);
  /// - `out_tokens` [>= max_depth + 1]: accepted path tokens, then the replacement or bonus;
  /// - `out_nodes` empty or [>= max_depth]: the accepted node indices (which KV rows to keep).
  /// Greedy mode accepts the longest path on which every token is the target's argmax after its
  /// parent (the first in child order among equally long ones), so duplicate siblings are
  /// searched, not just the first. Rows are checked where they are read, as `verify_chain` says.
  /// Records the round in `stats` if given. Throws `Error` on sizes or tokens out of range or a
  /// row that fails its check (nothing is written or drawn then).
  /// O(path + rejections * vocab) sampled; O(reached nodes * vocab) greedy.
  TreeVerifyResult verify(const TokenTree& tree, std::span<const float> target_probs,
                          std::span<const float> draft_probs, std::size_t vocab, VerifyMode mode,
                          Rng& rng, std::span<std::int32_t> out_tokens,
                          std::span<std::int32_t> out_nodes = {},
                          AcceptanceStats* stats = nullptr) {
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
    detail::check_tree_tokens(tree, vocab, "");
    Rng trial = rng;  // advanced only when the round succeeds
    const detail::TreeRound round =
        mode == VerifyMode::kGreedy
            ? detail::walk_greedy(tree, target_probs.data(), vocab, scratch_)
            : detail::walk_sampled(tree, target_probs.data(),
                                   draft_probs.empty() ? nullptr : draft_probs.data(), vocab, trial,
                                   scratch_);
    if (round.fault.failed) {
      detail::throw_row_fault(round.fault, "", "target_probs", "draft_probs");
    }
    rng = trial;
    const TreeVerifyResult result =
        detail::emit_tree_round(tree, round, scratch_.path, out_tokens, out_nodes);
    if (stats != nullptr) {
      stats->record(result.num_tested, result.num_accepted);
    }
    return result;
  }

 private:
  detail::TreeScratch scratch_;
};

/// A batch of token trees, one per sequence, for one verification step. Sequence s owns rows
/// [row_offsets[s], row_offsets[s+1]) of the probability buffers: its root row, then one row per
/// node, so row_offsets[s+1] - row_offsets[s] == trees[s].size() + 1.
struct TreeBatch {
  std::size_t vocab = 0;                      ///< entries per probability row
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

/// Verifies every tree of `batch` (see `TreeVerifier::verify`, which also says how rows are
/// checked), sequence s with `rngs[s]`, so the result never depends on the thread count; records
/// each round in `stats` if given. Throws `Error` on malformed offsets, sizes or tokens, or a row
/// that fails its check (the message names the sequence); nothing is written or drawn then.
/// Sequences run in parallel under OpenMP when the batch is large.
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
    check_arg(
        batch.row_offsets[s + 1] - batch.row_offsets[s] == rows, ErrorCode::kInvalidArgument,
        [&] {
          return detail::concat({"batch.row_offsets[", std::to_string(s + 1), "] - row_offsets[",
                                 std::to_string(s), "] (rows of ", detail::sequence_name(s), ")"});
        },
        batch.row_offsets[s + 1] - batch.row_offsets[s], "must equal trees[s].size() + 1 =", rows);
    detail::check_tree_tokens(batch.trees[s], vocab,
                              detail::concat({detail::sequence_name(s), ": "}));
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
  // Rounds run on copies of the Rngs into staging (the path of sequence s from row_offsets[s])
  // and are written only once every sequence succeeded.
  std::vector<Rng> trials(rngs.begin(), rngs.end());
  std::vector<detail::TreeRound> rounds(num_seqs);
  std::vector<std::int32_t> paths(total);
  std::vector<std::size_t> path_sizes(num_seqs);
  const auto n = static_cast<std::int64_t>(num_seqs);
  [[maybe_unused]] const bool parallel = num_seqs > 1 && total * vocab >= (1u << 18);
#if INFERKIT_HAS_OPENMP
#  pragma omp parallel if (parallel)
#endif
  {
    detail::TreeScratch scratch;  // one per thread
#if INFERKIT_HAS_OPENMP
#  pragma omp for schedule(dynamic)
#endif
    for (std::int64_t si = 0; si < n; ++si) {
      const auto s = static_cast<std::size_t>(si);
      const auto begin = static_cast<std::size_t>(batch.row_offsets[s]);
      const float* p = batch.target_probs.data() + begin * vocab;
      rounds[s] =
          mode == VerifyMode::kGreedy
              ? detail::walk_greedy(batch.trees[s], p, vocab, scratch)
              : detail::walk_sampled(
                    batch.trees[s], p,
                    batch.draft_probs.empty() ? nullptr : batch.draft_probs.data() + begin * vocab,
                    vocab, trials[s], scratch);
      rounds[s].fault.row += begin;  // name rows by their index in the batch's buffers
      std::copy(scratch.path.begin(), scratch.path.end(),
                paths.begin() + static_cast<std::ptrdiff_t>(begin));
      path_sizes[s] = scratch.path.size();
    }
  }
  detail::throw_first_fault(rounds);
  for (std::size_t s = 0; s < num_seqs; ++s) {
    const auto begin = static_cast<std::size_t>(batch.row_offsets[s]);
    const std::size_t rows = batch.trees[s].size() + 1;
    const TreeVerifyResult result = detail::emit_tree_round(
        batch.trees[s], rounds[s],
        std::span<const std::int32_t>(paths).subspan(begin, path_sizes[s]),
        out.tokens.subspan(begin, rows),
        out.nodes.empty() ? std::span<std::int32_t>() : out.nodes.subspan(begin, rows));
    out.num_tokens[s] = static_cast<std::int32_t>(result.num_tokens);
    rngs[s] = trials[s];
    if (stats != nullptr) {
      stats->record(result.num_tested, result.num_accepted);
    }
  }
}

}  // namespace inferkit
