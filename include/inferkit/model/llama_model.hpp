// SPDX-License-Identifier: Apache-2.0
// LlamaModel: the Llama-family forward pass over paged KV, on the CPU, for all the tokens of a
// StepPlan at once: token embedding, per layer RMSNorm, Q/K/V projections, RoPE at each token's
// position, K/V appended into the PagedKVCache through the plan's slot mapping, attention
// through paged_prefill over the plan's page table, the output projection, RMSNorm and the SwiGLU
// MLP, then the final norm and the (possibly tied) output head for the rows that sample. The
// weights are views into a memory-mapped GgufFile. The engine calls `forward` once per step.
// Threads: a LlamaModel is immutable after construction: forward (const; OpenMP inside) may run
// from several threads at once, each with its own LlamaKVCache and LlamaWorkspace.
#pragma once

#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <inferkit/attention/attention.hpp>
#include <inferkit/core/config.hpp>
#include <inferkit/core/cpu_isa.hpp>
#include <inferkit/core/error.hpp>
#include <inferkit/core/float16.hpp>
#include <inferkit/kv/paged_kv_cache.hpp>
#include <inferkit/model/detail/swiglu.hpp>
#include <inferkit/model/gguf.hpp>
#include <inferkit/model/int8_linear.hpp>
#include <inferkit/model/llama_config.hpp>
#include <inferkit/model/quantized_linear.hpp>
#include <inferkit/plan/step_plan.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace inferkit {

/// The KV storage the model's pages use: fp16, as llama.cpp's default KV type.
using LlamaKVCache = PagedKVCache<float16>;

/// The phases of a forward pass, for a breakdown of where a step's time goes.
enum class LlamaPhase : std::uint8_t {
  kEmbedding,       ///< token embedding lookups and the plan's block copies
  kNorms,           ///< RMSNorms (two a layer, and the final one of the sampled rows)
  kQkvProducts,     ///< the Q, K and V projections
  kRope,            ///< rotary embeddings of q and k
  kKvAppend,        ///< K/V written into the pages
  kAttention,       ///< paged attention
  kAttnOutProduct,  ///< the attention output projection
  kMlpProducts,     ///< the gate, up and down projections
  kActivation,      ///< SwiGLU
  kResidual,        ///< the residual additions
  kLogits,          ///< the output head of the sampled rows
  kCount,
};
/// The number of phases (the size of LlamaWorkspace::phase_seconds).
inline constexpr std::size_t kLlamaPhaseCount = static_cast<std::size_t>(LlamaPhase::kCount);

/// A phase's name: "embedding", "norms", "qkv_products", ...
constexpr std::string_view to_string(LlamaPhase phase) noexcept {
  constexpr std::string_view kNames[] = {
      "embedding",        "norms",        "qkv_products", "rope",     "kv_append", "attention",
      "attn_out_product", "mlp_products", "activation",   "residual", "logits"};
  const auto i = static_cast<std::size_t>(phase);
  return i < kLlamaPhaseCount ? kNames[i] : "unknown";
}

/// Scratch buffers of one forward pass, reused across steps (sized to the largest step seen).
struct LlamaWorkspace {
  std::vector<float> x;         ///< [tokens][hidden] residual stream
  std::vector<float> h;         ///< [tokens][hidden] normed input of a sublayer
  std::vector<float> q;         ///< [tokens][q_heads][head_dim]
  std::vector<float> k;         ///< [tokens][kv_heads][head_dim]
  std::vector<float> v;         ///< [tokens][kv_heads][head_dim]
  std::vector<float> attn;      ///< [tokens][q_heads][head_dim]
  std::vector<float> gate;      ///< [tokens][ffn]
  std::vector<float> up;        ///< [tokens][ffn]
  std::vector<float> rows;      ///< [logit rows][hidden] final-normed rows that sample
  std::vector<float> rope_cos;  ///< [tokens][head_dim / 2] cos(position * inv_freq), per step
  std::vector<float> rope_sin;  ///< [tokens][head_dim / 2] sin(position * inv_freq), per step
  /// When set, forward adds each phase's wall seconds to phase_seconds (indexed by LlamaPhase):
  /// two clock reads a phase, about 30 a layer; off, nothing is timed.
  bool time_phases = false;
  std::array<double, kLlamaPhaseCount> phase_seconds{};  ///< seconds by LlamaPhase, accumulated
};

