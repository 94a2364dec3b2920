// SPDX-License-Identifier: Apache-2.0
// Test helper: where the repository's files and the fetched model are. Paths are found from this
// header's own location (the test binaries are built from the source tree), and the model from
// INFERKIT_MODEL (scripts/test.sh exports it after scripts/fetch-model.sh) or models/.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace inferkit::test {

/// `relative` (e.g. "tests/data/x.jsonl") under the repository root.
inline std::string source_path(std::string_view relative) {
  const std::filesystem::path here(__FILE__);  // <root>/tests/support/model_files.hpp
  return (here.parent_path().parent_path().parent_path() / relative).string();
}

/// The SmolLM2-135M-Instruct GGUF, or nullopt when it has not been fetched (the tests that need
/// it then say so and pass: CI fetches it first).
inline std::optional<std::string> smollm2_path() {
  if (const char* env = std::getenv("INFERKIT_MODEL"); env != nullptr && *env != '\0') {
    if (std::filesystem::is_regular_file(env)) return std::string(env);
  }
  const std::string local = source_path("models/SmolLM2-135M-Instruct.Q4_1.gguf");
  if (std::filesystem::is_regular_file(local)) return local;
  return std::nullopt;
}

}  // namespace inferkit::test
