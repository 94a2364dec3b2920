// SPDX-License-Identifier: Apache-2.0
// Tests for model/gguf_tensor_info.hpp: rows() is the product of the dims past the row length.
#include <catch2/catch.hpp>
#include <inferkit/model/gguf_tensor_info.hpp>

using namespace inferkit;

TEST_CASE("GgufTensorInfo: rows of a tensor viewed as a matrix", "[model][gguf_tensor_info]") {
  GgufTensorInfo t;
  CHECK(t.rows() == 1);  // no dims: a scalar
  t.dims = {576};
  CHECK(t.rows() == 1);
  t.dims = {576, 49152};
  CHECK(t.rows() == 49152);
  t.dims = {64, 3, 5, 7};
  CHECK(t.rows() == 105);
}
