// SPDX-License-Identifier: Apache-2.0
// Test helper: writes GGUF images byte by byte, valid or deliberately broken, so the reader's
// tests (and the fuzzer's seed corpus) can build every case from scratch: metadata of every type,
// tensors with their data laid out at the alignment, and knobs that make a file lie (counts,
// offsets, raw type ids). It writes the format from the GGUF spec, independently of the reader.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <inferkit/model/ggml_type.hpp>
#include <inferkit/model/gguf_value.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace inferkit::test {

/// An encoded metadata value: its type id and its payload bytes (what follows the type id).
struct GgufEncoded {
  std::uint32_t type = 0;
  std::vector<std::byte> bytes;
};

namespace gguf {

inline void put_le(std::vector<std::byte>& out, std::uint64_t v, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) out.push_back(static_cast<std::byte>((v >> (8 * i)) & 0xff));
}
inline void put_string(std::vector<std::byte>& out, std::string_view s) {
  put_le(out, s.size(), 8);
  for (const char c : s) out.push_back(static_cast<std::byte>(c));
}
inline GgufEncoded scalar(GgufValueType type, std::uint64_t bits, std::size_t n) {
  GgufEncoded e{static_cast<std::uint32_t>(type), {}};
  put_le(e.bytes, bits, n);
  return e;
}
/// An integer of type `T` as GGUF type `type` (two's complement, little-endian).
template <class T>
GgufEncoded integer(GgufValueType type, T v) {
  return scalar(type, static_cast<std::make_unsigned_t<T>>(v), sizeof(T));
}
inline GgufEncoded u8(std::uint8_t v) { return integer(GgufValueType::kUint8, v); }
inline GgufEncoded i8(std::int8_t v) { return integer(GgufValueType::kInt8, v); }
inline GgufEncoded u16(std::uint16_t v) { return integer(GgufValueType::kUint16, v); }
inline GgufEncoded i16(std::int16_t v) { return integer(GgufValueType::kInt16, v); }
inline GgufEncoded u32(std::uint32_t v) { return integer(GgufValueType::kUint32, v); }
inline GgufEncoded i32(std::int32_t v) { return integer(GgufValueType::kInt32, v); }
inline GgufEncoded u64(std::uint64_t v) { return integer(GgufValueType::kUint64, v); }
inline GgufEncoded i64(std::int64_t v) { return integer(GgufValueType::kInt64, v); }
inline GgufEncoded f32(float v) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &v, 4);
  return scalar(GgufValueType::kFloat32, bits, 4);
}
inline GgufEncoded f64(double v) {
  std::uint64_t bits = 0;
  std::memcpy(&bits, &v, 8);
  return scalar(GgufValueType::kFloat64, bits, 8);
}
inline GgufEncoded boolean(bool v) { return scalar(GgufValueType::kBool, v ? 1 : 0, 1); }
inline GgufEncoded str(std::string_view s) {
  GgufEncoded e{static_cast<std::uint32_t>(GgufValueType::kString), {}};
  put_string(e.bytes, s);
  return e;
}
/// An array of `element` whose elements are `items` (each encoded as that type; arrays of
/// arrays pass `kArray` and array items).
inline GgufEncoded array(GgufValueType element, const std::vector<GgufEncoded>& items) {
  GgufEncoded e{static_cast<std::uint32_t>(GgufValueType::kArray), {}};
  put_le(e.bytes, static_cast<std::uint32_t>(element), 4);
  put_le(e.bytes, items.size(), 8);
  for (const GgufEncoded& item : items)
    e.bytes.insert(e.bytes.end(), item.bytes.begin(), item.bytes.end());
  return e;
}
inline GgufEncoded strings(const std::vector<std::string>& items) {
  std::vector<GgufEncoded> encoded;
  for (const std::string& s : items) encoded.push_back(str(s));
  return array(GgufValueType::kString, encoded);
}
inline GgufEncoded i32s(const std::vector<std::int32_t>& items) {
  std::vector<GgufEncoded> encoded;
  for (const std::int32_t v : items) encoded.push_back(i32(v));
  return array(GgufValueType::kInt32, encoded);
}
inline GgufEncoded f32s(const std::vector<float>& items) {
  std::vector<GgufEncoded> encoded;
  for (const float v : items) encoded.push_back(f32(v));
  return array(GgufValueType::kFloat32, encoded);
}

}  // namespace gguf

/// A tensor to write. `type` is a raw ggml type id so tests can write unknown ones; `offset`
/// overrides the data offset written in the info (the data is still placed in order).
struct GgufTensorSpec {
  std::string name;
  std::uint32_t type = 0;
  std::vector<std::uint64_t> dims;
  std::vector<std::byte> data;  // written at the tensor's aligned place in the data section
  std::optional<std::uint64_t> offset;
};

/// Builds a GGUF image. Defaults: version 3, alignment 32, counts as added.
class GgufWriter {
 public:
  /// Where the last `bytes()` call put things.
  struct Layout {
    std::vector<std::size_t> kv_offsets;      // start of each metadata entry (its key length)
    std::vector<std::size_t> tensor_offsets;  // start of each tensor info (its name length)
    std::size_t data_offset = 0;              // start of the data section
  };

