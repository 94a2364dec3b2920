// SPDX-License-Identifier: Apache-2.0
// Tests for perf/kv_memory_planner.hpp: the lesson's Llama-3-70B KV figures to the byte, every KV
// dtype and scale layout against a per-row brute-force sum, the GPU budget (fits, does not fit,
// GB vs GiB), the GQA saving, and bad arguments naming the argument.
#include <catch2/catch.hpp>
#include <cstdint>
#include <inferkit/core/bfloat16.hpp>
#include <inferkit/core/dtype.hpp>
#include <inferkit/core/error.hpp>
#include <inferkit/core/float16.hpp>
#include <inferkit/core/float8.hpp>
#include <inferkit/core/model_shape.hpp>
#include <inferkit/core/rng.hpp>
#include <inferkit/kv/kv_quantization.hpp>
#include <inferkit/kv/paged_kv_cache.hpp>
#include <inferkit/perf/hardware.hpp>
#include <inferkit/perf/kv_memory_planner.hpp>
#include <limits>
#include <string>

using inferkit::DType;
using inferkit::Error;
using inferkit::ErrorCode;
using inferkit::KVCacheFormat;
using inferkit::KVScaleLayout;
using inferkit::MemoryBudget;
using inferkit::MemoryBudgetOptions;
using inferkit::ModelShape;

namespace {

#if defined(INFERKIT_TEST_SANITIZED)
constexpr int kTrials = 30;
#else
constexpr int kTrials = 300;
#endif

// Brute force: walk every layer, K and V, head and token, and add the bytes of that row and of
// its scale metadata.
std::int64_t brute_force_kv_bytes(const ModelShape& shape, const KVCacheFormat& format,
                                  std::int64_t tokens) {
  const int bits = inferkit::bits_per_element(format.dtype);
  const bool quantized = bits < 16 && format.scales != KVScaleLayout::kNone;
  const std::int64_t meta = format.dtype == DType::kInt4 ? 4 + 4 : 4;  // scale (+ zero point)
  std::int64_t total = 0;
  for (int layer = 0; layer < shape.num_layers; ++layer) {
    for (int kv = 0; kv < 2; ++kv) {
      for (int head = 0; head < shape.num_kv_heads; ++head) {
        for (std::int64_t t = 0; t < tokens; ++t) {
          std::int64_t row_bits = std::int64_t{shape.head_dim} * bits;
          total += row_bits / 8 + (row_bits % 8 != 0 ? 1 : 0);
          const bool starts_group =
              format.scales == KVScaleLayout::kPerTokenHead || (t % format.scale_block_tokens) == 0;
          if (quantized && starts_group) total += meta;
        }
      }
    }
  }
  return total;
}

const ModelShape& llama70b() {
  static const ModelShape shape = inferkit::model_preset("llama-3-70b");
  return shape;
}

}  // namespace