/// One transformer block's weights (views into the model file).
struct LlamaLayerWeights {
  const float* attn_norm = nullptr;  ///< [hidden]
  LinearWeights wq;                  ///< [q_heads * head_dim][hidden]
  LinearWeights wk;                  ///< [kv_heads * head_dim][hidden]
  LinearWeights wv;                  ///< [kv_heads * head_dim][hidden]
  LinearWeights wo;                  ///< [hidden][q_heads * head_dim]
  const float* ffn_norm = nullptr;   ///< [hidden]
  LinearWeights w_gate;              ///< [ffn][hidden]
  LinearWeights w_up;                ///< [ffn][hidden]
  LinearWeights w_down;              ///< [hidden][ffn]
};

/// A layer's projections repacked for int8 activations (LlamaModelOptions::activations = kInt8;
/// a matrix of a type without an int8 product stays empty and runs on linear()).
struct LlamaLayerInt8Weights {
  Int8LinearWeights wq;      ///< LlamaLayerWeights::wq repacked
  Int8LinearWeights wk;      ///< wk repacked
  Int8LinearWeights wv;      ///< wv repacked
  Int8LinearWeights wo;      ///< wo repacked
  Int8LinearWeights w_gate;  ///< w_gate repacked
  Int8LinearWeights w_up;    ///< w_up repacked
  Int8LinearWeights w_down;  ///< w_down repacked
};

/// How a LlamaModel computes its products.
struct LlamaModelOptions {
  /// kFp32 (default): fp32 activations, the exact products of the stored weights; the reference
  /// that the fp64 and llama.cpp golden files are checked against. kInt8: activations rounded to
  /// int8 per 32 inputs and multiplied on the int8 dot-product units (model/int8_linear.hpp;
  /// AVX-512 VNNI, else a slow portable path): 3-4x faster batched products, about as far from
  /// the exact forward as llama.cpp is (docs/real-model.md). Weights are repacked at load (the
  /// same bytes again, held in memory beside the mapped file).
  ActivationPrecision activations = ActivationPrecision::kFp32;
};

/// A Llama-family model whose weights live in a GgufFile (which must outlive it).
class LlamaModel {
  LlamaConfig config_;
  LlamaModelOptions options_;
  LinearWeights token_embd_;  // [vocab][hidden]
  const float* output_norm_ = nullptr;
  LinearWeights output_;  // [vocab][hidden]; the embedding when tied
  std::vector<LlamaLayerWeights> layers_;
  std::vector<LlamaLayerInt8Weights> int8_layers_;  // empty unless options_.activations is kInt8
  Int8LinearWeights int8_output_;
  std::vector<double> inv_freq_;  // [head_dim / 2] RoPE frequencies

