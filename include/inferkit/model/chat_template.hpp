// SPDX-License-Identifier: Apache-2.0
// ChatTemplate: turns a conversation into the prompt text an instruction-tuned model was trained
// on. GGUF files carry the template as Jinja source (`tokenizer.chat_template`); inferkit does
// not run Jinja, it recognizes the ChatML family (`<|im_start|>role\ncontent<|im_end|>\n`, used
// by SmolLM2, Qwen and others), including a default system prompt that the template inserts
// when the conversation starts without one, and renders it directly.
// Threads: a ChatTemplate is immutable after construction: every call may run concurrently from
// any number of threads.
#pragma once

#include <cstddef>
#include <inferkit/core/error.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace inferkit {

/// One turn of a conversation: `role` is "system", "user" or "assistant" (any text is passed
/// through), `content` its text.
struct ChatMessage {
  std::string role;     ///< who speaks
  std::string content;  ///< what they say
};

/// A chat template recognized from its Jinja source.
class ChatTemplate {
 public:
  /// The template of `source` (the `tokenizer.chat_template` text; empty when the file has none).
  /// Never throws: a template inferkit cannot render is reported by `apply`.
  explicit ChatTemplate(std::string_view source = {}) : source_(source) {
    is_chatml_ = source_.find("<|im_start|>") != std::string::npos &&
                 source_.find("<|im_end|>") != std::string::npos;
    // A template that prepends a system turn when messages[0] is not one (SmolLM2's):
    //   {% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\n...
    const bool conditional =
        source_.find("messages[0]['role'] != 'system'") != std::string::npos ||
        source_.find(R"(messages[0]["role"] != "system")") != std::string::npos;
    static constexpr std::string_view kOpen = "<|im_start|>system";
    const std::size_t open = source_.find(kOpen);
    if (is_chatml_ && conditional && open != std::string::npos) {
      std::size_t body = open + kOpen.size();
      if (source_.compare(body, 1, "\n") == 0) {
        body += 1;
      } else if (source_.compare(body, 2, "\\n") == 0) {  // an escaped newline in the Jinja text
        body += 2;
      }
      const std::size_t close = source_.find("<|im_end|>", body);
      if (close != std::string::npos) {
        default_system_ = source_.substr(body, close - body);
        has_default_system_ = true;
      }
    }
  }

  /// The Jinja source it was built from.
  [[nodiscard]] std::string_view source() const noexcept { return source_; }
  /// True when the template is ChatML, the family `apply` renders.
  [[nodiscard]] bool is_chatml() const noexcept { return is_chatml_; }
  /// The system prompt the template inserts before a conversation that has none (SmolLM2's
  /// "You are a helpful AI assistant named SmolLM, trained by Hugging Face"), or empty.
  [[nodiscard]] std::string_view default_system_prompt() const noexcept { return default_system_; }

  /// One piece of a rendered conversation: the template's own special markers
  /// (`<|im_start|>`, `<|im_end|>`) apart from the text between them (roles, contents, newlines).
  struct Piece {
    std::string text;     ///< the piece's text
    bool marker = false;  ///< a special token of the template, not text
  };

  /// The prompt for `messages`: each as `<|im_start|>{role}\n{content}<|im_end|>\n`, after the
  /// default system turn when the template has one and messages[0] is not a system turn, then
  /// `<|im_start|>assistant\n` when `add_generation_prompt`. Tokenize it with special tokens
  /// parsed only when the contents are trusted; `BpeTokenizer::encode_chat` parses only the
  /// template's markers. Throws `Error{kUnsupported}` (quoting the template's start) when the
  /// template is not ChatML.
  [[nodiscard]] std::string apply(std::span<const ChatMessage> messages,
                                  bool add_generation_prompt) const {
    std::string out;
    for (const Piece& p : pieces(messages, add_generation_prompt)) out.append(p.text);
    return out;
  }

  /// `apply`'s text as pieces, markers apart; text pieces between two markers are joined, so
  /// encoding each text piece whole gives the tokens of `apply`'s text with specials parsed
  /// (when no content writes a special token). Throws as `apply`.
  [[nodiscard]] std::vector<Piece> pieces(std::span<const ChatMessage> messages,
                                          bool add_generation_prompt) const {
    if (!is_chatml_) {
      detail::throw_error(
          ErrorCode::kUnsupported,
          detail::concat({"chat template '", std::string_view(source_).substr(0, 60),
                          source_.size() > 60 ? "...' " : "' ",
                          "is not ChatML (<|im_start|>role\\ncontent<|im_end|>), the family "
                          "inferkit renders"}));
    }
    std::vector<Piece> out;
    const auto text = [&](std::string_view t) {
      if (out.empty() || out.back().marker) out.push_back({std::string(), false});
      out.back().text.append(t);
    };
    const auto turn = [&](std::string_view role, std::string_view content) {
      out.push_back({"<|im_start|>", true});
      text(role);
      text("\n");
      text(content);
      out.push_back({"<|im_end|>", true});
      text("\n");
    };
    if (has_default_system_ && (messages.empty() || messages[0].role != "system")) {
      // The template inserts it inside its loop (loop.first), so not for an empty conversation.
      if (!messages.empty()) turn("system", default_system_);
    }
    for (const ChatMessage& m : messages) turn(m.role, m.content);
    if (add_generation_prompt) {
      out.push_back({"<|im_start|>", true});
      text("assistant\n");
    }
    return out;
  }

 private:
  std::string source_;
  std::string default_system_;
  bool is_chatml_ = false;
  bool has_default_system_ = false;
};

}  // namespace inferkit
