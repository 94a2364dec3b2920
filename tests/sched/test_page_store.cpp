// SPDX-License-Identifier: Apache-2.0
// Tests for sched/detail/page_store.hpp: random tail edits (appends, copy-on-write of the last
// entry, truncation, clearing, slot reuse) against a plain vector per slot, so every run always
// reads back exactly its table, across relocation and compaction of the arena.
#include <catch2/catch.hpp>
#include <cstdint>
#include <inferkit/core/rng.hpp>
#include <inferkit/sched/detail/page_store.hpp>
#include <vector>

using inferkit::BlockId;
using inferkit::Rng;
using inferkit::detail::PageStore;

namespace {

void check_equal(const PageStore& store, const std::vector<std::vector<BlockId>>& model) {
  for (std::size_t s = 0; s < model.size(); ++s) {
    INFO("slot " << s);
    const std::int32_t b = store.begin(s);
    REQUIRE(store.end(s) - b == static_cast<std::int32_t>(model[s].size()));
    for (std::size_t i = 0; i < model[s].size(); ++i) {
      REQUIRE(store.data()[static_cast<std::size_t>(b) + i] == model[s][i]);
    }
  }
}

}  // namespace

TEST_CASE("PageStore: runs follow their tables through tail edits, relocation and compaction",
          "[sched][page_store]") {
  Rng rng(5);
  constexpr std::size_t kSlots = 12;
  PageStore store;
  store.resize(kSlots);
  std::vector<std::vector<BlockId>> model(kSlots);
  BlockId next = 0;
  std::size_t max_arena = 0;
  for (int op = 0; op < 20000; ++op) {
    const std::size_t s = rng.below(kSlots);
    std::vector<BlockId>& t = model[s];
    switch (rng.below(5)) {
      case 0:
      case 1: {  // append a few blocks
        const auto n = 1 + rng.below(6);
        for (std::uint32_t i = 0; i < n; ++i) t.push_back(next++);
        break;
      }
      case 2:  // copy-on-write of the last block
        if (!t.empty()) t.back() = next++;
        break;
      case 3:  // truncation (rejected drafts), sometimes to empty
        t.resize(t.empty() ? 0 : rng.below(static_cast<std::uint32_t>(t.size()) + 1));
        break;
      case 4:  // the sequence leaves; the slot is reused later
        if (rng.below(4) == 0) {
          t.clear();
          store.clear(s);
          continue;
        }
        break;
    }
    store.sync(s, t);
    max_arena = std::max(max_arena, store.arena_size());
    if (op % 97 == 0) check_equal(store, model);
  }
  check_equal(store, model);
  // Compaction keeps the arena within a small factor of the live runs' capacity.
  std::size_t live = 0;
  for (const auto& t : model) live += t.size();
  INFO("max arena " << max_arena << ", live entries now " << live);
  CHECK(max_arena < 40 * 1024);
}

TEST_CASE("PageStore: an empty run and a cleared slot have no pages", "[sched][page_store]") {
  PageStore store;
  store.resize(2);
  CHECK(store.end(0) - store.begin(0) == 0);
  const std::vector<BlockId> blocks = {4, 5, 6};
  store.sync(1, blocks);
  CHECK(store.end(1) - store.begin(1) == 3);
  store.clear(1);
  CHECK(store.end(1) - store.begin(1) == 0);
  store.sync(1, std::vector<BlockId>{});
  CHECK(store.end(1) - store.begin(1) == 0);
}
