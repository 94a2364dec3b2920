// SPDX-License-Identifier: Apache-2.0
// kv_capacity: how many users fit? Given a model, G GPUs of M GB and a context length, print the
// memory budget (weights, overhead, KV pool) and, for each KV dtype, the KV bytes per token, the
// tokens the pool holds and the concurrent users at that context. It teaches the KV formula,
// 2 * layers * kv_heads * head_dim * bytes per element per token (the PagedAttention paper, Kwon
// et al., SOSP 2023, sizes a 13B model's KV the same way), and why KV quantization and GQA decide
// serving capacity.
//
//   kv_capacity --model llama-3-70b --gpus 4 --gpu a100-80gb --context 4096 [--json]
//
// A GPU's memory comes from a hardware preset (an "80GB" A100 or H100 holds 80 GiB = 80 * 2^30
// bytes) or is given in GB = 10^9 bytes (--gpu-mem-gb) or GiB = 2^30 bytes (--gpu-mem-gib).
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <examples/support/cli_main.hpp>
#include <examples/support/json_out.hpp>
#include <inferkit/core/dtype.hpp>
#include <inferkit/core/model_shape.hpp>
#include <inferkit/perf/hardware.hpp>
#include <inferkit/perf/kv_memory_planner.hpp>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace {

using inferkit::examples::require;
using inferkit::examples::UsageError;

struct Flags {
  std::string model = "llama-3-70b";
  int gpus = 4;
  std::string gpu = "a100-80gb";
  std::optional<double> gpu_mem_gb;
  std::optional<double> gpu_mem_gib;
  std::int64_t context = 4096;
  std::string weights_dtype = "bf16";
  double overhead = 0.1;
  std::string kv_scales = "none";
  std::int32_t scale_block = 16;
  bool json = false;
  bool list_models = false;
};

constexpr const char* kUsage =
    "usage: kv_capacity [--model NAME] [--gpus N] [--gpu a100-80gb|h100-sxm|h200]\n"
    "                   [--gpu-mem-gb GB | --gpu-mem-gib GIB] [--context TOKENS]\n"
    "                   [--weights-dtype bf16|fp16|fp8|int8|int4] [--overhead FRACTION]\n"
    "                   [--kv-scales none|token|block] [--scale-block TOKENS] [--json]\n"
    "                   [--list-models]\n"
    "  --model          a model preset (--list-models shows them; default llama-3-70b)\n"
    "  --gpus           GPUs holding one copy of the model, 1..1000000 (default 4)\n"
    "  --gpu            the memory of one GPU from a hardware preset (default a100-80gb: 80 GiB)\n"
    "  --gpu-mem-gb     or the memory of one GPU in GB = 10^9 bytes, (0, 1e9)\n"
    "  --gpu-mem-gib    or in GiB = 2^30 bytes, (0, 1e9)\n"
    "  --context        tokens per user, 1..16777216 (default 4096)\n"
    "  --weights-dtype  element type of the weights (default bf16)\n"
    "  --overhead       share of memory for activations and runtime, [0, 0.99] (default 0.1)\n"
    "  --kv-scales      quantization scales stored with the KV: none, per token and head,\n"
    "                   per block of --scale-block tokens and head, or inferkit: each dtype as\n"
    "                   inferkit's paged KV cache (and the engine's --kv-dtype) stores it, fp8\n"
    "                   per page of --scale-block tokens, int8 and int4 per token (default none)\n"
    "  --scale-block    tokens per scale block, 1..65536 (default 16)\n"
    "  --json           print one JSON object with every figure of the table\n"
    "  --list-models    list the model presets (with --json: as JSON)\n";

