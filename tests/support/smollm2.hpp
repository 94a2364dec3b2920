// SPDX-License-Identifier: Apache-2.0
// Test helper: SmolLM2-135M-Instruct loaded once per test binary (file, model, tokenizer and its
// end-of-text tokens), and INFERKIT_NEED_SMOLLM2, which skips a test case with a warning when the
// model has not been fetched (scripts/test.sh fetches it first, so CI never skips).
#pragma once

#include <catch2/catch.hpp>
#include <inferkit/model/bpe_tokenizer.hpp>
#include <inferkit/model/gguf.hpp>
#include <inferkit/model/llama_model.hpp>
#include <optional>
#include <string>
#include <tests/support/model_files.hpp>
#include <vector>

namespace inferkit::test {

struct LoadedSmolLM2 {
  GgufFile file;  // outlives model and tokenizer, which read its mapped tensors and vocabulary
  LlamaModel model;
  BpeTokenizer tokenizer;
  std::vector<TokenId> end_tokens;  // the tokenizer's end-of-sequence token, if it names one
  explicit LoadedSmolLM2(const std::string& path)
      : file(GgufFile::open(path)), model(file), tokenizer(BpeTokenizer::from_gguf(file)) {
    if (tokenizer.eos_id()) end_tokens.push_back(*tokenizer.eos_id());
  }
};

/// The model, loaded on first use; nullptr when it has not been fetched.
inline const LoadedSmolLM2* smollm2() {
  static const std::optional<std::string> path = smollm2_path();
  if (!path) return nullptr;
  static const LoadedSmolLM2 loaded(*path);
  return &loaded;
}

/// The same file's model with int8 activations (LlamaModelOptions), built on first use; nullptr
/// when the model has not been fetched.
inline const LlamaModel* smollm2_int8() {
  const LoadedSmolLM2* loaded = smollm2();
  if (loaded == nullptr) return nullptr;
  static const LlamaModel model(loaded->file, LlamaModelOptions{ActivationPrecision::kInt8});
  return &model;
}

}  // namespace inferkit::test

/// Declares `const inferkit::test::LoadedSmolLM2* m`, or ends the test case with a warning when
/// the model has not been fetched.
#define INFERKIT_NEED_SMOLLM2(m)                                          \
  const ::inferkit::test::LoadedSmolLM2* m = ::inferkit::test::smollm2(); \
  if (m == nullptr) {                                                     \
    WARN("SmolLM2 not fetched (run scripts/fetch-model.sh): skipped");    \
    return;                                                               \
  }
