// SPDX-License-Identifier: Apache-2.0
// BpeTokenizer: GPT-2 style byte-level BPE built from a GGUF vocabulary (`tokenizer.ggml.*`), as
// llama.cpp tokenizes: special tokens split out first (control tokens only when asked), then the
// pre-tokenizer that `tokenizer.ggml.pre` names cuts the text into words, each word's bytes merge
// by rank into tokens. Text -> encode -> scheduler/forward -> sampled ids -> decode or
// `StreamDecoder` -> text. `chat_prompt` renders the model's ChatML template.
// Threads: a BpeTokenizer is immutable after construction: every call may run concurrently from
// any number of threads.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <inferkit/core/error.hpp>
#include <inferkit/core/token_id.hpp>
#include <inferkit/model/chat_template.hpp>
#include <inferkit/model/detail/bpe_merge.hpp>
#include <inferkit/model/detail/bpe_pretokenize.hpp>
#include <inferkit/model/detail/byte_level.hpp>
#include <inferkit/model/detail/utf8.hpp>
#include <inferkit/model/gguf.hpp>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace inferkit {

/// A vocabulary entry's type, with the ids of `tokenizer.ggml.token_type` (llama.cpp's
/// `llama_token_type`).
enum class TokenType : std::int32_t {
  kUndefined = 0,    ///< no type given
  kNormal = 1,       ///< text in the byte-level alphabet; what BPE merges produce
  kUnknown = 2,      ///< the unknown token
  kControl = 3,      ///< a control token such as `<|im_start|>`; parsed in text only when asked
  kUserDefined = 4,  ///< an added token, always parsed in text
  kUnused = 5,       ///< reserved, never produced
  kByte = 6,         ///< a `<0xXX>` byte token (sentencepiece vocabularies)
};

/// Everything a `BpeTokenizer` is built from; `BpeTokenizer::from_gguf` fills it from a file.
struct BpeTokenizerConfig {
  std::vector<std::string> tokens;       ///< the vocabulary as stored, id = index (byte-level text)
  std::vector<std::string> merges;       ///< "left right" merge rules, rank = index (lower first)
  std::vector<TokenType> types;          ///< one per token; empty means all normal
  std::string pre_tokenizer = "smollm";  ///< the `tokenizer.ggml.pre` name
  std::optional<TokenId> bos_id;         ///< beginning of sequence
  std::optional<TokenId> eos_id;         ///< end of sequence
  std::optional<TokenId> unknown_id;     ///< unknown token
  std::optional<TokenId> padding_id;     ///< padding
  bool add_bos = false;                  ///< whether prompts should start with bos
  std::string chat_template;             ///< `tokenizer.chat_template` (Jinja source)
};

/// A byte-level BPE tokenizer. Immutable after construction: `encode` and `decode` are const
/// and safe to call from many threads at once.
class BpeTokenizer {
 public:
  /// Builds the tokenizer of a GGUF file: `tokenizer.ggml.model` must be "gpt2", and
  /// `tokenizer.ggml.pre` one of `supported_pre_tokenizers()`; reads tokens, merges, token types
  /// and the bos/eos/unknown/padding ids, `add_bos_token` and `tokenizer.chat_template`. Throws
  /// `Error{kUnsupported}` for another model or pre-tokenizer, and as the constructor does.
  static BpeTokenizer from_gguf(const GgufFile& file) {
    BpeTokenizerConfig c;
    const std::string_view model = file.get_string("tokenizer.ggml.model");
    if (model != "gpt2") {
      detail::throw_error(ErrorCode::kUnsupported,
                          detail::concat({"tokenizer.ggml.model = '", model,
                                          "': inferkit's BpeTokenizer reads 'gpt2' (byte-level "
                                          "BPE) vocabularies"}));
    }
    c.pre_tokenizer = std::string(file.get_string("tokenizer.ggml.pre"));
    for (const std::string_view t : file.get_string_array("tokenizer.ggml.tokens")) {
      c.tokens.emplace_back(t);
    }
    for (const std::string_view m : file.get_string_array("tokenizer.ggml.merges")) {
      c.merges.emplace_back(m);
    }
    if (const GgufValue* types = file.find("tokenizer.ggml.token_type")) {
      for (const std::int32_t t : types->as_i32_array())
        c.types.push_back(static_cast<TokenType>(t));
    }
    const auto id = [&](std::string_view key) -> std::optional<TokenId> {
      const GgufValue* v = file.find(key);
      if (v == nullptr) return std::nullopt;
      return v->as_i32();
    };
    c.bos_id = id("tokenizer.ggml.bos_token_id");
    c.eos_id = id("tokenizer.ggml.eos_token_id");
    c.unknown_id = id("tokenizer.ggml.unknown_token_id");
    c.padding_id = id("tokenizer.ggml.padding_token_id");
    if (const GgufValue* v = file.find("tokenizer.ggml.add_bos_token")) c.add_bos = v->as_bool();
    if (const GgufValue* v = file.find("tokenizer.chat_template")) {
      c.chat_template = std::string(v->as_string());
    }
    return BpeTokenizer(std::move(c));
  }

