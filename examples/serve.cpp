// SPDX-License-Identifier: Apache-2.0
// serve: an OpenAI-compatible HTTP server on inferkit's parts, so that any OpenAI client, load
// generator or router works against it unchanged. HTTP is cpp-httplib's, JSON nlohmann's,
// metrics prometheus-cpp's text format; inferkit provides the engine behind AsyncEngine (one
// engine thread, any number of HTTP worker threads that submit, stream and cancel).
//
//   serve [--model FILE.gguf] [--host 127.0.0.1] [--port 8080] [--api-key KEY] [--threads N]
//
// Routes: POST /v1/completions, POST /v1/chat/completions (streaming with server-sent events,
// or not), GET /v1/models, GET /health (503 while loading or draining), GET /metrics. Errors
// are OpenAI's shape: {"error": {"message", "type", "param", "code"}}. SIGINT or SIGTERM drains
// (finishes what runs, within --drain-seconds) and exits 0.
#include <httplib.h>
#include <prometheus/metric_family.h>
#include <prometheus/text_serializer.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <examples/support/cli_main.hpp>
#include <examples/support/model.hpp>
#include <filesystem>
#include <inferkit/engine/async_engine.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

using nlohmann::json;
using namespace std::chrono_literals;

struct Flags {
  std::string model;
  std::string model_name;  // the id clients send; default: the file's stem
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string api_key;
  int threads = 0;   // 0: OpenMP's default
  int kv_pages = 0;  // 0: enough for max_num_seqs requests of 1024 tokens, and the context
  int block_size = 16;
  int max_num_seqs = 64;
  long long max_batched_tokens = 2048;
  long long max_model_len = 0;  // 0: the model's context length
  bool no_prefix_cache = false;
  std::string spec;  // "ngram" or empty
  std::string activations = "fp32";
  std::string kv_dtype = "fp16";
  int max_queued_requests = 256;
  long long max_queued_prompt_tokens = 1 << 20;
  long long max_body_bytes = 4 << 20;
  int http_threads = 256;
  int timeout_seconds = 30;  // read and write timeouts of a connection
  int drain_seconds = 30;
};

constexpr const char* kUsage =
    "usage: serve [--model FILE.gguf] [--model-name NAME] [--host ADDR] [--port N]\n"
    "             [--api-key KEY] [--threads N] [--kv-pages N] [--block-size N]\n"
    "             [--max-num-seqs N] [--max-batched-tokens N] [--max-model-len N]\n"
    "             [--no-prefix-cache] [--spec ngram] [--activations fp32|int8]\n"
    "             [--kv-dtype fp16|bf16|fp8|fp8_e5m2|int8|int4] [--max-queued-requests N]\n"
    "             [--max-queued-prompt-tokens N] [--max-body-bytes N] [--http-threads N]\n"
    "             [--timeout-seconds N] [--drain-seconds N]\n"
    "defaults: --host 127.0.0.1 --port 8080, no API key, the model is $INFERKIT_MODEL or the\n"
    "SmolLM2-135M-Instruct that scripts/fetch-model.sh downloads; --max-num-seqs 64 requests run\n"
    "at once, --max-queued-requests 256 wait (more get 429), --http-threads 256 connections are\n"
    "served at once, each read and write times out after --timeout-seconds 30; --activations\n"
    "int8 runs the quantized products on int8 activations (2x the batched throughput, llama.cpp's\n"
    "rounding; fp32, the default, is exact); --kv-dtype stores K/V in that format (fp16 by\n"
    "default; int4 holds 4x fp16's tokens in the same memory, at a quality cost).\n";

// ---- errors, OpenAI's shape -------------------------------------------------------------------

// A request the server refuses: the HTTP status and OpenAI's error fields.
struct ApiError {
  ApiError(int status_code, std::string what, std::string kind = "invalid_request_error",
           std::string field = "", std::string machine_code = "")
      : status(status_code),
        message(std::move(what)),
        type(std::move(kind)),
        param(std::move(field)),
        code(std::move(machine_code)) {}
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // the offending field, or empty
  std::string code;   // machine-readable code, or empty
};

json error_body(const ApiError& e) {
  return {{"error",
           {{"message", e.message},
            {"type", e.type},
            {"param", e.param.empty() ? json(nullptr) : json(e.param)},
            {"code", e.code.empty() ? json(nullptr) : json(e.code)}}}};
}

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(error_body(e).dump(), "application/json");
}

[[noreturn]] void bad_field(const std::string& field, const std::string& what) {
  throw ApiError{400, "'" + field + "' " + what, "invalid_request_error", field, ""};
}

// ---- reading a request's fields ---------------------------------------------------------------

// The field `name` of `body` if present and not null.
const json* field(const json& body, const char* name) {
  const auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

bool read_bool(const json& body, const char* name, bool fallback) {
  const json* v = field(body, name);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) bad_field(name, "must be a boolean");
  return v->get<bool>();
}

