// SPDX-License-Identifier: Apache-2.0
// Tests for model/gguf.hpp: files written byte by byte by tests/support/gguf_writer.hpp (from the
// GGUF spec, not by the reader) read back exactly; every malformed file named in the class
// comment is rejected with its code and a message saying what and where; and the real
// SmolLM2-135M-Instruct file matches what an independent Python reading of it reported (counts,
// offsets, shapes, types).
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <inferkit/model/gguf.hpp>
#include <iterator>
#include <limits>
#include <map>
#include <string>
#include <tests/support/error_code.hpp>
#include <tests/support/gguf_seeds.hpp>
#include <tests/support/gguf_writer.hpp>
#include <tests/support/model_files.hpp>
#include <vector>

using namespace inferkit;
using inferkit::test::code_of;
using inferkit::test::GgufTensorSpec;
using inferkit::test::GgufWriter;
namespace g = inferkit::test::gguf;

namespace {

std::vector<std::byte> f32_bytes(const std::vector<float>& values) {
  std::vector<std::byte> out(values.size() * 4);
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

/// A small valid file: two tensors, a few values.
GgufWriter small_file() {
  GgufWriter w;
  w.add("general.architecture", g::str("test"))
      .add("test.count", g::u32(7))
      .tensor("a", GgmlType::kF32, {4, 2}, f32_bytes({1, 2, 3, 4, 5, 6, 7, 8}))
      .tensor("b", GgmlType::kQ8_0, {32, 3});
  return w;
}

/// The ErrorCode and message of from_bytes on `bytes`.
ErrorCode reject(std::vector<std::byte> bytes, std::string* message = nullptr) {
  return code_of([&] { (void)GgufFile::from_bytes(std::move(bytes)); }, message);
}

}  // namespace

TEST_CASE("GgufFile: every metadata type reads back", "[model][gguf]") {
  GgufWriter w;
  w.add("u8", g::u8(200))
      .add("i8", g::i8(-100))
      .add("u16", g::u16(60000))
      .add("i16", g::i16(-30000))
      .add("u32", g::u32(4000000000u))
      .add("i32", g::i32(-2000000000))
      .add("f32", g::f32(1.5f))
      .add("bool", g::boolean(true))
      .add("string", g::str("h\xc3\xa9llo"))
      .add("u64", g::u64(std::numeric_limits<std::uint64_t>::max()))
      .add("i64", g::i64(std::numeric_limits<std::int64_t>::min()))
      .add("f64", g::f64(-2.25))
      .add("strings", g::strings({"a", "", "ccc"}))
      .add("f32s", g::f32s({0.5f, -1.0f}))
      .add("i32s", g::i32s({1, -2, 3}))
      .add("u8s", g::array(GgufValueType::kUint8, {g::u8(1), g::u8(255)}))
      .add("nested",
           g::array(GgufValueType::kArray, {g::i32s({1, 2}), g::strings({"x"}),
                                            g::array(GgufValueType::kArray, {g::f32s({3.0f})})}))
      .add("empty", g::array(GgufValueType::kInt64, {}));
  const GgufFile f = GgufFile::from_bytes(w.bytes());
  CHECK(f.version() == 3);
  CHECK(f.alignment() == 32);
  CHECK(f.metadata().size() == 18);
  CHECK(f.metadata()[0].key() == "u8");
  CHECK(f.get_u32("u8") == 200);
  CHECK(f.get_i32("i8") == -100);
  CHECK(f.get("u16").type() == GgufValueType::kUint16);
  CHECK(f.get_u32("u16") == 60000);
  CHECK(f.get_i32("i16") == -30000);
  CHECK(f.get_u32("u32") == 4000000000u);
  CHECK(f.get_u64("u32") == 4000000000u);
  CHECK(f.get_i32("i32") == -2000000000);
  CHECK(f.get_f32("f32") == 1.5f);
  CHECK(f.get("f32").as_f64() == 1.5);
  CHECK(f.get_bool("bool"));
  CHECK(f.get_string("string") == "h\xc3\xa9llo");
  CHECK(f.get_u64("u64") == std::numeric_limits<std::uint64_t>::max());
  CHECK(f.get("i64").as_i64() == std::numeric_limits<std::int64_t>::min());
  CHECK(f.get("f64").as_f64() == -2.25);
  CHECK(f.get_f32("f64") == -2.25f);
  const auto strings = f.get_string_array("strings");
  REQUIRE(strings.size() == 3);
  CHECK(strings[0] == "a");
  CHECK(strings[1].empty());
  CHECK(strings[2] == "ccc");
  CHECK(f.get_f32_array("f32s") == std::vector<float>{0.5f, -1.0f});
  CHECK(f.get_i32_array("i32s") == std::vector<std::int32_t>{1, -2, 3});
  CHECK(f.get_i32_array("u8s") == std::vector<std::int32_t>{1, 255});
  const GgufValue& nested = f.get("nested");
  REQUIRE(nested.array_type() == GgufValueType::kArray);
  REQUIRE(nested.array_size() == 3);
  CHECK(nested.array_element(0).as_i32_array() == std::vector<std::int32_t>{1, 2});
  CHECK(nested.array_element(1).as_string_array()[0] == "x");
  CHECK(nested.array_element(2).array_element(0).as_f32_array() == std::vector<float>{3.0f});
  CHECK(f.get("empty").array_size() == 0);
  CHECK(f.get("empty").array_type() == GgufValueType::kInt64);
  CHECK(f.find("absent") == nullptr);
  CHECK(f.tensors().empty());
}

TEST_CASE("GgufFile: getters name the key and the type found", "[model][gguf]") {
  GgufWriter w;
  w.add("neg", g::i32(-1)).add("big", g::u64(std::uint64_t{1} << 40)).add("s", g::str("x"));
  const GgufFile f = GgufFile::from_bytes(w.bytes());
  std::string msg;
  CHECK(code_of([&] { (void)f.get_u32("neg"); }, &msg) == ErrorCode::kOutOfRange);
  CHECK_THAT(msg, Catch::Contains("'neg'") && Catch::Contains("int32") && Catch::Contains("-1") &&
                      Catch::Contains("byte offset"));
  CHECK(code_of([&] { (void)f.get_i32("big"); }, &msg) == ErrorCode::kOutOfRange);
  CHECK_THAT(msg, Catch::Contains("'big'") && Catch::Contains("uint64"));
  CHECK(code_of([&] { (void)f.get_u32("s"); }, &msg) == ErrorCode::kInvalidArgument);
  CHECK_THAT(msg, Catch::Contains("'s'") && Catch::Contains("string"));
  CHECK(code_of([&] { (void)f.get_string("neg"); }) == ErrorCode::kInvalidArgument);
  CHECK(code_of([&] { (void)f.get_string_array("s"); }) == ErrorCode::kInvalidArgument);
  CHECK(code_of([&] { (void)f.get_u32("absent"); }, &msg) == ErrorCode::kInvalidArgument);
  CHECK_THAT(msg, Catch::Contains("'absent'") && Catch::Contains("missing"));
}

TEST_CASE("GgufFile: tensors, their shapes and their data", "[model][gguf]") {
  GgufWriter w = small_file();
  w.tensor("c", GgmlType::kQ4_1, {64}).tensor("scalar", GgmlType::kF32, {});
  const std::vector<std::byte> image = w.bytes();
  const GgufFile f = GgufFile::from_bytes(image);
  REQUIRE(f.tensors().size() == 4);
  const GgufTensorInfo& a = f.tensor("a");
  CHECK(a.type == GgmlType::kF32);
  CHECK(a.dims == std::vector<std::int64_t>{4, 2});
  CHECK(a.num_elements == 8);
  CHECK(a.num_bytes == 32);
  CHECK(a.rows() == 2);
  const std::span<const std::byte> data = f.tensor_data(a);
  REQUIRE(data.size() == 32);
  float third = 0;
  std::memcpy(&third, data.data() + 8, 4);
  CHECK(third == 3.0f);
  CHECK(f.data_offset() == w.layout().data_offset);
  const GgufTensorInfo& b = *f.find_tensor("b");
  CHECK(b.num_bytes == 3 * 34);
  CHECK(b.offset % 32 == 0);
  CHECK(f.tensor_data(b).data() == f.bytes().data() + f.data_offset() + b.offset);
  CHECK(f.tensor("c").num_bytes == 2 * 20);
  CHECK(f.tensor("scalar").num_elements == 1);
  CHECK(f.tensor("scalar").num_bytes == 4);
  CHECK(f.find_tensor("d") == nullptr);
  std::string msg;
  CHECK(code_of([&] { (void)f.tensor("d"); }, &msg) == ErrorCode::kInvalidArgument);
  CHECK_THAT(msg, Catch::Contains("'d'"));
  GgufTensorInfo foreign = a;
  foreign.offset = 1u << 20;
  CHECK(code_of([&] { (void)f.tensor_data(foreign); }) == ErrorCode::kOutOfRange);
}

TEST_CASE("GgufFile: version 2, a custom alignment, moves keep views valid", "[model][gguf]") {
  GgufWriter w = small_file();
  w.version(2).alignment(64);
  GgufFile f = GgufFile::from_bytes(w.bytes());
  CHECK(f.version() == 2);
  CHECK(f.alignment() == 64);
  CHECK(f.data_offset() % 64 == 0);
  CHECK(f.tensor("b").offset % 64 == 0);
  const std::string_view arch = f.get_string("general.architecture");
  const std::span<const std::byte> data = f.tensor_data(f.tensor("a"));
  GgufFile moved = std::move(f);
  CHECK(arch == "test");
  CHECK(moved.get_string("general.architecture").data() == arch.data());
  CHECK(moved.tensor_data(moved.tensor("a")).data() == data.data());
}

TEST_CASE("GgufFile::open: maps a file, and unreadable paths are errors", "[model][gguf]") {
  const auto path = std::filesystem::temp_directory_path() / "inferkit_test_gguf_open.gguf";
  const std::vector<std::byte> image = small_file().bytes();
  {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(image.data()),
              static_cast<std::streamsize>(image.size()));
  }
  {
    const GgufFile f = GgufFile::open(path.string());
    CHECK(f.source() == path.string());
    CHECK(f.get_u32("test.count") == 7);
    CHECK(f.bytes().size() == image.size());
    CHECK(std::memcmp(f.bytes().data(), image.data(), image.size()) == 0);
  }
  std::filesystem::remove(path);
  std::string msg;
  CHECK(code_of([&] { (void)GgufFile::open(path.string()); }, &msg) == ErrorCode::kInvalidArgument);
  CHECK_THAT(msg, Catch::Contains(path.string()));
  CHECK(code_of([&] { (void)GgufFile::open(path.parent_path().string()); }) ==
        ErrorCode::kInvalidArgument);
}

