// SPDX-License-Identifier: Apache-2.0
// paged_memory: the fragmentation study of the vLLM paper (Kwon et al., SOSP 2023, Fig. 2),
// measured. One seeded request trace (lognormal prompt and output lengths near ShareGPT's means,
// 161 and 338 tokens) is replayed through three KV managers with the same memory budget:
//   contiguous_max    reserve the maximum length (2,048 tokens) per request (Orca "Max")
//   contiguous_exact  reserve prompt + the requested max output (Orca "Pow2"/"Oracle")
//   paged             BlockAllocator + BlockTable with blocks of 16 tokens (vLLM)
// For each it prints the share of reserved KV memory that holds real token states, and the peak
// number of requests resident at once. Teaches: why paging the KV cache lifts batch size.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <examples/support/cli_main.hpp>
#include <examples/support/json_out.hpp>
#include <inferkit/core/rng.hpp>
#include <inferkit/kv/block_allocator.hpp>
#include <inferkit/kv/block_table.hpp>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace {

using inferkit::examples::require;
using inferkit::examples::UsageError;

struct Flags {
  long long requests = 2000;
  long long seed = 1;
  double prompt_mean = 161.0;  // ShareGPT means reported in the vLLM paper
  double output_mean = 338.0;
  double sigma = 1.0;  // lognormal shape of both lengths
  long long max_len = 2048;
  long long block_size = 16;
  long long kv_tokens = 65536;      // KV memory budget, in token slots, for every manager
  std::string max_tokens = "pow2";  // how clients pick the requested max output
  long long max_num_seqs = 256;     // batch limit of every manager (vLLM's default)
  bool json = false;
};

constexpr const char* kUsage =
    "usage: paged_memory [--requests N] [--seed S] [--prompt-mean T] [--output-mean T]\n"
    "                    [--sigma S] [--max-len T] [--block-size T] [--kv-tokens T]\n"
    "                    [--max-tokens pow2|exact] [--max-num-seqs N] [--json]\n"
    "  --requests     requests in the trace, all queued at time 0, 1..1000000 (default 2000)\n"
    "  --seed         trace seed, >= 0 (default 1)\n"
    "  --prompt-mean  mean prompt length in tokens, lognormal, [1, 100000] (default 161)\n"
    "  --output-mean  mean output length in tokens, lognormal, [1, 100000] (default 338)\n"
    "  --sigma        lognormal sigma of both lengths, [0, 3] (default 1.0)\n"
    "  --max-len      model context length; prompt + output are capped to it, 2..1000000\n"
    "                 (default 2048)\n"
    "  --block-size   tokens per KV block of the paged manager, 1..4096 (default 16)\n"
    "  --kv-tokens    KV memory budget in token slots, the same for all managers,\n"
    "                 --max-len..2^31 (default 65536)\n"
    "  --max-tokens   requested max output per request: pow2 = the actual output rounded up\n"
    "                 to a power of two (Orca Pow2), exact = the actual output (Orca Oracle)\n"
    "  --max-num-seqs most requests resident at once, for every manager, 1..100000\n"
    "                 (default 256)\n"
    "  --json         print one JSON object with every figure of the text\n";

