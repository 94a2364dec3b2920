// SPDX-License-Identifier: Apache-2.0
// prefix_cache: the lesson's prefix-cache exercise on inferkit's RadixTree. 1,000 requests, 60%
// of which start with one of 5 common prefixes, go through a cache limited to 500 tokens (LRU
// and segmented LRU) and an unbounded one; then N requests sharing a 2,000-token system prompt
// show the prefill tokens a hit saves and, from the roofline model, the prefill time.
//
//   prefix_cache [--requests 1000] [--capacity 500] [--shared 0.6] [--prefixes 5] [--json]
//
// Each request is matched first (the hit), then run: it shares the matched blocks, gets fresh
// blocks for the rest, inserts its whole prompt into the cache and finishes.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <examples/support/cli.hpp>
#include <inferkit/core/error.hpp>
#include <inferkit/core/model_shape.hpp>
#include <inferkit/core/rng.hpp>
#include <inferkit/kv/block_allocator.hpp>
#include <inferkit/perf/hardware.hpp>
#include <inferkit/perf/roofline.hpp>
#include <inferkit/prefix/radix_tree.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace {

using inferkit::examples::require;
using inferkit::examples::UsageError;

struct Flags {
  long long requests = 1000;
  long long capacity = 500;  // tokens (the lesson's max_entries: one trie entry per token)
  double shared = 0.6;
  long long prefixes = 5;
  long long prefix_tokens = 64;
  long long suffix_tokens = 32;
  long long vocab = 32000;
  long long block_size = 1;
  long long seed = 1;
  std::string model = "llama-3-70b";
  std::string hardware = "a100-80gb";
  long long gpus = 1;
  long long system_tokens = 2000;
  long long user_tokens = 200;
  long long sp_requests = 100;
  bool json = false;
};

void print_usage() {
  std::printf(
      "usage: prefix_cache [--requests N] [--capacity TOKENS] [--shared FRACTION]\n"
      "                    [--prefixes N] [--prefix-tokens N] [--suffix-tokens N] [--vocab N]\n"
      "                    [--block-size N] [--seed N] [--model NAME] [--hardware NAME]\n"
      "                    [--gpus N] [--system-tokens N] [--user-tokens N]\n"
      "                    [--sp-requests N] [--json]\n"
      "defaults: --requests 1000 --capacity 500 --shared 0.6 --prefixes 5 --prefix-tokens 64\n"
      "          --suffix-tokens 32 --vocab 32000 --block-size 1 --seed 1\n"
      "          --model llama-3-70b --hardware a100-80gb --gpus 1 --system-tokens 2000\n"
      "          --user-tokens 200 --sp-requests 100\n");
}