 public:
  /// Binds the weights of `file` (checks every tensor's type and shape against the config), and
  /// with int8 activations repacks the Q4_0 / Q4_1 / Q8_0 ones. Throws `Error{kInvalidArgument}`
  /// naming a missing or misshapen tensor, and what `read_llama_config` throws.
  explicit LlamaModel(const GgufFile& file, const LlamaModelOptions& options = {})
      : config_(read_llama_config(file)), options_(options) {
    const LlamaConfig& c = config_;
    const std::int64_t q_width = std::int64_t{c.num_q_heads} * c.head_dim;
    const std::int64_t kv_width = std::int64_t{c.num_kv_heads} * c.head_dim;
    token_embd_ = matrix(file, "token_embd.weight", c.vocab_size, c.hidden_size);
    output_norm_ = vector(file, "output_norm.weight", c.hidden_size);
    output_ = c.tied_embeddings ? token_embd_
                                : matrix(file, "output.weight", c.vocab_size, c.hidden_size);
    layers_.resize(static_cast<std::size_t>(c.num_layers));
    for (std::int32_t l = 0; l < c.num_layers; ++l) {
      const std::string p = "blk." + std::to_string(l) + ".";
      LlamaLayerWeights& w = layers_[static_cast<std::size_t>(l)];
      w.attn_norm = vector(file, p + "attn_norm.weight", c.hidden_size);
      w.wq = matrix(file, p + "attn_q.weight", q_width, c.hidden_size);
      w.wk = matrix(file, p + "attn_k.weight", kv_width, c.hidden_size);
      w.wv = matrix(file, p + "attn_v.weight", kv_width, c.hidden_size);
      w.wo = matrix(file, p + "attn_output.weight", c.hidden_size, q_width);
      w.ffn_norm = vector(file, p + "ffn_norm.weight", c.hidden_size);
      w.w_gate = matrix(file, p + "ffn_gate.weight", c.ffn_size, c.hidden_size);
      w.w_up = matrix(file, p + "ffn_up.weight", c.ffn_size, c.hidden_size);
      w.w_down = matrix(file, p + "ffn_down.weight", c.hidden_size, c.ffn_size);
    }
    if (options_.activations == ActivationPrecision::kInt8) {
      int8_layers_.resize(layers_.size());
      for (std::size_t l = 0; l < layers_.size(); ++l) {
        const LlamaLayerWeights& w = layers_[l];
        LlamaLayerInt8Weights& p = int8_layers_[l];
        p = {pack(w.wq),     pack(w.wk),   pack(w.wv),    pack(w.wo),
             pack(w.w_gate), pack(w.w_up), pack(w.w_down)};
      }
      int8_output_ = pack(output_);
    }
    inv_freq_.resize(static_cast<std::size_t>(c.head_dim / 2));
    for (std::size_t i = 0; i < inv_freq_.size(); ++i) {
      inv_freq_[i] = std::pow(static_cast<double>(c.rope_base),
                              -2.0 * static_cast<double>(i) / static_cast<double>(c.head_dim));
    }
  }

  /// The hyperparameters.
  [[nodiscard]] const LlamaConfig& config() const noexcept { return config_; }

  /// The options it was built with.
  [[nodiscard]] const LlamaModelOptions& options() const noexcept { return options_; }

  /// The shape of a KV cache of `num_blocks` blocks of `block_size` tokens for this model.
  [[nodiscard]] PagedKVCacheShape kv_shape(std::int32_t num_blocks,
                                           std::int32_t block_size) const noexcept {
    return PagedKVCacheShape{config_.num_layers, num_blocks, block_size, config_.num_kv_heads,
                             config_.head_dim};
  }