double read_number(const json& body, const char* name, double fallback, double lo, double hi) {
  const json* v = field(body, name);
  if (v == nullptr) return fallback;
  if (!v->is_number()) bad_field(name, "must be a number");
  const double x = v->get<double>();
  if (!(x >= lo && x <= hi)) {
    bad_field(name, "must be in [" + inferkit::examples::format_g(lo) + ", " +
                        inferkit::examples::format_g(hi) + "], got " +
                        inferkit::examples::format_g(x));
  }
  return x;
}

std::int64_t read_integer(const json& body, const char* name, std::int64_t fallback,
                          std::int64_t lo, std::int64_t hi) {
  const json* v = field(body, name);
  if (v == nullptr) return fallback;
  if (!v->is_number_integer()) bad_field(name, "must be an integer");
  // An unsigned value above INT64_MAX reads as negative through get<int64_t>: check first.
  if (v->is_number_unsigned() && v->get<std::uint64_t>() > static_cast<std::uint64_t>(hi)) {
    bad_field(name, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  const auto x = v->get<std::int64_t>();
  if (x < lo || x > hi) {
    bad_field(name, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                        std::to_string(x));
  }
  return x;
}

// Fields OpenAI defines that this server does not implement: refused unless left at the value
// that means "off", so a client never silently gets something other than it asked for.
void refuse_unsupported(const json& body) {
  for (const char* name : {"presence_penalty", "frequency_penalty"}) {
    if (read_number(body, name, 0.0, -2.0, 2.0) != 0.0)
      bad_field(name, "is not supported (only 0)");
  }
  if (read_bool(body, "echo", false)) bad_field("echo", "is not supported");
  if (read_integer(body, "best_of", 1, 1, 1) != 1) bad_field("best_of", "must be 1");
  if (const json* b = field(body, "logit_bias"); b != nullptr && !b->empty()) {
    bad_field("logit_bias", "is not supported");
  }
  if (const json* s = field(body, "suffix"); s != nullptr) bad_field("suffix", "is not supported");
  if (const json* t = field(body, "tools"); t != nullptr && !t->empty()) {
    bad_field("tools", "is not supported");
  }
}

// What one HTTP request asks of the engine, and how to answer it.
struct Parsed {
  inferkit::CompletionRequest request;
  bool chat = false;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  std::int32_t logprobs = -1;  // -1: none; else top-N alternatives per token
  std::int32_t n = 1;          // completions of the prompt (choices)
  std::string model;
};

std::vector<std::string> read_stop(const json& body) {
  const json* v = field(body, "stop");
  if (v == nullptr) return {};
  std::vector<std::string> stops;
  if (v->is_string()) {
    stops.push_back(v->get<std::string>());
  } else if (v->is_array()) {
    for (const json& s : *v) {
      if (!s.is_string()) bad_field("stop", "must be a string or an array of strings");
      stops.push_back(s.get<std::string>());
    }
  } else {
    bad_field("stop", "must be a string or an array of strings");
  }
  if (stops.size() > inferkit::kMaxStopStrings) {
    bad_field("stop", "has " + std::to_string(stops.size()) + " strings; the limit is " +
                          std::to_string(inferkit::kMaxStopStrings));
  }
  for (const std::string& s : stops) {
    if (s.empty() || s.size() > inferkit::kMaxStopStringBytes) {
      bad_field("stop", "strings must have 1 to " + std::to_string(inferkit::kMaxStopStringBytes) +
                            " bytes");
    }
  }
  return stops;
}

// The text of a chat message's content: a string, or an array of {"type": "text", "text"} parts.
std::string read_content(const json& content, std::size_t index) {
  const std::string name = "messages[" + std::to_string(index) + "].content";
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) bad_field(name, "must be a string or an array of text parts");
  std::string text;
  for (const json& part : content) {
    if (!part.is_object() || part.value("type", json()) != "text" || !part.contains("text") ||
        !part["text"].is_string()) {
      bad_field(name, R"(parts must be {"type": "text", "text": ...} (only text is supported))");
    }
    text += part["text"].get<std::string>();
  }
  return text;
}

Parsed parse_request(const json& body, bool chat, const inferkit::examples::LoadedModel& m,
                     std::int64_t max_model_len, const std::string& model_name) {
  if (!body.is_object()) throw ApiError{400, "the body must be a JSON object"};
  Parsed p;
  p.chat = chat;
  if (const json* model = field(body, "model"); model != nullptr) {
    if (!model->is_string()) bad_field("model", "must be a string");
    p.model = model->get<std::string>();
    if (p.model != model_name) {
      throw ApiError{
          404,
          "The model '" + p.model + "' does not exist; this server serves '" + model_name + "'",
          "invalid_request_error", "model", "model_not_found"};
    }
  }
  p.model = model_name;
  refuse_unsupported(body);
  // n choices share the prompt's KV pages (the scheduler forks them after one prefill).
  p.n = static_cast<std::int32_t>(read_integer(body, "n", 1, 1, inferkit::kMaxCompletions));
  std::vector<inferkit::TokenId>& prompt = p.request.prompt;
  if (chat) {
    const json* messages = field(body, "messages");
    if (messages == nullptr) bad_field("messages", "is required");
    if (!messages->is_array() || messages->empty()) {
      bad_field("messages", "must be a non-empty array of {role, content}");
    }
    std::vector<inferkit::ChatMessage> turns;
    for (std::size_t i = 0; i < messages->size(); ++i) {
      const json& msg = (*messages)[i];
      const std::string name = "messages[" + std::to_string(i) + "]";
      if (!msg.is_object()) bad_field(name, "must be an object");
      const json* role = field(msg, "role");
      if (role == nullptr || !role->is_string()) bad_field(name + ".role", "must be a string");
      const std::string r = role->get<std::string>();
      if (r != "system" && r != "user" && r != "assistant" && r != "developer") {
        bad_field(name + ".role", "must be system, developer, user or assistant");
      }
      const json* content = field(msg, "content");
      turns.push_back({r == "developer" ? "system" : r,
                       content == nullptr ? std::string() : read_content(*content, i)});
    }
    // Markers of the template are special tokens; message text never is (no forged turns).
    prompt = m.tokenizer.encode_chat(turns, /*add_generation_prompt=*/true);
  } else {
    const json* v = field(body, "prompt");
    if (v == nullptr) bad_field("prompt", "is required");
    const json* one = v;
    if (v->is_array() && !v->empty() && !(*v)[0].is_number()) {
      if (v->size() != 1) bad_field("prompt", "must be one prompt (batches are not supported)");
      one = &(*v)[0];
    }
    if (one->is_string()) {
      // As llama-server and vLLM do: special-token text in a completion prompt is the token.
      prompt = m.tokenizer.encode(one->get<std::string>(), /*parse_special=*/true);
    } else if (one->is_array()) {
      for (const json& t : *one) {
        if (!t.is_number_integer() || t.get<std::int64_t>() < 0 ||
            t.get<std::int64_t>() >= m.model.config().vocab_size) {
          bad_field("prompt", "token ids must be integers in [0, " +
                                  std::to_string(m.model.config().vocab_size) + ")");
        }
        prompt.push_back(static_cast<inferkit::TokenId>(t.get<std::int64_t>()));
      }
    } else {
      bad_field("prompt", "must be a string or an array of token ids");
    }
  }
  if (prompt.empty()) bad_field(chat ? "messages" : "prompt", "has no tokens");
  const auto prompt_tokens = static_cast<std::int64_t>(prompt.size());
  if (prompt_tokens >= max_model_len) {
    throw ApiError{400,
                   "This model's maximum context length is " + std::to_string(max_model_len) +
                       " tokens. However, you requested " + std::to_string(prompt_tokens) +
                       " tokens in the prompt. Please reduce the length.",
                   "invalid_request_error", chat ? "messages" : "prompt",
                   "context_length_exceeded"};
  }
  inferkit::GenerationParams& g = p.request.params;
  const std::int64_t room = max_model_len - prompt_tokens;
  // OpenAI's defaults: 16 tokens for completions; chat runs to the end of the context.
  std::int64_t max_tokens = read_integer(body, "max_tokens", chat ? room : 16, 1, 1 << 30);
  max_tokens = read_integer(body, "max_completion_tokens", max_tokens, 1, 1 << 30);
  if (max_tokens > room) {
    throw ApiError{400,
                   "This model's maximum context length is " + std::to_string(max_model_len) +
                       " tokens. However, you requested " +
                       std::to_string(prompt_tokens + max_tokens) + " tokens (" +
                       std::to_string(prompt_tokens) + " in the prompt, " +
                       std::to_string(max_tokens) + " for the completion).",
                   "invalid_request_error", "max_tokens", "context_length_exceeded"};
  }
  g.max_new_tokens = max_tokens;
  g.sampling.temperature = static_cast<float>(read_number(body, "temperature", 1.0, 0.0, 2.0));
  g.sampling.top_p = static_cast<float>(read_number(body, "top_p", 1.0, 1e-6, 1.0));
  const std::int64_t top_k = read_integer(body, "top_k", 0, -1, m.model.config().vocab_size);
  g.sampling.top_k = static_cast<std::int32_t>(top_k < 0 ? 0 : top_k);
  g.sampling.min_p = static_cast<float>(read_number(body, "min_p", 0.0, 0.0, 1.0));
  // With a seed the draw is reproducible (the engine's stream depends on the seed alone);
  // without one, each request draws its own.
  g.seed =
      field(body, "seed") != nullptr
          ? static_cast<std::uint64_t>(read_integer(body, "seed", 0,
                                                    std::numeric_limits<std::int64_t>::min(),
                                                    std::numeric_limits<std::int64_t>::max()))
          : (static_cast<std::uint64_t>(std::random_device{}()) << 32) | std::random_device{}();
  p.request.stop_strings = read_stop(body);
  // vLLM's extension, which load generators send so that every request runs its full length.
  g.stop_at_eos = !read_bool(body, "ignore_eos", false);
  p.stream = read_bool(body, "stream", false);
  if (const json* so = field(body, "stream_options"); so != nullptr) {
    if (!so->is_object()) bad_field("stream_options", "must be an object");
    p.include_usage = read_bool(*so, "include_usage", false);
  }
  if (chat) {
    if (read_bool(body, "logprobs", false)) {
      p.logprobs = static_cast<std::int32_t>(
          read_integer(body, "top_logprobs", 0, 0, inferkit::kMaxTopLogprobs));
    } else if (field(body, "top_logprobs") != nullptr) {
      bad_field("top_logprobs", "needs 'logprobs': true");
    }
  } else {
    p.logprobs = static_cast<std::int32_t>(read_integer(body, "logprobs", -1, 0, 5));
  }
  g.logprobs = p.logprobs >= 0;
  g.top_logprobs = std::max(p.logprobs, 0);
  return p;
}

// ---- responses --------------------------------------------------------------------------------

std::string finish_reason(inferkit::CompletionEnd end) {
  switch (end) {
    case inferkit::CompletionEnd::kLength:
      return "length";
    case inferkit::CompletionEnd::kCancelled:
      return "abort";
    default:
      return "stop";
  }
}

// The text of token `id` as OpenAI's logprobs show it (its bytes, as valid UTF-8).
std::string token_text(const inferkit::BpeTokenizer& tok, inferkit::TokenId id) {
  inferkit::StreamDecoder d(tok, /*render_special=*/true);
  std::string s = d.push(id);
  return s + d.finish();
}

json logprobs_json(const Parsed& p, const inferkit::BpeTokenizer& tok,
                   std::span<const inferkit::TokenId> tokens,
                   std::span<const inferkit::TokenLogprobs> lps) {
  if (p.chat) {
    json content = json::array();
    for (std::size_t i = 0; i < tokens.size() && i < lps.size(); ++i) {
      json top = json::array();
      for (const inferkit::TokenLogprob& t : lps[i].top) {
        top.push_back({{"token", token_text(tok, t.token)}, {"logprob", t.logprob}});
      }
      content.push_back({{"token", token_text(tok, tokens[i])},
                         {"logprob", lps[i].logprob},
                         {"top_logprobs", top}});
    }
    return {{"content", content}};
  }
  json texts = json::array();
  json logprobs = json::array();
  json tops = json::array();
  for (std::size_t i = 0; i < tokens.size() && i < lps.size(); ++i) {
    texts.push_back(token_text(tok, tokens[i]));
    logprobs.push_back(lps[i].logprob);
    json top = json::object();
    for (const inferkit::TokenLogprob& t : lps[i].top) top[token_text(tok, t.token)] = t.logprob;
    tops.push_back(top);
  }
  return {{"tokens", texts}, {"token_logprobs", logprobs}, {"top_logprobs", tops}};
}

json usage_json(const inferkit::CompletionUpdate& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_prompt_tokens}}}};
}