  /// The `tokenizer.ggml.pre` names it splits text for: "smollm" and the names llama.cpp gives
  /// the same rules (each digit alone, then the GPT-2 regex), and "gpt-2" (the GPT-2 regex).
  static std::span<const std::string_view> supported_pre_tokenizers() noexcept {
    static constexpr std::array<std::string_view, 8> kNames = {
        "smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva", "gpt-2"};
    return kNames;
  }

  /// Builds a tokenizer from its parts. Throws `Error{kInvalidArgument}` naming the entry for:
  /// an empty or over-large vocabulary, a duplicate token, `types` of another size or an unknown
  /// type id, a merge rule without a space or whose result is not a token; `Error{kOutOfRange}` for
  /// a special id past the vocabulary; `Error{kUnsupported}` for an unknown pre-tokenizer. Merge
  /// rules whose parts are not tokens can never apply and are skipped.
  explicit BpeTokenizer(BpeTokenizerConfig config)
      : tokens_(std::move(config.tokens)),
        types_(std::move(config.types)),
        bos_(config.bos_id),
        eos_(config.eos_id),
        unknown_(config.unknown_id),
        padding_(config.padding_id),
        add_bos_(config.add_bos),
        pre_name_(std::move(config.pre_tokenizer)),
        chat_(config.chat_template) {
    set_pre_tokenizer();
    index_vocabulary();
    index_merges(config.merges);
    index_specials();
  }

  /// Tokens of `text` (any bytes; invalid UTF-8 is kept byte for byte). With `parse_special`,
  /// control and unknown tokens written in the text (`<|im_start|>`) become their ids; without,
  /// they are tokenized as plain text. User-defined tokens are always parsed (llama.cpp's and
  /// Hugging Face's rule). No BOS is added: see `add_bos()`. O(n log n) in the text's length.
  [[nodiscard]] std::vector<TokenId> encode(std::string_view text,
                                            bool parse_special = false) const {
    std::vector<TokenId> out;
    out.reserve(text.size() / 3 + 1);
    std::vector<detail::PreUnit> units;
    detail::BpeMergeScratch scratch;
    const auto encode_text = [&](std::string_view fragment) {
      detail::pre_tokenize(fragment, pre_kind_, units, [&](std::string_view word) {
        detail::bpe_merge_word(word, byte_tokens_.data(), merges_, scratch, out);
      });
    };
    for_each_fragment(text, parse_special, encode_text,
                      [&](TokenId special) { out.push_back(special); });
    return out;
  }

  /// The text of `ids`: each normal token's bytes, and special tokens' text (control and
  /// unknown tokens only when `render_special`; user-defined ones always). The result is the
  /// concatenated bytes, which need not be valid UTF-8 when `ids` stop inside a character (use
  /// `StreamDecoder` to stream). `decode(encode(s, p)) == s` for every string s whose bytes
  /// all have tokens (`encodes_byte`), valid UTF-8 or not. Throws
  /// `Error{kOutOfRange}` for an id outside the vocabulary.
  [[nodiscard]] std::string decode(std::span<const TokenId> ids, bool render_special = true) const {
    std::string out;
    for (const TokenId id : ids) out.append(token_piece(id, render_special));
    return out;
  }

  /// The bytes token `id` decodes to (what `decode` appends for it); empty for a control or
  /// unknown token unless `render_special`. Throws `Error{kOutOfRange}` for an id outside the
  /// vocabulary.
  [[nodiscard]] std::string_view token_piece(TokenId id, bool render_special = true) const {
    check_id(id);
    const TokenType t = types_[static_cast<std::size_t>(id)];
    if (!render_special && (t == TokenType::kControl || t == TokenType::kUnknown)) return {};
    return pieces_[static_cast<std::size_t>(id)];
  }

  /// The vocabulary entry of `id` as stored (byte-level text: " the" is "Ġthe"). Throws
  /// `Error{kOutOfRange}` for an id outside the vocabulary.
  [[nodiscard]] std::string_view token_text(TokenId id) const {
    check_id(id);
    return tokens_[static_cast<std::size_t>(id)];
  }

