// SPDX-License-Identifier: Apache-2.0
// paged_attention: one decode step of one Llama-3-8B attention layer (32 query heads, 8 KV heads,
// head_dim 128, fp16 KV in 16-token pages) over a batch whose pages are scattered, on the CPU:
// paged_decode checked against the double-precision reference, GQA's KV bytes and its measured
// speedup (the same step with one KV head per query head), speed against a streaming read of the
// same bytes timed in the same runs, split-KV + merge_states, and NaN in unwritten slots that
// never reach the output.
//
//   paged_attention [--batch 8] [--context 4096] [--seed 1] [--runs 10] [--json]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <examples/support/cli_main.hpp>
#include <examples/support/json_out.hpp>
#include <functional>
#include <inferkit/attention/attention.hpp>
#include <inferkit/attention/attention_params.hpp>
#include <inferkit/attention/merge_states.hpp>
#include <inferkit/attention/reference.hpp>
#include <inferkit/core/backend.hpp>
#include <inferkit/core/config.hpp>
#include <inferkit/core/error.hpp>
#include <inferkit/core/float16.hpp>
#include <inferkit/core/rng.hpp>
#include <inferkit/kv/block_allocator.hpp>
#include <inferkit/kv/block_table.hpp>
#include <inferkit/kv/paged_kv_cache.hpp>
#include <inferkit/kv/paged_kv_view.hpp>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <utility>
#include <vector>

#if INFERKIT_HAS_OPENMP
#  include <omp.h>
#endif

namespace {

using inferkit::float16;
using inferkit::examples::require;

// One Llama-3-8B attention layer, as vLLM pages it.
constexpr std::int32_t kQoHeads = 32;
constexpr std::int32_t kKvHeads = 8;
constexpr std::int32_t kGroup = kQoHeads / kKvHeads;  // query heads per KV head (GQA)
constexpr std::int32_t kHeadDim = 128;
constexpr std::int32_t kBlockSize = 16;  // tokens per page
constexpr std::int64_t kKvBytesPerToken = std::int64_t{kKvHeads} * kHeadDim * 2 * 2;  // fp16 K+V
constexpr std::int64_t kMaxTokens = 131072;  // batch x context: 512 MiB of K/V
constexpr double kTolerance = 1e-4;
constexpr std::size_t kRowElems = std::size_t{kQoHeads} * kHeadDim;  // q or out of one sequence

struct Flags {
  long long batch = 8;
  long long context = 4096;  // tokens per sequence
  long long seed = 1;
  long long runs = 10;
  bool json = false;
};

constexpr const char* kUsage =
    "usage: paged_attention [--batch N] [--context TOKENS] [--seed S] [--runs N] [--json]\n"
    "  --batch    sequences decoded together, 1..256 (default 8)\n"
    "  --context  tokens per sequence, 1..65536 (default 4096); batch x context <= 131072\n"
    "  --seed     seed of the random K/V/q and of the page shuffle, >= 0 (default 1)\n"
    "  --runs     timed runs, each timing the kernel, a streaming read of the same bytes and\n"
    "             the kernel without GQA back to back; medians and ranges reported, 1..1000\n"
    "             (default 10)\n"
    "  --json     print one JSON object with every figure of the text\n";

void add_flags(CLI::App& app, Flags& f) {
  using inferkit::examples::integer_in;
  app.add_option("--batch", f.batch)->transform(integer_in(1LL, 256LL));
  app.add_option("--context", f.context)->transform(integer_in(1LL, 65536LL));
  app.add_option("--seed", f.seed)
      ->transform(integer_in(0LL, std::numeric_limits<long long>::max()));
  app.add_option("--runs", f.runs)->transform(integer_in(1LL, 1000LL));
  app.add_flag("--json", f.json);
}

void check_flags(const Flags& f) {
  require(f.batch * f.context <= kMaxTokens,
          "--batch x --context = " + std::to_string(f.batch * f.context) +
              " must be <= 131072 tokens (512 MiB of fp16 K/V)");
}

std::size_t at(std::int64_t i) { return static_cast<std::size_t>(i); }

// ---- the batch: allocator, page tables and one layer's paged K/V ----

struct Batch {
  // The tables bind to the allocator by address: a Batch is built in place and never moves.
  Batch(std::int32_t num_blocks, const inferkit::PagedKVCacheShape& shape)
      : allocator(num_blocks, kBlockSize), cache(shape) {}