std::int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// ---- the server -------------------------------------------------------------------------------

std::atomic<bool> g_stop{false};

class Server {
 public:
  explicit Server(Flags f) : flags_(std::move(f)) {}

  int run() {
    install_routes();
    if (!http_.bind_to_port(flags_.host, flags_.port)) {
      throw inferkit::examples::UsageError{"cannot listen on " + flags_.host + ":" +
                                           std::to_string(flags_.port)};
    }
    // Listen first, so /health answers 503 while the model loads.
    std::thread listener([&] { http_.listen_after_bind(); });
    try {
      load();
    } catch (...) {
      http_.stop();
      listener.join();
      throw;
    }
    std::printf("serve: %s on http://%s:%d (model %s, %d KV pages of %d tokens, %s KV)\n",
                flags_.model_name.c_str(), flags_.host.c_str(), flags_.port, model_path_.c_str(),
                kv_pages_, flags_.block_size, flags_.kv_dtype.c_str());
    std::fflush(stdout);
    while (!g_stop.load()) std::this_thread::sleep_for(100ms);
    std::printf("serve: draining (up to %d s)\n", flags_.drain_seconds);
    std::fflush(stdout);
    const bool clean = front_->drain(std::chrono::seconds(flags_.drain_seconds));
    // Let the handlers write their last bytes before the sockets close.
    std::this_thread::sleep_for(200ms);
    http_.stop();
    listener.join();
    front_->shutdown(0s);
    std::printf("serve: stopped (%s)\n", clean ? "every request finished" : "deadline reached");
    return 0;
  }

