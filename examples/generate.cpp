// SPDX-License-Identifier: Apache-2.0
// generate: a real model (SmolLM2-135M-Instruct by default) served by inferkit's own parts: the
// GGUF reader, the BPE tokenizer, the Llama forward pass over paged KV, the continuous scheduler,
// sampling, and optionally speculative decoding with n-gram drafts checked by the chain verifier.
// Text streams as it is produced; the run ends with prefill and decode tokens per second.
//
//   generate --prompt "..." [--max-tokens 128] [--temperature 0] [--top-p 1] [--seed 0]
//            [--spec ngram] [--chat | --special] [--model FILE.gguf] [--json]
//
// --temperature 0 is greedy. --chat wraps the prompt in the model's ChatML template (a user
// turn, then the assistant's; special-token text in the prompt stays text). --special reads
// special-token text in the prompt (<|im_start|>) as the token, as llama.cpp and vLLM read a
// completion prompt (and as `serve` does). --json prints one object instead of streaming.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <examples/support/cli_main.hpp>
#include <examples/support/json_out.hpp>
#include <examples/support/model.hpp>
#include <inferkit/engine/engine.hpp>
#include <inferkit/model/stream_decoder.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace {

struct Flags {
  std::string prompt = "The three most important ideas in computer science are";
  long long max_tokens = 128;
  double temperature = 0.0;
  double top_p = 1.0;
  long long seed = 0;
  std::string spec;  // "ngram", or empty: no speculation
  bool chat = false;
  bool special = false;
  std::string model;
  std::string activations = "fp32";
  std::string kv_dtype = "fp16";
  bool json = false;
};

constexpr const char* kUsage =
    "usage: generate [--prompt TEXT] [--max-tokens N] [--temperature T] [--top-p P] [--seed N]\n"
    "                [--spec ngram] [--chat | --special] [--model FILE.gguf]\n"
    "                [--activations fp32|int8] [--kv-dtype fp16|bf16|fp8|fp8_e5m2|int8|int4]\n"
    "                [--json]\n"
    "defaults: --max-tokens 128 --temperature 0 (greedy) --top-p 1 --seed 0; the model is\n"
    "$INFERKIT_MODEL or the SmolLM2-135M-Instruct that scripts/fetch-model.sh downloads.\n"
    "--spec ngram drafts from the prompt and output (prompt lookup) and verifies with the chain\n"
    "verifier; --chat applies the model's chat template to the prompt; --special reads\n"
    "special-token text in the prompt (<|im_start|>) as the token instead of as text;\n"
    "--activations int8 runs the quantized products on int8 activations (faster, llama.cpp's\n"
    "rounding; fp32, the default, is exact); --kv-dtype stores K/V in that format (fp16, the\n"
    "default, as llama.cpp; fp8 is e4m3; int4 takes a quarter of fp16's memory, at a quality\n"
    "cost docs/real-model.md measures).\n";

void add_flags(CLI::App& app, Flags& f) {
  using inferkit::examples::integer_in;
  using inferkit::examples::number_in;
  app.add_option("--prompt", f.prompt);
  app.add_option("--max-tokens", f.max_tokens)->transform(integer_in(1LL, 8192LL));
  app.add_option("--temperature", f.temperature)->transform(number_in(0.0, 100.0));
  app.add_option("--top-p", f.top_p)->transform(number_in(0.001, 1.0));
  app.add_option("--seed", f.seed)->transform(integer_in(0LL, 1LL << 62));
  app.add_option("--spec", f.spec)->check(inferkit::examples::one_of({"ngram"}));
  app.add_flag("--chat", f.chat);
  app.add_flag("--special", f.special);
  app.add_option("--model", f.model);
  app.add_option("--activations", f.activations)
      ->check(inferkit::examples::one_of({"fp32", "int8"}));
  app.add_option("--kv-dtype", f.kv_dtype)
      ->check(inferkit::examples::one_of(inferkit::examples::kKvDtypeChoices));
  app.add_flag("--json", f.json);
}

}  // namespace

int main(int argc, char** argv) {
  return inferkit::examples::run_main("generate", kUsage, [&](CLI::App& app) {
    Flags f;
    add_flags(app, f);
    app.parse(argc, argv);
    inferkit::examples::require(!(f.chat && f.special),
                                "--chat and --special exclude each other (a chat's markers are "
                                "the template's; its text is never special)");
    const inferkit::examples::LoadedModel m(
        inferkit::examples::model_path(f.model),
        inferkit::examples::activation_precision(f.activations));
    std::vector<inferkit::TokenId> prompt;
    if (f.chat) {
      const std::vector<inferkit::ChatMessage> messages = {{"user", f.prompt}};
      // Only the template's markers are special: text in the message never forges a turn.
      prompt = m.tokenizer.encode_chat(messages, /*add_generation_prompt=*/true);
    } else {
      prompt = m.tokenizer.encode(f.prompt, /*parse_special=*/f.special);
    }
    if (prompt.empty()) throw inferkit::examples::UsageError{"--prompt is empty"};
    inferkit::EngineOptions options;
    options.num_blocks = static_cast<std::int32_t>(
        (static_cast<long long>(prompt.size()) + f.max_tokens + 64) / 16 + 8);
    options.ngram_speculation = f.spec == "ngram";
    options.eos_tokens = m.end_tokens;
    options.kv_dtype = inferkit::examples::kv_dtype(f.kv_dtype);
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
      using inferkit::examples::fixed;
      inferkit::examples::print_json({
          {"prompt_tokens", prompt},
          {"tokens", out.output},
          {"text", m.tokenizer.decode(out.output, /*render_special=*/false)},
          {"finish_reason", std::string(inferkit::to_string(out.reason))},
          {"prefill_tokens_per_s", fixed(prefill_tps, 1)},
          {"decode_tokens_per_s", fixed(decode_tps, 1)},
          {"drafted_tokens", st.drafted_tokens},
          {"accepted_tokens", st.accepted_tokens},
          {"kv_dtype", std::string(inferkit::to_string(engine.kv_dtype()))},
      });
      return 0;
    }
    std::fputs(decoder.finish().c_str(), stdout);
    std::printf(
        "\n\n[%zu prompt tokens, %zu generated (%s); prefill %.1f tokens/s, decode %.1f "
        "tokens/s",
        prompt.size(), out.output.size(), std::string(inferkit::to_string(out.reason)).c_str(),
        prefill_tps, decode_tps);
    if (!f.spec.empty()) {
      std::printf("; %lld of %lld drafts accepted", static_cast<long long>(st.accepted_tokens),
                  static_cast<long long>(st.drafted_tokens));
    }
    std::printf("]\n");
    return 0;
  });
}
