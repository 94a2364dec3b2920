// SPDX-License-Identifier: Apache-2.0
// Tests for model/detail/bpe_pretokenize.hpp: the words the GPT-2 regex
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// finds (worked out by hand from the regex), with and without smollm's digit isolation.
#include <catch2/catch.hpp>
#include <inferkit/model/detail/bpe_pretokenize.hpp>
#include <string>
#include <vector>

using namespace inferkit::detail;
using Words = std::vector<std::string>;

namespace {

Words split(const std::string& text, PreTokenizerKind kind = PreTokenizerKind::kDigitsThenGpt2) {
  Words words;
  std::vector<PreUnit> units;
  pre_tokenize(text, kind, units, [&](std::string_view w) { words.emplace_back(w); });
  return words;
}

}  // namespace

TEST_CASE("pre_tokenize: letters, spaces and punctuation", "[model][bpe_pretokenize]") {
  CHECK(split("Hello world") == Words{"Hello", " world"});
  CHECK(split("Hello, world!") == Words{"Hello", ",", " world", "!"});
  CHECK(split("a  b") == Words{"a", " ", " b"});  // \s+(?!\S) leaves one space
  CHECK(split("hi  ") == Words{"hi", "  "});      // trailing spaces stay together
  CHECK(split("  hi") == Words{" ", " hi"});
  CHECK(split("x\n\ny") == Words{"x", "\n", "\n", "y"});
  CHECK(split("a \n b") == Words{"a", " \n", " b"});
  CHECK(split(" ...") == Words{" ..."});
  CHECK(split("\xe4\xbd\xa0\xe5\xa5\xbd\xef\xbc\x8c\xe4\xb8\x96") ==  // 你好，世
        Words{"\xe4\xbd\xa0\xe5\xa5\xbd", "\xef\xbc\x8c", "\xe4\xb8\x96"});
  CHECK(split("caf\xc3\xa9 na\xc3\xafve") == Words{"caf\xc3\xa9", " na\xc3\xafve"});
  CHECK(split("a\xc2\xa0"
              "b") == Words{"a", "\xc2\xa0", "b"});  // NBSP is \s, not " "
  CHECK(split("") == Words{});
}

TEST_CASE("pre_tokenize: contractions are case sensitive", "[model][bpe_pretokenize]") {
  CHECK(split("I'm don't we'll they've you're he'd it's") ==
        Words{"I", "'m", " don", "'t", " we", "'ll", " they", "'ve", " you", "'re", " he", "'d",
              " it", "'s"});
  CHECK(split("IT'S") == Words{"IT", "'", "S"});
  CHECK(split("'") == Words{"'"});
  CHECK(split("x'") == Words{"x", "'"});
}

TEST_CASE("pre_tokenize: smollm isolates each digit, gpt-2 keeps runs",
          "[model][bpe_pretokenize]") {
  CHECK(split("abc 123") == Words{"abc", " ", "1", "2", "3"});
  CHECK(split("abc 123", PreTokenizerKind::kGpt2) == Words{"abc", " 123"});
  CHECK(split("$3.50") == Words{"$", "3", ".", "5", "0"});
  CHECK(split("x\xd9\xa3\xd9\xa4") == Words{"x", "\xd9\xa3", "\xd9\xa4"});  // Arabic-Indic ٣٤
  CHECK(split("\xc2\xbd"
              "cup") == Words{"\xc2\xbd", "cup"});  // ½ is \p{N}
}

TEST_CASE("pre_tokenize: invalid UTF-8 is kept, as 'other'", "[model][bpe_pretokenize]") {
  CHECK(split("a\xff\xfe b") == Words{"a", "\xff\xfe", " b"});
  CHECK(split(" \x80") == Words{" \x80"});
  CHECK(split("\xe4\xb8") == Words{"\xe4\xb8"});  // a cut-off character
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  std::string joined;
  for (const std::string& w : split(all + all)) joined += w;
  CHECK(joined == all + all);  // the words always concatenate to the text
}