void add_flags(CLI::App& app, Flags& f) {
  using inferkit::examples::integer_in;
  using inferkit::examples::number_in;
  app.add_option("--requests", f.requests)->transform(integer_in(1LL, 1'000'000LL));
  app.add_option("--seed", f.seed)
      ->transform(integer_in(0LL, std::numeric_limits<long long>::max()));
  app.add_option("--prompt-mean", f.prompt_mean)->transform(number_in(1.0, 100000.0));
  app.add_option("--output-mean", f.output_mean)->transform(number_in(1.0, 100000.0));
  app.add_option("--sigma", f.sigma)->transform(number_in(0.0, 3.0));
  app.add_option("--max-len", f.max_len)->transform(integer_in(2LL, 1'000'000LL));
  app.add_option("--block-size", f.block_size)->transform(integer_in(1LL, 4096LL));
  app.add_option("--kv-tokens", f.kv_tokens)->transform(integer_in(1LL, 1LL << 31));
  app.add_option("--max-tokens", f.max_tokens)
      ->check(inferkit::examples::one_of({"pow2", "exact"}));
  app.add_option("--max-num-seqs", f.max_num_seqs)->transform(integer_in(1LL, 100'000LL));
  app.add_flag("--json", f.json);
}

void check_flags(const Flags& f) {
  require(f.kv_tokens >= f.max_len, "--kv-tokens = " + std::to_string(f.kv_tokens) +
                                        " must be >= --max-len = " + std::to_string(f.max_len) +
                                        " (one request must fit)");
}

// ---- the trace ----

struct Request {
  std::int64_t prompt = 0;      // tokens
  std::int64_t output = 0;      // tokens actually generated before EOS
  std::int64_t max_tokens = 0;  // requested max output (>= output)
};

// A lognormal with the given mean: exp(N(mu, sigma^2)), mu = ln(mean) - sigma^2 / 2.
std::int64_t lognormal(inferkit::Rng& rng, double mean, double sigma) {
  const double u1 = 1.0 - rng.uniform_double();  // (0, 1]
  const double u2 = rng.uniform_double();
  const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  const double mu = std::log(mean) - 0.5 * sigma * sigma;
  return std::max<std::int64_t>(1, std::llround(std::exp(mu + sigma * z)));
}

std::vector<Request> make_trace(const Flags& f) {
  inferkit::Rng rng(static_cast<std::uint64_t>(f.seed));
  std::vector<Request> trace(static_cast<std::size_t>(f.requests));
  for (Request& r : trace) {
    r.prompt = std::min<std::int64_t>(lognormal(rng, f.prompt_mean, f.sigma), f.max_len - 1);
    r.output = std::min<std::int64_t>(lognormal(rng, f.output_mean, f.sigma), f.max_len - r.prompt);
    std::int64_t asked = r.output;
    if (f.max_tokens == "pow2") {
      asked = 1;
      while (asked < r.output) asked *= 2;
    }
    r.max_tokens = std::min<std::int64_t>(asked, f.max_len - r.prompt);
  }
  return trace;
}

// ---- KV managers: reserve on admission, grow by one token per step, release at the end ----

class KVManager {
 public:
  virtual ~KVManager() = default;
  // Admits request `id` holding `tokens` tokens now (its prompt); false if memory is short.
  virtual bool admit(std::size_t id, const Request& r, std::int64_t tokens) = 0;
  // Appends one generated token; false if memory is short (then the caller preempts).
  virtual bool grow(std::size_t id) = 0;
  virtual void release(std::size_t id) = 0;
  [[nodiscard]] virtual std::int64_t reserved_tokens() const = 0;
};

// Contiguous reservations in one arena of `capacity` slots, first fit, with coalescing free
// ranges: what a system without paging does. Mixed reservation sizes fragment the arena.
class ContiguousManager : public KVManager {
  std::int64_t max_len_;
  bool reserve_max_;
  std::map<std::int64_t, std::int64_t> free_;                           // offset -> length
  std::map<std::size_t, std::pair<std::int64_t, std::int64_t>> owned_;  // id -> (offset, len)
  std::int64_t reserved_ = 0;

 public:
  ContiguousManager(std::int64_t capacity, std::int64_t max_len, bool reserve_max)
      : max_len_(max_len), reserve_max_(reserve_max) {
    free_[0] = capacity;
  }
  bool admit(std::size_t id, const Request& r, std::int64_t /*tokens*/) override {
    const std::int64_t want = reserve_max_ ? max_len_ : r.prompt + r.max_tokens;
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->second < want) continue;
      const std::int64_t offset = it->first;
      const std::int64_t rest = it->second - want;
      free_.erase(it);
      if (rest > 0) free_[offset + want] = rest;
      owned_[id] = {offset, want};
      reserved_ += want;
      return true;
    }
    return false;  // not enough contiguous space (total free may still be larger)
  }
  bool grow(std::size_t /*id*/) override { return true; }  // reserved up front
  void release(std::size_t id) override {
    const auto [offset, len] = owned_.at(id);
    owned_.erase(id);
    reserved_ -= len;
    auto next = free_.emplace(offset, len).first;
    if (auto after = std::next(next); after != free_.end() && offset + len == after->first) {
      next->second += after->second;
      free_.erase(after);
    }
    if (next != free_.begin()) {
      auto before = std::prev(next);
      if (before->first + before->second == next->first) {
        before->second += next->second;
        free_.erase(next);
      }
    }
  }
  [[nodiscard]] std::int64_t reserved_tokens() const override { return reserved_; }
};

// vLLM's manager: the library's BlockAllocator and one BlockTable per request.
class PagedManager : public KVManager {
  inferkit::BlockAllocator allocator_;
  std::map<std::size_t, inferkit::BlockTable> tables_;
  std::vector<inferkit::BlockCopy> copies_;  // stays empty: no forks in this trace

