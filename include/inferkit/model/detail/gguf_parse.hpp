// SPDX-License-Identifier: Apache-2.0
// The GGUF parser behind `GgufFile`: header, metadata (every value type, arrays nested to a
// bounded depth), tensor infos, and the layout of the data section (alignment, bounds, no
// overlaps). A file is untrusted input: every count is checked against the bytes left before it
// sizes an allocation, every size against int64 overflow, and each failure is an `Error` naming
// what was being read and its byte offset.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <inferkit/core/error.hpp>
#include <inferkit/model/detail/gguf_cursor.hpp>
#include <inferkit/model/ggml_type.hpp>
#include <inferkit/model/gguf_tensor_info.hpp>
#include <inferkit/model/gguf_value.hpp>
#include <limits>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace inferkit::detail {

/// GGUF's default data alignment, when `general.alignment` is absent.
inline constexpr std::uint64_t kGgufDefaultAlignment = 32;
/// ggml's GGML_MAX_DIMS: a tensor has at most this many dims.
inline constexpr std::uint32_t kGgufMaxDims = 4;
/// Arrays of arrays are read down to this depth (llama.cpp writes none).
inline constexpr int kGgufMaxArrayDepth = 8;
/// At most this many arrays nested inside arrays in one file, so a file of empty arrays cannot
/// make the reader allocate far more than its own size.
inline constexpr std::uint64_t kGgufMaxNestedArrays = std::uint64_t{1} << 20;

/// The parsed file: what `GgufFile` keeps besides the bytes.
struct GgufParsed {
  std::uint32_t version = 0;
  std::uint64_t alignment = kGgufDefaultAlignment;
  std::uint64_t data_offset = 0;  // absolute byte offset of the data section
  std::vector<GgufValue> metadata;
  std::unordered_map<std::string_view, std::size_t> metadata_index;
  std::vector<GgufTensorInfo> tensors;
  std::vector<std::uint64_t> tensor_info_offsets;  // where each tensor's info starts
  std::unordered_map<std::string_view, std::size_t> tensor_index;
};

inline bool gguf_known_type(std::uint32_t id) noexcept {
  return id <= static_cast<std::uint32_t>(GgufValueType::kFloat64);
}

/// Reads a value of `type` (the type id is already consumed) for metadata `key`.
inline GgufValue read_gguf_value(GgufCursor& c, GgufValueType type, std::string_view key, int depth,
                                 std::uint64_t& nested_budget) {
  const std::uint64_t at = c.pos();
  const std::string what = concat({"metadata '", key, "' value"});
  if (type == GgufValueType::kString) return GgufValue::of_string(key, at, c.read_string(what));
  if (type != GgufValueType::kArray) {
    const std::size_t n = gguf_scalar_bytes(type);
    const std::uint64_t bits = c.read_le(n, what);
    if (type == GgufValueType::kBool && bits > 1) {
      gguf_error(ErrorCode::kInvalidArgument, c.source(), what, at,
                 concat({"bool byte is ", std::to_string(bits), ", not 0 or 1"}));
    }
    return {type, key, at, bits};
  }
  const std::uint32_t element_id = c.read_u32(what);
  if (!gguf_known_type(element_id)) {
    gguf_error(ErrorCode::kUnsupported, c.source(), what, at,
               concat({"array element type ", std::to_string(element_id),
                       " is not a GGUF value type (0..12)"}));
  }
  const auto element = static_cast<GgufValueType>(element_id);
  const std::uint64_t count = c.read_u64(what);
  if (element == GgufValueType::kString) {
    c.check_count(count, 8, what, at);
    std::vector<std::string_view> strings;
    strings.reserve(static_cast<std::size_t>(count));
    for (std::uint64_t i = 0; i < count; ++i) strings.push_back(c.read_string(what));
    return GgufValue::of_string_array(key, at, std::move(strings));
  }
  if (element == GgufValueType::kArray) {
    if (depth + 1 >= kGgufMaxArrayDepth) {
      gguf_error(ErrorCode::kUnsupported, c.source(), what, at,
                 concat({"arrays nest deeper than ", std::to_string(kGgufMaxArrayDepth)}));
    }
    c.check_count(count, 12, what, at);  // each inner array: element type + count
    if (count > nested_budget) {
      gguf_error(ErrorCode::kUnsupported, c.source(), what, at,
                 concat({"more than ", std::to_string(kGgufMaxNestedArrays),
                         " nested arrays in one file"}));
    }
    nested_budget -= count;
    std::vector<GgufValue> arrays;
    arrays.reserve(static_cast<std::size_t>(count));
    for (std::uint64_t i = 0; i < count; ++i) {
      arrays.push_back(read_gguf_value(c, GgufValueType::kArray, key, depth + 1, nested_budget));
    }
    return GgufValue::of_nested_array(key, at, std::move(arrays));
  }
  const std::size_t n = gguf_scalar_bytes(element);
  c.check_count(count, n, what, at);
  const std::span<const std::byte> raw = c.take(count * n, what);
  if (element == GgufValueType::kBool) {
    for (std::size_t i = 0; i < raw.size(); ++i) {
      if (std::to_integer<unsigned>(raw[i]) > 1) {
        gguf_error(ErrorCode::kInvalidArgument, c.source(), what, at + 12 + i,
                   concat({"bool element ", std::to_string(i), " is ",
                           std::to_string(std::to_integer<unsigned>(raw[i])), ", not 0 or 1"}));
      }
    }
  }
  return GgufValue::of_scalar_array(key, at, element, count, raw);
}

