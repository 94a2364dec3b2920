// SPDX-License-Identifier: Apache-2.0
// Tests for model/llama_model.hpp against llama.cpp on SmolLM2-135M-Instruct (Q4_1): the
// configuration read from the GGUF, teacher-forced next-token log-probabilities at every
// position of four texts (tests/data/smollm2_logprobs.jsonl, written by
// scripts/reference-llamacpp.sh) and of an exact fp64 forward, the cost of fp8, int8 and int4 KV
// on the latter, and chunked prefill giving the same bits as one pass.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <inferkit/core/float16.hpp>
#include <inferkit/core/float8.hpp>
#include <inferkit/kv/block_allocator.hpp>
#include <inferkit/kv/block_table.hpp>
#include <inferkit/model/gguf.hpp>
#include <inferkit/model/llama_model.hpp>
#include <optional>
#include <string>
#include <tests/support/json_lines.hpp>
#include <tests/support/smollm2.hpp>
#include <tests/support/teacher_forced.hpp>
#include <utility>
#include <vector>

namespace {

using namespace inferkit;
using test::teacher_forced;

// The model, or nullptr (then the test says so and passes: scripts/test.sh fetches it).
const LlamaModel* smollm2() {
  const test::LoadedSmolLM2* loaded = test::smollm2();
  return loaded == nullptr ? nullptr : &loaded->model;
}

// log-softmax of one row, in double.
std::vector<double> log_softmax(std::span<const float> row) {
  double max = -1e300;
  for (float x : row) max = std::max(max, static_cast<double>(x));
  double sum = 0.0;
  for (float x : row) sum += std::exp(static_cast<double>(x) - max);
  const double lse = max + std::log(sum);
  std::vector<double> out(row.size());
  for (std::size_t i = 0; i < row.size(); ++i) out[i] = static_cast<double>(row[i]) - lse;
  return out;
}

}  // namespace

TEST_CASE("LlamaModel: SmolLM2's configuration from its GGUF", "[model][llama_model]") {
  const LlamaModel* model = smollm2();
  if (model == nullptr) {
    WARN("SmolLM2 not fetched (run scripts/fetch-model.sh): skipped");
    return;
  }
  const LlamaConfig& c = model->config();
  CHECK(c.num_layers == 30);
  CHECK(c.hidden_size == 576);
  CHECK(c.num_q_heads == 9);
  CHECK(c.num_kv_heads == 3);
  CHECK(c.head_dim == 64);
  CHECK(c.ffn_size == 1536);
  CHECK(c.vocab_size == 49152);
  CHECK(c.rope_base == 100000.0f);
  CHECK(c.tied_embeddings);
}

namespace {

struct Agreement {
  std::int64_t positions = 0;
  double top1 = 0.0;      // share of positions whose argmax is the reference's top token
  double max_diff = 0.0;  // |our logprob - reference logprob| of the reference's top token
  double mean_diff = 0.0;
};

// Our teacher-forced logits (K/V stored as `KV`) on the texts of `golden` against its
// per-position top tokens.
template <class KV = float16>
Agreement agree_with(const LlamaModel& model, const std::string& golden) {
  Agreement a;
  std::int64_t top1 = 0;
  double sum = 0.0;
  for (const test::JsonValue& r : test::read_json_lines(test::source_path(golden))) {
    if (r.object.count("meta") != 0) continue;
    std::vector<TokenId> tokens;
    for (const test::JsonValue& t : r.at("tokens").array) {
      tokens.push_back(static_cast<TokenId>(t.number));
    }
    const std::vector<float> logits = teacher_forced<KV>(model, tokens, 64);
    const auto vocab = static_cast<std::size_t>(model.config().vocab_size);
    const auto& top = r.at("top").array;
    REQUIRE(top.size() == tokens.size());
    for (std::size_t p = 0; p < top.size(); ++p) {
      const std::vector<double> lp =
          log_softmax(std::span<const float>(logits.data() + p * vocab, vocab));
      const auto ref = static_cast<std::size_t>(top[p].array[0].array[0].number);
      const double diff = std::abs(lp[ref] - top[p].array[0].array[1].number);
      top1 +=
          std::max_element(lp.begin(), lp.end()) - lp.begin() == static_cast<std::ptrdiff_t>(ref)
              ? 1
              : 0;
      a.max_diff = std::max(a.max_diff, diff);
      sum += diff;
      ++a.positions;
    }
  }
  a.top1 = static_cast<double>(top1) / static_cast<double>(a.positions);
  a.mean_diff = sum / static_cast<double>(a.positions);
  return a;
}

}  // namespace

