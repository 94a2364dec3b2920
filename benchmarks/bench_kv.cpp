// SPDX-License-Identifier: Apache-2.0
// Benchmarks for the paged KV memory (kv/): BlockAllocator allocate+free pairs, BlockTable fork
// and copy-on-write, slot-mapping generation for a decode batch of 256 sequences, and the
// PagedKVCache append of one decode step's K/V. Each reports a ratio against a baseline timed in
// the same iterations (interleaved), because the machine is shared and noisy.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <inferkit/core/bfloat16.hpp>
#include <inferkit/core/float16.hpp>
#include <inferkit/core/float8.hpp>
#include <inferkit/core/rng.hpp>
#include <inferkit/kv/block_allocator.hpp>
#include <inferkit/kv/block_table.hpp>
#include <inferkit/kv/paged_kv_cache.hpp>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Times `op` (reported as the iteration time) and `baseline` (accumulated) in every iteration,
// then reports `<name>` = baseline time / op time: op throughput as a fraction of the baseline's.
template <class Op, class Baseline>
void run_with_baseline(benchmark::State& state, const char* ratio_name, Op&& op,
                       Baseline&& baseline) {
  double op_total = 0.0;
  double base_total = 0.0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    op();
    const double t_op = seconds_since(t0);
    const auto t1 = Clock::now();
    baseline();
    base_total += seconds_since(t1);
    op_total += t_op;
    state.SetIterationTime(t_op);
  }
  state.counters[ratio_name] = op_total > 0.0 ? base_total / op_total : 0.0;
}

/// n floats uniform in [-0.5, 0.5): K/V inputs of the append benchmarks.
std::vector<float> centered_uniform(inferkit::Rng& rng, std::size_t n) {
  std::vector<float> x(n);
  for (float& e : x) e = rng.uniform() - 0.5f;
  return x;
}

constexpr int kPairs = 1024;

// allocate_one + free, 1024 pairs per iteration, in a pool with half its blocks in use.
// Baseline: the same pairs on a std::vector used as a stack (the least a free list can cost).
void BM_BlockAllocator_AllocateFree(benchmark::State& state) {
  inferkit::BlockAllocator allocator(8192, 16);
  (void)allocator.allocate(4096);
  std::vector<std::int32_t> stack(4096);
  for (std::int32_t i = 0; i < 4096; ++i) stack[static_cast<std::size_t>(i)] = i;
  run_with_baseline(
      state, "vs_vector_stack",
      [&] {
        for (int i = 0; i < kPairs; ++i) {
          const std::optional<inferkit::BlockId> b = allocator.allocate_one();
          benchmark::DoNotOptimize(b);
          allocator.free(*b);
        }
      },
      [&] {
        for (int i = 0; i < kPairs; ++i) {
          const std::int32_t b = stack.back();
          stack.pop_back();
          benchmark::DoNotOptimize(b);
          stack.push_back(b);
        }
      });
  state.SetItemsProcessed(state.iterations() * kPairs);
}
BENCHMARK(BM_BlockAllocator_AllocateFree)->UseManualTime();

// allocate(out) + free(span) of n blocks at once (a prefill's worth), into caller-owned storage
// as BlockTable does (allocate(n), which returns a fresh vector, is not the hot path).
void BM_BlockAllocator_AllocateFreeBatch(benchmark::State& state) {
  const auto n = static_cast<std::int32_t>(state.range(0));
  inferkit::BlockAllocator allocator(8192, 16);
  std::vector<std::int32_t> stack(8192);
  std::vector<std::int32_t> out(static_cast<std::size_t>(n));
  std::vector<inferkit::BlockId> got(static_cast<std::size_t>(n));
  run_with_baseline(
      state, "vs_vector_stack",
      [&] {
        if (!allocator.allocate(std::span<inferkit::BlockId>(got))) {
          state.SkipWithError("out of blocks");
        }
        benchmark::DoNotOptimize(got.data());
        allocator.free(std::span<const inferkit::BlockId>(got));
      },
      [&] {
        for (std::int32_t i = 0; i < n; ++i) {
          out[static_cast<std::size_t>(i)] = stack.back();
          stack.pop_back();
        }
        benchmark::DoNotOptimize(out.data());
        for (std::int32_t i = n - 1; i >= 0; --i) stack.push_back(out[static_cast<std::size_t>(i)]);
      });
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_BlockAllocator_AllocateFreeBatch)->Arg(8)->Arg(128)->UseManualTime();

