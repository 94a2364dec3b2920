// SPDX-License-Identifier: Apache-2.0
// Token trees for tree speculation (SpecInfer, Medusa, EAGLE): draft nodes with a parent index and
// a depth, the attention mask that lets each node see only its ancestors during the target's single
// verification pass, and two builders: a static branching tree and an EAGLE-2 style dynamic tree
// that keeps the most confident paths under a node budget. Verified by tree_verifier.hpp.
// Threads: one thread at a time per TokenTree while add_node builds it, const calls may share it;
// the builders keep no state but advance the Rng they are given.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <inferkit/core/error.hpp>
#include <inferkit/core/rng.hpp>
#include <inferkit/spec/sampling.hpp>
#include <queue>
#include <span>
#include <vector>

namespace inferkit {

/// A tree of draft tokens hanging below a root: the last committed token, whose target
/// distribution predicts the depth-1 nodes. Nodes are numbered in insertion order and a parent
/// always precedes its children. Rows of the verification pass are ordered [root, node 0, ...].
class TokenTree {
 public:
  /// The parent index of a depth-1 node.
  static constexpr std::int32_t kRoot = -1;

  /// Appends a node below `parent` (kRoot or an existing node) and returns its index. Children of
  /// a node are kept in insertion order: the order in which verification tries them.
  /// Throws `Error{kOutOfRange}` on a bad parent or a negative token (the tree is unchanged).
  std::int32_t add_node(std::int32_t parent, std::int32_t token) {
    check_arg(parent >= kRoot && parent < static_cast<std::int32_t>(size()), ErrorCode::kOutOfRange,
              "parent", parent, "must be kRoot or < size() =", size());
    check_arg(token >= 0, ErrorCode::kOutOfRange, "token", token, "must be >=", 0);
    const auto node = static_cast<std::int32_t>(size());
    parents_.push_back(parent);
    tokens_.push_back(token);
    depths_.push_back(parent == kRoot ? 1 : depths_[static_cast<std::size_t>(parent)] + 1);
    children_.emplace_back();
    (parent == kRoot ? root_children_ : children_[static_cast<std::size_t>(parent)])
        .push_back(node);
    return node;
  }

  /// Number of draft nodes (the root not counted).
  [[nodiscard]] std::size_t size() const noexcept { return tokens_.size(); }
  /// True for a tree of no draft nodes (verification then samples the root row).
  [[nodiscard]] bool empty() const noexcept { return tokens_.empty(); }

  /// [size()] parent of each node (kRoot for depth 1).
  [[nodiscard]] std::span<const std::int32_t> parents() const noexcept { return parents_; }
  /// [size()] draft token of each node.
  [[nodiscard]] std::span<const std::int32_t> tokens() const noexcept { return tokens_; }
  /// [size()] depth of each node (1 below the root): its position offset after the root.
  [[nodiscard]] std::span<const std::int32_t> depths() const noexcept { return depths_; }

  /// Children of `node` (kRoot for the root's), in the order verification tries them.
  /// Precondition: node is kRoot or < size().
  [[nodiscard]] std::span<const std::int32_t> children(std::int32_t node) const noexcept {
    return node == kRoot ? std::span<const std::int32_t>(root_children_)
                         : std::span<const std::int32_t>(children_[static_cast<std::size_t>(node)]);
  }

  /// The deepest node's depth (0 for an empty tree).
  [[nodiscard]] std::int32_t max_depth() const noexcept {
    return depths_.empty() ? 0 : *std::max_element(depths_.begin(), depths_.end());
  }

  /// Nodes without children.
  [[nodiscard]] std::size_t num_leaves() const noexcept {
    return static_cast<std::size_t>(
        std::count_if(children_.begin(), children_.end(), [](const auto& c) { return c.empty(); }));
  }

  /// Writes the verification pass's attention mask over [root, node 0 .. node n-1] into `mask`
  /// [(n+1) * (n+1)], row-major: mask[r][c] = 1 iff c is r or an ancestor of r (the root is every
  /// node's ancestor). Every row also sees the committed prefix, which is not part of this mask.
  /// Throws `Error` if the size is wrong. O(n * depth) plus the fill.
  void attention_mask(std::span<std::uint8_t> mask) const {
    const std::size_t rows = size() + 1;
    check_arg(mask.size() == rows * rows, ErrorCode::kInvalidArgument, "mask.size()", mask.size(),
              "must equal (size() + 1)^2 =", rows * rows);
    std::fill(mask.begin(), mask.end(), std::uint8_t{0});
    mask[0] = 1;
    for (std::size_t node = 0; node < size(); ++node) {
      std::uint8_t* row = mask.data() + (node + 1) * rows;
      row[0] = 1;
      for (auto a = static_cast<std::int32_t>(node); a != kRoot;
           a = parents_[static_cast<std::size_t>(a)]) {
        row[static_cast<std::size_t>(a) + 1] = 1;
      }
    }
  }

  /// The mask as a new vector; see the overload above.
  [[nodiscard]] std::vector<std::uint8_t> attention_mask() const {
    std::vector<std::uint8_t> mask((size() + 1) * (size() + 1));
    attention_mask(mask);
    return mask;
  }

  /// Removes every node.
  void clear() noexcept {
    parents_.clear();
    tokens_.clear();
    depths_.clear();
    children_.clear();
    root_children_.clear();
  }