 private:
  void load() {
    model_path_ = inferkit::examples::model_path(flags_.model);
    model_ = std::make_unique<inferkit::examples::LoadedModel>(
        model_path_, inferkit::examples::activation_precision(flags_.activations));
    if (flags_.model_name.empty()) {
      flags_.model_name = std::filesystem::path(model_path_).stem().string();
    }
    inferkit::AsyncEngineOptions o;
    const std::int64_t context =
        flags_.max_model_len > 0 ? flags_.max_model_len : model_->model.config().context_length;
    kv_pages_ =
        flags_.kv_pages > 0
            ? flags_.kv_pages
            : static_cast<int>(std::max<std::int64_t>(
                  (static_cast<std::int64_t>(flags_.max_num_seqs) * 1024) / flags_.block_size,
                  2 * context / flags_.block_size));
    o.engine.num_blocks = kv_pages_;
    o.engine.block_size = flags_.block_size;
    o.engine.scheduler.max_num_seqs = flags_.max_num_seqs;
    o.engine.scheduler.max_batched_tokens = flags_.max_batched_tokens;
    o.engine.scheduler.max_model_len = context;
    o.engine.prefix_cache = !flags_.no_prefix_cache;
    // Per engine: omp_set_num_threads() here would set this thread's team, not the engine's.
    o.engine.threads = flags_.threads;
    o.engine.ngram_speculation = flags_.spec == "ngram";
    o.engine.eos_tokens = model_->end_tokens;
    o.engine.kv_dtype = inferkit::examples::kv_dtype(flags_.kv_dtype);
    o.max_queued_requests = flags_.max_queued_requests;
    o.max_queued_prompt_tokens = flags_.max_queued_prompt_tokens;
    front_ = std::make_unique<inferkit::AsyncEngine>(model_->model, model_->tokenizer, o);
    max_model_len_ = front_->max_prompt_tokens() + 1;
    ready_.store(true);
  }