  /// Runs every token of `plan` (its K/V goes into `kv` at the plan's slots, after the plan's
  /// block copies) and writes the logits of the rows `plan.logits_indices` lists, in that order,
  /// into `logits` ([rows][vocab]). A row's result does not depend on the other sequences of
  /// the step nor on the thread count (batch-invariant kernels). `KV` is the cache's storage:
  /// float16 (LlamaKVCache) or any type the CPU attention reads (bfloat16, fp8, int8, packed
  /// int4: less memory per token, at the quality cost tests/model/test_llama_model.cpp
  /// measures). Throws `Error{kInvalidArgument}` for a KV cache of another shape, a token
  /// outside the vocabulary or a logits span of the wrong size, and what the kernels throw.
  template <class KV>
  void forward(const StepPlan& plan, PagedKVCache<KV>& kv, LlamaWorkspace& ws,
               std::span<float> logits) const {
    const LlamaConfig& c = config_;
    const auto n = static_cast<std::int64_t>(plan.num_tokens());
    const auto m = static_cast<std::int64_t>(plan.logits_indices.size());
    check_arg(kv.shape().num_layers == c.num_layers && kv.shape().num_kv_heads == c.num_kv_heads &&
                  kv.shape().head_dim == c.head_dim && kv.shape().block_size == plan.block_size,
              ErrorCode::kInvalidArgument, "kv cache shape (layers)", kv.shape().num_layers,
              "must match the model and the plan; model layers", c.num_layers);
    check_arg(static_cast<std::int64_t>(logits.size()) == m * c.vocab_size,
              ErrorCode::kInvalidArgument, "logits.size()", logits.size(),
              "must be logit rows * vocab =", m * c.vocab_size);
    if (n == 0) return;
    for (std::int64_t i = 0; i < n; ++i) {
      const TokenId t = plan.token_ids[static_cast<std::size_t>(i)];
      if (t < 0 || t >= c.vocab_size) [[unlikely]] {
        check_arg(false, ErrorCode::kInvalidArgument, "plan.token_ids[" + std::to_string(i) + "]",
                  t, "must be in [0, vocab) with vocab =", c.vocab_size);
      }
    }
    const CpuIsa isa = cpu_isa();
    const std::int64_t hidden = c.hidden_size;
    const std::int64_t q_width = std::int64_t{c.num_q_heads} * c.head_dim;
    const std::int64_t kv_width = std::int64_t{c.num_kv_heads} * c.head_dim;
    // Each lap adds the time since the previous one to its phase (when ws.time_phases).
    using Clock = std::chrono::steady_clock;
    Clock::time_point last = ws.time_phases ? Clock::now() : Clock::time_point{};
    const auto lap = [&](LlamaPhase phase) {
      if (!ws.time_phases) return;
      const Clock::time_point now = Clock::now();
      ws.phase_seconds[static_cast<std::size_t>(phase)] +=
          std::chrono::duration<double>(now - last).count();
      last = now;
    };
    resize(ws.x, n * hidden);
    resize(ws.h, n * hidden);
    resize(ws.q, n * q_width);
    resize(ws.k, n * kv_width);
    resize(ws.v, n * kv_width);
    resize(ws.attn, n * q_width);
    resize(ws.gate, n * c.ffn_size);
    resize(ws.up, n * c.ffn_size);
    const auto row_bytes =
        static_cast<std::size_t>(ggml_row_bytes(token_embd_.type, token_embd_.cols));
    for (std::int64_t i = 0; i < n; ++i) {
      const auto t = static_cast<std::size_t>(plan.token_ids[static_cast<std::size_t>(i)]);
      dequantize_row(token_embd_.type, token_embd_.data + t * row_bytes, hidden,
                     ws.x.data() + i * hidden);
    }
    kv.copy_blocks(plan.block_copies);
    lap(LlamaPhase::kEmbedding);
    rope_angles(plan, ws);
    lap(LlamaPhase::kRope);
    const std::span<const std::int64_t> slots(plan.slot_mapping);
    static const LlamaLayerInt8Weights kNoInt8;
    for (std::int32_t l = 0; l < c.num_layers; ++l) {
      const LlamaLayerWeights& w = layers_[static_cast<std::size_t>(l)];
      const LlamaLayerInt8Weights& p =
          int8_layers_.empty() ? kNoInt8 : int8_layers_[static_cast<std::size_t>(l)];
      rms_norm(ws.x.data(), w.attn_norm, n, ws.h.data());
      lap(LlamaPhase::kNorms);
      const Projection qkv[] = {
          {&w.wq, &p.wq, ws.q.data()}, {&w.wk, &p.wk, ws.k.data()}, {&w.wv, &p.wv, ws.v.data()}};
      project(qkv, ws.h.data(), n);
      lap(LlamaPhase::kQkvProducts);
      rope(ws, n, ws.q.data(), c.num_q_heads);
      rope(ws, n, ws.k.data(), c.num_kv_heads);
      lap(LlamaPhase::kRope);
      kv.append(l, slots,
                std::span<const float>(ws.k.data(), static_cast<std::size_t>(n * kv_width)),
                std::span<const float>(ws.v.data(), static_cast<std::size_t>(n * kv_width)));
      lap(LlamaPhase::kKvAppend);
      PagedPrefillArgs<KV> a;
      a.q = ws.q.data();
      a.q_indptr = plan.q_indptr.data();
      a.kv = kv.view(l);
      a.pages = plan.pages();
      a.num_qo_heads = c.num_q_heads;
      a.head_dim = c.head_dim;
      a.out = ws.attn.data();
      paged_prefill(cpu{}, a);
      lap(LlamaPhase::kAttention);
      project(w.wo, p.wo, ws.attn.data(), n, ws.h.data());
      lap(LlamaPhase::kAttnOutProduct);
      add(ws.x.data(), ws.h.data(), n);
      lap(LlamaPhase::kResidual);
      rms_norm(ws.x.data(), w.ffn_norm, n, ws.h.data());
      lap(LlamaPhase::kNorms);
      const Projection gate_up[] = {{&w.w_gate, &p.w_gate, ws.gate.data()},
                                    {&w.w_up, &p.w_up, ws.up.data()}};
      project(gate_up, ws.h.data(), n);
      lap(LlamaPhase::kMlpProducts);
      swiglu(isa, ws.gate.data(), ws.up.data(), n, c.ffn_size);
      lap(LlamaPhase::kActivation);
      project(w.w_down, p.w_down, ws.gate.data(), n, ws.h.data());
      lap(LlamaPhase::kMlpProducts);
      add(ws.x.data(), ws.h.data(), n);
      lap(LlamaPhase::kResidual);
    }
    if (m == 0) return;
    resize(ws.rows, m * hidden);
    for (std::int64_t r = 0; r < m; ++r) {
      const std::int64_t row = plan.logits_indices[static_cast<std::size_t>(r)];
      rms_norm(ws.x.data() + row * hidden, output_norm_, 1, ws.rows.data() + r * hidden);
    }
    lap(LlamaPhase::kNorms);
    project(output_, int8_output_, ws.rows.data(), m, logits.data());
    lap(LlamaPhase::kLogits);
  }