TEST_CASE("GgufFile: every strict prefix of a valid file is rejected", "[model][gguf]") {
  const std::vector<std::byte> image = small_file().bytes();
  REQUIRE_NOTHROW(GgufFile::from_bytes(image));
  for (std::size_t n = 0; n < image.size(); ++n) {
    std::vector<std::byte> prefix(image.begin(), image.begin() + static_cast<std::ptrdiff_t>(n));
    std::string msg;
    const ErrorCode code = reject(std::move(prefix), &msg);
    CHECK(code == ErrorCode::kOutOfRange);
    CHECK_THAT(msg, Catch::Contains("byte offset"));
  }
}

TEST_CASE("GgufFile: bad header fields are rejected", "[model][gguf]") {
  std::string msg;
  SECTION("magic") {
    std::vector<std::byte> image = small_file().bytes();
    image[0] = std::byte{'g'};
    CHECK(reject(image, &msg) == ErrorCode::kInvalidArgument);
    CHECK_THAT(msg, Catch::Contains("magic") && Catch::Contains("6747"));
  }
  SECTION("versions other than 2 and 3") {
    for (const std::uint32_t v : {1u, 4u, 0x03000000u}) {
      GgufWriter w = small_file();
      CHECK(reject(w.version(v).bytes(), &msg) == ErrorCode::kUnsupported);
      CHECK_THAT(msg, Catch::Contains("version"));
    }
    CHECK_THAT(msg, Catch::Contains("big-endian"));
  }
  SECTION("a metadata count past the end allocates nothing") {
    GgufWriter w = small_file();
    CHECK(reject(w.kv_count(std::uint64_t{1} << 60).bytes(), &msg) == ErrorCode::kOutOfRange);
    CHECK_THAT(msg, Catch::Contains("metadata count") && Catch::Contains("byte offset 16"));
  }
  SECTION("a tensor count past the end allocates nothing") {
    GgufWriter w = small_file();
    CHECK(reject(w.tensor_count(std::numeric_limits<std::uint64_t>::max()).bytes(), &msg) ==
          ErrorCode::kOutOfRange);
    CHECK_THAT(msg, Catch::Contains("tensor count"));
  }
  SECTION("one more tensor than written") {
    GgufWriter w = small_file();
    (void)reject(w.tensor_count(3).bytes());  // reads padding and data as an info: any Error
  }
}

