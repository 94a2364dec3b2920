// SPDX-License-Identifier: Apache-2.0
// Shared by the examples that run a real model (generate, serve_bench), not part of the library:
// where the model file is (--model, else INFERKIT_MODEL, else the models/ folder
// scripts/fetch-model.sh fills), and the model, its tokenizer and its end-of-generation tokens
// loaded together.
#pragma once

#include <cstdlib>
#include <examples/support/cli_main.hpp>
#include <filesystem>
#include <inferkit/core/dtype.hpp>
#include <inferkit/core/token_id.hpp>
#include <inferkit/model/bpe_tokenizer.hpp>
#include <inferkit/model/gguf.hpp>
#include <inferkit/model/llama_model.hpp>
#include <string>
#include <vector>

namespace inferkit::examples {

/// The model file to use: `flag` if given, else $INFERKIT_MODEL, else the fetched SmolLM2.
/// Throws `UsageError` saying how to fetch it when none exists.
inline std::string model_path(const std::string& flag) {
  if (!flag.empty()) return flag;
  if (const char* env = std::getenv("INFERKIT_MODEL"); env != nullptr && *env != '\0') return env;
  const std::string fetched = INFERKIT_SOURCE_DIR "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
  if (std::filesystem::is_regular_file(fetched)) return fetched;
  throw UsageError{"no model file: run scripts/fetch-model.sh, or pass --model FILE.gguf"};
}

/// The --activations flag's values ("fp32", "int8"; checked by the parser with one_of).
inline ActivationPrecision activation_precision(const std::string& flag) {
  return flag == "int8" ? ActivationPrecision::kInt8 : ActivationPrecision::kFp32;
}

/// The --kv-dtype flag's choices: the KV formats an Engine serves (kEngineKVDTypes), by the names
/// try_parse_dtype reads ("fp8" is fp8_e4m3).
inline const std::vector<std::string> kKvDtypeChoices = {"fp16",     "bf16", "fp8", "fp8_e4m3",
                                                         "fp8_e5m2", "int8", "int4"};

/// The --kv-dtype flag's value as a DType (checked by the parser with one_of(kKvDtypeChoices)).
inline DType kv_dtype(const std::string& flag) {
  return try_parse_dtype(flag).value_or(DType::kFloat16);
}

/// A GGUF model with its tokenizer (the file must outlive both: they are views into it).
struct LoadedModel {
  GgufFile file;
  LlamaModel model;
  BpeTokenizer tokenizer;
  std::vector<TokenId> end_tokens;  ///< ids that end a generation (eos, <|im_end|>, ...)

  explicit LoadedModel(const std::string& path,
                       ActivationPrecision activations = ActivationPrecision::kFp32)
      : file(GgufFile::open(path)),
        model(file, LlamaModelOptions{activations}),
        tokenizer(BpeTokenizer::from_gguf(file)) {
    for (TokenId id = 0; id < tokenizer.vocab_size(); ++id) {
      if (tokenizer.is_end_of_generation(id)) end_tokens.push_back(id);
    }
  }
};

}  // namespace inferkit::examples