  /// The type of token `id`. Throws `Error{kOutOfRange}` for an id outside the vocabulary.
  [[nodiscard]] TokenType token_type(TokenId id) const {
    check_id(id);
    return types_[static_cast<std::size_t>(id)];
  }

  /// The id of the vocabulary entry `text` (as stored, e.g. "<|im_end|>" or "Ġthe"), if any.
  [[nodiscard]] std::optional<TokenId> find_token(std::string_view text) const {
    const auto it = by_text_.find(std::string(text));
    return it == by_text_.end() ? std::nullopt : std::optional<TokenId>(it->second);
  }

  /// Whether byte `b` has a token. A vocabulary may lack some (SmolLM2 has none for 21 bytes:
  /// 0xC0, 0xC1, 0xF1, 0xF2 and 0xF5..0xFF, which valid UTF-8 never or hardly uses, and the
  /// control characters U+0004, U+0006, U+0013, U+0014, U+0016, U+001D); `encode` drops such
  /// bytes, as llama.cpp and Hugging Face do, so the round trip `decode(encode(s)) == s` holds
  /// exactly for the strings whose bytes all have tokens.
  [[nodiscard]] bool encodes_byte(unsigned char b) const noexcept { return byte_tokens_[b] >= 0; }

  /// Tokens in the vocabulary.
  [[nodiscard]] std::int32_t vocab_size() const noexcept {
    return static_cast<std::int32_t>(tokens_.size());
  }
  /// Merge rules in use (rules whose parts are not tokens are dropped).
  [[nodiscard]] std::size_t merge_count() const noexcept { return merges_.size(); }
  /// The pre-tokenizer's name (`tokenizer.ggml.pre`).
  [[nodiscard]] std::string_view pre_tokenizer() const noexcept { return pre_name_; }
  /// Beginning-of-sequence id, if the vocabulary has one.
  [[nodiscard]] std::optional<TokenId> bos_id() const noexcept { return bos_; }
  /// End-of-sequence id, if the vocabulary has one.
  [[nodiscard]] std::optional<TokenId> eos_id() const noexcept { return eos_; }
  /// Unknown-token id, if any.
  [[nodiscard]] std::optional<TokenId> unknown_id() const noexcept { return unknown_; }
  /// Padding id, if any.
  [[nodiscard]] std::optional<TokenId> padding_id() const noexcept { return padding_; }
  /// Whether the model wants prompts to start with `bos_id()` (`tokenizer.ggml.add_bos_token`;
  /// false for SmolLM2). `encode` never adds it.
  [[nodiscard]] bool add_bos() const noexcept { return add_bos_; }

  /// True when generating `id` ends a turn: the eos token, or a control token whose text is one
  /// of `<|im_end|>`, `<|endoftext|>`, `<|eot_id|>`, `<|eom_id|>`, `<|end|>`, `<end_of_turn>`,
  /// `<|end_of_text|>` (llama.cpp's end-of-generation names). False for ids outside the
  /// vocabulary.
  [[nodiscard]] bool is_end_of_generation(TokenId id) const noexcept {
    return id >= 0 && id < vocab_size() && end_of_generation_[static_cast<std::size_t>(id)];
  }

  /// The chat template of the vocabulary.
  [[nodiscard]] const ChatTemplate& chat_template() const noexcept { return chat_; }
  /// `chat_template().apply(messages, add_generation_prompt)`: the prompt text for a
  /// conversation; encode it with `parse_special = true`. Throws `Error{kUnsupported}` when the
  /// template is not ChatML.
  [[nodiscard]] std::string chat_prompt(std::span<const ChatMessage> messages,
                                        bool add_generation_prompt) const {
    return chat_.apply(messages, add_generation_prompt);
  }

  /// Tokens of the conversation `messages` (as `chat_prompt`), with only the template's own
  /// markers as special tokens: special-token text inside a role or a content is tokenized as
  /// plain text, so a user cannot forge a turn. Equals `encode(chat_prompt(...), true)` when no
  /// content writes a special token. Throws `Error{kUnsupported}` when the template is not
  /// ChatML or a marker is not in the vocabulary.
  [[nodiscard]] std::vector<TokenId> encode_chat(std::span<const ChatMessage> messages,
                                                 bool add_generation_prompt) const {
    std::vector<TokenId> out;
    for (const ChatTemplate::Piece& p : chat_.pieces(messages, add_generation_prompt)) {
      if (!p.marker) {
        const std::vector<TokenId> ids = encode(p.text, /*parse_special=*/false);
        out.insert(out.end(), ids.begin(), ids.end());
        continue;
      }
      const std::optional<TokenId> id = find_token(p.text);
      if (!id) {
        detail::throw_error(
            ErrorCode::kUnsupported,
            detail::concat({"chat marker '", p.text, "' is not in the vocabulary"}));
      }
      out.push_back(*id);
    }
    return out;
  }