TEST_CASE("GgufFile: bad metadata is rejected", "[model][gguf]") {
  std::string msg;
  SECTION("a string length past the end") {
    GgufWriter w;
    test::GgufEncoded s = g::str("abc");
    s.bytes[0] = std::byte{0xff};  // length 255 + 3 bytes of text
    CHECK(reject(w.add("k", s).bytes(), &msg) == ErrorCode::kOutOfRange);
    CHECK_THAT(msg, Catch::Contains("'k'") && Catch::Contains("string length 255"));
  }
  SECTION("a key length past the end") {
    GgufWriter w;
    w.add("key", g::u8(1));
    std::vector<std::byte> image = w.bytes();
    image[w.layout().kv_offsets[0] + 7] = std::byte{0x10};
    CHECK(reject(image, &msg) == ErrorCode::kOutOfRange);
    CHECK_THAT(msg, Catch::Contains("metadata #0") &&
                        Catch::Contains("byte offset " + std::to_string(w.layout().kv_offsets[0])));
  }
  SECTION("an unknown value type") {
    GgufWriter w;
    CHECK(reject(w.add("k", {13, {}}).bytes(), &msg) == ErrorCode::kUnsupported);
    CHECK_THAT(msg, Catch::Contains("'k'") && Catch::Contains("value type 13"));
  }
  SECTION("an unknown array element type") {
    GgufWriter w;
    test::GgufEncoded a = g::i32s({1});
    a.bytes[0] = std::byte{99};
    CHECK(reject(w.add("k", a).bytes(), &msg) == ErrorCode::kUnsupported);
    CHECK_THAT(msg, Catch::Contains("element type 99"));
  }
  SECTION("a bool that is neither 0 nor 1") {
    GgufWriter w;
    CHECK(reject(w.add("k", g::scalar(GgufValueType::kBool, 2, 1)).bytes()) ==
          ErrorCode::kInvalidArgument);
    GgufWriter w2;
    w2.add("k", g::array(GgufValueType::kBool, {g::boolean(true), g::u8(7)}));
    CHECK(reject(w2.bytes(), &msg) == ErrorCode::kInvalidArgument);
    CHECK_THAT(msg, Catch::Contains("element 1 is 7"));
  }
  SECTION("an array count past the end allocates nothing") {
    for (const GgufValueType element :
         {GgufValueType::kUint8, GgufValueType::kString, GgufValueType::kArray}) {
      test::GgufEncoded a = g::array(element, {});
      a.bytes[11] = std::byte{0x7f};  // count 2^62-ish
      GgufWriter w;
      CHECK(reject(w.add("k", a).bytes(), &msg) == ErrorCode::kOutOfRange);
      CHECK_THAT(msg, Catch::Contains("'k'") && Catch::Contains("count"));
    }
  }
  SECTION("arrays nested too deep") {
    test::GgufEncoded a = g::i32s({1});
    for (int depth = 0; depth < 10; ++depth) a = g::array(GgufValueType::kArray, {a});
    GgufWriter w;
    CHECK(reject(w.add("k", a).bytes(), &msg) == ErrorCode::kUnsupported);
    CHECK_THAT(msg, Catch::Contains("nest deeper"));
  }
  SECTION("a duplicate key") {
    GgufWriter w;
    w.add("k", g::u8(1)).add("k", g::u8(2));
    CHECK(reject(w.bytes(), &msg) == ErrorCode::kInvalidArgument);
    CHECK_THAT(msg, Catch::Contains("'k'") && Catch::Contains("duplicate"));
  }
  SECTION("an alignment that is not a power of two, or not an integer") {
    GgufWriter w = small_file();
    CHECK(reject(w.alignment(48).bytes(), &msg) == ErrorCode::kInvalidArgument);
    CHECK_THAT(msg, Catch::Contains("power of two"));
    GgufWriter w0 = small_file();
    CHECK(reject(w0.add("general.alignment", g::u32(0)).bytes()) == ErrorCode::kInvalidArgument);
    GgufWriter ws = small_file();
    CHECK(reject(ws.add("general.alignment", g::str("32")).bytes()) == ErrorCode::kInvalidArgument);
  }
}

