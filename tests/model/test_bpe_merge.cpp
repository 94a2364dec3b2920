// SPDX-License-Identifier: Apache-2.0
// Tests for model/detail/bpe_merge.hpp against a brute-force reference: the textbook BPE loop
// (rescan every pair, merge the lowest rank, leftmost on ties) on random words and random rule
// sets gives the same tokens as the heap-based merge.
#include <catch2/catch.hpp>
#include <cstdint>
#include <inferkit/model/detail/bpe_merge.hpp>
#include <map>
#include <random>
#include <string>
#include <vector>

using namespace inferkit;
using namespace inferkit::detail;

namespace {

struct Rules {
  BpeMergeTable table;
  std::map<std::pair<TokenId, TokenId>, BpeMergeRule> plain;
  void add(TokenId a, TokenId b, BpeMergeRule r) {
    table.add(a, b, r);
    plain.emplace(std::pair{a, b}, r);
  }
};

std::vector<TokenId> brute_force(const std::string& word, const Rules& rules) {
  std::vector<TokenId> s;
  for (const char c : word) s.push_back(static_cast<unsigned char>(c));
  for (;;) {
    std::size_t best = s.size();
    BpeMergeRule rule{};
    for (std::size_t i = 0; i + 1 < s.size(); ++i) {
      const auto it = rules.plain.find({s[i], s[i + 1]});
      if (it != rules.plain.end() && (best == s.size() || it->second.rank < rule.rank)) {
        best = i;
        rule = it->second;
      }
    }
    if (best == s.size()) return s;
    s[best] = rule.result;
    s.erase(s.begin() + static_cast<std::ptrdiff_t>(best) + 1);
  }
}

}  // namespace

TEST_CASE("bpe_merge_word: the heap merge equals the textbook loop", "[model][bpe_merge]") {
  std::mt19937 rng(11);
  TokenId byte_tokens[256];
  for (int b = 0; b < 256; ++b) byte_tokens[b] = b;
  for (int trial = 0; trial < 50; ++trial) {
    Rules rules;
    TokenId next = 256;
    std::vector<TokenId> alive = {'a', 'b', 'c', 'd'};
    for (int r = 0; r < 40; ++r) {  // rules over a 4-letter alphabet and the tokens they make
      const TokenId a = alive[rng() % alive.size()];
      const TokenId b = alive[rng() % alive.size()];
      if (rules.plain.count({a, b})) continue;
      rules.add(a, b, {r, next});
      alive.push_back(next++);
    }
    BpeMergeScratch scratch;
    for (int w = 0; w < 40; ++w) {
      std::string word(1 + rng() % 30, 'a');
      for (char& c : word) c = static_cast<char>('a' + rng() % 4);
      std::vector<TokenId> got;
      bpe_merge_word(word, byte_tokens, rules.table, scratch, got);
      REQUIRE(got == brute_force(word, rules));
    }
  }
}

TEST_CASE("bpe_merge_word: the first rule for a pair wins, and missing bytes drop",
          "[model][bpe_merge]") {
  BpeMergeTable table;
  table.add('a', 'b', {0, 300});
  table.add('a', 'b', {5, 301});
  CHECK(table.size() == 1);
  CHECK(table.find('a', 'b')->result == 300);
  TokenId byte_tokens[256];
  for (int b = 0; b < 256; ++b) byte_tokens[b] = b;
  byte_tokens['x'] = -1;
  BpeMergeScratch scratch;
  std::vector<TokenId> out;
  bpe_merge_word("axb", byte_tokens, table, scratch, out);
  CHECK(out == std::vector<TokenId>{'a', 'b'});  // x is dropped, and a/b were never adjacent
  out.clear();
  bpe_merge_word("x", byte_tokens, table, scratch, out);
  CHECK(out.empty());
}
