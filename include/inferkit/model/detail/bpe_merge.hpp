// SPDX-License-Identifier: Apache-2.0
// The BPE merge loop: a word starts as one token per byte; the adjacent pair with the lowest
// merge rank is merged, ties going to the leftmost pair, until no pair has a rule. A binary heap
// of candidate pairs, with entries checked for staleness when popped, makes a word of n bytes
// cost O(n log n) (no string rebuilding; pairs are looked up by token ids, not text). This is
// the order llama.cpp's and Hugging Face's BPE merge in.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <inferkit/core/token_id.hpp>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace inferkit::detail {

/// What merging a pair of tokens makes: the merged token, and the rule's rank (lower first).
struct BpeMergeRule {
  std::int32_t rank = 0;
  TokenId result = 0;
};

/// The merge rules, keyed by the pair of token ids.
class BpeMergeTable {
 public:
  static std::uint64_t key(TokenId left, TokenId right) noexcept {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(left)) << 32) |
           static_cast<std::uint32_t>(right);
  }
  /// Adds a rule unless the pair has one already (the first, lowest-ranked rule wins).
  void add(TokenId left, TokenId right, BpeMergeRule rule) {
    rules_.emplace(key(left, right), rule);
  }
  void reserve(std::size_t n) { rules_.reserve(n); }
  [[nodiscard]] std::size_t size() const noexcept { return rules_.size(); }
  [[nodiscard]] const BpeMergeRule* find(TokenId left, TokenId right) const {
    const auto it = rules_.find(key(left, right));
    return it == rules_.end() ? nullptr : &it->second;
  }

 private:
  std::unordered_map<std::uint64_t, BpeMergeRule> rules_;
};

/// Scratch space for `bpe_merge_word`, reused across words.
struct BpeMergeScratch {
  struct Symbol {
    TokenId id = 0;
    std::int32_t prev = -1;
    std::int32_t next = -1;  // -1 past the end; a merged-away symbol has id -1
  };
  struct Candidate {
    std::int32_t rank = 0;
    std::int32_t left = 0;
    std::int32_t right = 0;
    TokenId left_id = 0;
    TokenId right_id = 0;
    TokenId result = 0;
  };
  std::vector<Symbol> symbols;
  std::vector<Candidate> heap;
};

/// Appends the tokens of `word` (raw bytes; `byte_tokens[b]` is the token of byte b, or -1 when
/// the vocabulary has none: such a byte never merges and is dropped) to `out`.
inline void bpe_merge_word(std::string_view word, const TokenId* byte_tokens,
                           const BpeMergeTable& merges, BpeMergeScratch& s,
                           std::vector<TokenId>& out) {
  const auto n = static_cast<std::int32_t>(word.size());
  if (n == 1) {
    const TokenId id = byte_tokens[static_cast<unsigned char>(word[0])];
    if (id >= 0) out.push_back(id);
    return;
  }
  s.symbols.resize(static_cast<std::size_t>(n));
  for (std::int32_t i = 0; i < n; ++i) {
    s.symbols[static_cast<std::size_t>(i)] = {
        byte_tokens[static_cast<unsigned char>(word[static_cast<std::size_t>(i)])], i - 1,
        i + 1 < n ? i + 1 : -1};
  }
  // Min-heap on (rank, left): std::*_heap build max-heaps, so the comparison is reversed.
  const auto later = [](const BpeMergeScratch::Candidate& a, const BpeMergeScratch::Candidate& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.left > b.left;
  };
  s.heap.clear();
  const auto consider = [&](std::int32_t left, std::int32_t right) {
    if (left < 0 || right < 0) return;
    const TokenId a = s.symbols[static_cast<std::size_t>(left)].id;
    const TokenId b = s.symbols[static_cast<std::size_t>(right)].id;
    if (const BpeMergeRule* rule = merges.find(a, b)) {
      s.heap.push_back({rule->rank, left, right, a, b, rule->result});
      std::push_heap(s.heap.begin(), s.heap.end(), later);
    }
  };
  for (std::int32_t i = 0; i + 1 < n; ++i) consider(i, i + 1);
  while (!s.heap.empty()) {
    std::pop_heap(s.heap.begin(), s.heap.end(), later);
    const BpeMergeScratch::Candidate c = s.heap.back();
    s.heap.pop_back();
    BpeMergeScratch::Symbol& left = s.symbols[static_cast<std::size_t>(c.left)];
    BpeMergeScratch::Symbol& right = s.symbols[static_cast<std::size_t>(c.right)];
    // Stale when either side has merged since the pair was queued.
    if (left.id != c.left_id || right.id != c.right_id || left.next != c.right) continue;
    left.id = c.result;
    left.next = right.next;
    if (right.next >= 0) s.symbols[static_cast<std::size_t>(right.next)].prev = c.left;
    right.id = -1;
    right.next = -1;
    consider(left.prev, c.left);
    consider(c.left, left.next);
  }
  for (std::int32_t i = 0; i >= 0; i = s.symbols[static_cast<std::size_t>(i)].next) {
    const TokenId id = s.symbols[static_cast<std::size_t>(i)].id;
    if (id >= 0) out.push_back(id);  // a byte without a token (never merged) is dropped
  }
}

}  // namespace inferkit::detail
