// SPDX-License-Identifier: Apache-2.0
// Checks, for files whose `general.architecture` is "llama", that each tensor llama.cpp's naming
// scheme knows has the shape the hyperparameters imply (token_embd [n_embd, n_vocab], attn_k
// [n_embd, n_head_kv * head_dim], ffn_down [n_ff, n_embd], ...), and that no tensor names a layer
// past `llama.block_count`. A hyperparameter that is absent, or given per layer as an array, is
// not checked here: the forward pass reads and validates the configuration it runs.
#pragma once

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <inferkit/core/error.hpp>
#include <inferkit/model/detail/gguf_cursor.hpp>
#include <inferkit/model/detail/gguf_parse.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace inferkit::detail {

/// One hyperparameter that a shape is built from: its key and value (when the file has it).
struct LlamaDim {
  std::string key;
  std::optional<std::int64_t> value;
};

/// Reads `key` as a dimension: nullopt when absent or an array; an `Error` when it is a scalar
/// of the wrong type or negative.
inline LlamaDim llama_dim(const GgufParsed& p, std::string_view source, std::string key) {
  LlamaDim d{std::move(key), std::nullopt};
  const auto it = p.metadata_index.find(d.key);
  if (it == p.metadata_index.end() || p.metadata[it->second].is_array()) return d;
  const GgufValue& v = p.metadata[it->second];
  const std::int64_t n = v.as_i64();
  if (n < 0) {
    gguf_error(ErrorCode::kInvalidArgument, source, concat({"metadata '", d.key, "'"}), v.offset(),
               concat({"is ", std::to_string(n), ", a dimension must be >= 0"}));
  }
  d.value = n;
  return d;
}

/// "blk.<n>.<rest>" -> n, rest; other names -> nullopt.
inline std::optional<std::pair<std::int64_t, std::string_view>> llama_layer_of(
    std::string_view name) {
  if (name.substr(0, 4) != "blk.") return std::nullopt;
  name.remove_prefix(4);
  std::int64_t layer = 0;
  const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), layer);
  if (ec != std::errc{} || end == name.data() || end == name.data() + name.size() || *end != '.')
    return std::nullopt;
  return std::pair{layer, name.substr(static_cast<std::size_t>(end - name.data()) + 1)};
}

/// The check itself (see the file comment).
inline void check_llama_shapes(const GgufParsed& p, std::string_view source) {
  const auto arch = p.metadata_index.find("general.architecture");
  if (arch == p.metadata_index.end() || p.metadata[arch->second].as_string() != "llama") return;
  const LlamaDim embd = llama_dim(p, source, "llama.embedding_length");
  const LlamaDim layers = llama_dim(p, source, "llama.block_count");
  const LlamaDim ff = llama_dim(p, source, "llama.feed_forward_length");
  const LlamaDim heads = llama_dim(p, source, "llama.attention.head_count");
  LlamaDim kv_heads = llama_dim(p, source, "llama.attention.head_count_kv");
  if (!p.metadata_index.contains(kv_heads.key))
    kv_heads = {heads.key + " (no head_count_kv)", heads.value};
  LlamaDim head_k = llama_dim(p, source, "llama.attention.key_length");
  LlamaDim head_v = llama_dim(p, source, "llama.attention.value_length");
  if (!p.metadata_index.contains(head_k.key) && embd.value && heads.value && *heads.value > 0) {
    head_k = {"head dim (embedding_length / head_count)", *embd.value / *heads.value};
  }
  if (!p.metadata_index.contains(head_v.key)) head_v = {head_k.key, head_k.value};
  LlamaDim vocab = llama_dim(p, source, "llama.vocab_size");
  if (!p.metadata_index.contains(vocab.key)) {
    const auto tokens = p.metadata_index.find("tokenizer.ggml.tokens");
    if (tokens != p.metadata_index.end() && p.metadata[tokens->second].is_array()) {
      vocab = {"tokenizer.ggml.tokens (its size)",
               static_cast<std::int64_t>(p.metadata[tokens->second].array_size())};
    }
  }
  const auto product = [](const LlamaDim& a, const LlamaDim& b) -> LlamaDim {
    if (!a.value || !b.value) return {a.key + " * " + b.key, std::nullopt};
    const std::optional<std::int64_t> v = checked_mul(*a.value, *b.value);
    return {a.key + " * " + b.key, v ? v : std::optional<std::int64_t>(-1)};
  };
  for (std::size_t i = 0; i < p.tensors.size(); ++i) {
    const GgufTensorInfo& t = p.tensors[i];
    const std::string named = concat({"tensor '", t.name, "' (info #", std::to_string(i), ")"});
    std::string_view role = t.name;
    if (const auto layer = llama_layer_of(t.name)) {
      if (layers.value && (layer->first < 0 || layer->first >= *layers.value)) {
        gguf_error(ErrorCode::kInvalidArgument, source, named, p.tensor_info_offsets[i],
                   concat({"names layer ", std::to_string(layer->first), " but ", layers.key, " = ",
                           std::to_string(*layers.value)}));
      }
      role = layer->second;
    }
    std::vector<LlamaDim> want;
    if (role == "token_embd.weight" || role == "output.weight") {
      want = {embd, vocab};
    } else if (role == "output_norm.weight" || role == "attn_norm.weight" ||
               role == "ffn_norm.weight") {
      want = {embd};
    } else if (role == "attn_q.weight") {
      want = {embd, product(heads, head_k)};
    } else if (role == "attn_k.weight") {
      want = {embd, product(kv_heads, head_k)};
    } else if (role == "attn_v.weight") {
      want = {embd, product(kv_heads, head_v)};
    } else if (role == "attn_output.weight") {
      want = {product(heads, head_v), embd};
    } else if (role == "ffn_gate.weight" || role == "ffn_up.weight") {
      want = {embd, ff};
    } else if (role == "ffn_down.weight") {
      want = {ff, embd};
    } else {
      continue;  // a tensor this check does not know
    }
    bool agrees = want.size() == t.dims.size();
    std::string expected = "[";
    std::string from;
    for (std::size_t d = 0; d < want.size(); ++d) {
      const bool known = want[d].value.has_value();
      expected += (d ? ", " : "") + (known ? std::to_string(*want[d].value) : std::string("?"));
      if (known && d < t.dims.size() && t.dims[d] != *want[d].value) agrees = false;
      if (known)
        from += concat({d ? "; " : "", want[d].key, " = ", std::to_string(*want[d].value)});
    }
    expected += "]";
    if (!agrees) {
      gguf_error(ErrorCode::kInvalidArgument, source, named, p.tensor_info_offsets[i],
                 concat({"shape ", gguf_shape_text(t.dims), " disagrees with the metadata, ",
                         "which makes it ", expected, " (", from, ")"}));
    }
  }
}

}  // namespace inferkit::detail
