// SPDX-License-Identifier: Apache-2.0
// GgufFile: a memory-mapped GGUF (v2/v3) model file, the format llama.cpp and its tools write:
// metadata (hyperparameters, the tokenizer's vocabulary and merges, the chat template) and
// tensor infos whose data the quantized linear layers read in place. The first step of serving
// a real model: open the file, read the config and tokenizer from `find`/`get_*`, and hand each
// weight's `tensor_data` to the layers. Malformed files are normal input: every defect is an
// `Error` naming what was wrong and its byte offset, never a crash (the reader is fuzzed).
// Threads: a GgufFile is immutable once opened: every call, and reading the views it hands out,
// may run concurrently from any number of threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <inferkit/core/error.hpp>
#include <inferkit/model/detail/gguf_llama_shapes.hpp>
#include <inferkit/model/detail/gguf_parse.hpp>
#include <inferkit/model/detail/mapped_file.hpp>
#include <inferkit/model/ggml_type.hpp>
#include <inferkit/model/gguf_tensor_info.hpp>
#include <inferkit/model/gguf_value.hpp>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace inferkit {

/// A parsed GGUF file whose bytes stay mapped (or owned) for the object's lifetime. Move-only;
/// every view it hands out (values, strings, tensor data) stays valid while it, or the object it
/// was moved into, lives.
///
/// Checked when a file is opened, each an `Error` whose message names what and where (the byte
/// offset): magic and version (`kInvalidArgument`, `kUnsupported` for versions other than 2 and
/// 3); every count, string length and offset against the bytes left (`kOutOfRange`); value,
/// array element and tensor types (`kUnsupported` when unknown, `kInvalidArgument` for a bool
/// that is not 0 or 1); duplicate metadata keys and tensor names (`kInvalidArgument`); tensor
/// shapes: at most 4 dims, a row length that is a whole number of blocks, element and byte
/// counts that fit int64 (`kOutOfRange`); `general.alignment` a power of two; tensor data
/// aligned, inside the data section and not overlapping (`kInvalidArgument`, `kOutOfRange`); and
/// for `general.architecture` "llama", each known tensor's shape against the hyperparameters
/// (`kInvalidArgument`). A count sizes an allocation only after it is checked against the bytes
/// left, so a lying file cannot make the reader allocate much more than the file's own size.
class GgufFile {
 public:
  /// Opens and memory-maps `path` (POSIX mmap, read-only, private). Throws
  /// `Error{kInvalidArgument}` when it cannot be opened or mapped, and as the class comment says
  /// for a malformed file.
  static GgufFile open(const std::string& path) {
    detail::MappedFile mapped(path);
    const std::span<const std::byte> bytes = mapped.bytes();
    return {path, std::move(mapped), {}, bytes};
  }

  /// Parses a GGUF image held in memory (tests, fuzzing, files that arrive over a network).
  /// Throws as `open` does.
  static GgufFile from_bytes(std::vector<std::byte> bytes) {
    const std::span<const std::byte> view(bytes.data(), bytes.size());
    return {"<bytes>", {}, std::move(bytes), view};
  }

  /// Takes over `other`'s bytes; views into them stay valid.
  GgufFile(GgufFile&& other) noexcept = default;
  /// Takes over `other`'s bytes (this object's are released); views into them stay valid.
  GgufFile& operator=(GgufFile&& other) noexcept = default;
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;
  ~GgufFile() = default;

  /// The path it was opened from, or "<bytes>".
  [[nodiscard]] const std::string& source() const noexcept { return source_; }
  /// GGUF format version: 2 or 3.
  [[nodiscard]] std::uint32_t version() const noexcept { return parsed_.version; }
  /// Alignment of tensor data in bytes (`general.alignment`, 32 when absent).
  [[nodiscard]] std::uint64_t alignment() const noexcept { return parsed_.alignment; }
  /// Byte offset of the data section (the tensors' offsets count from here).
  [[nodiscard]] std::uint64_t data_offset() const noexcept { return parsed_.data_offset; }
  /// The whole file.
  [[nodiscard]] std::span<const std::byte> bytes() const noexcept { return bytes_; }

  /// Every metadata value, in file order (each knows its `key()`).
  [[nodiscard]] std::span<const GgufValue> metadata() const noexcept { return parsed_.metadata; }

  /// The value of metadata `key`, or nullptr when the file has none.
  [[nodiscard]] const GgufValue* find(std::string_view key) const {
    const auto it = parsed_.metadata_index.find(key);
    return it == parsed_.metadata_index.end() ? nullptr : &parsed_.metadata[it->second];
  }

  /// The value of metadata `key`. Throws `Error{kInvalidArgument}` naming the key when absent.
  [[nodiscard]] const GgufValue& get(std::string_view key) const {
    const GgufValue* v = find(key);
    if (v == nullptr) {
      detail::throw_error(
          ErrorCode::kInvalidArgument,
          detail::concat({"gguf '", source_, "': metadata key '", key, "' is missing"}));
    }
    return *v;
  }