 private:
  // Steps with fewer tokens run the per-token work (norms, RoPE, SwiGLU) on one thread: a
  // token's share is about a microsecond, as much as waking the team for a parallel region.
  static constexpr std::int64_t kElementwiseParallelTokens = 16;

  // The repacked copy of `w` when it has an int8 product, else an empty one.
  static Int8LinearWeights pack(const LinearWeights& w) {
    return int8_linear_supports(w.type) ? Int8LinearWeights(w) : Int8LinearWeights();
  }

  // y = x · Wᵀ: on the int8 units when `packed` holds W, else exactly (linear()).
  static void project(const LinearWeights& w, const Int8LinearWeights& packed, const float* x,
                      std::int64_t n, float* y) {
    if (packed.empty()) {
      linear(w, x, n, y);
    } else {
      linear_int8(packed, x, n, y);
    }
  }

  // One product of `project`'s fused form: y = x · Wᵀ.
  struct Projection {
    const LinearWeights* w;
    const Int8LinearWeights* packed;
    float* y;
  };

  // Products of one input (q, k and v; gate and up) in one call, so one team serves them all:
  // on the int8 units (the activations quantized once) when every one is repacked, exactly
  // (linear()) when none is; a mix, one project() each. The same bits either way.
  static void project(std::span<const Projection> ps, const float* x, std::int64_t n) {
    constexpr std::size_t kMaxFused = 3;
    INFERKIT_ASSERT(ps.size() <= kMaxFused);
    std::array<Int8Product, kMaxFused> int8;
    std::array<LinearProduct, kMaxFused> exact;
    std::size_t packed = 0;
    for (std::size_t i = 0; i < ps.size(); ++i) {
      int8[i] = {ps[i].packed, ps[i].y};
      exact[i] = {ps[i].w, ps[i].y};
      if (!ps[i].packed->empty()) ++packed;
    }
    if (packed == ps.size()) {
      linear_int8(std::span<const Int8Product>(int8.data(), ps.size()), x, n);
    } else if (packed == 0) {
      linear(std::span<const LinearProduct>(exact.data(), ps.size()), x, n);
    } else {
      for (const Projection& p : ps) project(*p.w, *p.packed, x, n, p.y);
    }
  }