/// a * b, or nullopt when it overflows int64 (both >= 0).
inline std::optional<std::int64_t> checked_mul(std::int64_t a, std::int64_t b) noexcept {
  if (a != 0 && b > std::numeric_limits<std::int64_t>::max() / a) return std::nullopt;
  return a * b;
}

inline std::string gguf_shape_text(std::span<const std::int64_t> dims) {
  std::string s = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(dims[i]);
  }
  return s + "]";
}

/// Reads one tensor info (name, dims, type, offset) and sizes it.
inline GgufTensorInfo read_gguf_tensor_info(GgufCursor& c, std::uint64_t index) {
  const std::uint64_t at = c.pos();
  const std::string what = concat({"tensor info #", std::to_string(index)});
  GgufTensorInfo t;
  t.name = std::string(c.read_string(what));
  const std::string named = concat({"tensor '", t.name, "' (info #", std::to_string(index), ")"});
  const std::uint32_t n_dims = c.read_u32(named);
  if (n_dims > kGgufMaxDims) {
    gguf_error(ErrorCode::kUnsupported, c.source(), named, at,
               concat({"has ", std::to_string(n_dims), " dims, more than ggml's ",
                       std::to_string(kGgufMaxDims)}));
  }
  for (std::uint32_t d = 0; d < n_dims; ++d) {
    const std::uint64_t dim = c.read_u64(named);
    if (dim > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      gguf_error(ErrorCode::kOutOfRange, c.source(), named, at,
                 concat({"dim ", std::to_string(d), " = ", std::to_string(dim),
                         " is past int64's range"}));
    }
    t.dims.push_back(static_cast<std::int64_t>(dim));
  }
  const std::uint32_t type_id = c.read_u32(named);
  t.type = static_cast<GgmlType>(type_id);
  t.offset = c.read_u64(named);
  const std::optional<GgmlTypeLayout> layout = ggml_type_layout(t.type);
  if (!layout) {
    gguf_error(ErrorCode::kUnsupported, c.source(), named, at,
               concat({"ggml type ", std::to_string(type_id),
                       " is not one inferkit reads (f32, f16, bf16, q4_0, q4_1, q8_0)"}));
  }
  const std::string shape = gguf_shape_text(t.dims);
  std::int64_t elements = 1;
  for (const std::int64_t dim : t.dims) {
    const std::optional<std::int64_t> product = checked_mul(elements, dim);
    if (!product) {
      gguf_error(ErrorCode::kOutOfRange, c.source(), named, at,
                 concat({"shape ", shape, " has more elements than int64 holds"}));
    }
    elements = *product;
  }
  t.num_elements = elements;
  std::int64_t rows = 1;  // checked apart: with dims[0] == 0, elements cannot bound it
  for (std::size_t d = 1; d < t.dims.size(); ++d) {
    const std::optional<std::int64_t> product = checked_mul(rows, t.dims[d]);
    if (!product) {
      gguf_error(ErrorCode::kOutOfRange, c.source(), named, at,
                 concat({"shape ", shape, " has more rows than int64 holds"}));
    }
    rows = *product;
  }
  const std::int64_t row = t.dims.empty() ? 1 : t.dims[0];
  if (row % layout->block_elements != 0) {
    gguf_error(ErrorCode::kInvalidArgument, c.source(), named, at,
               concat({"row length dims[0] = ", std::to_string(row), " of shape ", shape,
                       " is not a multiple of the ", layout->name, " block size ",
                       std::to_string(layout->block_elements)}));
  }
  const std::optional<std::int64_t> row_bytes =
      checked_mul(row / layout->block_elements, layout->block_bytes);
  const std::optional<std::int64_t> bytes =
      row_bytes ? checked_mul(*row_bytes, rows) : std::nullopt;
  if (!bytes) {
    gguf_error(ErrorCode::kOutOfRange, c.source(), named, at,
               concat({"shape ", shape, " of ", layout->name, " has more bytes than int64 holds"}));
  }
  t.num_bytes = *bytes;
  return t;
}

