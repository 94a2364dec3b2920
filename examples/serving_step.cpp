// SPDX-License-Identifier: Apache-2.0
// serving_step: one serving step through inferkit's parts, in the order an engine calls them
// (the walkthrough is docs/serving_step.md, whose code blocks are taken from this file): a block
// pool and a prefix cache, a request admitted onto a block table (sharing what the cache holds),
// its K/V appended into paged storage, one decode step that verifies speculative drafts with
// paged_decode, sampling and verify_chain, then the commit (rejected tokens truncated) and the
// prompt inserted into the prefix cache, so a second request with the same prompt skips its
// prefill. The model is a stand-in: one attention layer whose K, V, q and logits are seeded
// functions of the tokens, so the program shows the plumbing, not a language model.
//
//   serving_step [--seed S] [--json]
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <examples/support/cli_main.hpp>
#include <examples/support/json_out.hpp>
#include <inferkit/attention/attention.hpp>
#include <inferkit/core/float16.hpp>
#include <inferkit/core/rng.hpp>
#include <inferkit/core/token_id.hpp>
#include <inferkit/kv/block_allocator.hpp>
#include <inferkit/kv/block_table.hpp>
#include <inferkit/kv/paged_kv_cache.hpp>
#include <inferkit/prefix/radix_tree.hpp>
#include <inferkit/spec/chain_verifier.hpp>
#include <inferkit/spec/ngram_drafter.hpp>
#include <inferkit/spec/sampling.hpp>
#include <limits>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