 private:
  void check_id(TokenId id) const {
    check_arg(id >= 0 && id < vocab_size(), ErrorCode::kOutOfRange, "token id", id,
              "must be in [0, vocab_size) with vocab_size =", vocab_size());
  }

  [[noreturn]] static void bad_entry(std::string_view list, std::size_t index,
                                     std::string_view entry, std::string_view problem) {
    detail::throw_error(
        ErrorCode::kInvalidArgument,
        detail::concat({list, "[", std::to_string(index), "] = '", entry.substr(0, 40),
                        entry.size() > 40 ? "...'" : "'", " ", problem}));
  }

  void set_pre_tokenizer() {
    const std::span<const std::string_view> names = supported_pre_tokenizers();
    if (std::find(names.begin(), names.end(), pre_name_) == names.end()) {
      std::string list;
      for (const std::string_view n : names) list.append(list.empty() ? "" : ", ").append(n);
      detail::throw_error(ErrorCode::kUnsupported,
                          detail::concat({"tokenizer.ggml.pre = '", pre_name_,
                                          "' is not a pre-tokenizer inferkit has: ", list}));
    }
    pre_kind_ = pre_name_ == "gpt-2" ? detail::PreTokenizerKind::kGpt2
                                     : detail::PreTokenizerKind::kDigitsThenGpt2;
  }

  void index_vocabulary() {
    check_arg(!tokens_.empty() &&
                  tokens_.size() < static_cast<std::size_t>(std::numeric_limits<TokenId>::max()),
              ErrorCode::kInvalidArgument, "tokenizer.ggml.tokens size", tokens_.size(),
              "must be in [1, 2^31 - 1)", "");
    if (types_.empty()) types_.assign(tokens_.size(), TokenType::kNormal);
    check_arg(types_.size() == tokens_.size(), ErrorCode::kInvalidArgument,
              "tokenizer.ggml.token_type size", types_.size(),
              "must equal the tokenizer.ggml.tokens size", tokens_.size());
    by_text_.reserve(tokens_.size());
    pieces_.reserve(tokens_.size());
    end_of_generation_.assign(tokens_.size(), false);
    for (std::size_t i = 0; i < tokens_.size(); ++i) {
      const std::string& text = tokens_[i];
      const auto type = static_cast<std::int32_t>(types_[i]);
      if (type < 0 || type > static_cast<std::int32_t>(TokenType::kByte)) {
        bad_entry("tokenizer.ggml.token_type", i, std::to_string(type), "is not a type id (0..6)");
      }
      if (!text.empty()) {
        const auto [it, inserted] = by_text_.emplace(text, static_cast<TokenId>(i));
        if (!inserted) {
          bad_entry("tokenizer.ggml.tokens", i, text,
                    detail::concat({"duplicates token ", std::to_string(it->second)}));
        }
      }
      pieces_.push_back(types_[i] == TokenType::kNormal ? byte_level_decode(text) : text);
      static constexpr std::array<std::string_view, 7> kEndNames = {
          "<|im_end|>", "<|endoftext|>", "<|eot_id|>",     "<|eom_id|>",
          "<|end|>",    "<end_of_turn>", "<|end_of_text|>"};
      if (types_[i] == TokenType::kControl &&
          std::find(kEndNames.begin(), kEndNames.end(), text) != kEndNames.end()) {
        end_of_generation_[i] = true;
      }
    }
    for (const std::optional<TokenId>* special : {&bos_, &eos_, &unknown_, &padding_}) {
      if (*special) check_id(**special);
    }
    if (eos_) end_of_generation_[static_cast<std::size_t>(*eos_)] = true;
    const std::array<std::uint32_t, 256>& cps = detail::byte_level_code_points();
    for (std::size_t b = 0; b < 256; ++b) {
      std::string text;
      detail::utf8_append(text, cps[b]);
      const auto it = by_text_.find(text);
      byte_tokens_[b] = it == by_text_.end() ? -1 : it->second;  // -1: dropped, as llama.cpp does
    }
  }

  /// A normal token's bytes: each code point of its text stands for one byte. Text outside
  /// the byte-level alphabet (not produced by GPT-2 conversions) is kept as it is.
  static std::string byte_level_decode(std::string_view text) {
    std::string bytes;
    const auto* p = reinterpret_cast<const unsigned char*>(text.data());
    for (std::size_t i = 0; i < text.size();) {
      const detail::Utf8Decoded d = detail::utf8_decode(p + i, text.size() - i);
      const int b = d.length ? detail::byte_level_byte(d.cp) : -1;
      if (b < 0) return std::string(text);
      bytes.push_back(static_cast<char>(b));
      i += d.length;
    }
    return bytes;
  }

