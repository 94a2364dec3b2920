// SPDX-License-Identifier: Apache-2.0
// kv_capacity: how many users fit? Given a model, G GPUs of M GB and a context length, print the
// memory budget (weights, overhead, KV pool) and, for each KV dtype, the KV bytes per token, the
// tokens the pool holds and the concurrent users at that context. It teaches the lesson's KV
// formula, 2 * layers * kv_heads * head_dim * bytes per element per token, and why KV
// quantization and GQA decide serving capacity.
//
//   kv_capacity --model llama-3-70b --gpus 4 --gpu-mem-gb 80 --context 4096 [--json]
//
// Memory is in GB = 10^9 bytes as vendors quote "80GB" (--gpu-mem-gib takes 2^30-byte GiB).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <examples/support/cli.hpp>
#include <inferkit/core/dtype.hpp>
#include <inferkit/core/model_shape.hpp>
#include <inferkit/perf/hardware.hpp>
#include <inferkit/perf/kv_memory_planner.hpp>
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
  long long gpus = 4;
  std::optional<double> gpu_mem_gb;
  std::optional<double> gpu_mem_gib;
  long long context = 4096;
  std::string weights_dtype = "bf16";
  double overhead = 0.1;
  std::string kv_scales = "none";
  long long scale_block = 16;
  bool json = false;
  bool list_models = false;
};

void print_usage() {
  std::printf(
      "usage: kv_capacity [--model NAME] [--gpus N] [--gpu-mem-gb GB | --gpu-mem-gib GIB]\n"
      "                   [--context TOKENS] [--weights-dtype bf16|fp16|fp8|int8|int4]\n"
      "                   [--overhead FRACTION] [--kv-scales none|token|block]\n"
      "                   [--scale-block TOKENS] [--json] [--list-models]\n"
      "defaults: --model llama-3-70b --gpus 4 --gpu-mem-gb 80 --context 4096\n"
      "          --weights-dtype bf16 --overhead 0.1 --kv-scales none\n");
}

Flags parse_flags(int argc, char** argv) {
  Flags flags;
  inferkit::examples::ArgParser args(argc, argv);
  while (args.next()) {
    const std::string& flag = args.flag();
    if (flag == "--model") {
      flags.model = args.value();
    } else if (flag == "--gpus") {
      flags.gpus = args.integer();
    } else if (flag == "--gpu-mem-gb") {
      flags.gpu_mem_gb = args.number();
    } else if (flag == "--gpu-mem-gib") {
      flags.gpu_mem_gib = args.number();
    } else if (flag == "--context") {
      flags.context = args.integer();
    } else if (flag == "--weights-dtype") {
      flags.weights_dtype = args.value();
    } else if (flag == "--overhead") {
      flags.overhead = args.number();
    } else if (flag == "--kv-scales") {
      flags.kv_scales = args.value();
    } else if (flag == "--scale-block") {
      flags.scale_block = args.integer();
    } else if (flag == "--json") {
      flags.json = true;
    } else if (flag == "--list-models") {
      flags.list_models = true;
    } else if (args.help()) {
      print_usage();
      std::exit(0);
    } else {
      args.unknown_flag();
    }
  }
  // Check ranges here so the message names the flag the user typed.
  require(flags.gpus >= 1 && flags.gpus <= 1'000'000, "--gpus", flags.gpus, "in [1, 1000000]");
  require(!(flags.gpu_mem_gb && flags.gpu_mem_gib), "give --gpu-mem-gb or --gpu-mem-gib, not both");
  for (const auto& [name, mem] : {std::pair{"--gpu-mem-gb", flags.gpu_mem_gb},
                                  std::pair{"--gpu-mem-gib", flags.gpu_mem_gib}}) {
    if (mem) require(*mem > 0.0 && *mem < 1e9, name, inferkit::examples::format_g(*mem), "> 0");
  }
  require(flags.context >= 1, "--context", flags.context, ">= 1");
  require(flags.overhead >= 0.0 && flags.overhead < 1.0, "--overhead",
          inferkit::examples::format_g(flags.overhead), "in [0, 1)");
  require(flags.scale_block >= 1, "--scale-block", flags.scale_block, ">= 1");
  return flags;
}