// fork + release of a 2,048-token sequence (128 blocks of 16). Baseline: copying the 128 ids.
void BM_BlockTable_Fork(benchmark::State& state) {
  inferkit::BlockAllocator allocator(4096, 16);
  inferkit::BlockTable parent(16);
  std::vector<inferkit::BlockCopy> copies;
  if (!parent.append_tokens(allocator, 2048, {}, copies)) state.SkipWithError("out of blocks");
  std::vector<inferkit::BlockId> ids_copy;
  run_with_baseline(
      state, "vs_id_copy",
      [&] {
        inferkit::BlockTable child = parent.fork(allocator);
        benchmark::DoNotOptimize(child.blocks().data());
        child.release(allocator);
      },
      [&] {
        ids_copy.assign(parent.blocks().begin(), parent.blocks().end());
        benchmark::DoNotOptimize(ids_copy.data());
        ids_copy.clear();
      });
  parent.release(allocator);
}
BENCHMARK(BM_BlockTable_Fork)->UseManualTime();

// Copy-on-write: a child appends one token into a shared last block holding 8 of 16 tokens
// (fork, append -> BlockCopy, PagedKVCache::copy_block over 32 layers, release).
// Baseline: memcpy of the same K/V bytes the copy moves.
void BM_BlockTable_CopyOnWrite(benchmark::State& state) {
  const inferkit::PagedKVCacheShape shape{32, 256, 16, 8, 128};
  inferkit::PagedKVCache<inferkit::float16> cache(shape);
  inferkit::BlockAllocator allocator(shape.num_blocks, shape.block_size);
  inferkit::BlockTable parent(16);
  std::vector<inferkit::BlockCopy> copies;
  if (!parent.append_tokens(allocator, 40, {}, copies)) state.SkipWithError("out of blocks");
  const std::size_t bytes = std::size_t{2} * 32 * 8 * 8 * 128 * sizeof(inferkit::float16);
  std::vector<unsigned char> src(bytes, 1);
  std::vector<unsigned char> dst(bytes);
  run_with_baseline(
      state, "vs_memcpy",
      [&] {
        inferkit::BlockTable child = parent.fork(allocator);
        std::int64_t slot = 0;
        if (!child.append_tokens(allocator, 1, std::span<std::int64_t>(&slot, 1), copies)) {
          state.SkipWithError("out of blocks");
        }
        cache.copy_blocks(copies);
        copies.clear();
        child.release(allocator);
      },
      [&] {
        std::memcpy(dst.data(), src.data(), bytes);
        benchmark::DoNotOptimize(dst.data());
      });
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes));
  parent.release(allocator);
}
BENCHMARK(BM_BlockTable_CopyOnWrite)->UseManualTime();

