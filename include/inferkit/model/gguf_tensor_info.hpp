// SPDX-License-Identifier: Apache-2.0
// GgufTensorInfo: what a GGUF file says about one tensor (name, element type, shape in ggml's
// order, where its bytes are), as `GgufFile` reads and validates it. The model loader looks
// tensors up by name and hands their bytes to the quantized linear layers.
// Threads: a value type; safe from any number of threads.
#pragma once

#include <cstdint>
#include <inferkit/model/ggml_type.hpp>
#include <string>
#include <vector>

namespace inferkit {

/// One tensor of a GGUF file. Shapes are in ggml's order: `dims[0]` is the length of a row
/// (the contiguous dimension), so a [rows, cols] row-major matrix has `dims = {cols, rows}`
/// (`token_embd.weight` of SmolLM2 is `{576, 49152}`: 49,152 rows of 576 values).
struct GgufTensorInfo {
  std::string name;                ///< e.g. "blk.0.attn_q.weight"
  GgmlType type = GgmlType::kF32;  ///< element type; one that `ggml_type_layout` knows
  std::vector<std::int64_t> dims;  ///< ggml order, dims[0] is the row length; at most 4
  std::uint64_t offset = 0;        ///< bytes from the start of the data section (aligned)
  std::int64_t num_elements = 0;   ///< product of dims (1 for a tensor with no dims)
  std::int64_t num_bytes = 0;      ///< bytes of data: rows times `ggml_row_bytes(type, dims[0])`

  /// Rows of the tensor viewed as a matrix of `dims[0]`-long rows: the product of dims[1..].
  [[nodiscard]] std::int64_t rows() const noexcept {
    std::int64_t r = 1;
    for (std::size_t i = 1; i < dims.size(); ++i) r *= dims[i];
    return r;
  }
};

}  // namespace inferkit
