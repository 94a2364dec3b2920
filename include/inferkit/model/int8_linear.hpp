// SPDX-License-Identifier: Apache-2.0
// Int8-activation linear layers: y = x · Wᵀ with W in ggml's Q4_0, Q4_1 or Q8_0 blocks, repacked
// once (Int8LinearWeights) so that the CPU's int8 dot-product instructions multiply 16 rows at a
// time, and the activations quantized per token and per block of 32 inputs to int8 (a scale
// amax/127 per block, as llama.cpp quantizes its activations to Q8 for these products). The
// integer dot products are exact; what differs from linear()'s exact fp32-activation product is
// the activations' rounding, at most half a code (amax/254) per input. The model's forward uses
// this path when built with ActivationPrecision::kInt8; linear() stays the reference.
//
// Paths, all giving the same bits: AVX-512 VNNI (vpdpbusd: 64 multiply-adds an instruction) where
// the CPU has it and the process's CPU path (core/cpu_isa.hpp, INFERKIT_CPU_ISA) is avx512; on
// the avx2 path AVX-VNNI (vpdpbusd on ymm) where the CPU has it, else vpmaddubsw + vpmaddwd; on
// the baseline path (and NEON, for now) a portable scalar one, slow: a reference, not a mode to
// choose there.
// Batch-invariant like linear(): a token's outputs are the same bits whatever the batch, its
// other tokens and the thread count.
// Threads: an Int8LinearWeights is immutable after construction; linear_int8 (OpenMP inside) may
// run from several threads at once when each writes its own y.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <inferkit/core/config.hpp>
#include <inferkit/core/cpu_isa.hpp>
#include <inferkit/core/detail/aligned_allocator.hpp>
#include <inferkit/core/error.hpp>
#include <inferkit/model/detail/int8_linear_amx.hpp>
#include <inferkit/model/detail/int8_linear_avx2.hpp>
#include <inferkit/model/detail/int8_linear_avx512.hpp>
#include <inferkit/model/detail/int8_linear_portable.hpp>
#include <inferkit/model/ggml_type.hpp>
#include <inferkit/model/quantized_linear.hpp>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#if INFERKIT_HAS_OPENMP
#  include <omp.h>
#endif

namespace inferkit {

/// The arithmetic of a model's quantized products.
enum class ActivationPrecision : std::uint8_t {
  kFp32,  ///< fp32 activations: the exact product of the stored weights (linear(); reference)
  kInt8,  ///< activations rounded to int8 per 32 inputs, integer dot products (linear_int8())
};

/// Whether weights of `type` can be repacked for int8 activations (Q4_0, Q4_1, Q8_0).
constexpr bool int8_linear_supports(GgmlType type) noexcept {
  return type == GgmlType::kQ4_0 || type == GgmlType::kQ4_1 || type == GgmlType::kQ8_0;
}

/// A Q4_0, Q4_1 or Q8_0 weight matrix repacked for linear_int8() (layout:
/// model/detail/int8_linear_portable.hpp): the same bytes as the file's blocks, give or take the
/// last group's padding rows, owned, 64-byte aligned.
class Int8LinearWeights {
  using Bytes = std::vector<std::uint8_t, detail::AlignedAllocator<std::uint8_t, 64>>;
  using Halves = std::vector<std::uint16_t, detail::AlignedAllocator<std::uint16_t, 64>>;
  GgmlType type_ = GgmlType::kQ4_1;
  std::int64_t rows_ = 0;
  std::int64_t cols_ = 0;
  Bytes quants_;
  Halves scales_;

 public:
  /// An empty matrix (0 x 0).
  Int8LinearWeights() = default;