TEST_CASE("kv_bytes_per_token: reproduces the lesson's Llama-3-70B bf16 figures exactly",
          "[perf][kv_memory_planner]") {
  const KVCacheFormat bf16{DType::kBFloat16};
  // 2 (K and V) * 80 layers * 8 KV heads * 128 head_dim * 2 bytes = 327,680 bytes = 320 KiB.
  CHECK(inferkit::kv_bytes_per_token(llama70b(), bf16) == 327'680.0);
  CHECK(inferkit::kv_bytes_for_tokens(llama70b(), bf16, 1) == 327'680);
  // 4,096 tokens: 1,342,177,280 bytes = exactly 1.25 GiB = 1,280 MiB = 1.34 GB. The lesson's
  // "1.28 GB" is 1,280 MiB read as if 1,000 MiB made a GB: it is 1.25 GiB or 1.34 GB.
  CHECK(inferkit::kv_bytes_for_tokens(llama70b(), bf16, 4096) == 1'342'177'280);
  CHECK(inferkit::kv_bytes_for_tokens(llama70b(), bf16, 4096) == inferkit::gib_to_bytes(1.25));
  // 131,072 tokens (128K): 42,949,672,960 bytes = exactly 40 GiB (= 42.9 GB), as the lesson says.
  CHECK(inferkit::kv_bytes_for_tokens(llama70b(), bf16, 131072) == 42'949'672'960);
  CHECK(inferkit::kv_bytes_for_tokens(llama70b(), bf16, 131072) == inferkit::gib_to_bytes(40));
  // 100 users * 4,096 tokens: 134,217,728,000 bytes = exactly 125 GiB = 134.2 GB. The lesson's
  // "128 GB" is 100 * its rounded 1.28 GB; the exact figure is 125 GiB or 134.2 GB.
  const std::int64_t hundred_users = 100 * inferkit::kv_bytes_for_tokens(llama70b(), bf16, 4096);
  CHECK(hundred_users == 134'217'728'000);
  CHECK(hundred_users == inferkit::gib_to_bytes(125));
  CHECK(inferkit::bytes_to_gb(static_cast<double>(hundred_users)) == Approx(134.217728));
  CHECK(inferkit::kv_bytes_for_tokens(llama70b(), bf16, 0) == 0);
}

TEST_CASE("kv_bytes_per_token: scales with the bits of each KV dtype",
          "[perf][kv_memory_planner]") {
  CHECK(inferkit::kv_bytes_per_token(llama70b(), {DType::kFloat32}) == 655'360.0);
  CHECK(inferkit::kv_bytes_per_token(llama70b(), {DType::kFloat16}) == 327'680.0);
  CHECK(inferkit::kv_bytes_per_token(llama70b(), {DType::kFloat8E4M3}) == 163'840.0);
  CHECK(inferkit::kv_bytes_per_token(llama70b(), {DType::kFloat8E5M2}) == 163'840.0);
  CHECK(inferkit::kv_bytes_per_token(llama70b(), {DType::kInt8}) == 163'840.0);
  CHECK(inferkit::kv_bytes_per_token(llama70b(), {DType::kInt4}) == 81'920.0);
  // Scales: 2 * 80 * 8 = 1,280 rows per token, each with an fp32 scale (int8) or an fp32 scale
  // and an fp32 zero point (int4).
  CHECK(inferkit::kv_bytes_per_token(llama70b(), {DType::kInt8, KVScaleLayout::kPerTokenHead}) ==
        163'840.0 + 1280 * 4);
  CHECK(inferkit::kv_bytes_per_token(llama70b(), {DType::kInt4, KVScaleLayout::kPerTokenHead}) ==
        81'920.0 + 1280 * 8);
  // Per block of 16 tokens the metadata is amortized: 10,240 / 16 = 640 bytes per token.
  CHECK(inferkit::kv_bytes_per_token(
            llama70b(), {DType::kInt4, KVScaleLayout::kPerBlockHead, 16}) == 81'920.0 + 640.0);
  // Wide types carry no scales whatever the layout says.
  CHECK(inferkit::kv_bytes_per_token(
            llama70b(), {DType::kBFloat16, KVScaleLayout::kPerTokenHead}) == 327'680.0);
}

TEST_CASE("kv_bytes_for_tokens: matches a per-row brute-force sum on random shapes",
          "[perf][kv_memory_planner]") {
  inferkit::Rng rng(7);
  const auto draw = [&rng](int lo, int hi) {
    return lo + static_cast<int>(rng.below(static_cast<std::uint32_t>(hi - lo + 1)));
  };
  for (int trial = 0; trial < kTrials; ++trial) {
    ModelShape shape = llama70b();
    shape.num_layers = draw(1, 6);
    shape.num_kv_heads = draw(1, 4);
    shape.num_q_heads = shape.num_kv_heads * draw(1, 8);
    shape.head_dim = draw(1, 160);  // odd head_dim: int4 rows round up to whole bytes
    KVCacheFormat format;
    format.dtype = inferkit::kAllDTypes[rng.below(inferkit::kAllDTypes.size())];
    format.scales = static_cast<KVScaleLayout>(rng.below(3));
    format.scale_block_tokens = draw(1, 32);
    const std::int64_t tokens = draw(0, 100);
    INFO("trial " << trial << " dtype " << inferkit::to_string(format.dtype) << " head_dim "
                  << shape.head_dim << " tokens " << tokens);
    const std::int64_t bytes = inferkit::kv_bytes_for_tokens(shape, format, tokens);
    REQUIRE(bytes == brute_force_kv_bytes(shape, format, tokens));
    // Per-token bytes are the exact average over whole scale blocks.
    const std::int64_t whole =
        format.scales == KVScaleLayout::kPerBlockHead ? format.scale_block_tokens : 1;
    CHECK(inferkit::kv_bytes_per_token(shape, format) * static_cast<double>(whole) ==
          Approx(static_cast<double>(inferkit::kv_bytes_for_tokens(shape, format, whole))));
  }
}

namespace {

// PagedKVCache<T>'s own bytes for `shape` (layers, heads, head_dim) and `blocks` pages of
// `block_size`, against the planner's paged_kv_cache_format for T's dtype.
template <class T>
void check_paged_format(const ModelShape& shape, std::int32_t blocks, std::int32_t block_size) {
  const DType dtype = inferkit::KVStorageTraits<T>::kDType;
  INFO("dtype " << inferkit::to_string(dtype) << " layers " << shape.num_layers << " kv heads "
                << shape.num_kv_heads << " head_dim " << shape.head_dim << " blocks " << blocks
                << " of " << block_size);
  const inferkit::PagedKVCache<T> cache(inferkit::PagedKVCacheShape{
      shape.num_layers, blocks, block_size, shape.num_kv_heads, shape.head_dim});
  const std::int64_t tokens = std::int64_t{blocks} * block_size;
  CHECK(inferkit::kv_bytes_for_tokens(shape, inferkit::paged_kv_cache_format(dtype, block_size),
                                      tokens) == cache.memory_bytes());
}

}  // namespace

TEST_CASE("paged_kv_cache_format: plans the bytes PagedKVCache stores, scales included",
          "[perf][kv_memory_planner]") {
  // The planner's format for each storage type against the cache itself: a full pool of whole
  // pages holds exactly the planned bytes (fp8's per-page scales amortize over whole pages).
  inferkit::Rng rng(11);
  for (int trial = 0; trial < 16; ++trial) {
    ModelShape shape = llama70b();
    shape.num_layers = 1 + static_cast<std::int32_t>(rng.below(4));
    shape.num_kv_heads = 1 + static_cast<std::int32_t>(rng.below(4));
    shape.num_q_heads = shape.num_kv_heads;
    shape.head_dim = 2 * (1 + static_cast<std::int32_t>(rng.below(40)));  // int4: even
    const auto blocks = 1 + static_cast<std::int32_t>(rng.below(5));
    const auto block_size = 1 + static_cast<std::int32_t>(rng.below(32));
    check_paged_format<float>(shape, blocks, block_size);
    check_paged_format<inferkit::float16>(shape, blocks, block_size);
    check_paged_format<inferkit::bfloat16>(shape, blocks, block_size);
    check_paged_format<inferkit::float8_e4m3>(shape, blocks, block_size);
    check_paged_format<inferkit::float8_e5m2>(shape, blocks, block_size);
    check_paged_format<std::int8_t>(shape, blocks, block_size);
    check_paged_format<std::uint8_t>(shape, blocks, block_size);
  }
}

TEST_CASE("gqa_saving: 64 query heads over 8 KV heads store 8x less KV than full MHA",
          "[perf][kv_memory_planner]") {
  const inferkit::GqaSaving saving = inferkit::gqa_saving(llama70b(), {DType::kBFloat16});
  CHECK(saving.gqa_bytes_per_token == 327'680.0);
  CHECK(saving.mha_bytes_per_token == 2'621'440.0);  // 2 * 80 * 64 * 128 * 2
  CHECK(saving.ratio == 8.0);
  // The ratio is the group size for GQA ratios 1, 4 and 8, whatever the dtype.
  for (int ratio : {1, 4, 8}) {
    ModelShape shape = inferkit::model_preset("llama-3-8b");
    shape.num_kv_heads = shape.num_q_heads / ratio;
    CHECK(inferkit::gqa_saving(shape, {DType::kInt4}).ratio == Approx(ratio));
  }
  CHECK(inferkit::gqa_saving(inferkit::model_preset("gpt-4-est"), {DType::kFloat16}).ratio == 1.0);
}

TEST_CASE("plan_kv_memory: Llama-3-70B on 4xA100-80GB at 4K context per KV dtype",
          "[perf][kv_memory_planner]") {
  MemoryBudgetOptions options;
  options.num_gpus = 4;
  options.gpu_memory_bytes = inferkit::hardware_preset("a100-80gb").memory_bytes;  // 80 GiB
  options.weights_dtype = DType::kBFloat16;
  options.overhead_fraction = 0.1;

  options.kv = {DType::kFloat16};
  const MemoryBudget fp16 = inferkit::plan_kv_memory(llama70b(), options);
  // 4 x 80 GiB = 343.6 GB, 70.6e9 parameters * 2 bytes = 141.2 GB of weights, 10% overhead.
  CHECK(fp16.total_memory_bytes == 343'597'383'680);
  CHECK(fp16.weights_bytes == 141'200'000'000);
  CHECK(fp16.overhead_bytes == 34'359'738'368);
  CHECK(fp16.kv_pool_bytes == 168'037'645'312);
  CHECK(fp16.fits);
  CHECK(fp16.max_total_tokens == 512'810);  // floor(168,037,645,312 / 327,680)
  CHECK(fp16.max_users(4096) == 125);

  options.kv = {DType::kFloat8E4M3};
  const MemoryBudget fp8 = inferkit::plan_kv_memory(llama70b(), options);
  CHECK(fp8.max_total_tokens == 1'025'620);
  CHECK(fp8.max_users(4096) == 250);

  options.kv = {DType::kInt4};
  const MemoryBudget int4 = inferkit::plan_kv_memory(llama70b(), options);
  CHECK(int4.max_total_tokens == 2'051'240);
  CHECK(int4.max_users(4096) == 500);
  // int4 KV gives 4x the fp16 users: 500 / 125.
  CHECK(static_cast<double>(int4.max_users(4096)) / static_cast<double>(fp16.max_users(4096)) ==
        Approx(4.0).epsilon(0.01));

  // Real int4 caches also store scales and zero points: per token per head that is 8 bytes per
  // 64 data bytes, so the gain drops to 445 / 125 = 3.56x.
  options.kv = {DType::kInt4, KVScaleLayout::kPerTokenHead};
  const MemoryBudget int4_scaled = inferkit::plan_kv_memory(llama70b(), options);
  CHECK(int4_scaled.kv_bytes_per_token == 92'160.0);
  CHECK(int4_scaled.max_users(4096) == 445);
  // One scale per 16-token block costs much less: 82,560 bytes per token.
  options.kv = {DType::kInt4, KVScaleLayout::kPerBlockHead, 16};
  const MemoryBudget int4_block = inferkit::plan_kv_memory(llama70b(), options);
  CHECK(int4_block.max_users(4096) == 168'037'645'312 / (4096 * 82'560));
  CHECK(int4_block.max_total_tokens % 16 == 0);

  // The same four GPUs counted as 80 * 10^9 bytes each (the datasheet's "80GB" read as decimal)
  // lose 7% of the memory and 13% of the KV pool: 109 fp16 users instead of 125.
  options.kv = {DType::kFloat16};
  options.gpu_memory_bytes = inferkit::gb_to_bytes(80);
  CHECK(inferkit::plan_kv_memory(llama70b(), options).kv_pool_bytes == 146'800'000'000);
  CHECK(inferkit::plan_kv_memory(llama70b(), options).max_users(4096) == 109);
}

TEST_CASE("plan_kv_memory: token and user counts are the largest that fit",
          "[perf][kv_memory_planner]") {
  inferkit::Rng rng(99);
  for (int trial = 0; trial < kTrials; ++trial) {
    const auto names = inferkit::model_preset_names();
    const ModelShape shape =
        inferkit::model_preset(names[rng.below(static_cast<std::uint32_t>(names.size()))]);
    MemoryBudgetOptions options;
    options.num_gpus = 1 + static_cast<int>(rng.below(16));
    options.gpu_memory_bytes = inferkit::gb_to_bytes(16.0 + 180.0 * rng.uniform_double());
    options.weights_dtype = inferkit::kAllDTypes[rng.below(inferkit::kAllDTypes.size())];
    options.overhead_fraction = 0.3 * rng.uniform_double();
    options.kv.dtype = inferkit::kAllDTypes[rng.below(inferkit::kAllDTypes.size())];
    options.kv.scales = static_cast<KVScaleLayout>(rng.below(3));
    const MemoryBudget budget = inferkit::plan_kv_memory(shape, options);
    INFO(shape.name << " x" << options.num_gpus);
    CHECK(budget.total_memory_bytes == options.num_gpus * options.gpu_memory_bytes);
    CHECK(budget.fits ==
          (budget.weights_bytes + budget.overhead_bytes < budget.total_memory_bytes));
    if (!budget.fits) {
      CHECK(budget.kv_pool_bytes == 0);
      CHECK(budget.max_total_tokens == 0);
      CHECK(budget.max_users(4096) == 0);
      continue;
    }
    CHECK(budget.kv_pool_bytes ==
          budget.total_memory_bytes - budget.weights_bytes - budget.overhead_bytes);
    const std::int64_t step =
        options.kv.scales == KVScaleLayout::kPerBlockHead ? options.kv.scale_block_tokens : 1;
    const std::int64_t tokens = budget.max_total_tokens;
    CHECK(tokens % step == 0);
    CHECK(inferkit::kv_bytes_for_tokens(shape, options.kv, tokens) <= budget.kv_pool_bytes);
    CHECK(inferkit::kv_bytes_for_tokens(shape, options.kv, tokens + step) > budget.kv_pool_bytes);
    for (std::int64_t context : {1, 2048, 4096, 32768}) {
      const std::int64_t users = budget.max_users(context);
      const std::int64_t per_user = inferkit::kv_bytes_for_tokens(shape, options.kv, context);
      CHECK(users * per_user <= budget.kv_pool_bytes);
      CHECK((users + 1) * per_user > budget.kv_pool_bytes);
    }
  }
}

TEST_CASE("plan_kv_memory: a model that does not fit is a result not an error",
          "[perf][kv_memory_planner]") {
  MemoryBudgetOptions options;  // one 80 GiB GPU, bf16 weights, 10% overhead
  const MemoryBudget budget =
      inferkit::plan_kv_memory(inferkit::model_preset("llama-3-405b"), options);
  CHECK_FALSE(budget.fits);
  CHECK(budget.weights_bytes == 811'800'000'000);
  CHECK(budget.kv_pool_bytes == 0);
  CHECK(budget.max_total_tokens == 0);
  CHECK(budget.max_users(4096) == 0);

  SECTION("exactly full is not a fit and one more byte is") {
    options.overhead_fraction = 0.0;
    const ModelShape smol = inferkit::model_preset("smollm2-135m");
    options.gpu_memory_bytes = 270'000'000;  // 135M parameters * 2 bytes
    CHECK_FALSE(inferkit::plan_kv_memory(smol, options).fits);
    options.gpu_memory_bytes += 1;
    const MemoryBudget one_byte = inferkit::plan_kv_memory(smol, options);
    CHECK(one_byte.fits);
    CHECK(one_byte.kv_pool_bytes == 1);
    CHECK(one_byte.max_total_tokens == 0);
    // One token of SmolLM2 KV in bf16: 2 * 30 * 3 * 64 * 2 = 23,040 bytes.
    options.gpu_memory_bytes = 270'000'000 + 23'040;
    CHECK(inferkit::plan_kv_memory(smol, options).max_total_tokens == 1);
    CHECK(inferkit::plan_kv_memory(smol, options).max_users(1) == 1);
    CHECK(inferkit::plan_kv_memory(smol, options).max_users(2) == 0);
  }
}

TEST_CASE("plan_kv_memory: GiB memory holds more than the same number of GB",
          "[perf][kv_memory_planner]") {
  MemoryBudgetOptions gb;
  gb.num_gpus = 4;
  gb.gpu_memory_bytes = inferkit::gb_to_bytes(80);
  MemoryBudgetOptions gib = gb;
  gib.gpu_memory_bytes = inferkit::gib_to_bytes(80);
  const MemoryBudget in_gb = inferkit::plan_kv_memory(llama70b(), gb);
  const MemoryBudget in_gib = inferkit::plan_kv_memory(llama70b(), gib);
  CHECK(in_gib.total_memory_bytes == 343'597'383'680);
  CHECK(in_gib.kv_pool_bytes > in_gb.kv_pool_bytes);
  // The lesson's memory_budget mixes the two (weights in GiB, GPU memory in GB); here the pool is
  // 0.9 * 343.6e9 - 141.2e9 bytes.
  CHECK(in_gib.kv_pool_bytes == 343'597'383'680 - 141'200'000'000 - 34'359'738'368);
}

TEST_CASE("plan_kv_memory: bad arguments name the argument", "[perf][kv_memory_planner]") {
  MemoryBudgetOptions options;
  const auto expect = [&](const MemoryBudgetOptions& bad, const std::string& text) {
    try {
      (void)inferkit::plan_kv_memory(llama70b(), bad);
      FAIL("no throw for " << text);
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::kInvalidArgument);
      CHECK_THAT(e.what(), Catch::Contains(text));
    }
  };
  MemoryBudgetOptions bad = options;
  bad.num_gpus = 0;
  expect(bad, "num_gpus = 0 must be >= 1");
  bad = options;
  bad.gpu_memory_bytes = 0;
  expect(bad, "gpu_memory_bytes = 0 must be > 0");
  bad.gpu_memory_bytes = -inferkit::gb_to_bytes(80);
  expect(bad, "gpu_memory_bytes = -80000000000 must be > 0");
  bad = options;
  bad.overhead_fraction = 1.0;
  expect(bad, "overhead_fraction = 1.000000 must be in [0, 1)");
  bad.overhead_fraction = -0.1;
  expect(bad, "overhead_fraction");
  bad.overhead_fraction = std::numeric_limits<double>::quiet_NaN();
  expect(bad, "overhead_fraction");
  bad = options;
  bad.kv.scale_block_tokens = 0;
  expect(bad, "scale_block_tokens = 0 must be >= 1");
  ModelShape shape = llama70b();
  shape.num_kv_heads = 3;
  CHECK_THROWS_WITH(inferkit::plan_kv_memory(shape, options),
                    Catch::Contains("num_kv_heads = 3 must divide num_q_heads = 64"));
  CHECK_THROWS_WITH(inferkit::kv_bytes_for_tokens(llama70b(), {}, -1),
                    Catch::Contains("tokens = -1 must be >= 0"));
  const MemoryBudget budget = inferkit::plan_kv_memory(llama70b(), options);
  CHECK_THROWS_WITH(budget.max_users(0), Catch::Contains("context_tokens = 0 must be >= 1"));
}