inferkit::KVScaleLayout parse_scales(const std::string& text) {
  if (text == "none") return inferkit::KVScaleLayout::kNone;
  if (text == "token") return inferkit::KVScaleLayout::kPerTokenHead;
  if (text == "block") return inferkit::KVScaleLayout::kPerBlockHead;
  throw UsageError{"--kv-scales = '" + text + "' is not one of none, token, block"};
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

void print_json(const Flags& flags, const inferkit::ModelShape& model,
                const inferkit::MemoryBudgetOptions& options, const std::vector<Row>& rows,
                double gqa_ratio) {
  const inferkit::MemoryBudget& b = rows.front().budget;
  std::printf(R"({"model":"%s","num_gpus":%d,"gpu_memory_bytes":%lld,)", model.name.c_str(),
              options.num_gpus, static_cast<long long>(options.gpu_memory_bytes));
  std::printf(R"("context_tokens":%lld,"weights_dtype":"%s","overhead_fraction":%g,)",
              flags.context, std::string(inferkit::to_string(options.weights_dtype)).c_str(),
              options.overhead_fraction);
  std::printf(R"("kv_scales":"%s","parameters":%lld,"total_memory_bytes":%lld,)",
              flags.kv_scales.c_str(), static_cast<long long>(inferkit::parameter_count(model)),
              static_cast<long long>(b.total_memory_bytes));
  std::printf(R"("weights_bytes":%lld,"overhead_bytes":%lld,"kv_pool_bytes":%lld,)",
              static_cast<long long>(b.weights_bytes), static_cast<long long>(b.overhead_bytes),
              static_cast<long long>(b.kv_pool_bytes));
  const auto object = [&](const char* name, auto field) {
    std::printf("\"%s\":{", name);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      std::printf("%s\"%s\":%s", i ? "," : "", rows[i].key, field(rows[i]).c_str());
    }
    std::printf("},");
  };
  object("bytes_per_token",
         [](const Row& r) { return format_bytes_per_token(r.budget.kv_bytes_per_token); });
  object("max_tokens", [](const Row& r) { return std::to_string(r.budget.max_total_tokens); });
  object("max_users", [](const Row& r) { return std::to_string(r.users); });
  std::printf("\"gqa_ratio\":%g}\n", gqa_ratio);
}

void print_table(const Flags& flags, const inferkit::ModelShape& model,
                 const inferkit::MemoryBudgetOptions& options, const std::vector<Row>& rows,
                 double gqa_ratio) {
  const inferkit::MemoryBudget& b = rows.front().budget;
  const auto gb = [](std::int64_t bytes) {
    return inferkit::bytes_to_gb(static_cast<double>(bytes));
  };
  const auto gib = [](std::int64_t bytes) {
    return inferkit::bytes_to_gib(static_cast<double>(bytes));
  };
  std::printf("model %s%s: %d layers, %d query heads, %d KV heads, head_dim %d, %s parameters\n",
              model.name.c_str(), model.is_estimate ? " (public estimate)" : "", model.num_layers,
              model.num_q_heads, model.num_kv_heads, model.head_dim,
              format_parameters(inferkit::parameter_count(model)).c_str());
  std::printf("memory   %d x %.1f GB = %.1f GB (%.1f GiB)   [GB = 10^9 bytes, GiB = 2^30 bytes]\n",
              options.num_gpus, gb(options.gpu_memory_bytes), gb(b.total_memory_bytes),
              gib(b.total_memory_bytes));
  std::printf("weights  %8.1f GB  (%s)\n", gb(b.weights_bytes),
              std::string(inferkit::to_string(options.weights_dtype)).c_str());
  std::printf("overhead %8.1f GB  (%.0f%% of memory: activations, CUDA context, fragmentation)\n",
              gb(b.overhead_bytes), 100.0 * options.overhead_fraction);
  std::printf("KV pool  %8.1f GB  (%.1f GiB)\n\n", gb(b.kv_pool_bytes), gib(b.kv_pool_bytes));
  std::printf("KV dtype   bytes/token    max tokens   users @ %lld tokens\n", flags.context);
  for (const Row& row : rows) {
    std::printf("%-8s %13s %13lld %20lld\n", row.key,
                format_bytes_per_token(row.budget.kv_bytes_per_token).c_str(),
                static_cast<long long>(row.budget.max_total_tokens),
                static_cast<long long>(row.users));
  }
  // rows[1] is fp16 and rows[5] int4 (kKVChoices order): the lesson's "int4 gives ~4x users".
  if (rows[1].users > 0) {
    std::printf("\nint4 KV serves %.2fx the users of fp16 KV at this context.",
                static_cast<double>(rows[5].users) / static_cast<double>(rows[1].users));
  }
  std::printf("\nKV scales: %s. fp8 = e4m3 or e5m2 (same size).\n", flags.kv_scales.c_str());
  std::printf(
      "GQA: %d KV heads for %d query heads store %.0fx less KV than full multi-head "
      "attention.\n",
      model.num_kv_heads, model.num_q_heads, gqa_ratio);
}

