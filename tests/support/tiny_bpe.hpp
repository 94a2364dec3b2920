// SPDX-License-Identifier: Apache-2.0
// Test helper: a tiny byte-level BPE vocabulary whose tokenizations can be checked by hand: the
// 256 byte tokens (ids 0..255, in byte order), a few merges, two control tokens and one
// user-defined token; as a `BpeTokenizerConfig` and as a GGUF image (for `from_gguf` and the
// fuzzer's seeds).
#pragma once

#include <cstdint>
#include <inferkit/model/bpe_tokenizer.hpp>
#include <inferkit/model/detail/byte_level.hpp>
#include <inferkit/model/detail/utf8.hpp>
#include <string>
#include <tests/support/gguf_writer.hpp>
#include <vector>

namespace inferkit::test {

/// The byte-level text of the bytes of `s` ("a b" -> "aĠb").
inline std::string byte_level(std::string_view s) {
  std::string out;
  for (const char c : s) {
    detail::utf8_append(out, detail::byte_level_code_points()[static_cast<unsigned char>(c)]);
  }
  return out;
}

/// Merges in rank order; each result is a token (ids from 256 on, in this order), then
/// "<|im_start|>" (control), "<|im_end|>" (control, eos) and "<tool>" (user-defined).
inline BpeTokenizerConfig tiny_bpe_config() {
  BpeTokenizerConfig c;
  for (int b = 0; b < 256; ++b)
    c.tokens.push_back(byte_level(std::string(1, static_cast<char>(b))));
  const std::vector<std::pair<std::string, std::string>> merges = {
      {"l", "l"},      // 256 "ll"
      {"h", "e"},      // 257 "he"
      {"he", "ll"},    // 258 "hell"
      {"hell", "o"},   // 259 "hello"
      {" ", "w"},      // 260 " w"
      {"o", "r"},      // 261 "or"
      {" w", "or"},    // 262 " wor"
      {" wor", "l"},   // 263 " worl"
      {" worl", "d"},  // 264 " world"
      {"a", "a"},      // 265 "aa"
      {"aa", "aa"},    // 266 "aaaa"
  };
  for (const auto& [l, r] : merges) {
    c.merges.push_back(byte_level(l) + " " + byte_level(r));
    c.tokens.push_back(byte_level(l + r));
  }
  c.types.assign(c.tokens.size(), TokenType::kNormal);
  for (const auto& [text, type] :
       std::vector<std::pair<std::string, TokenType>>{{"<|im_start|>", TokenType::kControl},
                                                      {"<|im_end|>", TokenType::kControl},
                                                      {"<tool>", TokenType::kUserDefined}}) {
    c.tokens.push_back(text);
    c.types.push_back(type);
  }
  c.bos_id = 267;
  c.eos_id = 268;
  c.pre_tokenizer = "smollm";
  c.chat_template =
      "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + "
      "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}";
  return c;
}

/// The same vocabulary as a GGUF file's tokenizer metadata (no tensors).
inline GgufWriter tiny_bpe_gguf() {
  const BpeTokenizerConfig c = tiny_bpe_config();
  std::vector<std::int32_t> types;
  for (const TokenType t : c.types) types.push_back(static_cast<std::int32_t>(t));
  GgufWriter w;
  w.add("tokenizer.ggml.model", gguf::str("gpt2"))
      .add("tokenizer.ggml.pre", gguf::str(c.pre_tokenizer))
      .add("tokenizer.ggml.tokens", gguf::strings(c.tokens))
      .add("tokenizer.ggml.token_type", gguf::i32s(types))
      .add("tokenizer.ggml.merges", gguf::strings(c.merges))
      .add("tokenizer.ggml.bos_token_id", gguf::u32(static_cast<std::uint32_t>(*c.bos_id)))
      .add("tokenizer.ggml.eos_token_id", gguf::u32(static_cast<std::uint32_t>(*c.eos_id)))
      .add("tokenizer.ggml.add_bos_token", gguf::boolean(false))
      .add("tokenizer.chat_template", gguf::str(c.chat_template));
  return w;
}

}  // namespace inferkit::test