  inferkit::BlockAllocator allocator;
  inferkit::PagedKVCache<float16> cache;
  std::vector<inferkit::BlockTable> tables;
  inferkit::PageTableBuffers pages;  // CSR page tables of `tables`, what kernels read

  void export_pages() {
    std::vector<const inferkit::BlockTable*> list;
    for (const inferkit::BlockTable& t : tables) list.push_back(&t);
    inferkit::build_page_table(list, pages);
  }
};

// Builds `batch` sequences of `context` tokens with random K/V. A serving engine's free list is
// shuffled by hours of requests coming and going, and its sequences grow side by side, so we
// shuffle the pool's free list first and then grow the sequences round-robin a page at a time:
// each page table ends up scattered over the pool.
std::unique_ptr<Batch> make_batch(const Flags& f, inferkit::Rng& rng) {
  const auto pages_per_seq = static_cast<std::int32_t>((f.context + kBlockSize - 1) / kBlockSize);
  const auto num_blocks = static_cast<std::int32_t>(f.batch) * pages_per_seq;
  inferkit::PagedKVCacheShape shape;
  shape.num_layers = 1;
  shape.num_blocks = num_blocks;
  shape.block_size = kBlockSize;
  shape.num_kv_heads = kKvHeads;
  shape.head_dim = kHeadDim;
  auto batch = std::make_unique<Batch>(num_blocks, shape);
  Batch& b = *batch;

  std::vector<inferkit::BlockId> all(at(num_blocks));
  if (!b.allocator.allocate(std::span<inferkit::BlockId>(all))) {
    throw inferkit::Error(inferkit::ErrorCode::kInvalidState, "fresh pool cannot hand out blocks");
  }
  for (std::size_t i = all.size(); i > 1; --i) {  // Fisher-Yates
    std::swap(all[i - 1], all[rng.below(static_cast<std::uint32_t>(i))]);
  }
  for (inferkit::BlockId id : all) b.allocator.free(id);

  b.tables.reserve(at(f.batch));
  for (long long s = 0; s < f.batch; ++s) b.tables.emplace_back(b.allocator);
  // Random K/V in [-1, 1): one Rng stream per sequence, so the values can be drawn in parallel
  // (a page of every sequence per round); the cache takes one writer per layer, so appends are
  // serial.
  std::vector<inferkit::Rng> streams;
  for (long long s = 0; s < f.batch; ++s) {
    streams.emplace_back(static_cast<std::uint64_t>(f.seed), static_cast<std::uint64_t>(s + 1));
  }
  const std::size_t page_elems = std::size_t{kBlockSize} * kKvHeads * kHeadDim;
  std::vector<float> k(at(f.batch) * page_elems);
  std::vector<float> v(k.size());
  std::vector<std::int64_t> slots(kBlockSize);
  std::vector<inferkit::BlockCopy> copies;  // stays empty: nothing is shared
  for (std::int64_t done = 0; done < f.context; done += kBlockSize) {
    const std::int64_t n = std::min<std::int64_t>(kBlockSize, f.context - done);
    const std::size_t elems = at(n * kKvHeads * kHeadDim);
#if INFERKIT_HAS_OPENMP
#  pragma omp parallel for schedule(static)
#endif
    for (long long s = 0; s < f.batch; ++s) {
      inferkit::Rng& r = streams[at(s)];
      for (std::size_t i = 0; i < elems; ++i) k[at(s) * page_elems + i] = 2.0f * r.uniform() - 1.0f;
      for (std::size_t i = 0; i < elems; ++i) v[at(s) * page_elems + i] = 2.0f * r.uniform() - 1.0f;
    }
    const std::span<std::int64_t> new_slots(slots.data(), at(n));
    for (std::size_t s = 0; s < b.tables.size(); ++s) {
      if (!b.tables[s].append_tokens(b.allocator, n, new_slots, copies)) {
        throw inferkit::Error(inferkit::ErrorCode::kInvalidState,
                              "pool sized for the batch ran out");
      }
      b.cache.append(0, new_slots, std::span<const float>(k).subspan(s * page_elems, elems),
                     std::span<const float>(v).subspan(s * page_elems, elems));
    }
  }
  b.export_pages();
  return batch;
}

// Share of logically consecutive pages that are also physically adjacent (1.0 = contiguous).
double adjacent_page_fraction(const inferkit::PageTableBuffers& pages) {
  std::int64_t pairs = 0;
  std::int64_t adjacent = 0;
  for (std::size_t s = 0; s + 1 < pages.indptr.size(); ++s) {
    for (std::int32_t i = pages.indptr[s] + 1; i < pages.indptr[s + 1]; ++i) {
      ++pairs;
      if (pages.indices[at(i)] == pages.indices[at(i - 1)] + 1) ++adjacent;
    }
  }
  return pairs == 0 ? 0.0 : static_cast<double>(adjacent) / static_cast<double>(pairs);
}

// ---- attention calls ----

// One decode step: q [num_seqs][32][128] -> out [num_seqs][32][128], lse [num_seqs][32].
void decode(const inferkit::PagedKVCache<float16>& cache, const inferkit::PageTableView& pages,
            const float* q, float* out, float* lse,
            std::int32_t kv_split_tokens = inferkit::kDefaultKvSplitTokens, bool causal = true) {
  inferkit::PagedDecodeArgs<float16> args;
  args.q = q;
  args.kv = cache.view(0);
  args.pages = pages;
  args.num_qo_heads = kQoHeads;
  args.head_dim = kHeadDim;
  args.out = out;
  args.lse = lse;
  args.kv_split_tokens = kv_split_tokens;
  args.params.causal = causal;
  inferkit::paged_decode(inferkit::cpu{}, args);
}

// The same decode on the batch's own (GQA) cache.
void decode(const Batch& b, const inferkit::PageTableView& pages, const float* q, float* out,
            float* lse, std::int32_t kv_split_tokens = inferkit::kDefaultKvSplitTokens,
            bool causal = true) {
  decode(b.cache, pages, q, out, lse, kv_split_tokens, causal);
}

// The batch's pool without GQA: one KV head per query head (32), the layout a multi-head
// attention model of the same size pages. Zero-filled: only its timing is used.
inferkit::PagedKVCache<float16> multi_head_cache(const Batch& b) {
  inferkit::PagedKVCacheShape shape;
  shape.num_layers = 1;
  shape.num_blocks = b.allocator.num_blocks();
  shape.block_size = kBlockSize;
  shape.num_kv_heads = kQoHeads;
  shape.head_dim = kHeadDim;
  return inferkit::PagedKVCache<float16>(shape);
}

// Largest |got - want|; infinity if anything is not finite.
template <class T>
double max_abs_diff(std::span<const float> got, std::span<const T> want) {
  double worst = 0.0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double d = std::abs(static_cast<double>(got[i]) - static_cast<double>(want[i]));
    if (!std::isfinite(d)) return std::numeric_limits<double>::infinity();
    worst = std::max(worst, d);
  }
  return worst;
}