  static void resize(std::vector<float>& v, std::int64_t n) {
    if (static_cast<std::int64_t>(v.size()) < n) v.resize(static_cast<std::size_t>(n));
  }

  // A [rows][cols] weight matrix of any supported type (GGUF dims {cols, rows}).
  static LinearWeights matrix(const GgufFile& file, const std::string& name, std::int64_t rows,
                              std::int64_t cols) {
    const GgufTensorInfo* t = file.find_tensor(name);
    if (t == nullptr || t->dims.size() != 2 || t->dims[0] != cols || t->dims[1] != rows) {
      detail::throw_error(ErrorCode::kInvalidArgument,
                          "tensor " + name +
                              (t == nullptr ? " is missing" : " has the wrong shape") + ": want [" +
                              std::to_string(rows) + "][" + std::to_string(cols) + "]");
    }
    LinearWeights w{t->type, rows, cols, file.tensor_data(*t).data()};
    validate(w);
    return w;
  }

  // An f32 vector of `size` elements (norm weights), 4-byte aligned in the mapping.
  static const float* vector(const GgufFile& file, const std::string& name, std::int64_t size) {
    const GgufTensorInfo* t = file.find_tensor(name);
    if (t == nullptr || t->type != GgmlType::kF32 || t->dims.size() != 1 || t->dims[0] != size) {
      detail::throw_error(
          ErrorCode::kInvalidArgument,
          "tensor " + name + " must be an f32 vector of " + std::to_string(size) + " elements");
    }
    const std::byte* data = file.tensor_data(*t).data();
    check_arg(
        reinterpret_cast<std::uintptr_t>(data) % alignof(float) == 0, ErrorCode::kInvalidArgument,
        [&] { return "tensor data alignment of " + name; },
        reinterpret_cast<std::uintptr_t>(data) % alignof(float), "must be", 0);
    return reinterpret_cast<const float*>(data);
  }

  // Runs fn(t) for every token t in [0, n), across the OpenMP team when the step has at least
  // `min_tokens` tokens (below that a parallel region costs more than the work). Each token's
  // result comes from fn(t) alone, so it does not depend on the split: batch invariance holds.
  template <class Fn>
  static void for_each_token(std::int64_t n, std::int64_t min_tokens, const Fn& fn) noexcept {
#if INFERKIT_HAS_OPENMP
    if (n >= min_tokens) {  // (an `if` clause would still enter the runtime for one thread)
#  pragma omp parallel for schedule(static)
      for (std::int64_t t = 0; t < n; ++t) fn(t);
      return;
    }
#else
    (void)min_tokens;
#endif
    for (std::int64_t t = 0; t < n; ++t) fn(t);
  }