  [[nodiscard]] bool ready() const { return ready_.load() && front_ && front_->accepting(); }

  void install_routes() {
    // Streams hold a worker each while they run: the pool is sized for many more streams than
    // the engine runs at once, so the HTTP layer never becomes the batch limit.
    const int workers = flags_.http_threads;
    http_.new_task_queue = [workers] {
      return new httplib::ThreadPool(static_cast<std::size_t>(workers));
    };
    http_.set_payload_max_length(static_cast<std::size_t>(flags_.max_body_bytes));
    http_.set_read_timeout(flags_.timeout_seconds, 0);
    http_.set_write_timeout(flags_.timeout_seconds, 0);
    http_.set_keep_alive_timeout(5);
    http_.set_keep_alive_max_count(1000);
    http_.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (flags_.api_key.empty() || req.path.rfind("/v1/", 0) != 0) {
        return httplib::Server::HandlerResponse::Unhandled;
      }
      const std::string auth = req.get_header_value("Authorization");
      if (auth != "Bearer " + flags_.api_key) {
        send_error(res, {401, "Incorrect or missing API key (send 'Authorization: Bearer KEY')",
                         "authentication_error", "", "invalid_api_key"});
        return httplib::Server::HandlerResponse::Handled;
      }
      return httplib::Server::HandlerResponse::Unhandled;
    });
    http_.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;  // a handler already wrote the error
      if (res.status == 404) {
        send_error(res, {404, "no route " + req.method + " " + req.path, "invalid_request_error",
                         "", "not_found"});
      } else if (res.status == 413) {
        send_error(res, {413, "the body is larger than the limit (--max-body-bytes)",
                         "invalid_request_error", "", "payload_too_large"});
      } else if (res.status == 400) {
        send_error(res, {400, "malformed HTTP request", "invalid_request_error", "", ""});
      }
    });
    http_.set_exception_handler(
        [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
          std::string what = "internal error";
          try {
            std::rethrow_exception(std::move(ep));
          } catch (const std::exception& e) {
            what = e.what();
          } catch (...) {
          }
          send_error(res, {500, what, "server_error", "", ""});
        });
    http_.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
      if (!ready()) {
        send_error(res, {503, ready_.load() ? "draining" : "loading the model", "server_error", "",
                         "unavailable"});
        return;
      }
      res.set_content(R"({"status":"ok"})", "application/json");
    });
    http_.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
      if (!ready_.load()) return send_error(res, {503, "loading the model", "server_error"});
      json entry = {{"id", flags_.model_name},
                    {"object", "model"},
                    {"created", start_unix_},
                    {"owned_by", "inferkit"},
                    {"max_model_len", max_model_len_}};
      const json body = {{"object", "list"}, {"data", json::array({entry})}};
      res.set_content(body.dump(), "application/json");
    });
    http_.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      if (!ready_.load()) return send_error(res, {503, "loading the model", "server_error"});
      res.set_content(metrics_text(), "text/plain; version=0.0.4");
    });
    http_.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
      complete(req, res, /*chat=*/false);
    });
    http_.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
      complete(req, res, /*chat=*/true);
    });
  }

  using Handles = std::vector<std::shared_ptr<inferkit::CompletionHandle>>;

  void complete(const httplib::Request& req, httplib::Response& res, bool chat) {
    if (!ready()) {
      res.set_header("Retry-After", "5");
      return send_error(res, {503, ready_.load() ? "the server is draining" : "loading the model",
                              "server_error", "", "unavailable"});
    }
    std::shared_ptr<Parsed> parsed;
    auto handles = std::make_shared<Handles>();
    try {
      const json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
      if (body.is_discarded()) {
        throw ApiError{400, "the body is not valid JSON (or not valid UTF-8)"};
      }
      parsed = std::make_shared<Parsed>(
          parse_request(body, chat, *model_, max_model_len_, flags_.model_name));
      auto [status, hs] = front_->submit_n(parsed->request, parsed->n);
      if (status == inferkit::SubmitStatus::kOverloaded) {
        res.set_header("Retry-After", "1");
        throw ApiError{429, "the server is overloaded: its waiting queue is full; retry later",
                       "rate_limit_error", "", "overloaded"};
      }
      if (status == inferkit::SubmitStatus::kDraining) {
        res.set_header("Retry-After", "5");
        throw ApiError{503, "the server is draining", "server_error", "", "unavailable"};
      }
      for (inferkit::CompletionHandle& h : hs) {
        handles->push_back(std::make_shared<inferkit::CompletionHandle>(std::move(h)));
      }
    } catch (const ApiError& e) {
      return send_error(res, e);
    } catch (const inferkit::Error& e) {  // what the front's validation names
      return send_error(res, {400, e.what(), "invalid_request_error", "", ""});
    }
    const std::string id = (chat ? "chatcmpl-" : "cmpl-") + std::to_string(handles->at(0)->id());
    const auto cancel_all = [handles](bool) {
      for (const auto& h : *handles) h->cancel();  // a no-op once finished
    };
    if (parsed->stream) {
      res.set_header("Cache-Control", "no-cache");
      res.set_chunked_content_provider(
          "text/event-stream",
          [this, handles, parsed, id](std::size_t, httplib::DataSink& sink) {
            return stream_events(*handles, *parsed, id, sink);
          },
          cancel_all);
      return;
    }
    // Not streamed: the body is written when every choice has finished. Through a content
    // provider, so that a client that hangs up is noticed (the socket stops being writable)
    // and its request cancelled at once instead of running to its end.
    res.set_chunked_content_provider(
        "application/json",
        [this, handles, parsed, id](std::size_t, httplib::DataSink& sink) {
          std::vector<inferkit::CompletionUpdate> all(handles->size());
          for (;;) {
            bool done = true;
            for (std::size_t i = 0; i < handles->size(); ++i) {
              if (all[i].finished) continue;
              all[i].append((*handles)[i]->next(
                  std::chrono::milliseconds(100 / static_cast<int>(handles->size()) + 1)));
              done = done && all[i].finished;
            }
            if (done) break;
            if (!sink.is_writable()) {
              for (const auto& h : *handles) h->cancel();
              return false;
            }
          }
          const std::string text = whole_response(all, *parsed, id).dump();
          sink.write(text.data(), text.size());
          sink.done();
          return true;
        },
        cancel_all);
  }

  // Usage of all choices: the prompt once (it was computed once), every choice's tokens.
  static json usage_of(const std::vector<inferkit::CompletionUpdate>& finals) {
    inferkit::CompletionUpdate sum;
    sum.prompt_tokens = finals.at(0).prompt_tokens;
    sum.cached_prompt_tokens = finals.at(0).cached_prompt_tokens;
    for (const auto& f : finals) sum.completion_tokens += f.completion_tokens;
    return usage_json(sum);
  }

  [[nodiscard]] json whole_response(const std::vector<inferkit::CompletionUpdate>& all,
                                    const Parsed& p, const std::string& id) const {
    json choices = json::array();
    for (std::size_t i = 0; i < all.size(); ++i) {
      const inferkit::CompletionUpdate& c = all[i];
      json choice = {{"index", i}, {"finish_reason", finish_reason(c.end)}};
      choice["logprobs"] = p.logprobs >= 0
                               ? logprobs_json(p, model_->tokenizer, c.tokens, c.logprobs)
                               : json(nullptr);
      if (p.chat) {
        choice["message"] = {{"role", "assistant"}, {"content", c.text}};
      } else {
        choice["text"] = c.text;
      }
      if (!c.stop_string.empty()) choice["stop_reason"] = c.stop_string;
      choices.push_back(std::move(choice));
    }
    return {{"id", id},
            {"object", p.chat ? "chat.completion" : "text_completion"},
            {"created", unix_seconds()},
            {"model", p.model},
            {"choices", std::move(choices)},
            {"usage", usage_of(all)}};
  }

  // Writes one server-sent event; false when the client is gone.
  static bool send_event(httplib::DataSink& sink, const std::string& data) {
    const std::string event = "data: " + data + "\n\n";
    return sink.is_writable() && sink.write(event.data(), event.size());
  }

  bool stream_events(Handles& handles, const Parsed& p, const std::string& id,
                     httplib::DataSink& sink) {
    const std::int64_t created = unix_seconds();
    const auto chunk = [&](std::size_t index, json delta_or_text, const json& finish,
                           const json& logprobs) {
      json choice = {{"index", index}, {"finish_reason", finish}, {"logprobs", logprobs}};
      if (p.chat) {
        choice["delta"] = std::move(delta_or_text);
      } else {
        choice["text"] = std::move(delta_or_text);
      }
      json c = {{"id", id},
                {"object", p.chat ? "chat.completion.chunk" : "text_completion"},
                {"created", created},
                {"model", p.model},
                {"choices", json::array({choice})}};
      if (p.include_usage) c["usage"] = nullptr;
      return c;
    };
    const auto gone = [&] {
      for (const auto& h : handles) h->cancel();
      return false;
    };
    if (p.chat) {
      for (std::size_t i = 0; i < handles.size(); ++i) {
        if (!send_event(
                sink,
                chunk(i, {{"role", "assistant"}, {"content", ""}}, nullptr, nullptr).dump())) {
          return gone();
        }
      }
    }
    std::vector<inferkit::CompletionUpdate> finals(handles.size());
    const auto wait = std::chrono::milliseconds(100 / static_cast<int>(handles.size()) + 1);
    for (;;) {
      bool done = true;
      bool sent = false;
      for (std::size_t i = 0; i < handles.size(); ++i) {
        if (finals[i].finished) continue;
        inferkit::CompletionUpdate u = handles[i]->next(wait);
        if (!u.tokens.empty() || !u.text.empty() || u.finished) {
          const json lp = p.logprobs >= 0
                              ? logprobs_json(p, model_->tokenizer, u.tokens, u.logprobs)
                              : json(nullptr);
          const json finish = u.finished ? json(finish_reason(u.end)) : json(nullptr);
          json body =
              p.chat ? (u.text.empty() && u.finished ? json::object() : json{{"content", u.text}})
                     : json(u.text);
          if (!send_event(sink, chunk(i, std::move(body), finish, lp).dump())) return gone();
          sent = true;
        }
        if (u.finished) finals[i] = std::move(u);
        done = done && finals[i].finished;
      }
      if (done) break;
      if (!sent && !sink.is_writable()) return gone();  // hung up while waiting for a token
    }
    if (p.include_usage) {
      const json last = {{"id", id},
                         {"object", p.chat ? "chat.completion.chunk" : "text_completion"},
                         {"created", created},
                         {"model", p.model},
                         {"choices", json::array()},
                         {"usage", usage_of(finals)}};
      if (!send_event(sink, last.dump())) return false;
    }
    if (!send_event(sink, "[DONE]")) return false;
    sink.done();
    return true;
  }

  [[nodiscard]] std::string metrics_text() const {
    using prometheus::ClientMetric;
    using prometheus::MetricFamily;
    using prometheus::MetricType;
    const inferkit::AsyncEngineMetrics m = front_->metrics();
    const ClientMetric::Label model{"model_name", flags_.model_name};
    std::vector<MetricFamily> families;
    const auto gauge = [&](const char* name, const char* help, double v) {
      ClientMetric c;
      c.label = {model};
      c.gauge.value = v;
      families.push_back({std::string("inferkit:") + name, help, MetricType::Gauge, {c}});
    };
    const auto counter = [&](const char* name, const char* help, double v) {
      ClientMetric c;
      c.label = {model};
      c.counter.value = v;
      families.push_back({std::string("inferkit:") + name, help, MetricType::Counter, {c}});
    };
    const auto histogram = [&](const char* name, const char* help,
                               const inferkit::LatencyHistogram& h) {
      ClientMetric c;
      c.label = {model};
      c.histogram.sample_count = h.count();
      c.histogram.sample_sum = h.sum();
      std::uint64_t cumulative = 0;
      const auto bounds = inferkit::LatencyHistogram::bounds();
      for (std::size_t i = 0; i < bounds.size(); ++i) {
        cumulative += h.counts()[i];
        c.histogram.bucket.push_back({cumulative, bounds[i]});
      }
      c.histogram.bucket.push_back({h.count(), std::numeric_limits<double>::infinity()});
      families.push_back({std::string("inferkit:") + name, help, MetricType::Histogram, {c}});
    };
    // The names of vLLM's metrics, under inferkit's prefix.
    gauge("num_requests_running", "Requests running on the engine.", m.running);
    gauge("num_requests_waiting", "Requests waiting to be admitted.", m.waiting);
    gauge("kv_cache_usage_perc", "Share of KV pages held by requests (1 = full).",
          m.kv_pages_total > 0 ? static_cast<double>(m.kv_pages_used) / m.kv_pages_total : 0.0);
    gauge("kv_cache_pages_used", "KV pages held by requests.", m.kv_pages_used);
    gauge("kv_cache_pages_cached", "Free KV pages that still hold cached prefixes.",
          m.kv_pages_cached);
    gauge("kv_cache_pages_total", "KV pages in the pool.", m.kv_pages_total);
    counter("prompt_tokens_total", "Prompt tokens of finished requests.",
            static_cast<double>(m.prompt_tokens));
    counter("prefix_cache_hits_total", "Prompt tokens served by the prefix cache.",
            static_cast<double>(m.cached_prompt_tokens));
    counter("generation_tokens_total", "Output tokens generated.",
            static_cast<double>(m.generation_tokens));
    counter("num_preemptions_total", "Requests preempted to free KV pages.",
            static_cast<double>(m.preemptions));
    counter("engine_steps_total", "Engine steps run.", static_cast<double>(m.steps));
    counter("requests_accepted_total", "Requests queued.",
            static_cast<double>(m.requests_accepted));
    counter("requests_rejected_overload_total", "Requests refused with 429: queue full.",
            static_cast<double>(m.requests_overloaded));
    {
      MetricFamily f{"inferkit:request_success_total",
                     "Finished requests, by finish reason.",
                     MetricType::Counter,
                     {}};
      const std::pair<const char*, std::int64_t> reasons[] = {
          {"stop", m.requests_finished_stop},
          {"length", m.requests_finished_length},
          {"abort", m.requests_cancelled},
          {"error", m.requests_failed}};
      for (const auto& [reason, count] : reasons) {
        ClientMetric c;
        c.label = {{"finished_reason", reason}, model};
        c.counter.value = static_cast<double>(count);
        f.metric.push_back(c);
      }
      families.push_back(std::move(f));
    }
    histogram("time_to_first_token_seconds", "Time to first token.", m.ttft);
    histogram("inter_token_latency_seconds", "Time between consecutive output tokens.",
              m.inter_token);
    histogram("request_queue_time_seconds", "Time from arrival to first scheduled.", m.queue_time);
    histogram("e2e_request_latency_seconds", "Time from arrival to the last token.", m.e2e);
    return prometheus::TextSerializer().Serialize(families);
  }

  Flags flags_;
  std::string model_path_;
  std::unique_ptr<inferkit::examples::LoadedModel> model_;
  std::unique_ptr<inferkit::AsyncEngine> front_;
  std::atomic<bool> ready_{false};
  std::int64_t max_model_len_ = 0;
  int kv_pages_ = 0;
  std::int64_t start_unix_ = unix_seconds();
  httplib::Server http_;
};

}  // namespace