TEST_CASE("GgufFile: bad tensor infos are rejected", "[model][gguf]") {
  std::string msg;
  const auto with = [](GgufTensorSpec spec) {
    GgufWriter w;
    w.tensor("ok", GgmlType::kF32, {8}).tensor(std::move(spec));
    return w.bytes();
  };
  SECTION("an unknown tensor type") {
    CHECK(reject(with({"q4k", 12, {256}, std::vector<std::byte>(144), {}}), &msg) ==
          ErrorCode::kUnsupported);
    CHECK_THAT(msg, Catch::Contains("'q4k'") && Catch::Contains("ggml type 12"));
  }
  SECTION("more than 4 dims") {
    CHECK(reject(with({"t", 0, {1, 1, 1, 1, 1}, std::vector<std::byte>(4), {}}), &msg) ==
          ErrorCode::kUnsupported);
    CHECK_THAT(msg, Catch::Contains("5 dims"));
  }
  SECTION("a dim past int64") {
    CHECK(reject(with({"t", 0, {std::uint64_t{1} << 63}, {}, {}})) == ErrorCode::kOutOfRange);
  }
  SECTION("an element count that overflows int64") {
    CHECK(reject(with({"t", 0, {std::uint64_t{1} << 32, std::uint64_t{1} << 32}, {}, {}}), &msg) ==
          ErrorCode::kOutOfRange);
    CHECK_THAT(msg, Catch::Contains("elements"));
    // dims[0] == 0 makes zero elements, but the rows still overflow
    CHECK(reject(with({"t", 0, {0, std::uint64_t{1} << 40, std::uint64_t{1} << 40}, {}, {}}),
                 &msg) == ErrorCode::kOutOfRange);
    CHECK_THAT(msg, Catch::Contains("rows"));
  }
  SECTION("a byte count that overflows int64") {
    const auto rows = std::uint64_t{1} << 57;  // 2^62 elements fit; 2^57 blocks * 34 bytes do not
    CHECK(reject(with({"t", 8, {32, rows}, {}, {}}), &msg) == ErrorCode::kOutOfRange);
    CHECK_THAT(msg, Catch::Contains("bytes"));
  }
  SECTION("a row that is not a whole number of blocks") {
    CHECK(reject(with({"t", 3, {33}, std::vector<std::byte>(40), {}}), &msg) ==
          ErrorCode::kInvalidArgument);
    CHECK_THAT(msg, Catch::Contains("33") && Catch::Contains("q4_1 block size 32"));
  }
  SECTION("misaligned data") {
    CHECK(reject(with({"t", 0, {8}, std::vector<std::byte>(32), 48}), &msg) ==
          ErrorCode::kInvalidArgument);
    CHECK_THAT(msg, Catch::Contains("'t'") && Catch::Contains("alignment 32"));
  }
  SECTION("data past the end of the file") {
    CHECK(reject(with({"t", 0, {8}, std::vector<std::byte>(32), 1024}), &msg) ==
          ErrorCode::kOutOfRange);
    CHECK_THAT(msg, Catch::Contains("'t'") && Catch::Contains("past the end"));
    CHECK(reject(with({"t", 0, {8}, std::vector<std::byte>(32), ~std::uint64_t{31}})) ==
          ErrorCode::kOutOfRange);
  }
  SECTION("overlapping data") {
    CHECK(reject(with({"t", 0, {8}, std::vector<std::byte>(32), 0}), &msg) ==
          ErrorCode::kInvalidArgument);
    CHECK_THAT(msg, Catch::Contains("overlaps tensor 'ok'"));
  }
  SECTION("a duplicate tensor name") {
    CHECK(reject(with({"ok", 0, {8}, std::vector<std::byte>(32), {}}), &msg) ==
          ErrorCode::kInvalidArgument);
    CHECK_THAT(msg, Catch::Contains("'ok'") && Catch::Contains("duplicate"));
  }
}

