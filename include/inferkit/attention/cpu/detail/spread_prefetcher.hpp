// SPDX-License-Identifier: Apache-2.0
// Software prefetch along a page table for the CPU attention kernels: hardware prefetchers stop
// at page boundaries and cannot know which physical page comes next, so the kernel prefetches
// the K/V rows of the tile ahead itself, spread between its own arithmetic.
#pragma once

#include <algorithm>
#include <cstdint>
#include <inferkit/attention/cpu/detail/kv_head_source.hpp>
#include <inferkit/attention/cpu/detail/simd_common.hpp>
#include <inferkit/core/config.hpp>

namespace inferkit::detail {
inline namespace INFERKIT_ISA_ABI {

/// Prefetches one cache line into L1. An asm statement where the instruction is known (x86
/// prefetcht0, AArch64 prfm): GCC's dead-code elimination deletes loops whose only statements
/// are __builtin_prefetch (observed with g++ 12 -O2).
INFERKIT_FORCEINLINE void prefetch_line(const char* p) noexcept {
#if INFERKIT_ARCH_X86 && !INFERKIT_CUDA_COMPILER
  __asm__ volatile("prefetcht0 %0" : : "m"(*p));
#elif INFERKIT_ARCH_AARCH64 && !INFERKIT_CUDA_COMPILER
  __asm__ volatile("prfm pldl1keep, %0" : : "Q"(*p));
#else
  __builtin_prefetch(p, 0, 3);
#endif
}

/// Prefetches the K and V rows of one future tile (16 tokens) a few cache lines at a time,
/// interleaved with the current tile's arithmetic. Why not all at once: one tile is 128 lines
/// (fp16, head_dim 128) and the core has only ~16 L1 miss buffers, so a burst stalls the
/// kernel's own loads for about a DRAM latency per 16 lines; spread out, the requests overlap
/// the compute. Measured on 2 cores, shuffled 4 KiB page-heads: burst 0.5-0.6 of the streaming
/// read, spread 0.8-0.9. Lines go to L1 (prefetcht0 measured 3-5% above prefetcht1 into L2).
/// The walk runs between the FMAs, so start() lays the tile out as runs of line pairs and a
/// step is a few instructions: two prefetches and pointer bumps.
template <class KV>
struct SpreadPrefetcher {
  static constexpr std::int64_t kLine = 64;
  /// `lines` steps of K line k + i * 64 with V line v + i * 64; v == nullptr: K alone. K and V
  /// rows of a page span start at their own alignment mod 64, so their line counts may differ
  /// by one: the longer one's last line is a run of its own (passed as k).
  struct Run {
    const char* k = nullptr;
    const char* v = nullptr;
    std::int64_t lines = 0;
  };
  /// Where the walk stands. A kernel loop copies it into a local (cursor()), walks that, and
  /// stores it back (resume()): the struct itself, holding an array, stays in memory, and a walk
  /// on its members stores and reloads them at every step (measured: decode ran 8-11% faster
  /// once the loops walked a local copy).
  struct Cursor {
    const char* k = nullptr;  ///< the current run's next lines
    const char* v = nullptr;
    std::int64_t left = 0;  ///< steps left in the current run
    std::int32_t next_run = 0;
  };
  Run runs[2 * kTileTokens] = {};  ///< at most two per page span, one span per token
  std::int32_t num_runs = 0;
  Cursor pos;              ///< the stored position (start() resets it)
  std::int64_t lines = 0;  ///< steps the whole tile takes

  /// Targets tokens [begin, min(begin + 16, end)) of `src`; nothing when begin >= end.
  void start(const KvHeadSource<KV>& src, std::int64_t begin, std::int64_t end,
             std::int64_t row_bytes) noexcept {
    num_runs = 0;
    pos = Cursor{};
    lines = 0;
    end = std::min<std::int64_t>(end, begin + kTileTokens);
    for (std::int64_t tok = begin; tok < end;) {
      const std::int64_t page = tok / src.block_size;
      const std::int64_t slot = tok - page * src.block_size;
      const std::int64_t n = std::min(end - tok, src.block_size - slot);
      const std::int64_t off = src.pages[page] * src.block_stride + slot * src.token_stride;
      const auto* kp = reinterpret_cast<const char*>(src.k + off);
      const auto* vp = reinterpret_cast<const char*>(src.v + off);
      const auto k_mis = static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(kp) % kLine);
      const auto v_mis = static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(vp) % kLine);
      const std::int64_t k_lines = (n * row_bytes + k_mis + kLine - 1) / kLine;
      const std::int64_t v_lines = (n * row_bytes + v_mis + kLine - 1) / kLine;
      const std::int64_t both = std::min(k_lines, v_lines);
      runs[num_runs++] = {kp - k_mis, vp - v_mis, both};
      if (k_lines != v_lines) {
        const char* longer = k_lines > v_lines ? kp - k_mis : vp - v_mis;
        runs[num_runs++] = {longer + both * kLine, nullptr, 1};
      }
      lines += std::max(k_lines, v_lines);
      tok += n;
    }
  }

  [[nodiscard]] INFERKIT_FORCEINLINE Cursor cursor() const noexcept { return pos; }
  INFERKIT_FORCEINLINE void resume(const Cursor& c) noexcept { pos = c; }

  /// Every line of the tile has been issued.
  [[nodiscard]] bool done() const noexcept { return pos.left == 0 && pos.next_run == num_runs; }

  /// Issues the next `n` steps from `c`, each one line of K and the line of V at the same offset.
  INFERKIT_FORCEINLINE void issue(Cursor& c, std::int64_t n) const noexcept {
    walk(c, n, prefetch_line);
  }
  /// issue() from the stored position.
  INFERKIT_FORCEINLINE void issue(std::int64_t n) noexcept { walk(n, prefetch_line); }

  /// Calls on_line(line) for the lines of the next `n` steps from `c` (issue's walk; tests
  /// record it).
  template <class OnLine>
  INFERKIT_FORCEINLINE void walk(Cursor& c, std::int64_t n, OnLine&& on_line) const noexcept {
    for (; n > 0; --n) {
      if (c.left == 0) {
        if (c.next_run == num_runs) return;
        c.k = runs[c.next_run].k;
        c.v = runs[c.next_run].v;
        c.left = runs[c.next_run].lines;
        ++c.next_run;
      }
      on_line(c.k);
      c.k += kLine;
      if (c.v != nullptr) {
        on_line(c.v);
        c.v += kLine;
      }
      --c.left;
    }
  }
  /// walk() from the stored position, which it advances.
  template <class OnLine>
  INFERKIT_FORCEINLINE void walk(std::int64_t n, OnLine&& on_line) noexcept {
    Cursor c = cursor();
    walk(c, n, on_line);
    resume(c);
  }
};

/// Prefetches the K and V rows of tokens [begin, end) of `src` all at once, tile by tile through
/// `pf`: for the start of a range, and for the prefill path, whose compute per tile hides a
/// burst.
template <class KV>
inline void prefetch_tokens(SpreadPrefetcher<KV>& pf, const KvHeadSource<KV>& src,
                            std::int64_t begin, std::int64_t end, std::int64_t row_bytes) noexcept {
  for (std::int64_t tok = begin; tok < end; tok += kTileTokens) {
    pf.start(src, tok, end, row_bytes);
    pf.issue(pf.lines);
  }
}

}  // namespace INFERKIT_ISA_ABI
}  // namespace inferkit::detail
