// SPDX-License-Identifier: Apache-2.0
// Tests for model/chat_template.hpp: SmolLM2's template (copied from its GGUF file) renders what
// its Jinja says, default system prompt included; other templates are refused.
#include <catch2/catch.hpp>
#include <inferkit/model/chat_template.hpp>
#include <string>
#include <tests/support/error_code.hpp>
#include <vector>

using namespace inferkit;
using inferkit::test::code_of;

namespace {

// tokenizer.chat_template of SmolLM2-135M-Instruct.Q4_1.gguf (its newlines are real newlines).
const std::string kSmolLm2 =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|im_start|>assistant\n' }}{% endif %}";

}  // namespace

TEST_CASE("ChatTemplate: SmolLM2's ChatML with its default system prompt",
          "[model][chat_template]") {
  const ChatTemplate t(kSmolLm2);
  CHECK(t.is_chatml());
  CHECK(t.default_system_prompt() ==
        "You are a helpful AI assistant named SmolLM, trained by Hugging Face");
  const std::vector<ChatMessage> user = {{"user", "Hi!"}};
  CHECK(t.apply(user, true) ==
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
        "Face<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n");
  const std::vector<ChatMessage> with_system = {
      {"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello."}, {"user", "Bye"}};
  CHECK(t.apply(with_system, false) ==
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
        "<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n");
  CHECK(t.apply({}, true) == "<|im_start|>assistant\n");  // the loop never runs
  CHECK(t.source() == kSmolLm2);
}

TEST_CASE("ChatTemplate: plain ChatML, escaped newlines, and refusals", "[model][chat_template]") {
  const ChatTemplate plain(
      "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
      "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}");
  CHECK(plain.is_chatml());
  CHECK(plain.default_system_prompt().empty());
  const std::vector<ChatMessage> m = {{"user", "x"}};
  CHECK(plain.apply(m, false) == "<|im_start|>user\nx<|im_end|>\n");
  const ChatTemplate escaped(
      "{% if messages[0]['role'] != 'system' %}{{ '<|im_start|>system\\nBe nice<|im_end|>\\n' }}"
      "{% endif %}");
  CHECK(escaped.default_system_prompt() == "Be nice");
  std::string msg;
  const ChatTemplate llama3("{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>' }}");
  CHECK_FALSE(llama3.is_chatml());
  CHECK(code_of([&] { (void)llama3.apply(m, true); }, &msg) == ErrorCode::kUnsupported);
  CHECK_THAT(msg, Catch::Contains("start_header_id") && Catch::Contains("ChatML"));
  CHECK(code_of([] { (void)ChatTemplate().apply({}, true); }) == ErrorCode::kUnsupported);
}