// Slot mapping for a decode step of 256 sequences: each appends one token (a new block every
// 16 steps). Sequences restart after 1,024 tokens. Baseline: writing 256 precomputed
// slots + 1 (the bare cost of producing the int64 array).
void BM_BlockTable_SlotMappingDecode256(benchmark::State& state) {
  constexpr int kSeqs = 256;
  inferkit::BlockAllocator allocator(kSeqs * 64 + 64, 16);
  std::vector<inferkit::BlockTable> tables;
  tables.reserve(kSeqs);
  for (int s = 0; s < kSeqs; ++s) tables.emplace_back(allocator);
  std::vector<inferkit::BlockCopy> copies;
  std::vector<std::int64_t> slots(kSeqs);
  std::vector<std::int64_t> plain(kSeqs, 0);
  for (auto& t : tables) {
    if (!t.append_tokens(allocator, 100, {}, copies)) state.SkipWithError("out of blocks");
  }
  run_with_baseline(
      state, "vs_plain_fill",
      [&] {
        for (std::size_t s = 0; s < tables.size(); ++s) {
          if (tables[s].num_tokens() >= 1024) tables[s].truncate(allocator, 1);
          if (!tables[s].append_tokens(allocator, 1, std::span<std::int64_t>(&slots[s], 1),
                                       copies)) {
            state.SkipWithError("out of blocks");
          }
        }
        benchmark::DoNotOptimize(slots.data());
      },
      [&] {
        for (std::int64_t& p : plain) p += 1;
        benchmark::DoNotOptimize(plain.data());
      });
  state.SetItemsProcessed(state.iterations() * kSeqs);
  for (auto& t : tables) t.release(allocator);
}
BENCHMARK(BM_BlockTable_SlotMappingDecode256)->UseManualTime();