TEST_CASE("GgufFile: llama tensor shapes must agree with the hyperparameters", "[model][gguf]") {
  const auto llama = [](std::uint64_t k_rows, std::uint64_t layer) {
    GgufWriter w = test::llama_metadata(64, 2, 96, 4, 2);
    w.add("tokenizer.ggml.tokens", g::strings({"a", "b", "c"}))
        .tensor("token_embd.weight", GgmlType::kQ8_0, {64, 3})
        .tensor("blk." + std::to_string(layer) + ".attn_k.weight", GgmlType::kQ4_0, {64, k_rows})
        .tensor("blk.0.ffn_down.weight", GgmlType::kF32, {96, 64})
        .tensor("blk.0.unknown_role", GgmlType::kF32, {3});
    return w.bytes();
  };
  CHECK_NOTHROW(GgufFile::from_bytes(llama(32, 1)));  // 2 kv heads * head dim 16
  std::string msg;
  CHECK(reject(llama(64, 1), &msg) == ErrorCode::kInvalidArgument);
  CHECK_THAT(msg, Catch::Contains("'blk.1.attn_k.weight'") && Catch::Contains("[64, 64]") &&
                      Catch::Contains("[64, 32]") &&
                      Catch::Contains("llama.attention.head_count_kv") &&
                      Catch::Contains("byte offset"));
  CHECK(reject(llama(32, 2), &msg) == ErrorCode::kInvalidArgument);
  CHECK_THAT(msg, Catch::Contains("layer 2") && Catch::Contains("llama.block_count = 2"));
}