int main(int argc, char** argv) {
  using inferkit::examples::integer_in;
  return inferkit::examples::run_main("serve", kUsage, [&](CLI::App& app) {
    Flags f;
    app.add_option("--model", f.model);
    app.add_option("--model-name", f.model_name);
    app.add_option("--host", f.host);
    app.add_option("--port", f.port)->transform(integer_in(0, 65535));
    app.add_option("--api-key", f.api_key);
    app.add_option("--threads", f.threads)->transform(integer_in(1, 1024));
    app.add_option("--kv-pages", f.kv_pages)->transform(integer_in(1, 1 << 24));
    app.add_option("--block-size", f.block_size)->transform(integer_in(1, 1024));
    app.add_option("--max-num-seqs", f.max_num_seqs)->transform(integer_in(1, 4096));
    app.add_option("--max-batched-tokens", f.max_batched_tokens)
        ->transform(integer_in<long long>(1, 1 << 20));
    app.add_option("--max-model-len", f.max_model_len)
        ->transform(integer_in<long long>(2, 1 << 24));
    app.add_flag("--no-prefix-cache", f.no_prefix_cache);
    app.add_option("--spec", f.spec)->check(inferkit::examples::one_of({"ngram"}));
    app.add_option("--activations", f.activations)
        ->check(inferkit::examples::one_of({"fp32", "int8"}));
    app.add_option("--kv-dtype", f.kv_dtype)
        ->check(inferkit::examples::one_of(inferkit::examples::kKvDtypeChoices));
    app.add_option("--max-queued-requests", f.max_queued_requests)
        ->transform(integer_in(1, 1 << 20));
    app.add_option("--max-queued-prompt-tokens", f.max_queued_prompt_tokens)
        ->transform(integer_in<long long>(1, 1LL << 40));
    app.add_option("--max-body-bytes", f.max_body_bytes)
        ->transform(integer_in<long long>(1024, 1LL << 30));
    app.add_option("--http-threads", f.http_threads)->transform(integer_in(4, 4096));
    app.add_option("--timeout-seconds", f.timeout_seconds)->transform(integer_in(1, 3600));
    app.add_option("--drain-seconds", f.drain_seconds)->transform(integer_in(0, 3600));
    app.parse(argc, argv);
    std::signal(SIGPIPE, SIG_IGN);  // a client that hangs up must not end the server
    std::signal(SIGINT, [](int) { g_stop.store(true); });
    std::signal(SIGTERM, [](int) { g_stop.store(true); });
    Server server(f);
    return server.run();
  });
}