TEST_CASE("LlamaModel: teacher-forced log-probabilities match an exact fp64 forward",
          "[model][llama_model]") {
  // tests/data/smollm2_fp64_logprobs.jsonl: gguf-py's dequantization and a float64 numpy
  // forward (scripts/reference-fp64.py), no rounding anywhere. Ours runs in fp32 with fp16 KV.
  const LlamaModel* model = smollm2();
  if (model == nullptr) {
    WARN("SmolLM2 not fetched (run scripts/fetch-model.sh): skipped");
    return;
  }
  const Agreement a = agree_with(*model, "tests/data/smollm2_fp64_logprobs.jsonl");
  WARN("vs fp64: " << a.positions << " positions, top-1 " << a.top1 << ", max |dlogprob| "
                   << a.max_diff << ", mean " << a.mean_diff);
  CHECK(a.positions > 700);
  CHECK(a.top1 >= 0.995);
  CHECK(a.max_diff <= 0.02);
  CHECK(a.mean_diff <= 0.002);
}

TEST_CASE("LlamaModel: teacher-forced log-probabilities with fp8, int8 and int4 KV",
          "[model][llama_model]") {
  // The quality cost of a smaller KV cache, against the same exact fp64 forward as above: only
  // the K/V storage changes (fp8 e4m3 with a power-of-two scale per page and head; int8 with a
  // scale per token and head; int4 with a scale and a zero point per token and head). The
  // bounds are not expected values: each format must stay at least as close as the next coarser
  // one, and int4 must keep the top token at more than half the positions. Its cost is large on
  // this model (top-1 0.80, mean |dlogprob| 0.31 measured; 16 levels per token across 64 dims
  // whose K channels differ in range), which is what a user of int4 KV should know before taking
  // its 4x capacity. The figures are printed for docs/real-model.md.
  const LlamaModel* model = smollm2();
  if (model == nullptr) {
    WARN("SmolLM2 not fetched (run scripts/fetch-model.sh): skipped");
    return;
  }
  const std::string golden = "tests/data/smollm2_fp64_logprobs.jsonl";
  const Agreement fp16 = agree_with<float16>(*model, golden);
  const Agreement fp8 = agree_with<float8_e4m3>(*model, golden);
  const Agreement int8 = agree_with<std::int8_t>(*model, golden);
  const Agreement int4 = agree_with<std::uint8_t>(*model, golden);
  for (const auto& [name, a] : {std::pair{"fp16", fp16}, std::pair{"fp8 e4m3", fp8},
                                std::pair{"int8", int8}, std::pair{"int4", int4}}) {
    WARN(name << " KV vs fp64: " << a.positions << " positions, top-1 " << a.top1
              << ", max |dlogprob| " << a.max_diff << ", mean " << a.mean_diff);
  }
  CHECK(fp16.mean_diff <= int8.mean_diff);
  CHECK(int8.mean_diff <= fp8.mean_diff);  // 255 levels per token vs 3 mantissa bits
  CHECK(fp8.mean_diff <= int4.mean_diff);
  CHECK(int4.top1 > 0.5);
}

TEST_CASE("LlamaModel: teacher-forced log-probabilities agree with llama.cpp",
          "[model][llama_model]") {
  // llama.cpp rounds activations to 8 bits for its Q4_1/Q8_0 products and q and the softmax to
  // fp16 in attention: on these texts it is itself 0.039 (mean) from the fp64 forward above, and
  // disagrees with it on the top token at ~4% of positions, so this bound is how close one
  // exact implementation can be to it, not a tolerance on ours (see the fp64 test).
  const LlamaModel* model = smollm2();
  if (model == nullptr) {
    WARN("SmolLM2 not fetched (run scripts/fetch-model.sh): skipped");
    return;
  }
  const Agreement a = agree_with(*model, "tests/data/smollm2_logprobs.jsonl");
  WARN("vs llama.cpp: " << a.positions << " positions, top-1 " << a.top1 << ", max |dlogprob| "
                        << a.max_diff << ", mean " << a.mean_diff);
  CHECK(a.positions > 700);
  CHECK(a.top1 >= 0.95);
  CHECK(a.mean_diff <= 0.05);
}