 public:
  PagedManager(std::int64_t capacity, std::int32_t block_size)
      : allocator_(static_cast<std::int32_t>(capacity / block_size), block_size) {}
  bool admit(std::size_t id, const Request& /*r*/, std::int64_t tokens) override {
    inferkit::BlockTable table(allocator_.block_size());
    // Admit only while 1% of the blocks stay free for running requests (vLLM's watermark).
    if (!allocator_.can_allocate(table.blocks_needed_to_append(allocator_, tokens), 0.01)) {
      return false;
    }
    if (!table.append_tokens(allocator_, tokens, {}, copies_)) return false;
    tables_.emplace(id, std::move(table));
    return true;
  }
  bool grow(std::size_t id) override {
    return tables_.at(id).append_tokens(allocator_, 1, {}, copies_);
  }
  void release(std::size_t id) override {
    tables_.at(id).release(allocator_);
    tables_.erase(id);
  }
  [[nodiscard]] std::int64_t reserved_tokens() const override {
    return std::int64_t{allocator_.num_used_blocks()} * allocator_.block_size();
  }
  [[nodiscard]] std::int64_t tokens_stored() const { return allocator_.tokens_stored(); }
};

struct Result {
  double used_fraction = 0.0;  // sum over steps of stored tokens / sum of reserved tokens
  std::int64_t peak_requests = 0;
  double mean_requests = 0.0;
  std::int64_t steps = 0;
  std::int64_t preemptions = 0;
};

// Replays the trace: every request is queued at time 0; each step admits waiting requests in
// FCFS order while memory allows (prefill stores the prompt), then every running request
// generates one token. A request whose next token finds no memory preempts the most recently
// admitted one, which is recomputed later (vLLM's recompute preemption; contiguous managers
// never need it).
Result replay(const std::vector<Request>& trace, KVManager& manager, std::size_t max_num_seqs) {
  struct Running {
    std::size_t id;
    std::int64_t tokens;     // prompt + generated so far (stored)
    std::int64_t generated;  // of trace[id].output
  };
  std::deque<std::pair<std::size_t, std::int64_t>> waiting;  // (id, tokens already generated)
  for (std::size_t i = 0; i < trace.size(); ++i) waiting.emplace_back(i, 0);
  std::vector<Running> running;
  Result result;
  double stored_sum = 0.0;
  double reserved_sum = 0.0;
  double resident_sum = 0.0;
  while (!waiting.empty() || !running.empty()) {
    while (!waiting.empty() && running.size() < max_num_seqs) {
      const auto [id, generated] = waiting.front();
      const std::int64_t tokens = trace[id].prompt + generated;  // recompute includes outputs
      if (!manager.admit(id, trace[id], tokens)) break;
      running.push_back({id, tokens, generated});
      waiting.pop_front();
    }
    if (running.empty()) {
      throw UsageError{"the KV budget cannot hold a single request"};
    }
    for (std::size_t i = 0; i < running.size(); ++i) {
      while (!manager.grow(running[i].id)) {
        // Preempt the most recently admitted request (possibly this one).
        const Running victim = running.back();
        manager.release(victim.id);
        waiting.emplace_front(victim.id, victim.generated);
        running.pop_back();
        ++result.preemptions;
        if (i >= running.size()) break;
      }
      if (i < running.size()) {
        ++running[i].tokens;
        ++running[i].generated;
      }
    }
    std::int64_t stored = 0;
    for (const Running& r : running) stored += r.tokens;
    stored_sum += static_cast<double>(stored);
    reserved_sum += static_cast<double>(manager.reserved_tokens());
    resident_sum += static_cast<double>(running.size());
    result.peak_requests =
        std::max<std::int64_t>(result.peak_requests, static_cast<std::int64_t>(running.size()));
    ++result.steps;
    std::erase_if(running, [&](const Running& r) {
      const bool done = r.generated >= trace[r.id].output;
      if (done) manager.release(r.id);
      return done;
    });
  }
  result.used_fraction = reserved_sum > 0.0 ? stored_sum / reserved_sum : 0.0;
  result.mean_requests = resident_sum / static_cast<double>(result.steps);
  return result;
}