void add_flags(CLI::App& app, Flags& flags) {
  using inferkit::examples::integer_in;
  using inferkit::examples::number_in;
  using inferkit::examples::one_of;
  app.add_option("--model", flags.model);
  app.add_option("--gpus", flags.gpus)->transform(integer_in(1, 1'000'000));
  app.add_option("--gpu", flags.gpu);  // hardware_preset() names the known ones when it throws
  app.add_option("--gpu-mem-gb", flags.gpu_mem_gb)->transform(number_in(0.0, 1e9));
  app.add_option("--gpu-mem-gib", flags.gpu_mem_gib)->transform(number_in(0.0, 1e9));
  app.add_option("--context", flags.context)
      ->transform(integer_in<std::int64_t>(1, std::int64_t{1} << 24));
  app.add_option("--weights-dtype", flags.weights_dtype)
      ->check(one_of({"bf16", "fp16", "fp8", "int8", "int4"}));
  app.add_option("--overhead", flags.overhead)->transform(number_in(0.0, 0.99));
  app.add_option("--kv-scales", flags.kv_scales)
      ->check(one_of({"none", "token", "block", "inferkit"}));
  app.add_option("--scale-block", flags.scale_block)->transform(integer_in<std::int32_t>(1, 65536));
  app.add_flag("--json", flags.json);
  app.add_flag("--list-models", flags.list_models);
}

// The checks across flags, and the open end of the memory range, which a range check cannot say.
void check_flags(const Flags& flags) {
  require(!(flags.gpu_mem_gb && flags.gpu_mem_gib), "give --gpu-mem-gb or --gpu-mem-gib, not both");
  for (const auto& [name, mem] : {std::pair{"--gpu-mem-gb", flags.gpu_mem_gb},
                                  std::pair{"--gpu-mem-gib", flags.gpu_mem_gib}}) {
    if (mem) {
      require(*mem > 0.0,
              std::string(name) + " = " + inferkit::examples::format_g(*mem) + " must be > 0");
    }
  }
}

// --kv-scales as a layout ("inferkit" picks one per dtype: paged_kv_cache_format).
inferkit::KVScaleLayout parse_scales(const std::string& text) {
  if (text == "token") return inferkit::KVScaleLayout::kPerTokenHead;
  if (text == "block") return inferkit::KVScaleLayout::kPerBlockHead;
  return inferkit::KVScaleLayout::kNone;  // --kv-scales admits only none, token, block
}

// The KV dtypes compared. fp8 stands for both e4m3 and e5m2: they take the same bytes.
struct KVChoice {
  const char* key;
  inferkit::DType dtype;
};
constexpr KVChoice kKVChoices[] = {
    {"fp32", inferkit::DType::kFloat32},  {"fp16", inferkit::DType::kFloat16},
    {"bf16", inferkit::DType::kBFloat16}, {"fp8", inferkit::DType::kFloat8E4M3},
    {"int8", inferkit::DType::kInt8},     {"int4", inferkit::DType::kInt4},
};

// "70.6B" or "135M".
std::string format_parameters(std::int64_t parameters) {
  char text[32];
  const auto p = static_cast<double>(parameters);
  if (p >= 1e9) {
    std::snprintf(text, sizeof text, "%.4gB", p / 1e9);
  } else {
    std::snprintf(text, sizeof text, "%.4gM", p / 1e6);
  }
  return text;
}

struct Row {
  const char* key;
  inferkit::MemoryBudget budget;
  std::int64_t users;
};

// Everything the table shows, computed once for the text and the JSON.
struct Report {
  inferkit::ModelShape model;
  inferkit::MemoryBudgetOptions options;
  std::string memory_source;  // the preset name, or how the size was given
  std::vector<Row> rows;      // kKVChoices order: rows[1] is fp16, rows[5] int4
  double gqa_ratio = 0.0;
  std::optional<double> int4_vs_fp16;  // users ratio, when fp16 serves anyone
};

// Bytes per token are whole numbers unless per-block scales are amortized over a block.
std::string format_bytes_per_token(double bytes) {
  char text[64];
  if (bytes == std::floor(bytes)) {
    std::snprintf(text, sizeof text, "%.0f", bytes);
  } else {
    std::snprintf(text, sizeof text, "%.3f", bytes);
  }
  return text;
}