namespace {

// llama.cpp's own distance from the fp64 forward, from the two golden files: at each position,
// whether its top token is fp64's, and |its log-probability of fp64's top token - fp64's| (when
// that token is outside llama.cpp's listed 20, its 20th log-probability stands in: a lower bound).
Agreement llamacpp_vs_fp64() {
  const auto records = [](const std::string& file) {
    std::vector<test::JsonValue> out;
    for (test::JsonValue& r : test::read_json_lines(test::source_path(file))) {
      if (r.object.count("meta") == 0) out.push_back(std::move(r));
    }
    return out;
  };
  const std::vector<test::JsonValue> exact = records("tests/data/smollm2_fp64_logprobs.jsonl");
  const std::vector<test::JsonValue> llama = records("tests/data/smollm2_logprobs.jsonl");
  REQUIRE(exact.size() == llama.size());
  Agreement a;
  std::int64_t top1 = 0;
  double sum = 0.0;
  for (std::size_t i = 0; i < exact.size(); ++i) {
    REQUIRE(exact[i].at("name").string == llama[i].at("name").string);
    const auto& e = exact[i].at("top").array;
    const auto& l = llama[i].at("top").array;
    REQUIRE(e.size() == l.size());
    for (std::size_t p = 0; p < e.size(); ++p) {
      const double ref = e[p].array[0].array[0].number;
      const double ref_lp = e[p].array[0].array[1].number;
      double lp = l[p].array.back().array[1].number;
      for (const test::JsonValue& entry : l[p].array) {
        if (entry.array[0].number == ref) lp = entry.array[1].number;
      }
      top1 += l[p].array[0].array[0].number == ref ? 1 : 0;
      a.max_diff = std::max(a.max_diff, std::abs(lp - ref_lp));
      sum += std::abs(lp - ref_lp);
      ++a.positions;
    }
  }
  a.top1 = static_cast<double>(top1) / static_cast<double>(a.positions);
  a.mean_diff = sum / static_cast<double>(a.positions);
  return a;
}

}  // namespace

TEST_CASE("LlamaModel: int8 activations stay as close to fp64 as llama.cpp does",
          "[model][llama_model]") {
  // The accuracy cost of ActivationPrecision::kInt8 against the exact fp64 forward, beside
  // llama.cpp's own distance from it (it rounds activations to 8 bits for these products too,
  // and more in attention): the int8 mode must be no further from fp64 than llama.cpp is. The
  // figures are printed for docs/real-model.md.
  const LlamaModel* exact = smollm2();
  const LlamaModel* int8 = test::smollm2_int8();
  if (exact == nullptr || int8 == nullptr) {
    WARN("SmolLM2 not fetched (run scripts/fetch-model.sh): skipped");
    return;
  }
  const std::string golden = "tests/data/smollm2_fp64_logprobs.jsonl";
  const Agreement fp32 = agree_with(*exact, golden);
  const Agreement q8 = agree_with(*int8, golden);
  const Agreement llama = llamacpp_vs_fp64();
  for (const auto& [name, a] : {std::pair{"fp32 activations", fp32},
                                std::pair{"int8 activations", q8}, std::pair{"llama.cpp", llama}}) {
    WARN(name << " vs fp64: " << a.positions << " positions, top-1 " << a.top1
              << ", max |dlogprob| " << a.max_diff << ", mean " << a.mean_diff);
  }
  CHECK(q8.positions == llama.positions);
  CHECK(fp32.mean_diff < q8.mean_diff);  // the rounding is real, and measured
  CHECK(q8.mean_diff <= llama.mean_diff);
  CHECK(q8.top1 >= llama.top1);
}

TEST_CASE("LlamaModel: int8 activations are batch-invariant", "[model][llama_model]") {
  // A token's logits are the same bits whatever else its step holds: prefill in chunks of 1
  // (one token a step, as decode) to 33 against one 70-token pass.
  const LlamaModel* model = test::smollm2_int8();
  if (model == nullptr) {
    WARN("SmolLM2 not fetched (run scripts/fetch-model.sh): skipped");
    return;
  }
  std::vector<TokenId> tokens;
  for (int i = 0; i < 70; ++i) tokens.push_back(static_cast<TokenId>((i * 7919 + 13) % 49152));
  const std::vector<float> one = teacher_forced(*model, tokens, 70);
  for (std::int32_t chunk : {1, 5, 16, 33}) {
    INFO("chunk " << chunk);
    CHECK(teacher_forced(*model, tokens, chunk) == one);
  }
}

TEST_CASE("LlamaModel: chunked prefill gives the bits of a single pass", "[model][llama_model]") {
  const LlamaModel* model = smollm2();
  if (model == nullptr) {
    WARN("SmolLM2 not fetched (run scripts/fetch-model.sh): skipped");
    return;
  }
  std::vector<TokenId> tokens;
  for (int i = 0; i < 70; ++i) tokens.push_back(static_cast<TokenId>((i * 7919 + 13) % 49152));
  const std::vector<float> one = teacher_forced(*model, tokens, 70);
  for (std::int32_t chunk : {1, 5, 16, 33}) {
    INFO("chunk " << chunk);
    CHECK(teacher_forced(*model, tokens, chunk) == one);
  }
}
