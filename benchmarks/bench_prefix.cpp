// SPDX-License-Identifier: Apache-2.0
// Benchmarks for prefix/radix_tree.hpp on a serving-shaped cache: 10k sequences of unique tails
// under 10 shared prefixes, over a million cached tokens. Match and insert throughput in tokens
// per second against std::memcmp / std::memcpy over the same tokens, and eviction cost per freed
// block as the tree grows against the same measurement on the smallest tree in the same run.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <inferkit/kv/block_allocator.hpp>
#include <inferkit/prefix/radix_tree.hpp>
#include <memory>
#include <span>
#include <utility>
#include <vector>

namespace {

using inferkit::BlockAllocator;
using inferkit::BlockId;
using inferkit::RadixTree;
using inferkit::TokenId;
using Clock = std::chrono::steady_clock;

constexpr std::int32_t kBlockSize = 16;
constexpr std::int64_t kTailTokens = 112;  // 7 pages of unique tokens per sequence
constexpr std::int64_t kRoots = 10;

// Deterministic token ids (SplitMix64 of a domain, an id and a position).
TokenId token(std::uint64_t domain, std::uint64_t id, std::uint64_t pos) {
  std::uint64_t z = (domain << 56) ^ (id << 20) ^ pos;
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return static_cast<TokenId>((z ^ (z >> 31)) % 128000u);
}

// A tree over an allocator, filled with sequences "root (id % kRoots) + unique tail (id)".
struct Cache {
  std::int64_t root_tokens;
  std::unique_ptr<BlockAllocator> allocator;
  std::unique_ptr<RadixTree> tree;
  std::uint64_t next_id = 0;
  std::vector<TokenId> buffer;
  std::vector<BlockId> blocks;
  std::vector<std::vector<TokenId>> roots;

  Cache(std::int64_t root_tokens_, std::int64_t cached_tokens, std::int64_t capacity_tokens)
      : root_tokens(root_tokens_) {
    const std::int64_t pages = capacity_tokens / kBlockSize;
    allocator = std::make_unique<BlockAllocator>(static_cast<std::int32_t>(pages + pages / 8 + 64),
                                                 kBlockSize);
    inferkit::RadixTreeOptions options;
    options.max_cached_tokens = capacity_tokens;
    tree = std::make_unique<RadixTree>(*allocator, options);
    while (tree->cached_tokens() < cached_tokens) add(next_id++);
  }

  // Root (id % kRoots) then the unique tail of `id`; the roots are generated once.
  const std::vector<TokenId>& sequence(std::uint64_t id) {
    if (roots.empty()) {
      roots.resize(static_cast<std::size_t>(kRoots));
      for (std::int64_t r = 0; r < kRoots; ++r) {
        for (std::int64_t j = 0; j < root_tokens; ++j) {
          roots[static_cast<std::size_t>(r)].push_back(
              token(1, static_cast<std::uint64_t>(r), static_cast<std::uint64_t>(j)));
        }
      }
    }
    const std::vector<TokenId>& root = roots[id % kRoots];
    buffer.assign(root.begin(), root.end());
    for (std::int64_t j = 0; j < kTailTokens; ++j) {
      buffer.push_back(token(2, id, static_cast<std::uint64_t>(j)));
    }
    return buffer;
  }