  /// Repacks `w`. Throws what validate(w) throws, and `Error{kUnsupported}` naming the type when
  /// it is not Q4_0, Q4_1 or Q8_0. O(rows cols).
  explicit Int8LinearWeights(const LinearWeights& w) : type_(w.type), rows_(w.rows), cols_(w.cols) {
    validate(w);
    check_arg(int8_linear_supports(w.type), ErrorCode::kUnsupported, "weights type",
              std::string(ggml_type_layout(w.type)->name),
              "has no int8-activation product; supported:", "Q4_0, Q4_1, Q8_0");
    const std::int64_t groups = (rows_ + detail::kInt8GroupRows - 1) / detail::kInt8GroupRows;
    const std::int64_t blocks = cols_ / detail::kInt8BlockValues;
    const std::int64_t qbytes = detail::int8_quant_bytes(type_);
    const std::int64_t halves = detail::int8_scale_halves(type_);
    quants_.assign(static_cast<std::size_t>(groups * blocks * qbytes), 0);
    scales_.assign(static_cast<std::size_t>(groups * blocks * halves), 0);
    const std::int64_t row_bytes = ggml_row_bytes(type_, cols_);
    const std::int64_t block_bytes = ggml_type_layout(type_)->block_bytes;
    const std::int64_t scale_bytes = type_ == GgmlType::kQ4_1 ? 4 : 2;
    for (std::int64_t row = 0; row < rows_; ++row) {
      const std::int64_t g = row / detail::kInt8GroupRows;
      const std::int64_t r = row % detail::kInt8GroupRows;
      for (std::int64_t b = 0; b < blocks; ++b) {
        const std::byte* block = w.data + row * row_bytes + b * block_bytes;
        std::uint8_t* q = quants_.data() + (g * blocks + b) * qbytes;
        std::uint16_t* s = scales_.data() + (g * blocks + b) * halves;
        std::memcpy(s + r, block, 2);
        if (type_ == GgmlType::kQ4_1) std::memcpy(s + 16 + r, block + 2, 2);
        const std::byte* qs = block + scale_bytes;
        const std::int64_t quads = type_ == GgmlType::kQ8_0 ? 8 : 4;
        for (std::int64_t j = 0; j < quads; ++j) {
          for (std::int64_t i = 0; i < 4; ++i) {
            const auto byte = static_cast<std::uint8_t>(qs[4 * j + i]);
            // Q8_0's signed codes become unsigned by +128 (flipping the sign bit).
            q[64 * j + 4 * r + i] = type_ == GgmlType::kQ8_0 ? byte ^ 0x80u : byte;
          }
        }
      }
    }
  }