void print_json(const Flags& flags, const Report& r) {
  using inferkit::examples::significant;
  const inferkit::MemoryBudget& b = r.rows.front().budget;
  nlohmann::ordered_json bytes_per_token;
  nlohmann::ordered_json max_tokens;
  nlohmann::ordered_json max_users;
  for (const Row& row : r.rows) {
    bytes_per_token[row.key] = significant(row.budget.kv_bytes_per_token, 10);
    max_tokens[row.key] = row.budget.max_total_tokens;
    max_users[row.key] = row.users;
  }
  inferkit::examples::print_json({
      {"model", r.model.name},
      {"estimate", r.model.is_estimate},
      {"layers", r.model.num_layers},
      {"q_heads", r.model.num_q_heads},
      {"kv_heads", r.model.num_kv_heads},
      {"head_dim", r.model.head_dim},
      {"parameters", inferkit::parameter_count(r.model)},
      {"gpu", r.memory_source},
      {"num_gpus", r.options.num_gpus},
      {"gpu_memory_bytes", r.options.gpu_memory_bytes},
      {"context_tokens", flags.context},
      {"weights_dtype", inferkit::to_string(r.options.weights_dtype)},
      {"overhead_fraction", significant(r.options.overhead_fraction, 6)},
      {"kv_scales", flags.kv_scales},
      {"scale_block_tokens", flags.scale_block},
      {"total_memory_bytes", b.total_memory_bytes},
      {"weights_bytes", b.weights_bytes},
      {"overhead_bytes", b.overhead_bytes},
      {"kv_pool_bytes", b.kv_pool_bytes},
      {"bytes_per_token", bytes_per_token},
      {"max_tokens", max_tokens},
      {"max_users", max_users},
      // null when fp16 serves no one
      {"int4_users_vs_fp16", inferkit::examples::fixed(r.int4_vs_fp16.value_or(std::nan("")), 4)},
      {"gqa_ratio", significant(r.gqa_ratio, 6)},
  });
}

void print_table(const Flags& flags, const Report& r) {
  const inferkit::MemoryBudget& b = r.rows.front().budget;
  const auto gb = [](std::int64_t bytes) {
    return inferkit::bytes_to_gb(static_cast<double>(bytes));
  };
  const auto gib = [](std::int64_t bytes) {
    return inferkit::bytes_to_gib(static_cast<double>(bytes));
  };
  std::printf("model %s%s: %d layers, %d query heads, %d KV heads, head_dim %d, %s parameters\n",
              r.model.name.c_str(), r.model.is_estimate ? " (public estimate)" : "",
              r.model.num_layers, r.model.num_q_heads, r.model.num_kv_heads, r.model.head_dim,
              format_parameters(inferkit::parameter_count(r.model)).c_str());
  std::printf(
      "memory   %d x %s: %d x %.1f GB = %.1f GB (%.1f GiB)   [GB = 10^9 bytes, GiB = 2^30 "
      "bytes]\n",
      r.options.num_gpus, r.memory_source.c_str(), r.options.num_gpus,
      gb(r.options.gpu_memory_bytes), gb(b.total_memory_bytes), gib(b.total_memory_bytes));
  std::printf("weights  %8.1f GB  (%s)\n", gb(b.weights_bytes),
              std::string(inferkit::to_string(r.options.weights_dtype)).c_str());
  std::printf("overhead %8.1f GB  (%.0f%% of memory: activations, CUDA context, fragmentation)\n",
              gb(b.overhead_bytes), 100.0 * r.options.overhead_fraction);
  std::printf("KV pool  %8.1f GB  (%.1f GiB)\n\n", gb(b.kv_pool_bytes), gib(b.kv_pool_bytes));
  std::printf("KV dtype   bytes/token    max tokens   users @ %lld tokens\n",
              static_cast<long long>(flags.context));
  for (const Row& row : r.rows) {
    std::printf("%-8s %13s %13lld %20lld\n", row.key,
                format_bytes_per_token(row.budget.kv_bytes_per_token).c_str(),
                static_cast<long long>(row.budget.max_total_tokens),
                static_cast<long long>(row.users));
  }
  if (r.int4_vs_fp16) {
    std::printf("\nint4 KV serves %.2fx the users of fp16 KV at this context.", *r.int4_vs_fp16);
  }
  std::printf("\nKV scales: %s. fp8 = e4m3 or e5m2 (same size).\n", flags.kv_scales.c_str());
  std::printf(
      "GQA: %d KV heads for %d query heads store %.0fx less KV than full multi-head "
      "attention.\n",
      r.model.num_kv_heads, r.model.num_q_heads, r.gqa_ratio);
}