  // One request: match, share the hit, allocate the rest, insert, finish.
  void add(std::uint64_t id) {
    const std::vector<TokenId>& t = sequence(id);
    const auto hit = tree->match(t);
    const std::size_t pages = t.size() / kBlockSize;
    blocks = hit.blocks;
    allocator->retain(std::span<const BlockId>(blocks));
    const std::size_t first = blocks.size();
    blocks.resize(pages);
    if (!allocator->allocate(std::span<BlockId>(blocks).subspan(first))) std::abort();
    for (std::size_t p = first; p < pages; ++p) allocator->set_block_tokens(blocks[p], kBlockSize);
    (void)tree->insert(t, blocks);
    allocator->free(std::span<const BlockId>(blocks));
  }
};

// Tokens per second of `match` on the 1M-token tree; baseline: memcmp of each query against a
// stored copy (the least work any exact matcher must do).
void BM_RadixTree_Match(benchmark::State& state) {
  Cache cache(1024, 1'000'000, 2'000'000);
  std::vector<std::vector<TokenId>> queries;
  for (std::uint64_t q = 0; q < 512; ++q)
    queries.push_back(cache.sequence((q * 7919) % cache.next_id));
  const std::vector<std::vector<TokenId>> copies = queries;
  std::int64_t matched = 0;
  std::size_t i = 0;
  const auto start = Clock::now();
  for (auto _ : state) {
    const auto m = cache.tree->match(queries[i]);
    matched += m.num_tokens;
    benchmark::DoNotOptimize(m.blocks.data());
    i = (i + 1) % queries.size();
  }
  const double match_s = std::chrono::duration<double>(Clock::now() - start).count();
  // Baseline, same process and moment: memcmp over the same number of tokens.
  std::int64_t compared = 0;
  int sink = 0;
  const auto t0 = Clock::now();
  while (compared < matched || compared == 0) {
    for (std::size_t k = 0; k < queries.size(); ++k) {
      sink += std::memcmp(queries[k].data(), copies[k].data(), queries[k].size() * sizeof(TokenId));
      compared += static_cast<std::int64_t>(queries[k].size());
    }
    benchmark::DoNotOptimize(sink);
  }
  const double base_s = std::chrono::duration<double>(Clock::now() - t0).count();
  // Wall-clock rates on both sides: the machine is shared, so only the ratio is meaningful.
  const double match_tps = static_cast<double>(matched) / match_s;
  const double memcmp_tps = static_cast<double>(compared) / base_s;
  state.counters["tokens_per_s"] = match_tps;
  state.counters["memcmp_tokens_per_s"] = memcmp_tps;
  state.counters["vs_memcmp"] = match_tps / memcmp_tps;
  state.counters["cached_tokens"] = static_cast<double>(cache.tree->cached_tokens());
  state.counters["sequences"] = static_cast<double>(cache.next_id);
}
BENCHMARK(BM_RadixTree_Match)->Unit(benchmark::kMicrosecond);

// Tokens per second of a request's `insert` (1024 shared + 112 new tokens) into a full 1M-token
// tree, so every insert also evicts: the whole request cycle (match, allocator retain/allocate,
// insert, free) and the insert call alone; baseline: memcpy of the same tokens.
void BM_RadixTree_Insert(benchmark::State& state) {
  Cache cache(1024, 1'000'000, 1'000'000);
  std::int64_t tokens = 0;
  std::vector<BlockId>& blocks = cache.blocks;
  double insert_only_s = 0.0;
  const auto start = Clock::now();
  for (auto _ : state) {
    const std::vector<TokenId>& t = cache.sequence(cache.next_id++);
    const auto hit = cache.tree->match(t);  // what a scheduler does first; shares the root
    blocks = hit.blocks;
    cache.allocator->retain(std::span<const BlockId>(blocks));
    const std::size_t first = blocks.size();
    blocks.resize(t.size() / kBlockSize);
    if (!cache.allocator->allocate(std::span<BlockId>(blocks).subspan(first))) std::abort();
    for (std::size_t p = first; p < blocks.size(); ++p)
      cache.allocator->set_block_tokens(blocks[p], kBlockSize);
    const auto t0 = Clock::now();
    const auto r = cache.tree->insert(t, blocks);
    insert_only_s += std::chrono::duration<double>(Clock::now() - t0).count();
    benchmark::DoNotOptimize(r.inserted_tokens);
    cache.allocator->free(std::span<const BlockId>(blocks));
    tokens += static_cast<std::int64_t>(t.size());
  }
  const double insert_s = std::chrono::duration<double>(Clock::now() - start).count();
  std::vector<TokenId> dst(cache.buffer.size());
  std::int64_t copied = 0;
  const auto t0 = Clock::now();
  while (copied < tokens || copied == 0) {
    std::memcpy(dst.data(), cache.buffer.data(), dst.size() * sizeof(TokenId));
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
    copied += static_cast<std::int64_t>(dst.size());
  }
  const double memcpy_tps =
      static_cast<double>(copied) / std::chrono::duration<double>(Clock::now() - t0).count();
  const double insert_tps = static_cast<double>(tokens) / insert_s;
  state.counters["tokens_per_s"] = insert_tps;
  state.counters["memcpy_tokens_per_s"] = memcpy_tps;
  state.counters["vs_memcpy"] = insert_tps / memcpy_tps;
  // The insert call alone (its walk, the new leaf, and the LRU eviction that makes room).
  const double insert_only_tps = static_cast<double>(tokens) / insert_only_s;
  state.counters["insert_only_tokens_per_s"] = insert_only_tps;
  state.counters["insert_only_vs_memcpy"] = insert_only_tps / memcpy_tps;
  state.counters["cached_tokens"] = static_cast<double>(cache.tree->cached_tokens());
}
BENCHMARK(BM_RadixTree_Insert)->Unit(benchmark::kMicrosecond);

// Nanoseconds per freed block of evict(256) on a tree of state.range(0) cached tokens (steady
// state: refilled outside the timed region); baseline: the same on a 10k-token tree, measured in
// the same run. Flat (ratio ~1) means no per-call work grows with the number of leaves.
double evict_ns_per_block(Cache& cache, std::int64_t target_tokens, int rounds) {
  constexpr std::int64_t kBatch = 256;
  double total_ns = 0.0;
  std::int64_t freed = 0;
  for (int r = 0; r < rounds; ++r) {
    const auto t0 = Clock::now();
    freed += cache.tree->evict(kBatch);
    total_ns += std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
    while (cache.tree->cached_tokens() < target_tokens) cache.add(cache.next_id++);
  }
  return total_ns / static_cast<double>(freed);
}

// The floor any cache pays per freed block at this size: BlockAllocator::uncache of an evictable
// block in a random LRU position, on an allocator as large as the tree's.
struct RawAllocatorFloor {
  BlockAllocator allocator;
  std::vector<BlockId> cached;
  std::uint64_t lcg = 1;