  /// The weights' ggml type (Q4_0, Q4_1 or Q8_0).
  [[nodiscard]] GgmlType type() const noexcept { return type_; }
  /// Output features.
  [[nodiscard]] std::int64_t rows() const noexcept { return rows_; }
  /// Input features (a multiple of 32).
  [[nodiscard]] std::int64_t cols() const noexcept { return cols_; }
  /// No rows or no columns (a default-constructed one: the model's "not repacked").
  [[nodiscard]] bool empty() const noexcept { return rows_ == 0 || cols_ == 0; }
  /// Bytes held (quants and scales).
  [[nodiscard]] std::size_t bytes() const noexcept {
    return quants_.size() + scales_.size() * sizeof(std::uint16_t);
  }
  /// The repacked quants (the layout of model/detail/int8_linear_portable.hpp).
  [[nodiscard]] const std::uint8_t* quants() const noexcept { return quants_.data(); }
  /// The fp16 block scales (d of a group's 16 rows, then m for Q4_1), as raw bits.
  [[nodiscard]] const std::uint16_t* scales() const noexcept { return scales_.data(); }
};

/// One product of linear_int8()'s fused form: y[n][w->rows()] = x[n][cols] · Wᵀ.
struct Int8Product {
  const Int8LinearWeights* w = nullptr;  ///< the product's weights (cols: the shared input's)
  float* y = nullptr;  ///< token t's outputs at y + t * w->rows(); must not overlap x
};

namespace detail {

/// A path of the int8-activation products.
enum class Int8Isa : std::uint8_t {
  kBaseline,    ///< portable scalar C++ (same bits, slow)
  kAvx2,        ///< AVX2 + FMA + F16C: vpmaddubsw + vpmaddwd
  kAvxVnni,     ///< the AVX2 set + AVX-VNNI
  kAvx512Vnni,  ///< AVX-512 F/BW/VL + VNNI
  kAmxInt8,     ///< the AVX-512 VNNI set + AMX-INT8 tiles (from kAmxMinTokens tokens; fewer: VNNI)
};

/// The path's name in messages and test output.
constexpr const char* int8_isa_name(Int8Isa isa) noexcept {
  switch (isa) {
    case Int8Isa::kAvx2:
      return "avx2";
    case Int8Isa::kAvxVnni:
      return "avx-vnni";
    case Int8Isa::kAvx512Vnni:
      return "avx512-vnni";
    case Int8Isa::kAmxInt8:
      return "amx-int8";
    case Int8Isa::kBaseline:
      break;
  }
  return "baseline";
}

inline namespace INFERKIT_ISA_ABI {

/// Whether this build and CPU can run `isa`.
inline bool int8_isa_supported(Int8Isa isa) noexcept {
  switch (isa) {
    case Int8Isa::kAvx2:
      return cpu_isa_supported(CpuIsa::kAvx2);
    case Int8Isa::kAvxVnni:
      return cpu_isa_supported(CpuIsa::kAvx2) && cpu_has_avx_vnni();
    case Int8Isa::kAvx512Vnni:
      return cpu_isa_supported(CpuIsa::kAvx512) && cpu_has_avx512_vnni();
    case Int8Isa::kAmxInt8:
      return INFERKIT_HAS_AMX_KERNEL && cpu_isa_supported(CpuIsa::kAvx512) &&
             cpu_has_avx512_vnni() && cpu_has_amx_int8();
    case Int8Isa::kBaseline:
      break;
  }
  return true;
}

/// The process's path, from the CPU kernels' path (cpu_isa(): CPUID or INFERKIT_CPU_ISA): on
/// avx512, AMX-INT8 where the CPU and the OS allow it (cpu_has_amx_int8(); INFERKIT_AMX=off
/// declines it), else AVX-512 VNNI where the CPU has it; on avx512 without it, or avx2, AVX-VNNI
/// where the CPU has it, else AVX2; on baseline and NEON the portable one. Throws what cpu_isa()
/// throws.
inline Int8Isa int8_linear_isa() {
  const CpuIsa isa = cpu_isa();
  if (isa == CpuIsa::kAvx512 && cpu_has_avx512_vnni()) {
    return int8_isa_supported(Int8Isa::kAmxInt8) ? Int8Isa::kAmxInt8 : Int8Isa::kAvx512Vnni;
  }
  if (isa == CpuIsa::kAvx512 || isa == CpuIsa::kAvx2) {
    return cpu_has_avx_vnni() ? Int8Isa::kAvxVnni : Int8Isa::kAvx2;
  }
  return Int8Isa::kBaseline;
}

/// Token counts up to which each thread of a product quantizes every token itself (a decode
/// step's one or two: cheaper than the barrier it saves).
inline constexpr std::int64_t kPrivateCodesMaxTokens = 2;

/// linear_int8() of several products on the path `isa` (the tests run each path; linear_int8
/// takes the process's).
inline void linear_int8_on(Int8Isa isa, std::span<const Int8Product> products, const float* x,
                           std::int64_t n) {
  const ProductsShape shape = check_products(products, n, [](const Int8LinearWeights& w) {
    return std::pair{w.rows(), w.cols()};
  });
  // (Named copies: lambdas and OpenMP regions below use them, and clang 14 cannot capture a
  // structured binding.)
  const std::int64_t cols = shape.cols;
  const std::int64_t macs = shape.macs;
  if (macs == 0) return;  // no tokens, no products or no rows: nothing read or written
  check_arg(x != nullptr || cols == 0, ErrorCode::kInvalidArgument, "x of tokens", n,
            "is null; cols", cols);
  check_arg(int8_isa_supported(isa), ErrorCode::kUnsupported, "int8 path", int8_isa_name(isa),
            "is not supported by this CPU or build; supported:", "baseline");
  // AMX pays only for prefill-sized batches (kAmxMinTokens): smaller ones take the VNNI path.
  if (isa == Int8Isa::kAmxInt8 && n < kAmxMinTokens) isa = Int8Isa::kAvx512Vnni;
  const bool amx = isa == Int8Isa::kAmxInt8;
  const std::int64_t blocks = cols / kInt8BlockValues;
  // AMX reads whole tiles: the activations are padded to a multiple of 16 tokens (zeros).
  const std::int64_t padded_n =
      amx ? (n + kAmxTileTokens - 1) / kAmxTileTokens * kAmxTileTokens : n;
  // The products' row groups, numbered one after another (for_thread_share): a layer's q, k
  // and v (or gate and up) need one team and one barrier, not one each.
  std::vector<Int8Job> jobs;
  std::vector<std::int64_t> first_group;  // product i's groups: [first_group[i], first_group[i+1])
  jobs.reserve(products.size());
  first_group.reserve(products.size() + 1);
  first_group.push_back(0);
  for (const Int8Product& p : products) {
    if (p.w->rows() == 0) continue;
    Int8Job job;
    job.type = p.w->type();
    job.quants = p.w->quants();
    job.scales = p.w->scales();
    job.rows = p.w->rows();
    job.blocks = blocks;
    job.n = n;
    job.y = p.y;
    jobs.push_back(job);
    first_group.push_back(first_group.back() + (job.rows + kInt8GroupRows - 1) / kInt8GroupRows);
  }
  const std::int64_t groups = first_group.back();
  const bool parallel = groups > 1 && macs >= kLinearParallelMinMacs;
#if INFERKIT_HAS_OPENMP
  const int team = parallel ? omp_get_max_threads() : 1;
#else
  (void)parallel;  // serial build (INFERKIT_OPENMP=OFF): one thread whatever the size
  const int team = 1;
#endif
  // With a token or two, each thread quantizes every token into codes of its own, which saves
  // the barrier between quantizing and multiplying (the codes are the same bits either way).
  const bool private_codes = team > 1 && n <= kPrivateCodesMaxTokens;
  const std::int64_t copies = private_codes ? team : 1;
  // One allocation for the codes and the per-block scales and sums (each thread's, for private
  // codes; and, for AMX, each thread's weight tiles of one group); allocated here, not in the
  // parallel region, where bad_alloc could not propagate.
  const std::int64_t code_bytes = (padded_n * cols + 63) / 64 * 64;
  const std::int64_t scale_bytes = (12 * padded_n * blocks + 63) / 64 * 64;
  const std::int64_t copy_bytes = code_bytes + scale_bytes;
  const std::int64_t tile_bytes = amx ? team * blocks * kAmxWeightTileBytes : 0;
  const std::unique_ptr<std::byte[]> buffer(
      new std::byte[static_cast<std::size_t>(64 + copies * copy_bytes + tile_bytes)]);
  std::byte* base = buffer.get() + (64 - reinterpret_cast<std::uintptr_t>(buffer.get()) % 64);
  const auto codes_of = [&](std::int64_t copy) {
    std::byte* at = base + copy * copy_bytes;
    Int8ActivationsView v;
    v.q = reinterpret_cast<std::int8_t*>(at);
    v.scale = reinterpret_cast<float*>(at + code_bytes);
    v.sum = reinterpret_cast<std::int32_t*>(v.scale + padded_n * blocks);
    v.scaled_sum = reinterpret_cast<float*>(v.sum + padded_n * blocks);
    v.cols = cols;
    v.blocks = blocks;
    return v;
  };
  [[maybe_unused]] auto* tiles =  // (unused where the build has no AMX kernel)
      reinterpret_cast<std::uint8_t*>(base + copies * copy_bytes);
  if (padded_n > n) {  // the padding tokens (AMX: one copy): zero codes and scales, no outputs
    const Int8ActivationsView xa = codes_of(0);
    std::memset(xa.q + n * cols, 0, static_cast<std::size_t>((padded_n - n) * cols));
    for (std::int64_t i = n * blocks; i < padded_n * blocks; ++i) {
      xa.scale[i] = 0.0f;
      xa.sum[i] = 0;
      xa.scaled_sum[i] = 0.0f;
    }
  }
#if INFERKIT_HAS_OPENMP
#  pragma omp parallel num_threads(team) if (parallel)
#endif
  {
#if INFERKIT_HAS_OPENMP
    const int threads = omp_get_num_threads();
    const int id = omp_get_thread_num();
#else
    const int threads = 1;
    const int id = 0;
#endif
    // Each thread quantizes a share of the tokens (private codes: all of them, into its own
    // copy), then multiplies a share of the row groups by all of them.
    const bool own = private_codes && threads > 1;
    const Int8ActivationsView xa = codes_of(own ? id : 0);
    const std::int64_t t0 = own ? 0 : n * id / threads;
    const std::int64_t t1 = own ? n : n * (id + 1) / threads;
    for (std::int64_t t = t0; t < t1; ++t) {
#if INFERKIT_CPU_DISPATCH
      if (isa == Int8Isa::kAvx512Vnni || amx) {
        int8_avx512::quantize_token(x + t * cols, xa, t);
        continue;
      }
#endif
      // (AVX2 hosts quantize with the portable code: n x cols work beside n x rows x cols.)
      int8_baseline::quantize_token(x + t * cols, xa, t);
    }
#if INFERKIT_HAS_OPENMP
    if (!own) {
#  pragma omp barrier
    }
#endif
    for_thread_share(
        first_group, id, threads, [&](std::size_t j, std::int64_t g0, std::int64_t g1) {
          Int8Job job = jobs[j];
          job.x = xa;
          if (amx) {  // (only where the build has the AMX kernel: int8_isa_supported)
#if INFERKIT_HAS_AMX_KERNEL
            int8_amx::int8_rows(job, g0, g1, tiles + id * blocks * kAmxWeightTileBytes);
#endif
          } else {
#if INFERKIT_CPU_DISPATCH
            if (isa == Int8Isa::kAvx512Vnni) {
              int8_avx512::int8_rows(job, g0, g1);
            } else if (isa == Int8Isa::kAvx2 || isa == Int8Isa::kAvxVnni) {
              int8_avx2::int8_rows(job, g0, g1, isa == Int8Isa::kAvxVnni);
            } else {
              int8_baseline::int8_rows(job, g0, g1);
            }
#else
        int8_baseline::int8_rows(job, g0, g1);
#endif
          }
        });
  }
}

/// linear_int8() on the path `isa` (the tests run both; linear_int8 takes the process's).
inline void linear_int8_on(Int8Isa isa, const Int8LinearWeights& w, const float* x, std::int64_t n,
                           float* y) {
  check_arg(n >= 0, ErrorCode::kInvalidArgument, "n (tokens)", n, "must be >=", 0);
  if (n == 0 || w.rows() == 0) return;
  check_arg(y != nullptr, ErrorCode::kInvalidArgument, "y of tokens", n, "is null; rows", w.rows());
  const Int8Product product{&w, y};
  linear_int8_on(isa, std::span<const Int8Product>(&product, 1), x, n);
}

}  // namespace INFERKIT_ISA_ABI
}  // namespace detail

// The entry points that run kernels live in the ISA namespace (core/config.hpp): TUs built with
// other -m flags get their own copies.
inline namespace INFERKIT_ISA_ABI {

/// y[n][rows] = x[n][cols] · Wᵀ with the activations quantized to int8 per token and block of
/// 32 inputs (x ≈ q · amax/127) and integer dot products against the repacked codes (token t at
/// x + t cols, output at y + t rows; `y` must not overlap `x`). The error against linear()'s exact
/// product is the activations' rounding: |Δy| ≤ Σ_blocks (amax_block / 254) Σ |w|, plus fp32
/// accumulation. Batch-invariant (the same bits for any n, other tokens and thread count). Throws
/// `Error{kInvalidArgument}` for n < 0 or null x / y when they are read or written, and what
/// cpu_isa() throws. O(n rows cols).
inline void linear_int8(const Int8LinearWeights& w, const float* x, std::int64_t n, float* y) {
  detail::linear_int8_on(detail::int8_linear_isa(), w, x, n, y);
}

/// Several products of the same input (a layer's q, k and v projections; gate and up), each as
/// linear_int8(*p.w, x, n, p.y): the activations are quantized once and one team of threads
/// shares the row groups of all the products, so a decode step pays one parallel region and one
/// quantization where it paid one per product. The same bits as the separate calls. Throws
/// `Error{kInvalidArgument}` naming the product for a null weights pointer, a product whose cols
/// differ from the first's, or a null y it would write; otherwise what linear_int8 throws.
/// O(n Σ rows cols).
inline void linear_int8(std::span<const Int8Product> products, const float* x, std::int64_t n) {
  detail::linear_int8_on(detail::int8_linear_isa(), products, x, n);
}

}  // namespace INFERKIT_ISA_ABI

}  // namespace inferkit