  GgufWriter& version(std::uint32_t v) {
    version_ = v;
    return *this;
  }
  GgufWriter& add(std::string key, GgufEncoded value) {
    kvs_.emplace_back(std::move(key), std::move(value));
    return *this;
  }
  /// Adds `general.alignment` and lays the data out at that alignment.
  GgufWriter& alignment(std::uint32_t a) {
    alignment_ = a;
    return add("general.alignment", gguf::u32(a));
  }
  /// A tensor of a known type; `data` defaults to the bytes its shape needs, filled with `fill`.
  GgufWriter& tensor(std::string name, GgmlType type, std::vector<std::uint64_t> dims,
                     std::vector<std::byte> data = {}, std::byte fill = std::byte{0}) {
    if (data.empty()) {
      std::int64_t rows = 1;
      for (std::size_t i = 1; i < dims.size(); ++i) rows *= static_cast<std::int64_t>(dims[i]);
      const auto row = static_cast<std::int64_t>(dims.empty() ? 1 : dims[0]);
      data.assign(static_cast<std::size_t>(ggml_row_bytes(type, row) * rows), fill);
    }
    return tensor(GgufTensorSpec{std::move(name), static_cast<std::uint32_t>(type), std::move(dims),
                                 std::move(data), std::nullopt});
  }
  GgufWriter& tensor(GgufTensorSpec spec) {
    tensors_.push_back(std::move(spec));
    return *this;
  }
  /// Writes `n` instead of the real metadata count.
  GgufWriter& kv_count(std::uint64_t n) {
    kv_count_ = n;
    return *this;
  }
  /// Writes `n` instead of the real tensor count.
  GgufWriter& tensor_count(std::uint64_t n) {
    tensor_count_ = n;
    return *this;
  }

  /// The image. Fills `layout()`.
  [[nodiscard]] std::vector<std::byte> bytes() {
    std::vector<std::byte> out;
    layout_ = {};
    for (const char c : std::string_view("GGUF")) out.push_back(static_cast<std::byte>(c));
    gguf::put_le(out, version_, 4);
    gguf::put_le(out, tensor_count_.value_or(tensors_.size()), 8);
    gguf::put_le(out, kv_count_.value_or(kvs_.size()), 8);
    for (const auto& [key, value] : kvs_) {
      layout_.kv_offsets.push_back(out.size());
      gguf::put_string(out, key);
      gguf::put_le(out, value.type, 4);
      out.insert(out.end(), value.bytes.begin(), value.bytes.end());
    }
    std::vector<std::size_t> places;
    std::size_t cursor = 0;
    for (const GgufTensorSpec& t : tensors_) {
      cursor = align(cursor);
      places.push_back(cursor);
      cursor += t.data.size();
    }
    for (std::size_t i = 0; i < tensors_.size(); ++i) {
      const GgufTensorSpec& t = tensors_[i];
      layout_.tensor_offsets.push_back(out.size());
      gguf::put_string(out, t.name);
      gguf::put_le(out, t.dims.size(), 4);
      for (const std::uint64_t d : t.dims) gguf::put_le(out, d, 8);
      gguf::put_le(out, t.type, 4);
      gguf::put_le(out, t.offset.value_or(places[i]), 8);
    }
    out.resize(align(out.size()), std::byte{0});
    layout_.data_offset = out.size();
    for (std::size_t i = 0; i < tensors_.size(); ++i) {
      out.resize(layout_.data_offset + places[i], std::byte{0});
      out.insert(out.end(), tensors_[i].data.begin(), tensors_[i].data.end());
    }
    return out;
  }

  [[nodiscard]] const Layout& layout() const noexcept { return layout_; }

 private:
  [[nodiscard]] std::size_t align(std::size_t n) const {
    return alignment_ == 0 ? n : (n + alignment_ - 1) / alignment_ * alignment_;
  }

  std::uint32_t version_ = 3;
  std::uint32_t alignment_ = 32;
  std::vector<std::pair<std::string, GgufEncoded>> kvs_;
  std::vector<GgufTensorSpec> tensors_;
  std::optional<std::uint64_t> kv_count_;
  std::optional<std::uint64_t> tensor_count_;
  Layout layout_;
};

/// A writer holding a llama configuration's metadata (architecture "llama", the hyperparameters
/// the GGUF reader checks tensor shapes against), for tests and fuzz seeds to add tensors to.
inline GgufWriter llama_metadata(std::uint32_t embedding, std::uint32_t blocks,
                                 std::uint32_t feed_forward, std::uint32_t heads,
                                 std::uint32_t kv_heads) {
  GgufWriter w;
  w.add("general.architecture", gguf::str("llama"))
      .add("llama.embedding_length", gguf::u32(embedding))
      .add("llama.block_count", gguf::u32(blocks))
      .add("llama.feed_forward_length", gguf::u32(feed_forward))
      .add("llama.attention.head_count", gguf::u32(heads))
      .add("llama.attention.head_count_kv", gguf::u32(kv_heads));
  return w;
}

}  // namespace inferkit::test