TEST_CASE("GgufFile: the SmolLM2-135M-Instruct file", "[model][gguf]") {
  const std::optional<std::string> path = test::smollm2_path();
  if (!path) {
    WARN("SmolLM2 not fetched (scripts/fetch-model.sh): real-file checks skipped");
    return;
  }
  const GgufFile f = GgufFile::open(*path);
  // Figures from an independent Python reading of the file (struct.unpack over the spec).
  CHECK(f.version() == 3);
  CHECK(f.metadata().size() == 33);
  CHECK(f.alignment() == 32);
  CHECK(f.data_offset() == 1785664);
  CHECK(f.bytes().size() == 98362432);
  CHECK(f.get_string("general.architecture") == "llama");
  CHECK(f.get_u32("llama.block_count") == 30);
  CHECK(f.get_u32("llama.context_length") == 8192);
  CHECK(f.get_u32("llama.embedding_length") == 576);
  CHECK(f.get_u32("llama.feed_forward_length") == 1536);
  CHECK(f.get_u32("llama.attention.head_count") == 9);
  CHECK(f.get_u32("llama.attention.head_count_kv") == 3);
  CHECK(f.get_u32("llama.rope.dimension_count") == 64);
  CHECK(f.get_u32("llama.vocab_size") == 49152);
  CHECK(f.get_f32("llama.rope.freq_base") == 100000.0f);
  CHECK(f.get_f32("llama.attention.layer_norm_rms_epsilon") == Approx(1e-5f));
  CHECK(f.get_string("tokenizer.ggml.model") == "gpt2");
  CHECK(f.get_string("tokenizer.ggml.pre") == "smollm");
  CHECK(f.get_string_array("tokenizer.ggml.tokens").size() == 49152);
  CHECK(f.get_string_array("tokenizer.ggml.tokens")[1] == "<|im_start|>");
  CHECK(f.get_string_array("tokenizer.ggml.merges").size() == 48900);
  CHECK(f.get_string_array("tokenizer.ggml.merges")[0] == "\xc4\xa0 t");  // "Ġ t"
  CHECK(f.get_i32_array("tokenizer.ggml.token_type").size() == 49152);
  CHECK(f.get_u32("tokenizer.ggml.bos_token_id") == 1);
  CHECK(f.get_u32("tokenizer.ggml.eos_token_id") == 2);
  CHECK(f.get_u32("tokenizer.ggml.padding_token_id") == 2);
  CHECK_FALSE(f.get_bool("tokenizer.ggml.add_bos_token"));
  CHECK_THAT(std::string(f.get_string("tokenizer.chat_template")),
             Catch::StartsWith("{% for message in messages %}"));

  REQUIRE(f.tensors().size() == 272);
  std::map<GgmlType, int> types;
  for (const GgufTensorInfo& t : f.tensors()) ++types[t.type];
  CHECK(types[GgmlType::kQ4_1] == 210);
  CHECK(types[GgmlType::kF32] == 61);
  CHECK(types[GgmlType::kQ8_0] == 1);
  const GgufTensorInfo& embd = f.tensor("token_embd.weight");
  CHECK(embd.type == GgmlType::kQ8_0);
  CHECK(embd.dims == std::vector<std::int64_t>{576, 49152});
  CHECK(embd.offset == 0);
  CHECK(embd.num_bytes == 49152 * 18 * 34);
  CHECK(f.find_tensor("output.weight") == nullptr);  // tied to the embedding
  CHECK(f.tensor("output_norm.weight").offset == 96574464);
  const std::int64_t n_embd = 576, n_ff = 1536, kv = 3 * 64;
  const std::map<std::string, std::vector<std::int64_t>> shapes = {
      {"attn_norm.weight", {n_embd}},      {"ffn_norm.weight", {n_embd}},
      {"attn_q.weight", {n_embd, n_embd}}, {"attn_k.weight", {n_embd, kv}},
      {"attn_v.weight", {n_embd, kv}},     {"attn_output.weight", {n_embd, n_embd}},
      {"ffn_gate.weight", {n_embd, n_ff}}, {"ffn_up.weight", {n_embd, n_ff}},
      {"ffn_down.weight", {n_ff, n_embd}}};
  for (int layer = 0; layer < 30; ++layer) {
    for (const auto& [role, dims] : shapes) {
      const GgufTensorInfo& t = f.tensor("blk." + std::to_string(layer) + "." + role);
      CHECK(t.dims == dims);
      CHECK(t.type == (dims.size() == 1 ? GgmlType::kF32 : GgmlType::kQ4_1));
      CHECK(f.tensor_data(t).size() == static_cast<std::size_t>(t.num_bytes));
    }
  }
  // The last tensor ends exactly at the end of the file.
  const GgufTensorInfo& last = f.tensors().back();
  CHECK(f.data_offset() + last.offset + static_cast<std::uint64_t>(last.num_bytes) ==
        f.bytes().size());
}