// One decode step's append: 256 sequences x 8 KV heads x head_dim 128, K and V, into a cache
// of 256 x 8 blocks of 16 tokens; the step's slots advance by one token each iteration, as in
// decoding. Baselines: memcpy of the same number of stored bytes, hot and cold (see below).
template <class T, bool kFromFloat>
void BM_PagedKVCache_AppendDecode256(benchmark::State& state) {
  constexpr int kSeqs = 256;
  constexpr int kBlocksPerSeq = 8;
  const inferkit::PagedKVCacheShape shape{1, kSeqs * kBlocksPerSeq, 16, 8, 128};
  inferkit::PagedKVCache<T> cache(shape);
  const std::size_t elements = std::size_t{kSeqs} * 8 * 128;
  inferkit::Rng rng(1);
  const std::vector<float> kf = centered_uniform(rng, elements);
  const std::vector<float> vf = centered_uniform(rng, elements);
  std::vector<T> kt(elements);
  std::vector<T> vt(elements);
  if constexpr (!kFromFloat) {
    for (std::size_t i = 0; i < elements; ++i) {
      kt[i] = T(kf[i]);
      vt[i] = T(vf[i]);
    }
  }
  // Sequence s owns blocks s * 8 .. s * 8 + 7 (scattered in a real pool; contiguous here).
  std::vector<std::int64_t> slots(kSeqs);
  std::int64_t position = 0;
  const std::size_t stored_bytes =
      2 * elements * sizeof(T) / (inferkit::PagedKVCache<T>::kPackedInt4 ? 2 : 1);
  // Baselines: memcpy of the same bytes into a hot 1-step buffer, and into a buffer as large
  // as the cache, rotating by one step's bytes per iteration (a destination as cold as the
  // pages the append scatters into).
  std::vector<unsigned char> src(stored_bytes, 1);
  std::vector<unsigned char> hot(stored_bytes);
  const auto cache_bytes = static_cast<std::size_t>(cache.memory_bytes());
  const std::size_t steps_in_cold = std::max<std::size_t>(1, cache_bytes / stored_bytes);
  std::vector<unsigned char> cold(steps_in_cold * stored_bytes);
  std::size_t cold_step = 0;
  // Third baseline: the same scatter done by hand (memcpy of each token-head chunk into the
  // cache's own pages, no checks), half a block-set away from the op's slots: the memory
  // pattern's own cost, so vs_scatter_memcpy isolates the library's overhead.
  const inferkit::PagedKVView<T> view = cache.view(0);
  const auto chunk = static_cast<std::size_t>(view.token_stride()) * sizeof(T);
  // Fourth baseline, for appends from float: memcpy of the float input itself (4 bytes read per
  // element, where the stored-byte baselines move 1-2): what a conversion must at least read.
  std::vector<float> input_copy(kFromFloat ? 2 * elements : 0);
  double input_total = 0.0;
  double scatter_total = 0.0;
  double op_total = 0.0;
  double hot_total = 0.0;
  double cold_total = 0.0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    for (std::int64_t s = 0; s < kSeqs; ++s) {
      slots[static_cast<std::size_t>(s)] = s * kBlocksPerSeq * 16 + position;
    }
    if constexpr (kFromFloat) {
      cache.append(0, slots, kf, vf);
    } else {
      cache.append_elements(0, slots, kt, vt);
    }
    position = (position + 1) % (kBlocksPerSeq * 16);
    const double t_op = seconds_since(t0);
    const auto t1 = Clock::now();
    std::memcpy(hot.data(), src.data(), stored_bytes);
    benchmark::DoNotOptimize(hot.data());
    const auto t2 = Clock::now();
    std::memcpy(cold.data() + cold_step * stored_bytes, src.data(), stored_bytes);
    benchmark::DoNotOptimize(cold.data());
    cold_step = (cold_step + 1) % steps_in_cold;
    const auto t3 = Clock::now();
    const std::int32_t other = static_cast<std::int32_t>((position + 64) % (kBlocksPerSeq * 16));
    const unsigned char* in = src.data();
    for (std::int32_t s = 0; s < kSeqs; ++s) {
      const std::int32_t block = (s * kBlocksPerSeq * 16 + other) / 16;
      for (std::int32_t h = 0; h < 8; ++h, in += chunk) {
        std::memcpy(view.k + view.offset(block, h, other % 16), in, chunk);
        std::memcpy(view.v + view.offset(block, h, other % 16), in + stored_bytes / 2, chunk);
      }
    }
    benchmark::DoNotOptimize(view.k);
    scatter_total += seconds_since(t3);
    if constexpr (kFromFloat) {
      const auto t4 = Clock::now();
      std::memcpy(input_copy.data(), kf.data(), elements * sizeof(float));
      std::memcpy(input_copy.data() + elements, vf.data(), elements * sizeof(float));
      benchmark::DoNotOptimize(input_copy.data());
      input_total += seconds_since(t4);
    }
    cold_total += std::chrono::duration<double>(t3 - t2).count();
    hot_total += std::chrono::duration<double>(t2 - t1).count();
    op_total += t_op;
    state.SetIterationTime(t_op);
  }
  state.counters["vs_memcpy_hot"] = hot_total / op_total;
  state.counters["vs_memcpy_cold"] = cold_total / op_total;
  state.counters["vs_scatter_memcpy"] = scatter_total / op_total;
  if constexpr (kFromFloat) state.counters["vs_memcpy_input"] = input_total / op_total;
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * stored_bytes));
}
BENCHMARK(BM_PagedKVCache_AppendDecode256<inferkit::float16, false>)
    ->Name("BM_PagedKVCache_AppendDecode256/fp16_copy")
    ->UseManualTime();
BENCHMARK(BM_PagedKVCache_AppendDecode256<float, false>)
    ->Name("BM_PagedKVCache_AppendDecode256/fp32_copy")
    ->UseManualTime();
BENCHMARK(BM_PagedKVCache_AppendDecode256<inferkit::float16, true>)
    ->Name("BM_PagedKVCache_AppendDecode256/fp16_from_fp32")
    ->UseManualTime();
BENCHMARK(BM_PagedKVCache_AppendDecode256<inferkit::bfloat16, true>)
    ->Name("BM_PagedKVCache_AppendDecode256/bf16_from_fp32")
    ->UseManualTime();
BENCHMARK(BM_PagedKVCache_AppendDecode256<inferkit::float8_e4m3, true>)
    ->Name("BM_PagedKVCache_AppendDecode256/fp8_e4m3_from_fp32")
    ->UseManualTime();