struct MaxError {
  double out = 0.0;  // max abs error of the outputs
  double lse = 0.0;  // and of the log-sum-exp
};

// Sequence s of `out`/`lse` (all 32 heads) against the double-precision reference, which reads
// the sequence's K/V gathered back into contiguous tensors.
MaxError check_against_reference(const Batch& b, std::int32_t s, const std::vector<float>& q,
                                 const std::vector<float>& out, const std::vector<float>& lse) {
  const inferkit::BlockTable& table = b.tables[at(s)];
  std::vector<float> k(at(table.num_tokens() * kKvHeads * kHeadDim));
  std::vector<float> v(k.size());
  b.cache.gather(0, table, k, v);
  inferkit::AttentionShape shape;
  shape.num_q_tokens = 1;
  shape.num_kv_tokens = static_cast<std::int32_t>(table.num_tokens());
  shape.num_qo_heads = kQoHeads;
  shape.num_kv_heads = kKvHeads;
  shape.head_dim = kHeadDim;
  std::vector<double> want_out(kRowElems);
  std::vector<double> want_lse(kQoHeads);
  const std::span<const float> qs(q.data() + at(s) * kRowElems, kRowElems);
  inferkit::reference_attention<float>(qs, k, v, shape, inferkit::AttentionParams{}, want_out,
                                       want_lse);
  const std::span<const float> got_out(out.data() + at(s) * kRowElems, kRowElems);
  const std::span<const float> got_lse(lse.data() + at(s) * kQoHeads, at(kQoHeads));
  return {max_abs_diff<double>(got_out, want_out), max_abs_diff<double>(got_lse, want_lse)};
}

