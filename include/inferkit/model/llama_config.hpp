// SPDX-License-Identifier: Apache-2.0
// LlamaConfig: the hyperparameters of a Llama-family model as its GGUF file states them (layers,
// widths, heads, RoPE base, RMSNorm epsilon, context, vocabulary), read and cross-checked against
// the tensors, plus the ModelShape the planner and the cost model take. LlamaModel builds on it.
// Threads: a value type and a pure reader of a (const) GgufFile; safe from any number of threads.
#pragma once

#include <cstdint>
#include <inferkit/core/error.hpp>
#include <inferkit/core/model_shape.hpp>
#include <inferkit/model/gguf.hpp>
#include <string>
#include <string_view>

namespace inferkit {

/// A Llama-family model's hyperparameters.
struct LlamaConfig {
  std::string architecture;         ///< general.architecture ("llama")
  std::string name;                 ///< general.name, or "" when absent
  std::int32_t num_layers = 0;      ///< transformer blocks
  std::int32_t hidden_size = 0;     ///< residual stream width
  std::int32_t ffn_size = 0;        ///< SwiGLU hidden width
  std::int32_t num_q_heads = 0;     ///< attention query heads
  std::int32_t num_kv_heads = 0;    ///< K/V heads (GQA)
  std::int32_t head_dim = 0;        ///< hidden_size / num_q_heads
  std::int32_t vocab_size = 0;      ///< rows of the token embedding
  std::int64_t context_length = 0;  ///< positions the model was trained for
  float rope_base = 10000.0f;       ///< RoPE theta
  float rms_eps = 1e-5f;            ///< RMSNorm epsilon
  bool tied_embeddings = false;     ///< no output.weight: the token embedding is the output head

  /// The shape the memory planner and the roofline cost model take.
  [[nodiscard]] ModelShape shape() const {
    ModelShape s;
    s.name = name.empty() ? architecture : name;
    s.num_layers = num_layers;
    s.num_q_heads = num_q_heads;
    s.num_kv_heads = num_kv_heads;
    s.head_dim = head_dim;
    s.hidden_size = hidden_size;
    s.intermediate_size = ffn_size;
    s.vocab_size = vocab_size;
    s.tied_embeddings = tied_embeddings;
    return s;
  }
};

namespace detail {

inline std::int32_t positive_i32(const GgufFile& file, const std::string& key) {
  const std::uint64_t v = file.get_u64(key);
  check_arg(v >= 1 && v <= (std::uint64_t{1} << 30), ErrorCode::kInvalidArgument, key, v,
            "must be in [1, limit] with limit =", std::uint64_t{1} << 30);
  return static_cast<std::int32_t>(v);
}

}  // namespace detail

/// Reads the configuration of the Llama-family model in `file` (`<arch>.block_count`,
/// `.embedding_length`, `.feed_forward_length`, `.attention.head_count[_kv]`, `.rope.freq_base`,
/// `.attention.layer_norm_rms_epsilon`, `.context_length`) and checks it against the tensors
/// (token embedding rows, whether an output head exists). Throws `Error{kUnsupported}` for an
/// architecture other than llama, `Error{kInvalidArgument}` naming the key for a missing or
/// inconsistent value.
inline LlamaConfig read_llama_config(const GgufFile& file) {
  LlamaConfig c;
  c.architecture = file.get_string("general.architecture");
  if (c.architecture != "llama") {
    detail::throw_error(ErrorCode::kUnsupported, "general.architecture = '" + c.architecture +
                                                     "' is not supported (supported: llama)");
  }
  if (const GgufValue* n = file.find("general.name"); n != nullptr) {
    c.name = file.get_string("general.name");
  }
  const std::string a = c.architecture + ".";
  c.num_layers = detail::positive_i32(file, a + "block_count");
  c.hidden_size = detail::positive_i32(file, a + "embedding_length");
  c.ffn_size = detail::positive_i32(file, a + "feed_forward_length");
  c.num_q_heads = detail::positive_i32(file, a + "attention.head_count");
  c.num_kv_heads = detail::positive_i32(file, a + "attention.head_count_kv");
  c.context_length = detail::positive_i32(file, a + "context_length");
  if (file.find(a + "rope.freq_base") != nullptr) c.rope_base = file.get_f32(a + "rope.freq_base");
  c.rms_eps = file.get_f32(a + "attention.layer_norm_rms_epsilon");
  check_arg(c.hidden_size % c.num_q_heads == 0, ErrorCode::kInvalidArgument, a + "embedding_length",
            c.hidden_size, "must be a multiple of head_count =", c.num_q_heads);
  check_arg(c.num_q_heads % c.num_kv_heads == 0, ErrorCode::kInvalidArgument,
            a + "attention.head_count_kv", c.num_kv_heads,
            "must divide head_count =", c.num_q_heads);
  c.head_dim = c.hidden_size / c.num_q_heads;
  check_arg(c.head_dim % 2 == 0, ErrorCode::kInvalidArgument, "head_dim", c.head_dim,
            "must be a multiple of", 2);  // RoPE rotates pairs
  check_arg(c.rope_base > 0.0f, ErrorCode::kInvalidArgument, a + "rope.freq_base", c.rope_base,
            "must be >", 0);
  check_arg(c.rms_eps > 0.0f, ErrorCode::kInvalidArgument, a + "attention.layer_norm_rms_epsilon",
            c.rms_eps, "must be >", 0);
  const GgufTensorInfo* embd = file.find_tensor("token_embd.weight");
  if (embd == nullptr || embd->dims.size() != 2 || embd->dims[0] != c.hidden_size) {
    detail::throw_error(
        ErrorCode::kInvalidArgument,
        "token_embd.weight must be a [vocab][" + std::to_string(c.hidden_size) + "] tensor");
  }
  check_arg(embd->dims[1] >= 1 && embd->dims[1] <= (std::int64_t{1} << 24),
            ErrorCode::kInvalidArgument, "token_embd.weight rows", embd->dims[1], "must be in",
            "[1, 2^24]");
  c.vocab_size = static_cast<std::int32_t>(embd->dims[1]);
  c.tied_embeddings = file.find_tensor("output.weight") == nullptr;
  return c;
}

}  // namespace inferkit
