// SPDX-License-Identifier: Apache-2.0
// StreamDecoder: turns generated tokens into text as they arrive, emitting only complete UTF-8.
// Byte-level BPE splits characters across tokens (an emoji or a Chinese character can take two
// or three), so printing each token's bytes would show broken characters; the decoder holds an
// incomplete sequence until the token that completes it arrives.
// Threads: one thread at a time per decoder (push and finish mutate it); the BpeTokenizer it reads
// may be shared.
#pragma once

#include <cstddef>
#include <inferkit/core/token_id.hpp>
#include <inferkit/model/bpe_tokenizer.hpp>
#include <inferkit/model/detail/utf8.hpp>
#include <string>
#include <string_view>

namespace inferkit {

/// Streams a tokenizer's output as valid UTF-8. For ids whose bytes are valid UTF-8 as a
/// whole, the concatenation of every `push` and the final `finish` equals
/// `tokenizer.decode(ids, render_special)`. Bytes that can never become valid UTF-8 are replaced
/// by U+FFFD (one per maximal invalid subsequence, as the Unicode standard recommends), so the
/// output is always valid. Keeps a reference to the tokenizer, which must outlive it.
class StreamDecoder {
 public:
  /// A decoder of `tokenizer`'s ids; `render_special` as in `BpeTokenizer::decode`.
  explicit StreamDecoder(const BpeTokenizer& tokenizer, bool render_special = true)
      : tokenizer_(&tokenizer), render_special_(render_special) {}

  /// Adds token `id` and returns the text completed by it (possibly empty). Throws
  /// `Error{kOutOfRange}` for an id outside the vocabulary (the decoder is then unchanged).
  [[nodiscard]] std::string push(TokenId id) {
    pending_.append(tokenizer_->token_piece(id, render_special_));
    return drain(false);
  }

  /// Ends the stream: returns what is held (an incomplete sequence becomes U+FFFD) and resets.
  [[nodiscard]] std::string finish() { return drain(true); }

  /// Forgets any held bytes.
  void reset() noexcept { pending_.clear(); }

  /// Bytes held back, waiting for the rest of a character (0..3).
  [[nodiscard]] std::size_t pending_bytes() const noexcept { return pending_.size(); }

 private:
  std::string drain(bool final) {
    std::string out;
    const auto* p = reinterpret_cast<const unsigned char*>(pending_.data());
    const std::size_t n = pending_.size();
    std::size_t i = 0;
    while (i < n) {
      bool complete = false;
      const std::size_t k = detail::utf8_valid_prefix(p + i, n - i, &complete);
      if (complete) {
        out.append(pending_, i, k);
        i += k;
      } else if (k > 0 && i + k == n && !final) {
        break;  // a valid start that more bytes may complete: hold it
      } else {
        detail::utf8_append(out, 0xFFFD);
        i += k > 0 ? k : 1;
      }
    }
    pending_.erase(0, i);
    return out;
  }

  const BpeTokenizer* tokenizer_;
  bool render_special_;
  std::string pending_;
};

}  // namespace inferkit
