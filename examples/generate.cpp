// SPDX-License-Identifier: Apache-2.0
// generate: a real model (SmolLM2-135M-Instruct by default) served by inferkit's own parts: the
// GGUF reader, the BPE tokenizer, the Llama forward pass over paged KV, the continuous scheduler,
// sampling, and optionally speculative decoding with n-gram drafts checked by the chain verifier.
// Text streams as it is produced; the run ends with prefill and decode tokens per second.
//
//   generate --prompt "..." [--max-tokens 128] [--temperature 0] [--top-p 1] [--seed 0]
//            [--spec ngram] [--chat] [--model FILE.gguf] [--json]
//
// --temperature 0 is greedy. --chat wraps the prompt in the model's ChatML template (a user
// turn, then the assistant's). --json prints one object instead of streaming.
#include <cstdint>
#include <cstdio>
#include <examples/support/cli.hpp>
#include <examples/support/json.hpp>
#include <examples/support/model.hpp>
#include <inferkit/engine/engine.hpp>
#include <inferkit/model/stream_decoder.hpp>
#include <string>
#include <vector>

namespace {

struct Flags {
  std::string prompt = "The three most important ideas in computer science are";
  long long max_tokens = 128;
  double temperature = 0.0;
  double top_p = 1.0;
  long long seed = 0;
  bool spec = false;
  bool chat = false;
  std::string model;
  bool json = false;
};

constexpr const char* kUsage =
    "usage: generate [--prompt TEXT] [--max-tokens N] [--temperature T] [--top-p P] [--seed N]\n"
    "                [--spec ngram] [--chat] [--model FILE.gguf] [--json]\n"
    "defaults: --max-tokens 128 --temperature 0 (greedy) --top-p 1 --seed 0; the model is\n"
    "$INFERKIT_MODEL or the SmolLM2-135M-Instruct that scripts/fetch-model.sh downloads.\n"
    "--spec ngram drafts from the prompt and output (prompt lookup) and verifies with the chain\n"
    "verifier; --chat applies the model's chat template to the prompt.\n";

Flags parse_flags(int argc, char** argv) {
  Flags f;
  inferkit::examples::ArgParser args(argc, argv, kUsage);
  while (args.next()) {
    const std::string& flag = args.flag();
    if (flag == "--json")
      f.json = true;
    else if (flag == "--chat")
      f.chat = true;
    else if (flag == "--prompt")
      f.prompt = args.value();
    else if (flag == "--max-tokens")
      f.max_tokens = args.integer<long long>(1, 8192);
    else if (flag == "--temperature")
      f.temperature = args.number(0.0, 100.0);
    else if (flag == "--top-p")
      f.top_p = args.number(0.001, 1.0);
    else if (flag == "--seed")
      f.seed = args.integer<long long>(0, 1LL << 62);
    else if (flag == "--spec")
      f.spec = args.choice({"ngram"}) == "ngram";
    else if (flag == "--model")
      f.model = args.value();
    else
      args.unknown_flag();
  }
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  return inferkit::examples::run_main("generate", [&] {
    const Flags f = parse_flags(argc, argv);
    const inferkit::examples::LoadedModel m(inferkit::examples::model_path(f.model));
    std::vector<inferkit::TokenId> prompt;
    if (f.chat) {
      const std::vector<inferkit::ChatMessage> messages = {{"user", f.prompt}};
      prompt = m.tokenizer.encode(m.tokenizer.chat_prompt(messages, true), /*parse_special=*/true);
    } else {
      prompt = m.tokenizer.encode(f.prompt, /*parse_special=*/false);
    }
    if (prompt.empty()) throw inferkit::examples::UsageError{"--prompt is empty"};
    inferkit::EngineOptions options;
    options.num_blocks = static_cast<std::int32_t>(
        (static_cast<long long>(prompt.size()) + f.max_tokens + 64) / 16 + 8);
    options.ngram_speculation = f.spec;
    options.eos_tokens = m.end_tokens;
    inferkit::Engine engine(m.model, options);
    inferkit::StreamDecoder decoder(m.tokenizer, /*render_special=*/false);
    if (!f.json) {
      std::fputs(f.chat ? "" : f.prompt.c_str(), stdout);
      std::fflush(stdout);
      engine.set_token_callback([&](inferkit::RequestId, std::span<const inferkit::TokenId> t) {
        for (inferkit::TokenId id : t) std::fputs(decoder.push(id).c_str(), stdout);
        std::fflush(stdout);
      });
    }
    inferkit::GenerationParams params;
    params.max_new_tokens = f.max_tokens;
    params.sampling.temperature = static_cast<float>(f.temperature);
    params.sampling.top_p = static_cast<float>(f.top_p);
    params.seed = static_cast<std::uint64_t>(f.seed);
    (void)engine.submit(prompt, params);
    engine.run();
    const inferkit::RequestOutcome out = engine.take_finished().at(0);
    const inferkit::RequestMetrics& mt = out.metrics;
    // Prefill: from the first step to the first token (the prompt's chunks); decode: every
    // later token.
    const double prefill_s = mt.first_token_s - mt.first_scheduled_s;
    const double prefill_tps = prefill_s > 0 ? static_cast<double>(prompt.size()) / prefill_s : 0;
    const double decode_tps = out.output.size() >= 2 && mt.tpot_s() > 0 ? 1.0 / mt.tpot_s() : 0;
    const inferkit::EngineStats& st = engine.stats();
    if (f.json) {
      inferkit::examples::Json j;
      j.begin().begin_array("prompt_tokens");
      for (inferkit::TokenId t : prompt) j.field("", t);
      j.end().begin_array("tokens");
      for (inferkit::TokenId t : out.output) j.field("", t);
      j.end()
          .field("text", m.tokenizer.decode(out.output, /*render_special=*/false))
          .field("finish_reason", std::string(inferkit::to_string(out.reason)))
          .field("prefill_tokens_per_s", prefill_tps, "%.1f")
          .field("decode_tokens_per_s", decode_tps, "%.1f")
          .field("drafted_tokens", st.drafted_tokens)
          .field("accepted_tokens", st.accepted_tokens)
          .end();
      std::puts(j.str().c_str());
      return 0;
    }
    std::fputs(decoder.finish().c_str(), stdout);
    std::printf(
        "\n\n[%zu prompt tokens, %zu generated (%s); prefill %.1f tokens/s, decode %.1f "
        "tokens/s",
        prompt.size(), out.output.size(), std::string(inferkit::to_string(out.reason)).c_str(),
        prefill_tps, decode_tps);
    if (f.spec) {
      std::printf("; %lld of %lld drafts accepted", static_cast<long long>(st.accepted_tokens),
                  static_cast<long long>(st.drafted_tokens));
    }
    std::printf("]\n");
    return 0;
  });
}