Flags parse_flags(int argc, char** argv) {
  Flags f;
  inferkit::examples::ArgParser args(argc, argv);
  while (args.next()) {
    const std::string& flag = args.flag();
    if (flag == "--json") {
      f.json = true;
      continue;
    }
    if (args.help()) {
      print_usage();
      std::exit(0);
    }
    require(args.has_value(), flag + " needs a value (see --help)");
    if (flag == "--requests")
      f.requests = args.integer();
    else if (flag == "--capacity")
      f.capacity = args.integer();
    else if (flag == "--shared")
      f.shared = args.number();
    else if (flag == "--prefixes")
      f.prefixes = args.integer();
    else if (flag == "--prefix-tokens")
      f.prefix_tokens = args.integer();
    else if (flag == "--suffix-tokens")
      f.suffix_tokens = args.integer();
    else if (flag == "--vocab")
      f.vocab = args.integer();
    else if (flag == "--block-size")
      f.block_size = args.integer();
    else if (flag == "--seed")
      f.seed = args.integer();
    else if (flag == "--model")
      f.model = args.value();
    else if (flag == "--hardware")
      f.hardware = args.value();
    else if (flag == "--gpus")
      f.gpus = args.integer();
    else if (flag == "--system-tokens")
      f.system_tokens = args.integer();
    else if (flag == "--user-tokens")
      f.user_tokens = args.integer();
    else if (flag == "--sp-requests")
      f.sp_requests = args.integer();
    else
      throw UsageError{"unknown flag " + flag + " (see --help)"};
  }
  constexpr long long kMax = 1'000'000;
  require(f.requests >= 1 && f.requests <= kMax, "--requests", f.requests, "in [1, 1000000]");
  require(f.capacity >= 0 && f.capacity <= kMax, "--capacity", f.capacity, "in [0, 1000000]");
  require(f.shared >= 0.0 && f.shared <= 1.0, "--shared", std::to_string(f.shared), "in [0, 1]");
  require(f.prefixes >= 1 && f.prefixes <= 10000, "--prefixes", f.prefixes, "in [1, 10000]");
  require(f.prefix_tokens >= 1 && f.prefix_tokens <= 100000, "--prefix-tokens", f.prefix_tokens,
          "in [1, 100000]");
  require(f.suffix_tokens >= 1 && f.suffix_tokens <= 100000, "--suffix-tokens", f.suffix_tokens,
          "in [1, 100000] (unique tails keep requests distinct)");
  require(f.vocab >= 2 && f.vocab <= 2'000'000'000, "--vocab", f.vocab, "in [2, 2^31)");
  require(f.block_size >= 1 && f.block_size <= 1024, "--block-size", f.block_size, "in [1, 1024]");
  require(f.seed >= 0, "--seed", f.seed, ">= 0");
  require(f.gpus >= 1 && f.gpus <= 1024, "--gpus", f.gpus, "in [1, 1024]");
  require(f.system_tokens >= 1 && f.system_tokens <= 1'000'000, "--system-tokens", f.system_tokens,
          "in [1, 1000000]");
  require(f.user_tokens >= 1 && f.user_tokens <= 1'000'000, "--user-tokens", f.user_tokens,
          "in [1, 1000000]");
  require(f.sp_requests >= 1 && f.sp_requests <= 100000, "--sp-requests", f.sp_requests,
          "in [1, 100000]");
  return f;
}

using inferkit::BlockAllocator;
using inferkit::BlockId;
using inferkit::TokenId;

std::vector<TokenId> random_tokens(inferkit::Rng& rng, long long n, long long vocab) {
  std::vector<TokenId> t(static_cast<std::size_t>(n));
  for (TokenId& x : t) x = static_cast<TokenId>(rng.below(static_cast<std::uint32_t>(vocab)));
  return t;
}

// One request through the cache: match, share the hit, allocate the rest, insert, finish.
void serve(inferkit::RadixTree& tree, BlockAllocator& allocator, const std::vector<TokenId>& prompt,
           long long& matched_tokens) {
  const inferkit::PrefixMatch hit = tree.match(prompt);
  matched_tokens = hit.num_tokens;
  const std::int32_t bs = allocator.block_size();
  const auto pages =
      static_cast<std::int32_t>((static_cast<std::int64_t>(prompt.size()) + bs - 1) / bs);
  std::vector<BlockId> blocks = hit.blocks;
  allocator.retain(std::span<const BlockId>(blocks));
  std::vector<BlockId> fresh(static_cast<std::size_t>(pages) - blocks.size());
  if (!allocator.allocate(std::span<BlockId>(fresh))) {
    throw inferkit::Error(inferkit::ErrorCode::kOutOfRange, "allocator too small");
  }
  for (std::size_t i = 0; i < fresh.size(); ++i) {
    const std::int64_t end =
        std::min<std::int64_t>(static_cast<std::int64_t>(blocks.size() + i + 1) * bs,
                               static_cast<std::int64_t>(prompt.size()));
    allocator.set_block_tokens(
        fresh[i],
        static_cast<std::int32_t>(end - static_cast<std::int64_t>(blocks.size() + i) * bs));
  }
  blocks.insert(blocks.end(), fresh.begin(), fresh.end());
  (void)tree.insert(prompt, blocks);
  allocator.free(std::span<const BlockId>(blocks));  // finished: cached blocks stay evictable
}

struct ExerciseResult {
  inferkit::PrefixCacheStats stats;
};

// The lesson's workload: `shared` of the requests are one of `prefixes` common prefixes plus a
// unique tail; the rest are unique throughout. Same seed, same requests for every cache.
ExerciseResult run_exercise(const Flags& f, std::optional<long long> capacity,
                            inferkit::EvictionPolicy policy) {
  inferkit::Rng rng(static_cast<std::uint64_t>(f.seed));
  std::vector<std::vector<TokenId>> common;
  for (long long i = 0; i < f.prefixes; ++i)
    common.push_back(random_tokens(rng, f.prefix_tokens, f.vocab));
  const long long len = f.prefix_tokens + f.suffix_tokens;
  const long long pages = (len + f.block_size - 1) / f.block_size;
  // Room for everything cached (bounded: capacity; unbounded: every request) plus one running
  // request, so only the tree's policy evicts.
  const long long cache_pages = capacity ? *capacity / f.block_size : f.requests * pages;
  BlockAllocator allocator(static_cast<std::int32_t>(cache_pages + pages + 1),
                           static_cast<std::int32_t>(f.block_size));
  inferkit::RadixTreeOptions options;
  if (capacity) options.max_cached_tokens = *capacity;
  options.policy = policy;
  inferkit::RadixTree tree(allocator, options);
  for (long long r = 0; r < f.requests; ++r) {
    std::vector<TokenId> prompt;
    if (rng.uniform_double() < f.shared) {
      prompt = common[rng.below(static_cast<std::uint32_t>(f.prefixes))];
      const auto tail = random_tokens(rng, f.suffix_tokens, f.vocab);
      prompt.insert(prompt.end(), tail.begin(), tail.end());
    } else {
      prompt = random_tokens(rng, len, f.vocab);
    }
    long long matched = 0;
    serve(tree, allocator, prompt, matched);
  }
  return {tree.stats()};
}

struct SystemPromptResult {
  long long tokens_saved = 0;
  double ms_saved_per_hit = 0.0;
  double ms_saved_total = 0.0;
  double ms_full_prefill = 0.0;
  long long hits = 0;
  double ms_saved_four = 0.0;  // a full system-prompt hit on 4 devices of the same preset
};

// N requests share one system prompt; each adds its own user message.
SystemPromptResult run_system_prompt(const Flags& f) {
  const inferkit::ModelShape shape = inferkit::model_preset(f.model);
  const inferkit::Hardware hw =
      inferkit::tensor_parallel(inferkit::hardware_preset(f.hardware), static_cast<int>(f.gpus));
  constexpr std::int32_t kBlock = 16;  // vLLM's default page
  inferkit::Rng rng(static_cast<std::uint64_t>(f.seed) + 1);
  const std::vector<TokenId> system = random_tokens(rng, f.system_tokens, f.vocab);
  const long long len = f.system_tokens + f.user_tokens;
  const long long pages = (len + kBlock - 1) / kBlock;
  BlockAllocator allocator(static_cast<std::int32_t>(pages * 2 + 1), kBlock);
  inferkit::RadixTree tree(allocator);
  SystemPromptResult out;
  for (long long r = 0; r < f.sp_requests; ++r) {
    std::vector<TokenId> prompt = system;
    const auto user = random_tokens(rng, f.user_tokens, f.vocab);
    prompt.insert(prompt.end(), user.begin(), user.end());
    long long matched = 0;
    serve(tree, allocator, prompt, matched);
    out.tokens_saved += matched;
    if (matched > 0) {
      ++out.hits;
      const double ms =
          1e3 * inferkit::prefix_reuse_seconds_saved(hw, shape, {}, matched, len - matched);
      out.ms_saved_total += ms;
    }
  }
  out.ms_saved_per_hit = out.hits > 0 ? out.ms_saved_total / static_cast<double>(out.hits) : 0.0;
  out.ms_full_prefill = 1e3 * inferkit::prefill_cost(hw, shape, {}, len).seconds;
  const inferkit::Hardware four =
      inferkit::tensor_parallel(inferkit::hardware_preset(f.hardware), 4);
  out.ms_saved_four =
      1e3 * inferkit::prefix_reuse_seconds_saved(four, shape, {}, f.system_tokens, f.user_tokens);
  return out;
}

int run(int argc, char** argv) {
  const Flags f = parse_flags(argc, argv);
  const auto slru = run_exercise(f, f.capacity, inferkit::EvictionPolicy::kSegmentedLru);
  const auto lru = run_exercise(f, f.capacity, inferkit::EvictionPolicy::kLru);
  const auto unbounded = run_exercise(f, std::nullopt, inferkit::EvictionPolicy::kLru);
  const SystemPromptResult sp = run_system_prompt(f);
  const bool passes = slru.stats.request_hit_rate() > 0.55;
  if (f.json) {
    auto cache = [](const ExerciseResult& r) {
      char buf[160];
      std::snprintf(buf, sizeof buf,
                    R"({"hit_rate":%.4f,"token_hit_rate":%.4f,"evicted_blocks":%lld})",
                    r.stats.request_hit_rate(), r.stats.token_hit_rate(),
                    static_cast<long long>(r.stats.evicted_blocks));
      return std::string(buf);
    };
    std::printf(
        "{\"bounded\":%s,\"bounded_lru\":%s,\"unbounded\":%s,"
        "\"system_prompt\":{\"tokens_saved\":%lld,\"ms_saved_per_request\":%.1f,"
        "\"requests\":%lld,\"full_prefill_ms\":%.1f}}\n",
        cache(slru).c_str(), cache(lru).c_str(), cache(unbounded).c_str(), sp.tokens_saved,
        sp.ms_saved_per_hit, f.sp_requests, sp.ms_full_prefill);
    return 0;
  }
  std::printf(
      "Prefix cache exercise: %lld requests, %.0f%% start with one of %lld prefixes of "
      "%lld tokens,\nthen a unique tail of %lld tokens (the rest: %lld unique tokens); "
      "vocab %lld, block size %lld, seed %lld\n\n",
      f.requests, 100.0 * f.shared, f.prefixes, f.prefix_tokens, f.suffix_tokens,
      f.prefix_tokens + f.suffix_tokens, f.vocab, f.block_size, f.seed);
  std::printf("%-34s %16s %15s %15s\n", "cache", "request hit rate", "token hit rate",
              "evicted blocks");
  auto row = [](const std::string& name, const ExerciseResult& r) {
    std::printf("%-34s %15.1f%% %14.1f%% %15lld\n", name.c_str(),
                100.0 * r.stats.request_hit_rate(), 100.0 * r.stats.token_hit_rate(),
                static_cast<long long>(r.stats.evicted_blocks));
  };
  const std::string cap = std::to_string(f.capacity) + " tokens";
  row("bounded " + cap + ", segmented LRU", slru);
  row("bounded " + cap + ", plain LRU", lru);
  row("unbounded", unbounded);
  std::printf("\nbounded (segmented LRU) hit rate above 55%%: %s\n", passes ? "yes" : "NO");
  std::printf(
      "Why plain LRU falls short: every request inserts a tail no one will reuse, and the 40%%\n"
      "unique requests insert %lld tokens each. Under LRU those fresh tails are newer than a\n"
      "prefix last used a few requests ago, so the shared prefixes get flushed. Segmented LRU\n"
      "evicts never-matched entries first and keeps matched prefixes (up to 80%% of capacity).\n"
      "A request hit means at least one block matched, as in the lesson's trie.\n\n",
      f.prefix_tokens + f.suffix_tokens);
  std::printf(
      "System prompt: %lld requests share a %lld-token system prompt plus %lld user "
      "tokens;\n%s on %lld x %s, block size 16\n",
      f.sp_requests, f.system_tokens, f.user_tokens, f.model.c_str(), f.gpus, f.hardware.c_str());
  std::printf("  prefill tokens saved: %lld (%lld hits of %lld requests)\n", sp.tokens_saved,
              sp.hits, f.sp_requests);
  std::printf("  roofline prefill of one whole prompt: %.1f ms\n", sp.ms_full_prefill);
  std::printf("  prefill time saved per hit request: %.1f ms (total %.1f ms)\n",
              sp.ms_saved_per_hit, sp.ms_saved_total);
  std::printf(
      "  The roofline is a lower bound (100%% utilization). The lesson's \"about 400 ms\" per\n"
      "  request fits its 4-GPU deployment: 4 x %s save %.1f ms at the roofline, so 400 ms\n"
      "  means %.0f%% utilization; a single device cannot beat the figure above.\n",
      f.hardware.c_str(), sp.ms_saved_four, 100.0 * sp.ms_saved_four / 400.0);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return inferkit::examples::run_main("prefix_cache", [&] { return run(argc, argv); });
}
