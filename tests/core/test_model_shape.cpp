// SPDX-License-Identifier: Apache-2.0
// Tests for core/model_shape.hpp: presets carry the published configs, the parameter count
// computed from the shape agrees with the published one, and bad shapes name the field.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <inferkit/core/error.hpp>
#include <inferkit/core/model_shape.hpp>
#include <inferkit/core/rng.hpp>
#include <string>

using inferkit::Error;
using inferkit::ErrorCode;
using inferkit::ModelShape;

TEST_CASE("model_preset: returns the published Llama and Mistral configs", "[core][model_shape]") {
  const ModelShape l70 = inferkit::model_preset("llama-3-70b");
  CHECK(l70.name == "llama-3-70b");
  CHECK(l70.num_layers == 80);
  CHECK(l70.num_q_heads == 64);
  CHECK(l70.num_kv_heads == 8);
  CHECK(l70.head_dim == 128);
  CHECK(l70.hidden_size == 8192);
  CHECK(l70.intermediate_size == 28672);
  CHECK(l70.vocab_size == 128256);
  CHECK(l70.gqa_group_size() == 8);
  CHECK_FALSE(l70.is_estimate);

  const ModelShape l8 = inferkit::model_preset("llama-3-8b");
  CHECK((l8.num_layers == 32 && l8.num_q_heads == 32 && l8.num_kv_heads == 8));
  CHECK((l8.hidden_size == 4096 && l8.intermediate_size == 14336 && l8.vocab_size == 128256));

  const ModelShape l405 = inferkit::model_preset("llama-3-405b");
  CHECK((l405.num_layers == 126 && l405.num_q_heads == 128 && l405.num_kv_heads == 8));
  CHECK((l405.hidden_size == 16384 && l405.intermediate_size == 53248));

  const ModelShape m7 = inferkit::model_preset("mistral-7b");
  CHECK((m7.num_layers == 32 && m7.num_kv_heads == 8 && m7.vocab_size == 32000));

  const ModelShape smol = inferkit::model_preset("smollm2-135m");
  CHECK((smol.num_layers == 30 && smol.num_q_heads == 9 && smol.num_kv_heads == 3));
  CHECK((smol.head_dim == 64 && smol.hidden_size == 576 && smol.intermediate_size == 1536));
  CHECK(smol.vocab_size == 49152);
  CHECK(smol.tied_embeddings);
}

TEST_CASE("model_preset: gpt-4-est is marked as an estimate", "[core][model_shape]") {
  const ModelShape gpt4 = inferkit::model_preset("gpt-4-est");
  CHECK(gpt4.is_estimate);
  CHECK(gpt4.num_layers == 120);
  CHECK(gpt4.num_kv_heads == 96);
  CHECK(gpt4.num_q_heads == 96);
  CHECK(gpt4.head_dim == 128);
  CHECK(gpt4.published_params == 1'800'000'000'000);
  CHECK(gpt4.gqa_group_size() == 1);
  // Every other preset is a published config.
  for (std::string_view name : inferkit::model_preset_names()) {
    CHECK(inferkit::model_preset(name).is_estimate == (name == "gpt-4-est"));
  }
}

