// SPDX-License-Identifier: Apache-2.0
// The pre-tokenizer: splits text into the words BPE merges within, as the GPT-2 regex
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// does, written as a hand-made scanner (llama.cpp does the same) rather than a regex engine.
// "smollm" (and the StarCoder family) first isolates every \p{N} code point, then applies that
// regex to the runs between them: what Hugging Face's Digits(individual_digits) + ByteLevel
// pre-tokenizers do. Bytes that are not valid UTF-8 count as "other" (as U+FFFD would).
#pragma once

#include <cstddef>
#include <cstdint>
#include <inferkit/model/detail/unicode_class.hpp>
#include <inferkit/model/detail/utf8.hpp>
#include <string_view>
#include <vector>

namespace inferkit::detail {

/// Which splitting rules a vocabulary's `tokenizer.ggml.pre` names.
enum class PreTokenizerKind : std::uint8_t {
  kGpt2,           ///< the GPT-2 regex alone
  kDigitsThenGpt2  ///< each \p{N} code point alone, then the GPT-2 regex (smollm, starcoder, …)
};

/// One code point of the text being split.
struct PreUnit {
  std::uint32_t begin = 0;  // byte offset in the fragment
  CharClass cls = CharClass::kOther;
  char ascii = 0;  // the character when ASCII, else 0
};

/// Decodes `text` into units (one per code point, or per invalid byte), ending with a sentinel
/// unit whose `begin` is text.size().
inline void decode_units(std::string_view text, std::vector<PreUnit>& units) {
  units.clear();
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  std::size_t i = 0;
  while (i < n) {
    PreUnit u;
    u.begin = static_cast<std::uint32_t>(i);
    if (p[i] < 0x80) {
      u.cls = unicode_class(p[i]);
      u.ascii = static_cast<char>(p[i]);
      ++i;
    } else {
      const Utf8Decoded d = utf8_decode(p + i, n - i);
      u.cls = d.length ? unicode_class(d.cp) : CharClass::kOther;
      i += d.length ? d.length : 1;
    }
    units.push_back(u);
  }
  units.push_back(PreUnit{static_cast<std::uint32_t>(n), CharClass::kNone, 0});
}

/// Applies the GPT-2 rules to units [ini, end), calling `emit(end_unit)` at each word's end.
template <class Emit>
void split_gpt2(const std::vector<PreUnit>& u, std::size_t ini, std::size_t end, Emit&& emit) {
  const auto cls = [&](std::size_t i) { return i < end ? u[i].cls : CharClass::kNone; };
  std::size_t pos = ini;
  while (pos < end) {
    const char c = u[pos].ascii;
    if (c == '\'' && pos + 1 < end) {  // 's|'t|'re|'ve|'m|'ll|'d
      const char c1 = u[pos + 1].ascii;
      if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') {
        pos += 2;
        emit(pos);
        continue;
      }
      if (pos + 2 < end) {
        const char c2 = u[pos + 2].ascii;
        if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) {
          pos += 3;
          emit(pos);
          continue;
        }
      }
    }
    const CharClass k = c == ' ' ? cls(pos + 1) : u[pos].cls;
    if (k == CharClass::kLetter || k == CharClass::kNumber || k == CharClass::kOther) {
      // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`
      pos += c == ' ' ? 1 : 0;
      while (cls(pos) == k) ++pos;
      emit(pos);
      continue;
    }
    std::size_t spaces = 0;
    while (cls(pos + spaces) == CharClass::kWhitespace) ++spaces;
    if (spaces > 1 && pos + spaces < end) {  // `\s+(?!\S)`: leave the last one to the next word
      pos += spaces - 1;
    } else {
      pos += spaces > 0 ? spaces : 1;  // `\s+`
    }
    emit(pos);
  }
}

/// Splits `text` into words, calling `on_word(std::string_view)` for each in order; the words
/// concatenate to `text`. `units` is scratch space.
template <class OnWord>
void pre_tokenize(std::string_view text, PreTokenizerKind kind, std::vector<PreUnit>& units,
                  OnWord&& on_word) {
  if (text.empty()) return;
  decode_units(text, units);
  const std::size_t n = units.size() - 1;  // the last unit is the sentinel
  std::size_t word_begin = 0;              // an index into units, not a byte offset
  const auto emit = [&](std::size_t word_end) {
    if (word_end > word_begin) {
      const std::uint32_t b = units[word_begin].begin;
      on_word(text.substr(b, units[word_end].begin - b));
      word_begin = word_end;
    }
  };
  if (kind == PreTokenizerKind::kGpt2) {
    split_gpt2(units, 0, n, emit);
    return;
  }
  std::size_t i = 0;
  while (i < n) {
    if (units[i].cls == CharClass::kNumber) {
      emit(++i);
      continue;
    }
    std::size_t j = i;
    while (j < n && units[j].cls != CharClass::kNumber) ++j;
    split_gpt2(units, i, j, emit);
    i = j;
  }
}

}  // namespace inferkit::detail