  // y[t] = x[t] / sqrt(mean(x[t]^2) + eps) * weight, per token. The sum of squares runs in
  // double, in 8 lanes and then across them in a fixed order: 8 independent chains (one chain
  // waited on every add's latency), and a token's result does not depend on the batch.
  void rms_norm(const float* x, const float* weight, std::int64_t n, float* y) const {
    const std::int64_t d = config_.hidden_size;
    const double eps = config_.rms_eps;
    for_each_token(n, kElementwiseParallelTokens, [&](std::int64_t t) {
      const float* xt = x + t * d;
      constexpr std::int64_t kLanes = 8;
      double lanes[kLanes] = {};
      const std::int64_t full = d / kLanes * kLanes;
      std::int64_t i = 0;
      for (; i < full; i += kLanes) {
        for (std::int64_t l = 0; l < kLanes; ++l) {
          lanes[l] += static_cast<double>(xt[i + l]) * xt[i + l];
        }
      }
      double sum = 0.0;
      for (const double lane : lanes) sum += lane;
      for (; i < d; ++i) sum += static_cast<double>(xt[i]) * xt[i];
      const auto scale = static_cast<float>(1.0 / std::sqrt(sum / static_cast<double>(d) + eps));
      float* yt = y + t * d;
      for (std::int64_t j = 0; j < d; ++j) yt[j] = xt[j] * scale * weight[j];
    });
  }

  // The step's rotation angles, once per forward (every layer's q and k turn by the same
  // ones): cos and sin of position * inv_freq[i], computed in double and rounded to float.
  void rope_angles(const StepPlan& plan, LlamaWorkspace& ws) const {
    const auto pairs = static_cast<std::int64_t>(inv_freq_.size());
    const auto n = static_cast<std::int64_t>(plan.num_tokens());
    resize(ws.rope_cos, n * pairs);
    resize(ws.rope_sin, n * pairs);
    for (std::int64_t t = 0; t < n; ++t) {
      const double pos = plan.positions[static_cast<std::size_t>(t)];
      for (std::int64_t i = 0; i < pairs; ++i) {
        const double angle = pos * inv_freq_[static_cast<std::size_t>(i)];
        ws.rope_cos[static_cast<std::size_t>(t * pairs + i)] = static_cast<float>(std::cos(angle));
        ws.rope_sin[static_cast<std::size_t>(t * pairs + i)] = static_cast<float>(std::sin(angle));
      }
    }
  }

  // RoPE in GGUF's llama layout (pairs of adjacent elements; the converter permuted Q and K so
  // this equals the reference implementation's rotate-half): element pair i of every head
  // turns by position * inv_freq[i], with the angles rope_angles stored.
  void rope(const LlamaWorkspace& ws, std::int64_t n, float* x, std::int32_t heads) const {
    const std::int32_t hd = config_.head_dim;
    const auto pairs = static_cast<std::int64_t>(inv_freq_.size());
    for_each_token(n, kElementwiseParallelTokens, [&](std::int64_t t) {
      const float* cos_t = ws.rope_cos.data() + t * pairs;
      const float* sin_t = ws.rope_sin.data() + t * pairs;
      for (std::int32_t h = 0; h < heads; ++h) {
        float* p = x + (t * heads + h) * hd;
        for (std::int64_t i = 0; i < pairs; ++i) {
          const float a = p[2 * i];
          const float b = p[2 * i + 1];
          p[2 * i] = a * cos_t[i] - b * sin_t[i];
          p[2 * i + 1] = a * sin_t[i] + b * cos_t[i];
        }
      }
    });
  }

  // x += y over the residual stream ([n][hidden]).
  void add(float* x, const float* y, std::int64_t n) const noexcept {
    const std::int64_t d = config_.hidden_size;
    for_each_token(n, kElementwiseParallelTokens, [&](std::int64_t t) {
      for (std::int64_t i = t * d; i < (t + 1) * d; ++i) x[i] += y[i];
    });
  }

  // gate = silu(gate) * up (model/detail/swiglu.hpp), per token row of `ffn` elements.
  static void swiglu(CpuIsa isa, float* gate, const float* up, std::int64_t n,
                     std::int64_t ffn) noexcept {
    for_each_token(n, kElementwiseParallelTokens, [&](std::int64_t t) {
      detail::silu_mul(isa, gate + t * ffn, up + t * ffn, ffn);
    });
  }
};

}  // namespace inferkit
