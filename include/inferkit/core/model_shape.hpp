// SPDX-License-Identifier: Apache-2.0
// ModelShape: the numbers of a decoder-only transformer that size its KV cache and its cost
// (layers, query and KV heads, head_dim, hidden and MLP widths, vocabulary, parameter count), and
// presets named as a user types them ("llama-3-70b"). The memory planner and the roofline cost
// model in perf/ read it; so do examples that size KV caches for real models.
// Threads: a value type and pure functions (the presets are a function-local static, initialized
// once thread-safely); safe from any number of threads.
#pragma once

#include <array>
#include <cstdint>
#include <inferkit/core/error.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace inferkit {

/// The shape of a decoder-only transformer with grouped-query attention, RMSNorm and a SwiGLU
/// MLP (the Llama family). All counts are per model, not per GPU.
struct ModelShape {
  std::string name;                   ///< preset name ("llama-3-70b") or a user label
  int num_layers = 0;                 ///< transformer blocks
  int num_q_heads = 0;                ///< attention query heads per layer
  int num_kv_heads = 0;               ///< K/V heads per layer (== num_q_heads for plain MHA)
  int head_dim = 0;                   ///< elements per head
  int hidden_size = 0;                ///< residual stream width
  int intermediate_size = 0;          ///< SwiGLU MLP width
  int vocab_size = 0;                 ///< tokenizer vocabulary
  std::int64_t published_params = 0;  ///< the vendor's parameter count; 0 = unknown (use computed)
  bool tied_embeddings = false;       ///< output head shares the input embedding matrix
  bool is_estimate = false;           ///< the shape is a public estimate, not a published config

  /// Query heads served by one KV head (1 = MHA, num_q_heads = MQA).
  [[nodiscard]] int gqa_group_size() const noexcept {
    return num_kv_heads > 0 ? num_q_heads / num_kv_heads : 0;
  }
};

/// Throws `Error{kInvalidArgument}` naming the first bad field: every count must be > 0 and
/// `num_kv_heads` must divide `num_q_heads` ("num_kv_heads = 3 must divide num_q_heads = 8").
/// `published_params` must be >= 0.
inline void validate(const ModelShape& shape) {
  const auto positive = [](std::string_view field, int value) {
    check_arg(value > 0, ErrorCode::kInvalidArgument, field, value, "must be >", 0);
  };
  positive("num_layers", shape.num_layers);
  positive("num_q_heads", shape.num_q_heads);
  positive("num_kv_heads", shape.num_kv_heads);
  positive("head_dim", shape.head_dim);
  positive("hidden_size", shape.hidden_size);
  positive("intermediate_size", shape.intermediate_size);
  positive("vocab_size", shape.vocab_size);
  check_arg(shape.num_q_heads % shape.num_kv_heads == 0, ErrorCode::kInvalidArgument,
            "num_kv_heads", shape.num_kv_heads, "must divide num_q_heads =", shape.num_q_heads);
  check_arg(shape.published_params >= 0, ErrorCode::kInvalidArgument, "published_params",
            shape.published_params, "must be >=", 0);
}

/// Parameters implied by the shape: input embeddings (+ a separate output head unless tied),
/// per layer the Q/K/V/O projections, the three SwiGLU matrices (gate, up, down) and two RMSNorm
/// weights, plus the final norm. Biases are not counted (Llama/Mistral have none). Exact for
/// dense Llama-style models; a mixture-of-experts model (the GPT-4 estimate) counts differently.
/// Throws as `validate`.
inline std::int64_t computed_parameter_count(const ModelShape& shape) {
  validate(shape);
  const std::int64_t hidden = shape.hidden_size;
  const std::int64_t q_width = std::int64_t{shape.num_q_heads} * shape.head_dim;
  const std::int64_t kv_width = std::int64_t{shape.num_kv_heads} * shape.head_dim;
  const std::int64_t attention = hidden * q_width         // W_q
                                 + 2 * hidden * kv_width  // W_k, W_v
                                 + q_width * hidden;      // W_o
  const std::int64_t mlp = 3 * hidden * shape.intermediate_size;
  const std::int64_t norms = 2 * hidden;
  const std::int64_t embeddings =
      std::int64_t{shape.vocab_size} * hidden * (shape.tied_embeddings ? 1 : 2);
  return embeddings + shape.num_layers * (attention + mlp + norms) + hidden;
}

/// The parameter count to size weights with: `published_params` when known, else the computed
/// one. Throws as `validate`.
inline std::int64_t parameter_count(const ModelShape& shape) {
  validate(shape);
  return shape.published_params > 0 ? shape.published_params : computed_parameter_count(shape);
}

namespace detail {

inline const std::array<ModelShape, 7>& model_presets() {
  // Llama 3 / Mistral: the published config.json values; parameter counts as the model cards
  // round them. GPT-4: the widely repeated public estimate (120 layers, 96 heads of 128, 1.8T
  // parameters as a mixture of experts); OpenAI has published none of it. SmolLM2: its config,
  // and the 135M of its name. OPT-13B (the vLLM paper's model): its config (multi-head
  // attention, a two-matrix GELU MLP of width 20480, so the SwiGLU-based computed count does not
  // apply and the 13B of its name is used).
  static const std::array<ModelShape, 7> presets = {{
      {"llama-3-8b", 32, 32, 8, 128, 4096, 14336, 128256, 8'030'000'000, false, false},
      {"llama-3-70b", 80, 64, 8, 128, 8192, 28672, 128256, 70'600'000'000, false, false},
      {"llama-3-405b", 126, 128, 8, 128, 16384, 53248, 128256, 405'900'000'000, false, false},
      {"mistral-7b", 32, 32, 8, 128, 4096, 14336, 32000, 7'240'000'000, false, false},
      {"gpt-4-est", 120, 96, 96, 128, 12288, 49152, 100256, 1'800'000'000'000, false, true},
      {"smollm2-135m", 30, 9, 3, 64, 576, 1536, 49152, 135'000'000, true, false},
      {"opt-13b", 40, 40, 40, 128, 5120, 20480, 50272, 13'000'000'000, true, false},
  }};
  return presets;
}

}  // namespace detail

/// The preset names, in a fixed order: llama-3-8b, llama-3-70b, llama-3-405b, mistral-7b,
/// gpt-4-est, smollm2-135m, opt-13b.
inline std::array<std::string_view, 7> model_preset_names() {
  std::array<std::string_view, 7> names{};
  for (std::size_t i = 0; i < names.size(); ++i) names[i] = detail::model_presets()[i].name;
  return names;
}

/// The preset called `name` (exact, lowercase), or `std::nullopt`.
inline std::optional<ModelShape> try_model_preset(std::string_view name) {
  for (const ModelShape& shape : detail::model_presets()) {
    if (shape.name == name) return shape;
  }
  return std::nullopt;
}

/// The preset called `name`. Throws `Error{kInvalidArgument}` naming the unknown model and
/// listing the known ones.
inline ModelShape model_preset(std::string_view name) {
  std::optional<ModelShape> shape = try_model_preset(name);
  if (!shape) {
    std::string known;
    for (std::string_view preset : model_preset_names()) {
      known += (known.empty() ? "" : ", ") + std::string(preset);
    }
    detail::throw_error(
        ErrorCode::kInvalidArgument,
        "model = '" + std::string(name) + "' is not a known preset (known: " + known + ")");
  }
  return *std::move(shape);
}

}  // namespace inferkit