  /// `get(key).as_u32()`: any integer type whose value fits uint32. Throws `Error` naming the
  /// key: kInvalidArgument when absent or not an integer, kOutOfRange when it does not fit.
  [[nodiscard]] std::uint32_t get_u32(std::string_view key) const { return get(key).as_u32(); }
  /// `get(key).as_u64()`; throws as `get_u32`.
  [[nodiscard]] std::uint64_t get_u64(std::string_view key) const { return get(key).as_u64(); }
  /// `get(key).as_i32()`; throws as `get_u32`.
  [[nodiscard]] std::int32_t get_i32(std::string_view key) const { return get(key).as_i32(); }
  /// `get(key).as_f32()`: float32, or float64 within float32's range; throws as `get_u32`.
  [[nodiscard]] float get_f32(std::string_view key) const { return get(key).as_f32(); }
  /// `get(key).as_bool()`; throws `Error{kInvalidArgument}` when absent or not a bool.
  [[nodiscard]] bool get_bool(std::string_view key) const { return get(key).as_bool(); }
  /// `get(key).as_string()`, a view into the file; throws when absent or not a string.
  [[nodiscard]] std::string_view get_string(std::string_view key) const {
    return get(key).as_string();
  }
  /// `get(key).as_string_array()`, views into the file; throws when absent or another type.
  [[nodiscard]] std::span<const std::string_view> get_string_array(std::string_view key) const {
    return get(key).as_string_array();
  }
  /// `get(key).as_f32_array()` (a copy); throws when absent or another type.
  [[nodiscard]] std::vector<float> get_f32_array(std::string_view key) const {
    return get(key).as_f32_array();
  }
  /// `get(key).as_i32_array()` (a copy; any integer elements that fit); throws as `get_u32`.
  [[nodiscard]] std::vector<std::int32_t> get_i32_array(std::string_view key) const {
    return get(key).as_i32_array();
  }

  /// Every tensor, in file order.
  [[nodiscard]] std::span<const GgufTensorInfo> tensors() const noexcept { return parsed_.tensors; }

  /// The tensor named `name`, or nullptr.
  [[nodiscard]] const GgufTensorInfo* find_tensor(std::string_view name) const {
    const auto it = parsed_.tensor_index.find(name);
    return it == parsed_.tensor_index.end() ? nullptr : &parsed_.tensors[it->second];
  }

  /// The tensor named `name`. Throws `Error{kInvalidArgument}` naming it when absent.
  [[nodiscard]] const GgufTensorInfo& tensor(std::string_view name) const {
    const GgufTensorInfo* t = find_tensor(name);
    if (t == nullptr) {
      detail::throw_error(
          ErrorCode::kInvalidArgument,
          detail::concat({"gguf '", source_, "': tensor '", name, "' is missing (the file has ",
                          std::to_string(parsed_.tensors.size()), " tensors)"}));
    }
    return *t;
  }

  /// The `info.num_bytes` bytes of a tensor's data, in place (aligned to `alignment()` within
  /// the file). Throws `Error{kOutOfRange}` when `info` (say, from another file) does not lie
  /// inside this file's data section.
  [[nodiscard]] std::span<const std::byte> tensor_data(const GgufTensorInfo& info) const {
    const std::uint64_t data_bytes = bytes_.size() - parsed_.data_offset;
    const auto n = static_cast<std::uint64_t>(info.num_bytes);
    if (info.num_bytes < 0 || info.offset > data_bytes || n > data_bytes - info.offset) {
      detail::throw_error(
          ErrorCode::kOutOfRange,
          detail::concat({"gguf '", source_, "': tensor '", info.name, "' data [",
                          std::to_string(info.offset), ", +", std::to_string(info.num_bytes),
                          ") is not inside this file's data section of ",
                          std::to_string(data_bytes), " bytes"}));
    }
    return bytes_.subspan(static_cast<std::size_t>(parsed_.data_offset + info.offset),
                          static_cast<std::size_t>(n));
  }

 private:
  GgufFile(std::string source, detail::MappedFile mapped, std::vector<std::byte> owned,
           std::span<const std::byte> bytes)
      : source_(std::move(source)),
        mapped_(std::move(mapped)),
        owned_(std::move(owned)),
        bytes_(bytes),
        parsed_(detail::parse_gguf(bytes_, source_)) {
    detail::check_llama_shapes(parsed_, source_);
    if (parsed_.data_offset > bytes_.size()) parsed_.data_offset = bytes_.size();
  }

  std::string source_;
  detail::MappedFile mapped_;
  std::vector<std::byte> owned_;  // from_bytes: the image (its buffer never moves)
  std::span<const std::byte> bytes_;
  detail::GgufParsed parsed_;
};

}  // namespace inferkit