/// Checks that every tensor's data is aligned, inside the file and apart from the others.
inline void check_gguf_data_layout(const GgufParsed& p, std::uint64_t file_size,
                                   std::string_view source) {
  const std::uint64_t data_bytes = p.data_offset <= file_size ? file_size - p.data_offset : 0;
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < p.tensors.size(); ++i) {
    const GgufTensorInfo& t = p.tensors[i];
    const std::string named = concat({"tensor '", t.name, "' (info #", std::to_string(i), ")"});
    const std::uint64_t at = p.tensor_info_offsets[i];
    if (t.offset % p.alignment != 0) {
      gguf_error(ErrorCode::kInvalidArgument, source, named, at,
                 concat({"data offset ", std::to_string(t.offset),
                         " is not a multiple of the alignment ", std::to_string(p.alignment)}));
    }
    const auto bytes = static_cast<std::uint64_t>(t.num_bytes);
    if (t.offset > data_bytes || bytes > data_bytes - t.offset) {
      gguf_error(ErrorCode::kOutOfRange, source, named, at,
                 concat({"data [", std::to_string(t.offset), ", +", std::to_string(bytes),
                         ") runs past the end of the data section (", std::to_string(data_bytes),
                         " bytes from byte offset ", std::to_string(p.data_offset), ")"}));
    }
    if (bytes > 0) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return p.tensors[a].offset < p.tensors[b].offset;
  });
  for (std::size_t k = 1; k < order.size(); ++k) {
    const GgufTensorInfo& prev = p.tensors[order[k - 1]];
    const GgufTensorInfo& cur = p.tensors[order[k]];
    if (prev.offset + static_cast<std::uint64_t>(prev.num_bytes) > cur.offset) {
      gguf_error(ErrorCode::kInvalidArgument, source,
                 concat({"tensor '", cur.name, "' (info #", std::to_string(order[k]), ")"}),
                 p.tensor_info_offsets[order[k]],
                 concat({"data at offset ", std::to_string(cur.offset), " overlaps tensor '",
                         prev.name, "' at [", std::to_string(prev.offset), ", +",
                         std::to_string(prev.num_bytes), ")"}));
    }
  }
}