int run(const Flags& f) {
  check_flags(f);
  const std::vector<Request> trace = make_trace(f);

  ContiguousManager max_manager(f.kv_tokens, f.max_len, true);
  ContiguousManager exact_manager(f.kv_tokens, f.max_len, false);
  PagedManager paged_manager(f.kv_tokens, static_cast<std::int32_t>(f.block_size));
  const auto seqs = static_cast<std::size_t>(f.max_num_seqs);
  const Result results[3] = {replay(trace, max_manager, seqs), replay(trace, exact_manager, seqs),
                             replay(trace, paged_manager, seqs)};
  const char* keys[3] = {"contiguous_max", "contiguous_exact", "paged"};

  double prompt_sum = 0.0;
  double output_sum = 0.0;
  for (const Request& r : trace) {
    prompt_sum += static_cast<double>(r.prompt);
    output_sum += static_cast<double>(r.output);
  }
  const auto n = static_cast<double>(trace.size());
  const double paged_waste = 1.0 - results[2].used_fraction;
  // The vLLM paper's Fig. 2 range for earlier systems (Orca Max / Pow2 / Oracle).
  constexpr double kPaperLow = 0.204;
  constexpr double kPaperHigh = 0.382;
  const bool inside =
      results[0].used_fraction >= kPaperLow && results[0].used_fraction <= kPaperHigh;
  if (f.json) {
    using inferkit::examples::fixed;
    nlohmann::ordered_json j = {
        {"requests", f.requests},
        {"seed", f.seed},
        {"prompt_mean", fixed(prompt_sum / n, 1)},
        {"output_mean", fixed(output_sum / n, 1)},
        {"sigma", fixed(f.sigma, 2)},
        {"max_len", f.max_len},
        {"kv_tokens", f.kv_tokens},
        {"max_num_seqs", f.max_num_seqs},
        {"max_tokens", f.max_tokens},
    };
    for (int m = 0; m < 3; ++m) {
      j[keys[m]] = {
          {"used_fraction", fixed(results[m].used_fraction, 4)},
          {"peak_requests", results[m].peak_requests},
          {"mean_requests", fixed(results[m].mean_requests, 1)},
          {"steps", results[m].steps},
          {"preemptions", results[m].preemptions},
      };
    }
    j["paged_waste"] = fixed(paged_waste, 4);
    j["paper_contiguous_range"] = {
        {"low", kPaperLow},
        {"high", kPaperHigh},
        {"contiguous_max_inside", inside},
    };
    j["paper_paged_waste_below"] = 0.04;
    inferkit::examples::print_json(j);
    return 0;
  }
  std::printf(
      "paged_memory: %lld requests (seed %lld), prompt mean %.1f, output mean %.1f tokens "
      "(lognormal, sigma %.2f, capped at %lld)\n"
      "KV budget: %lld token slots and at most %lld requests for every manager; requested max "
      "output: %s\n\n",
      f.requests, f.seed, prompt_sum / n, output_sum / n, f.sigma, f.max_len, f.kv_tokens,
      f.max_num_seqs, f.max_tokens.c_str());
  std::printf("%-18s %14s %14s %14s %8s %12s\n", "manager", "used_fraction", "peak_requests",
              "mean_requests", "steps", "preemptions");
  for (int m = 0; m < 3; ++m) {
    std::printf("%-18s %13.1f%% %14lld %14.1f %8lld %12lld\n", keys[m],
                100.0 * results[m].used_fraction, static_cast<long long>(results[m].peak_requests),
                results[m].mean_requests, static_cast<long long>(results[m].steps),
                static_cast<long long>(results[m].preemptions));
  }
  std::printf(
      "\nused_fraction = KV slots holding real token states / KV slots reserved, summed over "
      "steps.\n"
      "paged wastes %.1f%% (only the unfilled tail of each request's last block; the vLLM paper\n"
      "reports under 4%%: Kwon et al., \"Efficient Memory Management for Large Language Model\n"
      "Serving with PagedAttention\", SOSP 2023, arXiv:2309.06180).\n"
      "contiguous_max keeps %.1f%% in use, %s the 20.4-38.2%% the vLLM paper measured for\n"
      "earlier systems (Orca Max/Pow2/Oracle, its Fig. 2). Why the numbers differ from the\n"
      "paper: this is a time average over an idealized replay of a synthetic lognormal trace\n"
      "(ShareGPT-like means, output mean lowered by the %lld-token cap) with a saturated queue,\n"
      "counting only the KV pool; the paper sampled a real engine. Long requests dominate\n"
      "time-averaged use, so a heavier tail (--sigma) raises every share; contiguous_exact also\n"
      "pays external fragmentation (first-fit holes), which paging removes entirely. The paged\n"
      "manager admits greedily up to --max-num-seqs and preempts (recompute) when blocks run\n"
      "out, so compare batch sizes by mean_requests as well as peak_requests.\n",
      100.0 * paged_waste, 100.0 * results[0].used_fraction, inside ? "inside" : "outside",
      f.max_len);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return inferkit::examples::run_main("paged_memory", kUsage, [&](CLI::App& app) {
    Flags f;
    add_flags(app, f);
    app.parse(argc, argv);
    return run(f);
  });
}