namespace {

using inferkit::TokenId;

// The stand-in model: one attention layer, GQA 2 (4 query heads over 2 KV heads), a vocabulary
// of 64 tokens, and 16-token pages.
constexpr std::int32_t kQoHeads = 4;
constexpr std::int32_t kKvHeads = 2;
constexpr std::int32_t kHeadDim = 64;
constexpr std::int32_t kBlockSize = 16;
constexpr std::size_t kVocab = 64;
constexpr std::size_t kKvRow = std::size_t{kKvHeads} * kHeadDim;  // one token's K (or V)
constexpr std::size_t kQRow = std::size_t{kQoHeads} * kHeadDim;   // one token's q (or output)

constexpr const char* kUsage =
    "usage: serving_step [--seed S] [--json]\n"
    "  --seed  seed of the stand-in model and of sampling, >= 0 (default 1)\n"
    "  --json  print one JSON object with every figure of the text\n";

// Seeded values in [-1, 1) for `count` floats of token `token` at `position`, stream `what`
// (K, V, q): what a model's projections would produce.
void project(TokenId token, std::int64_t position, std::uint64_t what, std::uint64_t seed,
             std::span<float> out) {
  inferkit::Rng rng(seed ^ (static_cast<std::uint64_t>(token) << 32),
                    static_cast<std::uint64_t>(position) * 4 + what);
  for (float& x : out) x = 2.0f * rng.uniform() - 1.0f;
}

// The stand-in LM head: logits of the position after `token` from its attention output, through
// a fixed seeded matrix [kVocab][kQRow], plus a strong preference for the token that continues
// the prompt's pattern (t -> t + 7 mod 23), as a model that has read the prompt would have.
std::vector<float> lm_head(std::span<const float> attention_out, TokenId token,
                           std::uint64_t seed) {
  static std::vector<float> weights;
  if (weights.empty()) {
    weights.resize(kVocab * kQRow);
    inferkit::Rng rng(seed, 99);
    for (float& w : weights) w = 2.0f * rng.uniform() - 1.0f;
  }
  std::vector<float> logits(kVocab);
  for (std::size_t t = 0; t < kVocab; ++t) {
    float dot = 0.0f;
    for (std::size_t i = 0; i < kQRow; ++i) dot += weights[t * kQRow + i] * attention_out[i];
    logits[t] = 0.1f * dot;
  }
  logits[static_cast<std::size_t>((token + 7) % 23)] += 4.5f;
  return logits;
}

struct Report {
  std::int64_t prompt_tokens = 0;
  std::int64_t first_hit_tokens = 0;  // cached prefix of request 1 (an empty cache: 0)
  std::int64_t prefill_tokens = 0;    // request 1's tokens computed
  std::int32_t blocks_after_prefill = 0;
  std::size_t drafts = 0;  // n-gram drafts verified in the decode step
  std::size_t accepted = 0;
  std::vector<TokenId> emitted;  // tokens the step commits
  std::int64_t tokens_after_commit = 0;
  std::int64_t inserted_tokens = 0;    // what the prefix cache adopted
  std::int64_t second_hit_tokens = 0;  // request 2's cached prefix
  std::int64_t second_prefill_tokens = 0;
  std::int32_t shared_blocks = 0;  // blocks both requests hold
  std::int32_t free_blocks_at_end = 0;
  std::int32_t evictable_blocks_at_end = 0;
};

Report serve(std::uint64_t seed) {
  Report report;
  // [serving-step: pool]
  // 1. One pool of KV blocks for the whole GPU (or here, host memory), the paged K/V storage
  //    those blocks index, and a prefix cache over the same pool.
  inferkit::BlockAllocator pool(/*num_blocks=*/64, kBlockSize);
  inferkit::PagedKVCacheShape shape;
  shape.num_layers = 1;
  shape.num_blocks = pool.num_blocks();
  shape.block_size = kBlockSize;
  shape.num_kv_heads = kKvHeads;
  shape.head_dim = kHeadDim;
  inferkit::PagedKVCache<inferkit::float16> kv(shape);
  inferkit::RadixTree prefix_cache(pool);
  // [serving-step: pool]

  // A prompt that repeats itself, as code or a template does: the n-gram drafter feeds on that.
  std::vector<TokenId> prompt(40);
  for (std::size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<TokenId>((i * 7) % 23);
  report.prompt_tokens = static_cast<std::int64_t>(prompt.size());

  // Admits `tokens` onto `table`: shares the cached prefix, allocates blocks for the rest and
  // writes the rest's K/V. Returns the cached prefix length.
  const auto admit = [&](inferkit::BlockTable& table, const std::vector<TokenId>& tokens) {
    // [serving-step: admit]
    // 2. Admission: the cached prefix's blocks join the table at once (one more reference
    //    each, before anything else allocates), then the table grows by the uncached tokens.
    const inferkit::PrefixMatch hit = prefix_cache.match(tokens);
    table.append_shared_blocks(pool, hit.blocks);
    const std::int64_t fresh = static_cast<std::int64_t>(tokens.size()) - hit.num_tokens;
    std::vector<std::int64_t> slots(static_cast<std::size_t>(fresh));
    std::vector<inferkit::BlockCopy> copies;  // copy-on-write of a shared last block: none here
    if (!table.append_tokens(pool, fresh, slots, copies)) {
      throw inferkit::Error(inferkit::ErrorCode::kOutOfRange, "pool exhausted: queue the request");
    }
    // [serving-step: admit]
    // [serving-step: append]
    // 3. Prefill writes the new tokens' K and V into the slots the table handed out: token i
    //    goes to page slots[i] / block_size, offset slots[i] % block_size.
    std::vector<float> k(slots.size() * kKvRow);
    std::vector<float> v(k.size());
    for (std::size_t i = 0; i < slots.size(); ++i) {
      const auto position = hit.num_tokens + static_cast<std::int64_t>(i);
      const TokenId token = tokens[static_cast<std::size_t>(position)];
      project(token, position, 0, seed, std::span<float>(k).subspan(i * kKvRow, kKvRow));
      project(token, position, 1, seed, std::span<float>(v).subspan(i * kKvRow, kKvRow));
    }
    kv.append(/*layer=*/0, slots, k, v);
    // [serving-step: append]
    return hit.num_tokens;
  };

  inferkit::BlockTable table(kBlockSize);
  report.first_hit_tokens = admit(table, prompt);
  report.prefill_tokens = report.prompt_tokens - report.first_hit_tokens;
  report.blocks_after_prefill = table.num_blocks();

  // [serving-step: decode]
  // 4. A decode step that verifies speculative drafts: the last prompt token plus K drafts from
  //    prompt lookup are appended as K + 1 query tokens, and paged_decode attends each of them
  //    to the sequence up to itself (q_per_seq = K + 1, causal), in one pass over the pages.
  std::vector<TokenId> sequence = prompt;
  inferkit::NgramDrafter drafter(/*min_n=*/2, /*max_n=*/4, /*max_k=*/4);
  std::vector<TokenId> drafts(4);
  drafts.resize(drafter.propose(sequence, drafts));
  const std::vector<TokenId> step_tokens = [&] {
    std::vector<TokenId> t{sequence.back()};
    t.insert(t.end(), drafts.begin(), drafts.end());
    return t;
  }();
  // The last prompt token's K/V is already in the pages; the drafts' K/V is appended now.
  std::vector<std::int64_t> slots(drafts.size());
  std::vector<inferkit::BlockCopy> copies;
  if (!table.append_tokens(pool, static_cast<std::int64_t>(drafts.size()), slots, copies)) {
    throw inferkit::Error(inferkit::ErrorCode::kOutOfRange, "pool exhausted: preempt a sequence");
  }
  std::vector<float> k(drafts.size() * kKvRow);
  std::vector<float> v(k.size());
  for (std::size_t i = 0; i < drafts.size(); ++i) {
    const auto position = static_cast<std::int64_t>(sequence.size() + i);
    project(drafts[i], position, 0, seed, std::span<float>(k).subspan(i * kKvRow, kKvRow));
    project(drafts[i], position, 1, seed, std::span<float>(v).subspan(i * kKvRow, kKvRow));
  }
  kv.append(0, slots, k, v);
  std::vector<float> q(step_tokens.size() * kQRow);
  for (std::size_t i = 0; i < step_tokens.size(); ++i) {
    const auto position = static_cast<std::int64_t>(sequence.size() - 1 + i);
    project(step_tokens[i], position, 2, seed, std::span<float>(q).subspan(i * kQRow, kQRow));
  }
  inferkit::PageTableBuffers pages;
  const inferkit::BlockTable* batch[] = {&table};  // one sequence in this batch
  inferkit::build_page_table(batch, pages);
  std::vector<float> out(q.size());
  inferkit::PagedDecodeArgs<inferkit::float16> args;
  args.q = q.data();
  args.kv = kv.view(0);
  args.pages = pages.view();
  args.num_qo_heads = kQoHeads;
  args.head_dim = kHeadDim;
  args.q_per_seq = static_cast<std::int32_t>(step_tokens.size());
  args.out = out.data();
  inferkit::paged_decode(inferkit::cpu{}, args);
  // [serving-step: decode]

  // [serving-step: verify]
  // 5. Sampling and verification: each query row's logits become the filtered distribution
  //    plain sampling would use (logits_to_probs), and verify_chain accepts drafts so the
  //    emitted tokens follow exactly that distribution: the accepted drafts, then one token
  //    sampled from the residual (or the bonus row after the last draft).
  inferkit::SamplingParams sampling;
  sampling.temperature = 0.7f;
  sampling.top_p = 0.95f;
  inferkit::SamplingWorkspace workspace;
  std::vector<float> target(step_tokens.size() * kVocab);
  for (std::size_t i = 0; i < step_tokens.size(); ++i) {
    const std::vector<float> logits =
        lm_head(std::span<const float>(out).subspan(i * kQRow, kQRow), step_tokens[i], seed);
    inferkit::logits_to_probs(logits, sampling,
                              std::span<float>(target).subspan(i * kVocab, kVocab), workspace);
  }
  inferkit::Rng rng(seed, /*stream=*/0);  // one stream per sequence: reproducible
  std::vector<TokenId> emitted(drafts.size() + 1);
  const std::size_t n = inferkit::verify_chain(drafts, /*draft_probs=*/{}, target, kVocab,
                                               inferkit::VerifyMode::kSample, rng, emitted);
  emitted.resize(n);
  // [serving-step: verify]
  report.drafts = drafts.size();
  report.accepted = n - 1;
  report.emitted = emitted;

  // [serving-step: commit]
  // 6. Commit: the K/V of rejected drafts leaves the table (their blocks return to the pool
  //    when they empty); the emitted tokens join the sequence, and the last one is the next
  //    step's query. Then the prompt goes into the prefix cache: the cache adopts its full
  //    pages, and the table keeps its own references until the request finishes.
  const std::size_t rejected = drafts.size() - (n - 1);
  table.truncate(pool, table.num_tokens() - static_cast<std::int64_t>(rejected));
  sequence.insert(sequence.end(), emitted.begin(), emitted.end());
  const inferkit::PrefixInsert inserted =
      prefix_cache.insert(prompt, table.blocks().first(prompt.size() / kBlockSize));
  // [serving-step: commit]
  report.tokens_after_commit = table.num_tokens();
  report.inserted_tokens = inserted.inserted_tokens;

  // A second request with the same prompt: its two full pages come from the cache.
  inferkit::BlockTable second(kBlockSize);
  report.second_hit_tokens = admit(second, prompt);
  report.second_prefill_tokens = report.prompt_tokens - report.second_hit_tokens;
  for (inferkit::BlockId b : second.blocks()) {
    for (inferkit::BlockId a : table.blocks()) report.shared_blocks += a == b ? 1 : 0;
  }

  // [serving-step: finish]
  // 7. Finishing returns each table's references; cached pages stay in the pool as evictable
  //    blocks until a later match revives them or an allocation reclaims them.
  second.release(pool);
  table.release(pool);
  // [serving-step: finish]
  report.free_blocks_at_end = pool.num_free_blocks();
  report.evictable_blocks_at_end = pool.num_evictable_blocks();
  return report;
}

std::string join(const std::vector<TokenId>& tokens) {
  std::string text;
  // Appended piece by piece: `"" + std::to_string(t)` (an insert at 0) draws g++ 12's false
  // -Wrestrict at -O3 (GCC bug 105651).
  for (TokenId t : tokens) {
    if (!text.empty()) text += ' ';
    text += std::to_string(t);
  }
  return text;
}

int run(std::uint64_t seed, bool json) {
  const Report r = serve(seed);
  if (json) {
    inferkit::examples::print_json({
        {"seed", seed},
        {"prompt_tokens", r.prompt_tokens},
        {"first_hit_tokens", r.first_hit_tokens},
        {"prefill_tokens", r.prefill_tokens},
        {"blocks_after_prefill", r.blocks_after_prefill},
        {"drafts", r.drafts},
        {"accepted", r.accepted},
        {"emitted", r.emitted},
        {"tokens_after_commit", r.tokens_after_commit},
        {"inserted_tokens", r.inserted_tokens},
        {"second_hit_tokens", r.second_hit_tokens},
        {"second_prefill_tokens", r.second_prefill_tokens},
        {"shared_blocks", r.shared_blocks},
        {"free_blocks_at_end", r.free_blocks_at_end},
        {"evictable_blocks_at_end", r.evictable_blocks_at_end},
    });
    return 0;
  }
  std::printf("serving_step: one step of one request through inferkit (seed %llu)\n",
              static_cast<unsigned long long>(seed));
  std::printf("  admit:   %lld-token prompt, %lld cached, %lld prefilled into %d blocks of %d\n",
              static_cast<long long>(r.prompt_tokens), static_cast<long long>(r.first_hit_tokens),
              static_cast<long long>(r.prefill_tokens), r.blocks_after_prefill, kBlockSize);
  std::printf(
      "  decode:  %zu n-gram drafts verified in one paged_decode pass: %zu accepted, "
      "emitted %s\n",
      r.drafts, r.accepted, join(r.emitted).c_str());
  std::printf("  commit:  the sequence holds K/V of %lld tokens; the prefix cache adopted %lld\n",
              static_cast<long long>(r.tokens_after_commit),
              static_cast<long long>(r.inserted_tokens));
  std::printf("  request 2, same prompt: %lld tokens cached (%d blocks shared), %lld prefilled\n",
              static_cast<long long>(r.second_hit_tokens), r.shared_blocks,
              static_cast<long long>(r.second_prefill_tokens));
  std::printf("  finish:  pool has %d free and %d evictable (cached) blocks\n",
              r.free_blocks_at_end, r.evictable_blocks_at_end);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return inferkit::examples::run_main("serving_step", kUsage, [&](CLI::App& app) {
    std::uint64_t seed = 1;
    bool json = false;
    app.add_option("--seed", seed)
        ->transform(inferkit::examples::integer_in<std::uint64_t>(
            0, std::numeric_limits<std::uint64_t>::max()));
    app.add_flag("--json", json);
    app.parse(argc, argv);
    return run(seed, json);
  });
}