/// Parses a whole GGUF v2/v3 image. `source` names the file in messages.
inline GgufParsed parse_gguf(std::span<const std::byte> bytes, std::string_view source) {
  GgufCursor c(bytes, source);
  GgufParsed p;
  const std::span<const std::byte> magic = c.take(4, "magic");
  if (std::memcmp(magic.data(), "GGUF", 4) != 0) {
    gguf_error(ErrorCode::kInvalidArgument, source, "magic", 0,
               concat({"the file does not start with 'GGUF' (found 0x",
                       [&] {
                         static constexpr char kHex[] = "0123456789abcdef";
                         std::string hex;
                         for (const std::byte b : magic) {
                           hex += kHex[std::to_integer<unsigned>(b) >> 4];
                           hex += kHex[std::to_integer<unsigned>(b) & 15];
                         }
                         return hex;
                       }(),
                       ")"}));
  }
  p.version = c.read_u32("version");
  if (p.version != 2 && p.version != 3) {
    const std::uint32_t swapped = ((p.version & 0xffu) << 24) | ((p.version & 0xff00u) << 8) |
                                  ((p.version >> 8) & 0xff00u) | (p.version >> 24);
    gguf_error(ErrorCode::kUnsupported, source, "version", 4,
               concat({"GGUF version ", std::to_string(p.version),
                       p.version == 1 ? " (32-bit counts)" : "",
                       swapped == 2 || swapped == 3 ? " (a big-endian file)" : "",
                       " is not supported; inferkit reads versions 2 and 3"}));
  }
  const std::uint64_t tensor_count = c.read_u64("tensor count");
  const std::uint64_t kv_count = c.read_u64("metadata count");
  c.check_count(kv_count, 8 + 4 + 1, "metadata count", 16);  // key length, type, >= 1 byte
  c.check_count(tensor_count, 8 + 4 + 4 + 8, "tensor count", 8);
  p.metadata.reserve(static_cast<std::size_t>(kv_count));
  std::uint64_t nested_budget = kGgufMaxNestedArrays;
  for (std::uint64_t i = 0; i < kv_count; ++i) {
    const std::uint64_t at = c.pos();
    const std::string what = concat({"metadata #", std::to_string(i)});
    const std::string_view key = c.read_string(what);
    const auto [it, inserted] = p.metadata_index.emplace(key, p.metadata.size());
    if (!inserted) {
      gguf_error(ErrorCode::kInvalidArgument, source, concat({"metadata key '", key, "'"}), at,
                 concat({"is a duplicate (first at byte offset ",
                         std::to_string(p.metadata[it->second].offset()), ")"}));
    }
    const std::uint64_t type_at = c.pos();
    const std::uint32_t type_id = c.read_u32(what);
    if (!gguf_known_type(type_id)) {
      gguf_error(
          ErrorCode::kUnsupported, source, concat({"metadata '", key, "' type"}), type_at,
          concat({"value type ", std::to_string(type_id), " is not a GGUF value type (0..12)"}));
    }
    p.metadata.push_back(
        read_gguf_value(c, static_cast<GgufValueType>(type_id), key, 0, nested_budget));
  }
  if (const auto it = p.metadata_index.find("general.alignment"); it != p.metadata_index.end()) {
    const GgufValue& v = p.metadata[it->second];
    const std::uint32_t alignment = v.as_u32();
    if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
      gguf_error(ErrorCode::kInvalidArgument, source, "metadata 'general.alignment'", v.offset(),
                 concat({"alignment ", std::to_string(alignment), " is not a power of two"}));
    }
    p.alignment = alignment;
  }
  c.check_count(tensor_count, 8 + 4 + 4 + 8, "tensor count", 8);
  p.tensors.reserve(static_cast<std::size_t>(tensor_count));
  p.tensor_info_offsets.reserve(static_cast<std::size_t>(tensor_count));
  for (std::uint64_t i = 0; i < tensor_count; ++i) {
    p.tensor_info_offsets.push_back(c.pos());
    p.tensors.push_back(read_gguf_tensor_info(c, i));
  }
  for (std::size_t i = 0; i < p.tensors.size(); ++i) {
    const auto [it, inserted] = p.tensor_index.emplace(p.tensors[i].name, i);
    if (!inserted) {
      gguf_error(ErrorCode::kInvalidArgument, source,
                 concat({"tensor '", p.tensors[i].name, "' (info #", std::to_string(i), ")"}),
                 p.tensor_info_offsets[i],
                 concat({"is a duplicate name (first: info #", std::to_string(it->second), ")"}));
    }
  }
  // The data section starts at the next multiple of the alignment after the tensor infos.
  p.data_offset = (c.pos() + p.alignment - 1) / p.alignment * p.alignment;
  check_gguf_data_layout(p, c.size(), source);
  return p;
}

}  // namespace inferkit::detail