TEST_CASE("computed_parameter_count: within 1% of the published count for real models",
          "[core][model_shape]") {
  for (const char* name :
       {"llama-3-8b", "llama-3-70b", "llama-3-405b", "mistral-7b", "smollm2-135m"}) {
    INFO(name);
    const ModelShape shape = inferkit::model_preset(name);
    const double computed = static_cast<double>(inferkit::computed_parameter_count(shape));
    const double published = static_cast<double>(shape.published_params);
    CHECK(std::abs(computed - published) / published < 0.01);
    CHECK(inferkit::parameter_count(shape) == shape.published_params);
  }
  // Exact values for Llama-3-8B, summed by hand: 2 * 128256 * 4096 embeddings + 32 layers of
  // (2 * 4096^2 + 2 * 4096 * 1024 attention + 3 * 4096 * 14336 MLP + 2 * 4096 norms) + 4096.
  CHECK(inferkit::computed_parameter_count(inferkit::model_preset("llama-3-8b")) == 8'030'261'248);
  CHECK(inferkit::computed_parameter_count(inferkit::model_preset("mistral-7b")) == 7'241'732'096);
  // SmolLM2 ties its output head to the embeddings: one vocab * hidden matrix, not two.
  CHECK(inferkit::computed_parameter_count(inferkit::model_preset("smollm2-135m")) == 134'515'008);
}

TEST_CASE("computed_parameter_count: matches a per-matrix brute-force sum on random shapes",
          "[core][model_shape]") {
  inferkit::Rng rng(20261130);
  const auto draw = [&rng](int lo, int hi) {
    return lo + static_cast<int>(rng.below(static_cast<std::uint32_t>(hi - lo + 1)));
  };
  for (int trial = 0; trial < 200; ++trial) {
    ModelShape shape;
    shape.name = "random";
    shape.num_kv_heads = draw(1, 8);
    shape.num_q_heads = shape.num_kv_heads * draw(1, 8);
    shape.head_dim = draw(1, 256);
    shape.hidden_size = draw(1, 8192);
    shape.intermediate_size = draw(1, 30000);
    shape.vocab_size = draw(1, 200000);
    shape.num_layers = draw(1, 128);
    shape.tied_embeddings = (trial % 2) == 0;
    // Brute force: list every weight matrix and vector of the model and add their sizes.
    std::int64_t sum = std::int64_t{shape.vocab_size} * shape.hidden_size;  // embeddings
    if (!shape.tied_embeddings) sum += std::int64_t{shape.hidden_size} * shape.vocab_size;
    for (int layer = 0; layer < shape.num_layers; ++layer) {
      const std::int64_t q_out = std::int64_t{shape.num_q_heads} * shape.head_dim;
      const std::int64_t kv_out = std::int64_t{shape.num_kv_heads} * shape.head_dim;
      sum += shape.hidden_size;                                          // attention RMSNorm
      sum += shape.hidden_size * q_out;                                  // W_q
      sum += shape.hidden_size * kv_out;                                 // W_k
      sum += shape.hidden_size * kv_out;                                 // W_v
      sum += q_out * shape.hidden_size;                                  // W_o
      sum += shape.hidden_size;                                          // MLP RMSNorm
      sum += std::int64_t{shape.hidden_size} * shape.intermediate_size;  // gate
      sum += std::int64_t{shape.hidden_size} * shape.intermediate_size;  // up
      sum += std::int64_t{shape.intermediate_size} * shape.hidden_size;  // down
    }
    sum += shape.hidden_size;  // final norm
    REQUIRE(inferkit::computed_parameter_count(shape) == sum);
    // No published count: parameter_count falls back to the computed one.
    CHECK(inferkit::parameter_count(shape) == sum);
  }
}

TEST_CASE("validate: names the bad field and its value", "[core][model_shape]") {
  ModelShape shape = inferkit::model_preset("llama-3-8b");
  CHECK_NOTHROW(inferkit::validate(shape));

  SECTION("KV heads must divide query heads") {
    shape.num_q_heads = 8;
    shape.num_kv_heads = 3;
    CHECK_THROWS_WITH(inferkit::validate(shape),
                      "inferkit: invalid argument: num_kv_heads = 3 must divide num_q_heads = 8");
  }
  SECTION("GQA ratios 1, 4 and 8 are valid") {
    for (int ratio : {1, 4, 8}) {
      shape.num_kv_heads = 32 / ratio;
      CHECK_NOTHROW(inferkit::validate(shape));
      CHECK(shape.gqa_group_size() == ratio);
    }
  }
  SECTION("zero counts name the field") {
    const auto expect_field = [](ModelShape bad, const std::string& field) {
      try {
        inferkit::validate(bad);
        FAIL("no throw for " << field);
      } catch (const Error& e) {
        CHECK(e.code() == ErrorCode::kInvalidArgument);
        CHECK(std::string(e.what()).find(field + " = 0 must be > 0") != std::string::npos);
      }
    };
    ModelShape bad = shape;
    bad.num_layers = 0;
    expect_field(bad, "num_layers");
    bad = shape;
    bad.num_q_heads = 0;
    expect_field(bad, "num_q_heads");
    bad = shape;
    bad.num_kv_heads = 0;
    expect_field(bad, "num_kv_heads");
    bad = shape;
    bad.head_dim = 0;
    expect_field(bad, "head_dim");
    bad = shape;
    bad.hidden_size = 0;
    expect_field(bad, "hidden_size");
    bad = shape;
    bad.intermediate_size = 0;
    expect_field(bad, "intermediate_size");
    bad = shape;
    bad.vocab_size = 0;
    expect_field(bad, "vocab_size");
  }
  SECTION("negative published count is rejected and the shape is untouched") {
    shape.published_params = -1;
    const ModelShape before = shape;
    CHECK_THROWS_AS(inferkit::validate(shape), Error);
    CHECK(shape.published_params == before.published_params);
    CHECK_THROWS_AS(inferkit::computed_parameter_count(shape), Error);
  }
}

TEST_CASE("model_preset: an unknown name throws listing the known presets", "[core][model_shape]") {
  try {
    (void)inferkit::model_preset("gpt-5");
    FAIL("no throw");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::kInvalidArgument);
    const std::string what = e.what();
    CHECK(what.find("'gpt-5'") != std::string::npos);
    for (std::string_view name : inferkit::model_preset_names()) {
      CHECK(what.find(std::string(name)) != std::string::npos);
    }
  }
  CHECK_FALSE(inferkit::try_model_preset("Llama-3-70B").has_value());  // names are lowercase
  CHECK(inferkit::try_model_preset("mistral-7b").has_value());
  // Every listed name resolves to a valid preset of that name.
  CHECK(inferkit::model_preset_names().size() == 7);
  for (std::string_view name : inferkit::model_preset_names()) {
    const ModelShape shape = inferkit::model_preset(name);
    CHECK(shape.name == name);
    CHECK_NOTHROW(inferkit::validate(shape));
  }
}