int run(int argc, char** argv) {
  const Flags flags = parse_flags(argc, argv);
  if (flags.list_models) {
    for (std::string_view name : inferkit::model_preset_names()) {
      const inferkit::ModelShape shape = inferkit::model_preset(name);
      std::printf("%-14s %3d layers  %3d/%-3d q/kv heads  %s parameters%s\n", shape.name.c_str(),
                  shape.num_layers, shape.num_q_heads, shape.num_kv_heads,
                  format_parameters(inferkit::parameter_count(shape)).c_str(),
                  shape.is_estimate ? "  (estimate)" : "");
    }
    return 0;
  }
  const inferkit::ModelShape model = inferkit::model_preset(flags.model);  // throws if unknown

  inferkit::MemoryBudgetOptions options;
  options.num_gpus = static_cast<int>(flags.gpus);
  options.gpu_memory_bytes = flags.gpu_mem_gib
                                 ? inferkit::gib_to_bytes(*flags.gpu_mem_gib)
                                 : inferkit::gb_to_bytes(flags.gpu_mem_gb.value_or(80.0));
  options.weights_dtype = inferkit::parse_dtype(flags.weights_dtype);
  options.overhead_fraction = flags.overhead;
  options.kv.scales = parse_scales(flags.kv_scales);
  options.kv.scale_block_tokens = flags.scale_block;

  std::vector<Row> rows;
  for (const KVChoice& choice : kKVChoices) {
    options.kv.dtype = choice.dtype;
    const inferkit::MemoryBudget budget = inferkit::plan_kv_memory(model, options);
    rows.push_back({choice.key, budget, budget.max_users(flags.context)});
  }
  const inferkit::MemoryBudget& budget = rows.front().budget;
  if (!budget.fits) {
    char text[256];
    std::snprintf(
        text, sizeof text, "%s does not fit: weights %.1f GB + overhead %.1f GB >= memory %.1f GB",
        model.name.c_str(), inferkit::bytes_to_gb(static_cast<double>(budget.weights_bytes)),
        inferkit::bytes_to_gb(static_cast<double>(budget.overhead_bytes)),
        inferkit::bytes_to_gb(static_cast<double>(budget.total_memory_bytes)));
    throw UsageError{text};
  }
  const double gqa_ratio = inferkit::gqa_saving(model, options.kv).ratio;
  if (flags.json) {
    print_json(flags, model, options, rows, gqa_ratio);
  } else {
    print_table(flags, model, options, rows, gqa_ratio);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return inferkit::examples::run_main("kv_capacity", [&] { return run(argc, argv); });
}