 private:
  std::vector<std::int32_t> parents_;
  std::vector<std::int32_t> tokens_;
  std::vector<std::int32_t> depths_;
  std::vector<std::vector<std::int32_t>> children_;
  std::vector<std::int32_t> root_children_;
};

/// How a builder picks a node's children from the draft distribution q at that node.
/// - kTopK: the most probable distinct tokens (deterministic; verify without draft rows, one-hot);
/// - kSampled: independent draws from q (repeats possible; verify with the q rows, SpecInfer).
enum class CandidateRule : std::uint8_t { kTopK, kSampled };

/// The draft model at a node: returns q [vocab] for the children of `node` (TokenTree::kRoot for
/// the root) of `tree`, the tree being built (read the node's token and ancestors from it).
/// The span must stay valid until the builder returns.
using DraftFunction =
    std::function<std::span<const float>(const TokenTree& tree, std::int32_t node)>;

namespace detail {

/// The `count` most probable tokens of q with positive probability, most probable first (lowest
/// index on ties). O(vocab log count).
inline std::vector<std::int32_t> top_tokens(std::span<const float> q, std::size_t count) {
  std::vector<std::int32_t> order;
  const auto better = [&](std::int32_t a, std::int32_t b) {
    const float qa = q[static_cast<std::size_t>(a)];
    const float qb = q[static_cast<std::size_t>(b)];
    return qa > qb || (qa == qb && a < b);
  };
  for (std::size_t i = 0; i < q.size(); ++i) {
    if (!(q[i] > 0.0f)) {
      continue;
    }
    const auto token = static_cast<std::int32_t>(i);
    if (order.size() < count) {
      order.insert(std::upper_bound(order.begin(), order.end(), token, better), token);
    } else if (count > 0 && better(token, order.back())) {
      order.pop_back();
      order.insert(std::upper_bound(order.begin(), order.end(), token, better), token);
    }
  }
  return order;
}

}  // namespace detail

/// Builds a static tree: every node at depth d gets `branching[d-1]` children ({2, 2, 2} gives
/// 2 + 4 + 8 = 14 nodes and 8 leaves), chosen from `draft(node)` by `rule`. kTopK may give fewer
/// children where q has fewer positive tokens. `rng` is used only by kSampled.
/// Throws `Error` on an empty branching, a zero factor, or more than 4096 nodes.
inline TokenTree build_static_tree(std::span<const std::int32_t> branching,
                                   const DraftFunction& draft, CandidateRule rule, Rng& rng) {
  check_arg(!branching.empty(), ErrorCode::kInvalidArgument, "branching.size()", 0,
            "must be >=", 1);
  std::size_t level = 1;
  std::size_t total = 0;
  for (std::int32_t b : branching) {
    check_arg(b >= 1, ErrorCode::kInvalidArgument, "branching factor", b, "must be >=", 1);
    level *= static_cast<std::size_t>(b);
    total += level;
    check_arg(total <= 4096, ErrorCode::kOutOfRange, "tree nodes", total, "must be <=", 4096);
  }
  TokenTree tree;
  std::vector<std::int32_t> frontier{TokenTree::kRoot};
  for (std::int32_t b : branching) {
    std::vector<std::int32_t> next;
    for (std::int32_t node : frontier) {
      const std::span<const float> q = draft(tree, node);
      if (rule == CandidateRule::kTopK) {
        for (std::int32_t t : detail::top_tokens(q, static_cast<std::size_t>(b))) {
          next.push_back(tree.add_node(node, t));
        }
      } else {
        for (std::int32_t i = 0; i < b; ++i) {
          next.push_back(tree.add_node(node, sample_categorical(q, rng)));
        }
      }
    }
    frontier = std::move(next);
  }
  return tree;
}

/// Builds an EAGLE-2 style dynamic tree: the `node_budget` nodes with the highest path confidence
/// (product of draft probabilities from the root), each node offering its `top_k` most probable
/// children, up to `max_depth`. Best-first expansion: a child never scores above its parent, so
/// every kept node's ancestors are kept. Candidates are deterministic (verify one-hot).
/// Throws `Error` if a limit is 0 or node_budget > 4096. O(node_budget * (vocab + log budget)).
inline TokenTree build_dynamic_tree(std::size_t node_budget, std::size_t max_depth,
                                    std::size_t top_k, const DraftFunction& draft) {
  check_arg(node_budget >= 1 && node_budget <= 4096, ErrorCode::kOutOfRange, "node_budget",
            node_budget, "must be in [1, limit] with limit =", 4096);
  check_arg(max_depth >= 1, ErrorCode::kInvalidArgument, "max_depth", max_depth, "must be >=", 1);
  check_arg(top_k >= 1, ErrorCode::kInvalidArgument, "top_k", top_k, "must be >=", 1);
  struct Candidate {
    double score;
    std::int32_t parent;
    std::int32_t token;
    std::uint64_t order;  // ties: earlier candidates first, for determinism
    bool operator<(const Candidate& o) const {
      return score < o.score || (score == o.score && order > o.order);
    }
  };
  std::priority_queue<Candidate> queue;
  std::uint64_t order = 0;
  TokenTree tree;
  const auto offer = [&](std::int32_t node, double base) {
    const std::span<const float> q = draft(tree, node);
    for (std::int32_t t : detail::top_tokens(q, top_k)) {
      queue.push({base * static_cast<double>(q[static_cast<std::size_t>(t)]), node, t, order++});
    }
  };
  offer(TokenTree::kRoot, 1.0);
  while (tree.size() < node_budget && !queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    const std::int32_t node = tree.add_node(c.parent, c.token);
    if (static_cast<std::size_t>(tree.depths()[static_cast<std::size_t>(node)]) < max_depth) {
      offer(node, c.score);
    }
  }
  return tree;
}

}  // namespace inferkit
