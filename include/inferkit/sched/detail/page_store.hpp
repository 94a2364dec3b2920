// SPDX-License-Identifier: Apache-2.0
// PageStore: the scheduler's persistent page table. Each running sequence keeps a run of block
// ids in one arena, with room to grow, across steps; a step rewrites only the entries its block
// table changed (a table only changes at its tail: appends, a copy-on-write of the last block,
// truncation). StepPlan's begin/end page table points into the arena, so building it costs
// O(sequences + changed pages), not O(total pages).
#pragma once

#include <algorithm>
#include <cstdint>
#include <inferkit/core/config.hpp>
#include <inferkit/core/error.hpp>
#include <inferkit/kv/block_allocator.hpp>
#include <limits>
#include <span>
#include <vector>

namespace inferkit::detail {

class PageStore {
  struct Run {
    std::int32_t begin = 0;
    std::int32_t size = 0;
    std::int32_t capacity = 0;
  };
  static constexpr std::int32_t kMinCapacity = 8;

  std::vector<std::int32_t> arena_;
  std::vector<Run> runs_;           // [slots]
  std::int64_t live_capacity_ = 0;  // sum of the runs' capacities, in arena entries (pages)

 public:
  /// Makes room for sequence slots [0, n).
  void resize(std::size_t n) { runs_.resize(n); }

  /// Makes slot `s`'s run equal `blocks`, given that the run already equals them except at its
  /// tail: entries before the last common one are kept, the rest rewritten. O(1 + changed),
  /// amortized O(pages) when the run must move to grow.
  void sync(std::size_t s, std::span<const BlockId> blocks) {
    Run& run = runs_[s];
    const auto want = static_cast<std::int32_t>(blocks.size());
    std::int32_t from = std::min(run.size, want);
    from = from > 0 ? from - 1 : 0;
#if INFERKIT_DEBUG_ASSERTS
    for (std::int32_t i = 0; i < from; ++i) {
      INFERKIT_ASSERT(arena_[idx(run.begin + i)] == blocks[idx(i)]);
    }
#endif
    if (want > run.capacity) {
      relocate(s, want);
      from = 0;  // the new run holds nothing yet
    }
    std::copy(blocks.begin() + from, blocks.end(), arena_.begin() + run.begin + from);
    run.size = want;
  }

  /// Forgets slot `s`'s run (its sequence left the running set).
  void clear(std::size_t s) noexcept {
    live_capacity_ -= runs_[s].capacity;
    runs_[s] = Run{};
  }

  /// Offset of slot `s`'s first page in the arena.
  [[nodiscard]] std::int32_t begin(std::size_t s) const noexcept { return runs_[s].begin; }
  /// One past slot `s`'s last page.
  [[nodiscard]] std::int32_t end(std::size_t s) const noexcept {
    return runs_[s].begin + runs_[s].size;
  }
  /// The arena (valid until the next sync).
  [[nodiscard]] const std::int32_t* data() const noexcept { return arena_.data(); }
  /// Entries in the arena, garbage included.
  [[nodiscard]] std::size_t arena_size() const noexcept { return arena_.size(); }

 private:
  static std::size_t idx(std::int64_t i) noexcept { return static_cast<std::size_t>(i); }

  // Gives slot s a run of capacity >= need pages at the arena's end (doubling), compacting the
  // arena first when its garbage exceeds the live capacity by more than 4 * kMinCapacity entries
  // (so more than half of it is garbage).
  void relocate(std::size_t s, std::int32_t need) {
    Run& run = runs_[s];
    const auto cap = std::max<std::int64_t>({need, std::int64_t{2} * run.capacity, kMinCapacity});
    live_capacity_ -= run.capacity;
    run = Run{};
    const auto garbage = static_cast<std::int64_t>(arena_.size()) - live_capacity_;
    if (garbage > live_capacity_ + std::int64_t{4} * kMinCapacity) compact();
    const auto at = static_cast<std::int64_t>(arena_.size());
    check_arg(at + cap <= std::numeric_limits<std::int32_t>::max(), ErrorCode::kOutOfRange,
              "page store entries", at + cap, "must be <= int32 max",
              std::numeric_limits<std::int32_t>::max());
    arena_.resize(idx(at + cap));
    run.begin = static_cast<std::int32_t>(at);
    run.capacity = static_cast<std::int32_t>(cap);
    live_capacity_ += cap;
  }

  // Packs every run to the front of a new arena, in slot order. O(live capacity).
  void compact() {
    std::vector<std::int32_t> packed;
    packed.reserve(idx(live_capacity_));
    for (Run& run : runs_) {
      if (run.capacity == 0) continue;
      const auto at = static_cast<std::int32_t>(packed.size());
      packed.insert(packed.end(), arena_.begin() + run.begin,
                    arena_.begin() + run.begin + run.capacity);
      run.begin = at;
    }
    arena_ = std::move(packed);
  }
};

}  // namespace inferkit::detail