// ---- timing ----

double seconds_of(const std::function<void()>& body) {
  const auto start = std::chrono::steady_clock::now();
  body();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

int num_threads() {
#if INFERKIT_HAS_OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

// A plain parallel read of `bytes` of memory (a sum of 64-bit integers) with the same OpenMP
// threads as the kernel: the baseline of a memory-bound kernel reading the same number of bytes.
class StreamingRead {
 public:
  explicit StreamingRead(std::int64_t bytes)
      : n_((bytes / 32 + 1) * 4), buffer_(new std::uint64_t[at(n_)]) {
    std::uint64_t* data = buffer_.get();
#if INFERKIT_HAS_OPENMP
#  pragma omp parallel for schedule(static)
#endif
    for (std::int64_t i = 0; i < n_; ++i) data[i] = static_cast<std::uint64_t>(i);  // first touch
  }

  [[nodiscard]] std::int64_t bytes() const { return n_ * 8; }

  void operator()() const {
    const std::uint64_t* data = buffer_.get();
    std::uint64_t sum = 0;
#if INFERKIT_HAS_OPENMP
#  pragma omp parallel for schedule(static) reduction(+ : sum)
#endif
    for (std::int64_t i = 0; i < n_; i += 4) {
      sum += data[i] + data[i + 1] + data[i + 2] + data[i + 3];
    }
    const auto n = static_cast<std::uint64_t>(n_);
    if (sum != n * (n - 1) / 2) {  // also keeps the compiler from dropping the loop
      throw inferkit::Error(inferkit::ErrorCode::kInvalidState, "streaming read: wrong sum");
    }
  }

 private:
  std::int64_t n_;  // 64-bit words, a multiple of 4
  std::unique_ptr<std::uint64_t[]> buffer_;
};

// The median and the range of a set of samples.
struct Spread {
  double median = 0.0;
  double min = 0.0;
  double max = 0.0;
};

Spread spread_of(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  return {samples[samples.size() / 2], samples.front(), samples.back()};
}

// ---- the program ----

struct SplitResult {
  std::int32_t pages = 0;
  std::int32_t first_half_pages = 0;
  MaxError diff;  // merged vs one unsplit decode
};

// Split-KV by hand on sequence 0: decode its first and second half of pages separately (two
// page tables into the same pages), each with its LSE, then merge_states combines them.
SplitResult split_and_merge(const Batch& b, const std::vector<float>& q) {
  const inferkit::PageTableBuffers& csr = b.pages;
  const std::int32_t* indices = csr.indices.data() + csr.indptr[0];
  SplitResult r;
  r.pages = csr.indptr[1] - csr.indptr[0];
  r.first_half_pages = r.pages / 2;
  // The first half ends on a page boundary, so its last page is full; the second half ends
  // where the sequence does. The decode query comes after every key of either half, so each
  // half is attended without a causal mask (as cascade attention attends a shared prefix); a
  // one-page sequence leaves the first half empty, which yields LSE -inf and weight 0.
  const std::int32_t first_indptr[2] = {0, r.first_half_pages};
  const std::int32_t first_last[1] = {kBlockSize};
  const std::int32_t second_indptr[2] = {0, r.pages - r.first_half_pages};
  const std::int32_t second_last[1] = {csr.last_page_len[0]};
  const std::int32_t full_indptr[2] = {0, r.pages};
  const inferkit::PageTableView first{first_indptr, indices, first_last, 1};
  const inferkit::PageTableView second{second_indptr, indices + r.first_half_pages, second_last, 1};
  const inferkit::PageTableView full{full_indptr, indices, second_last, 1};

  // Partial states [2][32][128] and LSEs [2][32], the layout merge_states takes.
  std::vector<float> part_out(2 * kRowElems);
  std::vector<float> part_lse(2 * std::size_t{kQoHeads});
  decode(b, first, q.data(), part_out.data(), part_lse.data(), 0, false);
  decode(b, second, q.data(), part_out.data() + kRowElems, part_lse.data() + kQoHeads, 0, false);
  std::vector<float> merged_out(kRowElems);
  std::vector<float> merged_lse(kQoHeads);
  inferkit::merge_states(inferkit::cpu{}, part_out, part_lse, 2, kHeadDim, merged_out, merged_lse);

  std::vector<float> full_out(kRowElems);
  std::vector<float> full_lse(kQoHeads);
  decode(b, full, q.data(), full_out.data(), full_lse.data(), 0);  // one pass, no split
  r.diff = {max_abs_diff<float>(merged_out, full_out), max_abs_diff<float>(merged_lse, full_lse)};
  return r;
}

struct UnwrittenResult {
  std::int32_t seq = 0;
  std::int64_t tokens = 0;
  std::int32_t nan_slots = 0;
  bool truncated = false;
  bool finite = false;
  MaxError err;
};

// The last sequence's last page gets unused slots (a page-aligned sequence is truncated by 8
// tokens, as after rejected speculative tokens), and every unused slot of that page is filled
// with NaN in K and V. The kernel reads only last_page_len slots of a last page, so nothing of
// it may reach the output.
UnwrittenResult poison_unwritten_slots(Batch& b, const std::vector<float>& q) {
  UnwrittenResult r;
  r.seq = static_cast<std::int32_t>(b.tables.size()) - 1;
  inferkit::BlockTable& table = b.tables[at(r.seq)];
  if (table.num_tokens() % kBlockSize == 0) {
    table.truncate(b.allocator, table.num_tokens() - kBlockSize / 2);
    r.truncated = true;
  }
  r.tokens = table.num_tokens();
  const inferkit::BlockId last = table.blocks().back();
  const inferkit::PagedKVView<float16> kv = b.cache.view(0);
  const float16 nan(std::numeric_limits<float>::quiet_NaN());
  for (std::int32_t slot = table.last_block_tokens(); slot < kBlockSize; ++slot, ++r.nan_slots) {
    for (std::int32_t h = 0; h < kKvHeads; ++h) {
      std::fill_n(kv.k + kv.offset(last, h, slot), kHeadDim, nan);
      std::fill_n(kv.v + kv.offset(last, h, slot), kHeadDim, nan);
    }
  }
  b.export_pages();
  std::vector<float> out(b.tables.size() * kRowElems);
  std::vector<float> lse(b.tables.size() * kQoHeads);
  decode(b, b.pages.view(), q.data(), out.data(), lse.data());
  r.finite = std::all_of(out.begin(), out.end(), [](float x) { return std::isfinite(x); }) &&
             std::all_of(lse.begin(), lse.end(), [](float x) { return std::isfinite(x); });
  r.err = check_against_reference(b, r.seq, q, out, lse);
  return r;
}

int run(const Flags& f) {
  check_flags(f);
  inferkit::Rng rng(static_cast<std::uint64_t>(f.seed));
  const std::unique_ptr<Batch> owned = make_batch(f, rng);
  Batch& b = *owned;
  const auto batch = static_cast<std::int32_t>(f.batch);
  const auto total_pages = static_cast<std::int64_t>(b.pages.indices.size());
  const double adjacent = adjacent_page_fraction(b.pages);
  std::vector<float> q(at(f.batch) * kRowElems);
  for (float& x : q) x = 2.0f * rng.uniform() - 1.0f;

  // 2. Correctness: the batch in one call, the first and last sequences checked head by head.
  std::vector<float> out(q.size());
  std::vector<float> lse(at(f.batch) * kQoHeads);
  decode(b, b.pages.view(), q.data(), out.data(), lse.data());
  std::vector<std::int32_t> checked = {0};
  if (batch > 1) checked.push_back(batch - 1);
  MaxError err;
  for (std::int32_t s : checked) {
    const MaxError e = check_against_reference(b, s, q, out, lse);
    err.out = std::max(err.out, e.out);
    err.lse = std::max(err.lse, e.lse);
  }
  const bool pass = err.out <= kTolerance && err.lse <= kTolerance;

  // 3. GQA: each KV head's pages are read once for its 4 query heads.
  const std::int64_t kv_bytes = f.batch * f.context * kKvBytesPerToken;
  const std::int64_t kv_bytes_no_gqa = kv_bytes * kGroup;

  // 4. Speed: in every run, back to back, the kernel, a streaming read of the same bytes, and
  // the same step without GQA (4x the bytes), so drift on a shared machine hits all three
  // alike; ratios are taken per run and reported with their range.
  const inferkit::PagedKVCache<float16> mha = multi_head_cache(b);
  const StreamingRead stream(kv_bytes);
  std::vector<double> gqa_times;
  std::vector<double> stream_times;
  std::vector<double> mha_times;
  std::vector<double> stream_ratios;  // (KV bytes / kernel time) / (bytes / stream time)
  std::vector<double> gqa_speedups;   // time without GQA / time with it
  const auto step = [&] { decode(b, b.pages.view(), q.data(), out.data(), lse.data()); };
  const auto step_mha = [&] { decode(mha, b.pages.view(), q.data(), out.data(), lse.data()); };
  step();  // warm-up: first touch of outputs and scratch
  stream();
  step_mha();
  for (long long r = 0; r < f.runs; ++r) {
    gqa_times.push_back(seconds_of(step));
    stream_times.push_back(seconds_of([&] { stream(); }));
    mha_times.push_back(seconds_of(step_mha));
    stream_ratios.push_back(static_cast<double>(kv_bytes) / gqa_times.back() /
                            (static_cast<double>(stream.bytes()) / stream_times.back()));
    gqa_speedups.push_back(mha_times.back() / gqa_times.back());
  }
  const Spread gqa_s = spread_of(gqa_times);
  const Spread stream_s = spread_of(stream_times);
  const Spread mha_s = spread_of(mha_times);
  const Spread ratio = spread_of(stream_ratios);
  const Spread speedup = spread_of(gqa_speedups);
  const double decode_bps = static_cast<double>(kv_bytes) / gqa_s.median;
  const double stream_bps = static_cast<double>(stream.bytes()) / stream_s.median;

  // 5. Split-KV and merge; 6. unwritten slots (changes the last sequence, so it comes last).
  const SplitResult split = split_and_merge(b, q);
  const UnwrittenResult unwritten = poison_unwritten_slots(b, q);
  const bool ok = pass && unwritten.finite;

  if (f.json) {
    using inferkit::examples::fixed;
    using inferkit::examples::significant;
    // Errors keep the 4 significant digits of the text's "%.3e".
    inferkit::examples::print_json({
        {"model", "llama-3-8b layer"},
        {"q_heads", kQoHeads},
        {"kv_heads", kKvHeads},
        {"head_dim", kHeadDim},
        {"block_size", kBlockSize},
        {"batch", f.batch},
        {"context", f.context},
        {"seed", f.seed},
        {"threads", num_threads()},
        {"pages", total_pages},
        {"kv_mib", fixed(static_cast<double>(kv_bytes) / (1024.0 * 1024.0), 1)},
        {"adjacent_page_fraction", fixed(adjacent, 4)},
        {"correctness",
         {
             {"sequences", checked.size()},
             {"max_abs_err_out", significant(err.out, 4)},
             {"max_abs_err_lse", significant(err.lse, 4)},
             {"bound", kTolerance},
             {"pass", pass},
         }},
        {"gqa",
         {
             {"kv_bytes_per_step", kv_bytes},
             {"kv_bytes_per_step_without_gqa", kv_bytes_no_gqa},
             {"bytes_ratio", kGroup},
             {"decode_ms_without_gqa", fixed(1e3 * mha_s.median, 3)},
             {"speedup", fixed(speedup.median, 3)},
             {"speedup_min", fixed(speedup.min, 3)},
             {"speedup_max", fixed(speedup.max, 3)},
         }},
        {"speed",
         {
             {"runs", f.runs},
             {"decode_ms", fixed(1e3 * gqa_s.median, 3)},
             {"decode_gb_per_s", fixed(decode_bps / 1e9, 2)},
             {"stream_gb_per_s", fixed(stream_bps / 1e9, 2)},
             {"ratio", fixed(ratio.median, 3)},
             {"ratio_min", fixed(ratio.min, 3)},
             {"ratio_max", fixed(ratio.max, 3)},
             {"may_be_cached", kv_bytes < (std::int64_t{64} << 20)},
         }},
        {"merge",
         {
             {"pages", split.pages},
             {"first_half_pages", split.first_half_pages},
             {"split_tokens", inferkit::kDefaultKvSplitTokens},
             {"max_abs_diff_out", significant(split.diff.out, 4)},
             {"max_abs_diff_lse", significant(split.diff.lse, 4)},
         }},
        {"unwritten",
         {
             {"sequence", unwritten.seq},
             {"tokens", unwritten.tokens},
             {"nan_slots", unwritten.nan_slots},
             {"truncated", unwritten.truncated},
             {"finite", unwritten.finite},
             {"max_abs_err_out", significant(unwritten.err.out, 4)},
         }},
    });
    return ok ? 0 : 1;
  }

  const double mib = 1024.0 * 1024.0;
  std::printf(
      "paged_attention: one decode step of a Llama-3-8B attention layer on the CPU\n"
      "  %d query heads, %d KV heads (GQA group %d), head_dim %d, fp16 K/V, pages of %d tokens\n"
      "  batch %lld x context %lld tokens = %lld pages (%.1f MiB of K+V), seed %lld, "
      "%d threads\n"
      "  page tables are non-contiguous, as a real block table leaves them: pages come from a\n"
      "  shuffled free list and the sequences grew side by side, a page at a time; %.1f%% of\n"
      "  logically consecutive pages are physically adjacent\n\n",
      kQoHeads, kKvHeads, kGroup, kHeadDim, kBlockSize, f.batch, f.context,
      static_cast<long long>(total_pages), static_cast<double>(kv_bytes) / mib, f.seed,
      num_threads(), 100.0 * adjacent);
  std::printf(
      "correctness vs the double-precision reference (sequence%s %s, all %d heads):\n"
      "  max abs error: output %.2e, LSE %.2e (bound %.0e): %s\n\n",
      checked.size() > 1 ? "s" : "",
      checked.size() > 1 ? ("0 and " + std::to_string(batch - 1)).c_str() : "0", kQoHeads, err.out,
      err.lse, kTolerance, pass ? "PASS" : "FAIL");
  std::printf(
      "GQA: KV bytes read per decode step of this layer\n"
      "  batch %lld x context %lld x %d KV heads x %d x 2 bytes x 2 (K and V) = %lld bytes "
      "(%.1f MiB)\n"
      "  if each of the %d query heads read its own K/V: %lld bytes (%.1f MiB, %dx)\n"
      "  decode does few flops per KV byte, so it is bound by memory: reading each KV head once\n"
      "  for its %d query heads cuts the bytes %dx. Measured, the same step with %d KV heads\n"
      "  takes %.3f ms against %.3f ms: GQA makes it %.2fx faster (%.2f-%.2f over the runs)\n\n",
      f.batch, f.context, kKvHeads, kHeadDim, static_cast<long long>(kv_bytes),
      static_cast<double>(kv_bytes) / mib, kQoHeads, static_cast<long long>(kv_bytes_no_gqa),
      static_cast<double>(kv_bytes_no_gqa) / mib, kGroup, kGroup, kGroup, kQoHeads,
      1e3 * mha_s.median, 1e3 * gqa_s.median, speedup.median, speedup.min, speedup.max);
  std::printf(
      "speed (%lld runs, %d threads; each run times the kernel, a streaming read of the same\n"
      "  %.1f MiB and the kernel without GQA back to back, so the ratios are per run):\n"
      "  paged_decode: %.3f ms per step (median) = %.2f GB/s of KV\n"
      "  streaming read of the same bytes (a parallel sum): %.2f GB/s (median)\n"
      "  paged_decode / streaming read = %.2f (median; %.2f-%.2f over the runs)%s\n"
      "  (bench_attention measures the same ratio with a vectorized read over a 1 GiB buffer:\n"
      "  quote that one, from scripts/bench.sh)\n\n",
      f.runs, num_threads(), static_cast<double>(kv_bytes) / mib, 1e3 * gqa_s.median,
      decode_bps / 1e9, stream_bps / 1e9, ratio.median, ratio.min, ratio.max,
      kv_bytes < (std::int64_t{64} << 20)
          ? "\n  (K/V this small may sit in the CPU caches; the defaults are memory-bound)"
          : "");
  std::printf(
      "split-KV + merge (sequence 0, %d pages): pages [0, %d) and [%d, %d) decoded separately,\n"
      "  each with its LSE, and combined by merge_states (paged_decode itself does this per %d "
      "tokens)\n"
      "  merged vs one full decode: max abs diff output %.2e, LSE %.2e\n"
      "  this is how split-KV spreads a long sequence over threads and cascade attention shares a "
      "prefix\n\n",
      split.pages, split.first_half_pages, split.first_half_pages, split.pages,
      inferkit::kDefaultKvSplitTokens, split.diff.out, split.diff.lse);
  std::printf(
      "unwritten slots: sequence %d holds %lld tokens, so its last page has %d unused slots%s\n"
      "  NaN in K and V of the %d unused slots: output finite: %s, max abs error vs reference "
      "%.2e\n"
      "  (the kernel reads only last_page_len slots of a last page, never the rest)\n",
      unwritten.seq, static_cast<long long>(unwritten.tokens), unwritten.nan_slots,
      unwritten.truncated
          ? "\n  (its last 8 tokens were dropped, as after rejected speculative tokens)"
          : "",
      unwritten.nan_slots, unwritten.finite ? "yes" : "NO", unwritten.err.out);
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return inferkit::examples::run_main("paged_attention", kUsage, [&](CLI::App& app) {
    Flags f;
    add_flags(app, f);
    app.parse(argc, argv);
    return run(f);
  });
}