  explicit RawAllocatorFloor(std::int32_t blocks)
      : allocator(blocks + blocks / 8 + 64, kBlockSize) {
    for (std::int32_t i = 0; i < blocks; ++i) cached.push_back(*allocator.allocate_one());
    for (BlockId b : cached) allocator.mark_cached(b);
    shuffle();
    for (BlockId b : cached) allocator.free(b);  // evictable, in random LRU order
    shuffle();
  }
  std::size_t below(std::size_t n) {
    lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<std::size_t>((lcg >> 33) % n);
  }
  void shuffle() {
    for (std::size_t i = cached.size(); i > 1; --i) std::swap(cached[i - 1], cached[below(i)]);
  }
  double ns_per_block(int rounds) {
    constexpr std::size_t kBatch = 256;
    double total_ns = 0.0;
    for (int r = 0; r < rounds; ++r) {
      const auto t0 = Clock::now();
      for (std::size_t k = 0; k < kBatch; ++k) allocator.uncache(cached[cached.size() - 1 - k]);
      total_ns += std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
      const std::size_t kept = cached.size() - kBatch;
      for (std::size_t k = 0; k < kBatch; ++k) {  // refill, then scatter among the rest
        BlockId& slot = cached[kept + k];
        slot = *allocator.allocate_one();
        allocator.mark_cached(slot);
        allocator.free(slot);
      }
      for (std::size_t k = 0; k < kBatch; ++k) std::swap(cached[kept + k], cached[below(kept)]);
    }
    return total_ns / static_cast<double>(kBatch * static_cast<std::size_t>(rounds));
  }
};

// SGLang's eviction, modeled: every evict call collects all leaves and heapifies them by last
// access before popping the least recent. Per freed block this grows with the leaf count.
double heap_rebuild_ns_per_block(std::int64_t leaves, std::int64_t blocks_per_leaf, int rounds) {
  constexpr std::int64_t kBatch = 256;
  std::vector<std::pair<std::int64_t, std::int32_t>> all(static_cast<std::size_t>(leaves));
  for (std::size_t i = 0; i < all.size(); ++i) {
    all[i] = {static_cast<std::int64_t>((i * 2654435761u) % all.size()),
              static_cast<std::int32_t>(i)};
  }
  std::vector<std::pair<std::int64_t, std::int32_t>> heap;
  double total_ns = 0.0;
  std::int64_t freed = 0;
  for (int r = 0; r < rounds; ++r) {
    const auto t0 = Clock::now();
    heap = all;  // the collect
    std::make_heap(heap.begin(), heap.end(), std::greater<>());
    for (std::int64_t got = 0; got < kBatch && !heap.empty(); got += blocks_per_leaf) {
      std::pop_heap(heap.begin(), heap.end(), std::greater<>());
      benchmark::DoNotOptimize(heap.back());
      heap.pop_back();
      freed += blocks_per_leaf;
    }
    total_ns += std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
  }
  return total_ns / static_cast<double>(freed);
}

void BM_RadixTree_EvictPerBlock(benchmark::State& state) {
  const std::int64_t size = state.range(0);
  Cache small(256, 10'000, 4 * 10'000);
  Cache cache(256, size, 4 * size);
  RawAllocatorFloor floor(static_cast<std::int32_t>(size / kBlockSize));
  double ns = 0.0;
  double small_ns = 0.0;
  double floor_ns = 0.0;
  double heap_ns = 0.0;
  std::int64_t n = 0;
  const std::int64_t leaves = cache.tree->num_nodes() - kRoots;
  for (auto _ : state) {
    const double t = evict_ns_per_block(cache, size, 4);
    small_ns += evict_ns_per_block(small, 10'000, 4);
    floor_ns += floor.ns_per_block(4);
    heap_ns += heap_rebuild_ns_per_block(leaves, kTailTokens / kBlockSize, 4);
    state.SetIterationTime(t * 1024e-9);  // 4 rounds of 256 blocks
    ns += t;
    ++n;
  }
  state.counters["ns_per_block"] = ns / static_cast<double>(n);
  state.counters["ns_per_block_10k"] = small_ns / static_cast<double>(n);
  state.counters["vs_10k"] = ns / small_ns;
  state.counters["uncache_ns_per_block"] = floor_ns / static_cast<double>(n);
  state.counters["vs_uncache"] = ns / floor_ns;  // the tree's own share; flat when O(1)
  state.counters["heap_rebuild_ns_per_block"] = heap_ns / static_cast<double>(n);
  state.counters["leaves"] = static_cast<double>(leaves);
}
BENCHMARK(BM_RadixTree_EvictPerBlock)
    ->Arg(10'000)
    ->Arg(100'000)
    ->Arg(1'000'000)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