TEST_CASE("GgufFile: write the fuzz seed corpus", "[.][fuzz_seeds]") {
  // Run explicitly (inferkit_test_model "[fuzz_seeds]") after changing
  // tests/support/gguf_seeds.hpp.
  const std::filesystem::path dir = test::source_path("tests/fuzz/corpus/gguf");
  std::filesystem::create_directories(dir);
  for (const auto& [name, image] : test::gguf_fuzz_seeds()) {
    std::ofstream out(dir / name, std::ios::binary);
    out.write(reinterpret_cast<const char*>(image.data()),
              static_cast<std::streamsize>(image.size()));
  }
}

TEST_CASE("GgufFile: the committed fuzz seeds are these valid files", "[model][gguf]") {
  const std::filesystem::path dir = test::source_path("tests/fuzz/corpus/gguf");
  for (const auto& [name, image] : test::gguf_fuzz_seeds()) {
    INFO(name);
    CHECK(image.size() <= 4096);  // scripts/fuzz.sh passes -max_len=4096
    CHECK_NOTHROW(GgufFile::from_bytes(image));
    std::ifstream in(dir / name, std::ios::binary);
    const std::vector<char> file((std::istreambuf_iterator<char>(in)),
                                 std::istreambuf_iterator<char>());
    CHECK(file.size() == image.size());
    CHECK(
        (file.size() == image.size() && std::memcmp(file.data(), image.data(), file.size()) == 0));
  }
}