BENCHMARK(BM_PagedKVCache_AppendDecode256<std::int8_t, true>)
    ->Name("BM_PagedKVCache_AppendDecode256/int8_from_fp32")
    ->UseManualTime();
BENCHMARK(BM_PagedKVCache_AppendDecode256<std::uint8_t, true>)
    ->Name("BM_PagedKVCache_AppendDecode256/int4_from_fp32")
    ->UseManualTime();

// One chunked-prefill append: 512 tokens of one sequence x 8 KV heads x head_dim 128, K and V,
// from fp32, starting `offset` tokens into a block (the first argument; chunked prefill starts a
// chunk wherever the last one ended). The sequence's 33 blocks are drawn from a shuffled pool;
// 64 such sequences take turns, so the pages written are as cold as a real pool's. Baseline:
// memcpy of the fp32 input, timed in the same iterations (what a conversion must at least read).
template <class T>
void BM_PagedKVCache_AppendPrefill512(benchmark::State& state) {
  constexpr std::int32_t kTokens = 512;
  constexpr std::int32_t kBlockSize = 16;
  constexpr std::int32_t kBlocksPerSeq = kTokens / kBlockSize + 1;
  constexpr std::int32_t kSeqs = 64;
  const auto offset = static_cast<std::int32_t>(state.range(0));
  const inferkit::PagedKVCacheShape shape{1, kSeqs * kBlocksPerSeq, kBlockSize, 8, 128};
  inferkit::PagedKVCache<T> cache(shape);
  const std::size_t elements = std::size_t{kTokens} * 8 * 128;
  inferkit::Rng rng(2);
  const std::vector<float> kf = centered_uniform(rng, elements);
  const std::vector<float> vf = centered_uniform(rng, elements);
  std::vector<std::int64_t> order(static_cast<std::size_t>(shape.num_blocks));
  for (std::size_t b = 0; b < order.size(); ++b) order[b] = static_cast<std::int64_t>(b);
  for (std::size_t i = order.size(); i > 1; --i) {
    std::swap(order[i - 1], order[rng.below(static_cast<std::uint32_t>(i))]);
  }
  // slots[s]: sequence s's slots for tokens offset .. offset + 511.
  std::vector<std::vector<std::int64_t>> slots(kSeqs);
  for (std::int32_t s = 0; s < kSeqs; ++s) {
    for (std::int32_t p = offset; p < offset + kTokens; ++p) {
      const std::int64_t block =
          order[static_cast<std::size_t>(s * kBlocksPerSeq + p / kBlockSize)];
      slots[static_cast<std::size_t>(s)].push_back(block * kBlockSize + p % kBlockSize);
    }
  }
  std::vector<float> input_copy(2 * elements);
  std::size_t seq = 0;
  run_with_baseline(
      state, "vs_memcpy_input",
      [&] {
        cache.append(0, slots[seq], kf, vf);
        seq = (seq + 1) % kSeqs;
      },
      [&] {
        std::memcpy(input_copy.data(), kf.data(), elements * sizeof(float));
        std::memcpy(input_copy.data() + elements, vf.data(), elements * sizeof(float));
        benchmark::DoNotOptimize(input_copy.data());
      });
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * 2 * elements * 4));
}
BENCHMARK(BM_PagedKVCache_AppendPrefill512<inferkit::float8_e4m3>)
    ->Name("BM_PagedKVCache_AppendPrefill512/fp8_e4m3_from_fp32")
    ->ArgName("offset")
    ->Arg(0)
    ->Arg(8)
    ->UseManualTime();
BENCHMARK(BM_PagedKVCache_AppendPrefill512<std::int8_t>)
    ->Name("BM_PagedKVCache_AppendPrefill512/int8_from_fp32")
    ->ArgName("offset")
    ->Arg(0)
    ->Arg(8)
    ->UseManualTime();

}  // namespace

BENCHMARK_MAIN();
