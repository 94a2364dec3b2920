// SPDX-License-Identifier: Apache-2.0
// Tests for model/ggml_type.hpp: the block layouts match ggml's (ggml.c's type traits: block
// sizes QK4_0 = QK4_1 = QK8_0 = 32, block_q4_0 18 bytes, block_q4_1 20, block_q8_0 34), and row
// sizes are exact or rejected.
#include <catch2/catch.hpp>
#include <cstdint>
#include <inferkit/model/ggml_type.hpp>
#include <limits>
#include <tests/support/error_code.hpp>

using namespace inferkit;
using inferkit::test::code_of;

TEST_CASE("ggml_type_layout: the block layouts of ggml", "[model][ggml_type]") {
  // sizeof(ggml_half) = 2: q4_0 = d + 16 bytes, q4_1 = d + m + 16 bytes, q8_0 = d + 32 bytes.
  CHECK(ggml_type_layout(GgmlType::kQ4_0)->block_bytes == 2 + 16);
  CHECK(ggml_type_layout(GgmlType::kQ4_1)->block_bytes == 2 + 2 + 16);
  CHECK(ggml_type_layout(GgmlType::kQ8_0)->block_bytes == 2 + 32);
  for (GgmlType t : {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ8_0}) {
    CHECK(ggml_type_layout(t)->block_elements == 32);
  }
  CHECK(ggml_type_layout(GgmlType::kF32)->block_bytes == 4);
  CHECK(ggml_type_layout(GgmlType::kBF16)->name == "bf16");
  CHECK_FALSE(ggml_type_layout(static_cast<GgmlType>(12)));  // q4_K: not read by inferkit
}

TEST_CASE("ggml_row_bytes: exact sizes, bad rows rejected", "[model][ggml_type]") {
  CHECK(ggml_row_bytes(GgmlType::kQ4_1, 576) == 576 / 32 * 20);
  CHECK(ggml_row_bytes(GgmlType::kF16, 7) == 14);
  CHECK(ggml_row_bytes(GgmlType::kQ8_0, 0) == 0);
  CHECK(code_of([] { (void)ggml_row_bytes(GgmlType::kQ4_0, 33); }) == ErrorCode::kInvalidArgument);
  CHECK(code_of([] { (void)ggml_row_bytes(GgmlType::kF32, -1); }) == ErrorCode::kInvalidArgument);
  CHECK(code_of([] { (void)ggml_row_bytes(static_cast<GgmlType>(99), 32); }) ==
        ErrorCode::kUnsupported);
  CHECK(code_of([] {
          (void)ggml_row_bytes(GgmlType::kF32, std::numeric_limits<std::int64_t>::max());
        }) == ErrorCode::kOutOfRange);
}