  void index_merges(const std::vector<std::string>& merges) {
    merges_.reserve(merges.size());
    check_arg(merges.size() < static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()),
              ErrorCode::kInvalidArgument, "tokenizer.ggml.merges size", merges.size(), "must be <",
              std::numeric_limits<std::int32_t>::max());
    for (std::size_t i = 0; i < merges.size(); ++i) {
      const std::string& m = merges[i];
      const std::size_t space = m.find(' ', 1);
      if (space == std::string::npos) {
        bad_entry("tokenizer.ggml.merges", i, m, "has no space between its two parts");
      }
      const auto left = by_text_.find(m.substr(0, space));
      const auto right = by_text_.find(m.substr(space + 1));
      if (left == by_text_.end() || right == by_text_.end()) continue;  // can never apply
      const auto result = by_text_.find(left->first + right->first);
      if (result == by_text_.end()) {
        bad_entry("tokenizer.ggml.merges", i, m, "merges into a string that is not a token");
      }
      merges_.add(left->second, right->second, {static_cast<std::int32_t>(i), result->second});
    }
  }

  void index_specials() {
    for (std::size_t i = 0; i < tokens_.size(); ++i) {
      const TokenType t = types_[i];
      if ((t == TokenType::kControl || t == TokenType::kUserDefined || t == TokenType::kUnknown) &&
          !tokens_[i].empty()) {
        specials_.push_back(static_cast<TokenId>(i));
      }
    }
    // Longest first (llama.cpp's order), so "<|im_start|>" wins over a shorter token inside it.
    std::stable_sort(specials_.begin(), specials_.end(), [&](TokenId a, TokenId b) {
      return tokens_[static_cast<std::size_t>(a)].size() >
             tokens_[static_cast<std::size_t>(b)].size();
    });
  }

  /// Splits `text` at the special tokens that apply, as llama.cpp does: each special token in
  /// turn (longest first) is cut out of every text fragment left, left to right. Calls
  /// `on_text(fragment)` and `on_special(id)` in text order.
  template <class OnText, class OnSpecial>
  void for_each_fragment(std::string_view text, bool parse_special, OnText&& on_text,
                         OnSpecial&& on_special) const {
    struct Fragment {
      std::size_t begin = 0;
      std::size_t end = 0;
      TokenId special = -1;
    };
    std::vector<Fragment> fragments{{0, text.size(), -1}};
    std::vector<Fragment> next;
    for (const TokenId id : specials_) {
      const TokenType t = types_[static_cast<std::size_t>(id)];
      if (!parse_special && t != TokenType::kUserDefined) continue;
      const std::string& s = tokens_[static_cast<std::size_t>(id)];
      if (text.find(s) == std::string_view::npos) continue;
      next.clear();
      for (const Fragment& f : fragments) {
        if (f.special >= 0) {
          next.push_back(f);
          continue;
        }
        std::size_t at = f.begin;
        for (;;) {
          const std::size_t hit = text.substr(0, f.end).find(s, at);
          if (hit == std::string_view::npos) break;
          if (hit > at) next.push_back({at, hit, -1});
          next.push_back({hit, hit + s.size(), id});
          at = hit + s.size();
        }
        if (at < f.end) next.push_back({at, f.end, -1});
      }
      fragments.swap(next);
    }
    for (const Fragment& f : fragments) {
      if (f.special >= 0) {
        on_special(f.special);
      } else if (f.end > f.begin) {
        on_text(text.substr(f.begin, f.end - f.begin));
      }
    }
  }

  std::vector<std::string> tokens_;
  std::vector<TokenType> types_;
  std::vector<std::string> pieces_;  // what each token decodes to
  std::unordered_map<std::string, TokenId> by_text_;
  std::array<TokenId, 256> byte_tokens_{};
  detail::BpeMergeTable merges_;
  std::vector<TokenId> specials_;  // control, user-defined and unknown tokens, longest first
  std::vector<bool> end_of_generation_;
  std::optional<TokenId> bos_;
  std::optional<TokenId> eos_;
  std::optional<TokenId> unknown_;
  std::optional<TokenId> padding_;
  bool add_bos_ = false;
  std::string pre_name_;
  detail::PreTokenizerKind pre_kind_ = detail::PreTokenizerKind::kDigitsThenGpt2;
  ChatTemplate chat_;
};

}  // namespace inferkit
