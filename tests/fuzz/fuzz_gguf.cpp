// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for model/gguf.hpp: any byte string is either a GGUF file or an
// inferkit::Error; anything else (a crash, a sanitizer report, another exception, a tensor whose
// data lies outside the file) is a bug. An accepted file is then read all over: every metadata
// value through every accessor, every tensor's data, and its tokenizer, if it has one, on a few
// strings. Built and run by scripts/fuzz.sh from the
// seeds in tests/fuzz/corpus/gguf/ (tiny files written by tests/support/gguf_writer.hpp).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <inferkit/core/error.hpp>
#include <inferkit/model/bpe_tokenizer.hpp>
#include <inferkit/model/gguf.hpp>
#include <inferkit/model/stream_decoder.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace {

volatile std::uint64_t sink = 0;

/// Touches a value through every accessor; each either answers or throws inferkit::Error.
void touch(const inferkit::GgufValue& v, int depth) {
  const auto attempt = [](auto&& f) {
    try {
      f();
    } catch (const inferkit::Error&) {
    }
  };
  attempt([&] { sink = sink + v.as_u64(); });
  attempt([&] { sink = sink + static_cast<std::uint64_t>(v.as_i64()); });
  attempt([&] { sink = sink + v.as_u32(); });
  attempt([&] { sink = sink + static_cast<std::uint64_t>(v.as_i32()); });
  attempt([&] { sink = sink + static_cast<std::uint64_t>(v.as_f32() != 0.0f); });
  attempt([&] { sink = sink + static_cast<std::uint64_t>(v.as_bool()); });
  attempt([&] { sink = sink + v.as_string().size(); });
  if (!v.is_array()) return;
  attempt([&] { sink = sink + v.as_string_array().size(); });
  attempt([&] { sink = sink + v.as_f32_array().size(); });
  attempt([&] { sink = sink + v.as_i32_array().size(); });
  const std::size_t n = v.array_size();
  if (n > 0 && depth < 4) {
    touch(v.array_element(0), depth + 1);
    touch(v.array_element(n - 1), depth + 1);
  }
}

/// Builds the tokenizer when the file has one and runs text through it: encode and decode
/// must round-trip every string whose bytes all have tokens, and streaming must agree.
void tokenize(const inferkit::GgufFile& file, std::string_view input) {
  if (file.find("tokenizer.ggml.model") == nullptr) return;
  try {
    const inferkit::BpeTokenizer t = inferkit::BpeTokenizer::from_gguf(file);
    const std::string samples[] = {"hello world", "<|im_end|>he'll 12",
                                   std::string(input.substr(0, 64))};
    for (const std::string& s : samples) {
      bool encodable = true;
      for (const char c : s) encodable = encodable && t.encodes_byte(static_cast<unsigned char>(c));
      for (const bool special : {false, true}) {
        const std::vector<inferkit::TokenId> ids = t.encode(s, special);
        const std::string back = t.decode(ids);
        if (encodable && back != s) std::abort();
        inferkit::StreamDecoder stream(t);
        std::string streamed;
        for (const inferkit::TokenId id : ids) streamed += stream.push(id);
        streamed += stream.finish();
        sink = sink + streamed.size() + back.size();
      }
    }
    const std::vector<inferkit::ChatMessage> chat = {{"user", "hi"}};
    sink = sink + t.chat_prompt(chat, true).size();
  } catch (const inferkit::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::byte> bytes(size);
  for (std::size_t i = 0; i < size; ++i) bytes[i] = static_cast<std::byte>(data[i]);
  try {
    const inferkit::GgufFile file = inferkit::GgufFile::from_bytes(std::move(bytes));
    if (file.version() != 2 && file.version() != 3) std::abort();
    for (const inferkit::GgufValue& v : file.metadata()) {
      if (file.find(v.key()) != &v) std::abort();  // keys are unique
      touch(v, 0);
    }
    const std::span<const std::byte> all = file.bytes();
    for (const inferkit::GgufTensorInfo& t : file.tensors()) {
      if (file.find_tensor(t.name) != &t) std::abort();
      const std::span<const std::byte> d = file.tensor_data(t);
      if (static_cast<std::int64_t>(d.size()) != t.num_bytes) std::abort();
      if (!d.empty()) {
        if (d.data() < all.data() || d.data() + d.size() > all.data() + all.size()) std::abort();
        sink = sink + std::to_integer<std::uint64_t>(d.front()) +
               std::to_integer<std::uint64_t>(d.back());
      }
    }
    tokenize(file, std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const inferkit::Error&) {
    // Malformed input: the documented outcome.
  }
  return 0;
}