void list_models(bool json) {
  nlohmann::ordered_json models = nlohmann::ordered_json::array();
  for (std::string_view name : inferkit::model_preset_names()) {
    const inferkit::ModelShape shape = inferkit::model_preset(name);
    if (json) {
      models.push_back({
          {"name", shape.name},
          {"layers", shape.num_layers},
          {"q_heads", shape.num_q_heads},
          {"kv_heads", shape.num_kv_heads},
          {"parameters", inferkit::parameter_count(shape)},
          {"estimate", shape.is_estimate},
      });
    } else {
      std::printf("%-14s %3d layers  %3d/%-3d q/kv heads  %s parameters%s\n", shape.name.c_str(),
                  shape.num_layers, shape.num_q_heads, shape.num_kv_heads,
                  format_parameters(inferkit::parameter_count(shape)).c_str(),
                  shape.is_estimate ? "  (estimate)" : "");
    }
  }
  if (json) inferkit::examples::print_json(models);
}

int run(const Flags& flags) {
  check_flags(flags);
  if (flags.list_models) {
    list_models(flags.json);
    return 0;
  }
  Report r;
  r.model = inferkit::model_preset(flags.model);  // throws if unknown
  r.options.num_gpus = flags.gpus;
  if (flags.gpu_mem_gib) {
    r.options.gpu_memory_bytes = inferkit::gib_to_bytes(*flags.gpu_mem_gib);
    r.memory_source = inferkit::examples::format_g(*flags.gpu_mem_gib) + " GiB";
  } else if (flags.gpu_mem_gb) {
    r.options.gpu_memory_bytes = inferkit::gb_to_bytes(*flags.gpu_mem_gb);
    r.memory_source = inferkit::examples::format_g(*flags.gpu_mem_gb) + " GB";
  } else {
    r.options.gpu_memory_bytes = inferkit::hardware_preset(flags.gpu).memory_bytes;  // throws
    r.memory_source = flags.gpu;
  }
  r.options.weights_dtype = inferkit::parse_dtype(flags.weights_dtype);
  r.options.overhead_fraction = flags.overhead;
  r.options.kv.scales = parse_scales(flags.kv_scales);
  r.options.kv.scale_block_tokens = flags.scale_block;

  for (const KVChoice& choice : kKVChoices) {
    r.options.kv.dtype = choice.dtype;
    if (flags.kv_scales == "inferkit") {
      r.options.kv = inferkit::paged_kv_cache_format(choice.dtype, flags.scale_block);
    }
    const inferkit::MemoryBudget budget = inferkit::plan_kv_memory(r.model, r.options);
    r.rows.push_back({choice.key, budget, budget.max_users(flags.context)});
  }
  const inferkit::MemoryBudget& budget = r.rows.front().budget;
  if (!budget.fits) {
    char text[256];
    std::snprintf(
        text, sizeof text, "%s does not fit: weights %.1f GB + overhead %.1f GB >= memory %.1f GB",
        r.model.name.c_str(), inferkit::bytes_to_gb(static_cast<double>(budget.weights_bytes)),
        inferkit::bytes_to_gb(static_cast<double>(budget.overhead_bytes)),
        inferkit::bytes_to_gb(static_cast<double>(budget.total_memory_bytes)));
    throw UsageError{text};
  }
  r.gqa_ratio = inferkit::gqa_saving(r.model, r.options.kv).ratio;
  if (r.rows[1].users > 0) {
    r.int4_vs_fp16 = static_cast<double>(r.rows[5].users) / static_cast<double>(r.rows[1].users);
  }
  if (flags.json) {
    print_json(flags, r);
  } else {
    print_table(flags, r);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return inferkit::examples::run_main("kv_capacity", kUsage, [&](CLI::App& app) {
    Flags flags;
    add_flags(app, flags);
    app.parse(argc, argv);
    return run(flags);
  });
}
