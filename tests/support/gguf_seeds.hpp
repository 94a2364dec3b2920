// SPDX-License-Identifier: Apache-2.0
// Test helper: the seed corpus of the GGUF fuzzer (tests/fuzz/corpus/gguf/), tiny valid files
// (under scripts/fuzz.sh's 4 KB input limit) that between them use every metadata type, nested
// arrays, tensors of every type inferkit reads, a llama configuration whose shapes are checked,
// and a tokenizer vocabulary. The hidden test "[.][fuzz_seeds]" writes them; a regular test
// checks that the committed files are still exactly these.
#pragma once

#include <cstdint>
#include <inferkit/model/ggml_type.hpp>
#include <string>
#include <tests/support/gguf_writer.hpp>
#include <tests/support/tiny_bpe.hpp>
#include <utility>
#include <vector>

namespace inferkit::test {

/// (file name, image) of each seed.
inline std::vector<std::pair<std::string, std::vector<std::byte>>> gguf_fuzz_seeds() {
  namespace g = gguf;
  std::vector<std::pair<std::string, std::vector<std::byte>>> seeds;
  {
    GgufWriter w;
    w.add("general.architecture", g::str("test"))
        .tensor("f32", GgmlType::kF32, {4, 2})
        .tensor("q8_0", GgmlType::kQ8_0, {32, 2}, {}, std::byte{0x3c});
    seeds.emplace_back("tensors.gguf", w.bytes());
  }
  {
    GgufWriter w;
    w.version(2)
        .alignment(64)
        .add("u8", g::u8(7))
        .add("i8", g::i8(-7))
        .add("u16", g::u16(700))
        .add("i16", g::i16(-700))
        .add("u32", g::u32(70000))
        .add("i32", g::i32(-70000))
        .add("f32", g::f32(0.5f))
        .add("bool", g::boolean(true))
        .add("str", g::str("text"))
        .add("u64", g::u64(1))
        .add("i64", g::i64(-1))
        .add("f64", g::f64(2.5))
        .add("strs", g::strings({"a", "bc"}))
        .add("nested", g::array(GgufValueType::kArray, {g::i32s({1, 2}), g::f32s({1.0f})}))
        .tensor("f16", GgmlType::kF16, {8})
        .tensor("bf16", GgmlType::kBF16, {8})
        .tensor("q4_0", GgmlType::kQ4_0, {32})
        .tensor("q4_1", GgmlType::kQ4_1, {32});
    seeds.emplace_back("every_type.gguf", w.bytes());
  }
  {
    GgufWriter w = llama_metadata(32, 1, 64, 2, 1);
    w.add("llama.vocab_size", g::u32(4))
        .tensor("token_embd.weight", GgmlType::kQ8_0, {32, 4})
        .tensor("blk.0.attn_norm.weight", GgmlType::kF32, {32})
        .tensor("blk.0.attn_k.weight", GgmlType::kQ4_1, {32, 16})
        .tensor("blk.0.ffn_down.weight", GgmlType::kQ4_0, {64, 32})
        .tensor("output_norm.weight", GgmlType::kF32, {32});
    seeds.emplace_back("llama.gguf", w.bytes());
  }
  {
    // A tokenizer over a few letters (bytes without tokens are dropped), with merges, a
    // control token and a ChatML template.
    std::vector<std::string> tokens;
    for (const char c : std::string(" abehlorw'1\n"))
      tokens.push_back(byte_level(std::string(1, c)));
    std::vector<std::string> merges;
    for (const auto& [l, r] : std::vector<std::pair<std::string, std::string>>{
             {"h", "e"}, {"l", "l"}, {"he", "ll"}, {" ", "w"}, {"o", "r"}, {" w", "or"}}) {
      merges.push_back(byte_level(l) + " " + byte_level(r));
      tokens.push_back(byte_level(l + r));
    }
    tokens.push_back("<|im_end|>");
    std::vector<std::int32_t> types(tokens.size(), 1);
    types.back() = 3;
    GgufWriter w;
    w.add("tokenizer.ggml.model", g::str("gpt2"))
        .add("tokenizer.ggml.pre", g::str("smollm"))
        .add("tokenizer.ggml.tokens", g::strings(tokens))
        .add("tokenizer.ggml.token_type", g::i32s(types))
        .add("tokenizer.ggml.merges", g::strings(merges))
        .add("tokenizer.ggml.eos_token_id", g::u32(static_cast<std::uint32_t>(tokens.size() - 1)))
        .add("tokenizer.chat_template", g::str("<|im_start|>{{role}}<|im_end|>"));
    seeds.emplace_back("tokenizer.gguf", w.bytes());
  }
  return seeds;
}

}  // namespace inferkit::test
