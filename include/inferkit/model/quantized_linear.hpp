// SPDX-License-Identifier: Apache-2.0
// Linear layers over GGUF weights: y = x · Wᵀ with W in ggml's Q4_0, Q4_1, Q8_0, F16, BF16 or
// F32 blocks exactly as the file stores them, fp32 activations and fp32 accumulation. The
// model's forward pass calls linear() for every projection of a step (one token per sequence in
// decode, many in prefill) and dequantize_row() for embedding lookups. Results are
// batch-invariant: a token's outputs are the same bits whatever else is in the batch.
// Threads: linear (OpenMP inside each call) and dequantize_row keep no state; calls from several
// threads are safe when each writes its own y / out, which no other call reads.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <inferkit/core/config.hpp>
#include <inferkit/core/error.hpp>
#include <inferkit/model/detail/linear_isa.hpp>
#include <inferkit/model/detail/linear_job.hpp>
#include <inferkit/model/detail/linear_simd_avx2.hpp>
#include <inferkit/model/detail/linear_simd_avx512.hpp>
#include <inferkit/model/detail/linear_simd_portable.hpp>
#include <inferkit/model/ggml_type.hpp>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#if INFERKIT_HAS_OPENMP
#  include <omp.h>
#endif

namespace inferkit {

/// A weight matrix as a GGUF tensor of dims {cols, rows} stores it: `rows` rows (output
/// features), each holding `cols` inputs as consecutive ggml blocks of `type`, that is
/// ggml_row_bytes(type, cols) bytes per row, rows back to back. A view: `data` is not owned.
struct LinearWeights {
  GgmlType type = GgmlType::kF32;   ///< element type
  std::int64_t rows = 0;            ///< output features
  std::int64_t cols = 0;            ///< input features (a multiple of 32 for block types)
  const std::byte* data = nullptr;  ///< [rows][ggml_row_bytes(type, cols)] bytes
};

/// One product of linear()'s fused form: y[n][w->rows] = x[n][cols] · Wᵀ.
struct LinearProduct {
  const LinearWeights* w = nullptr;  ///< the product's weights (cols: the shared input's)
  float* y = nullptr;                ///< token t's outputs at y + t * w->rows; must not overlap x
};

/// Checks that `w` describes a readable matrix. Throws `Error{kUnsupported}` for a type other
/// than Q4_0, Q4_1, Q8_0, F16, BF16, F32; `Error{kInvalidArgument}` for negative rows or cols,
/// cols not a whole number of blocks, or null data for a non-empty matrix; `Error{kOutOfRange}`
/// when the matrix's size in bytes overflows int64.
inline void validate(const LinearWeights& w) {
  const std::int64_t row_bytes = ggml_row_bytes(w.type, w.cols);
  check_arg(w.rows >= 0, ErrorCode::kInvalidArgument, "rows", w.rows, "must be >=", 0);
  check_arg(row_bytes == 0 || w.rows <= std::numeric_limits<std::int64_t>::max() / row_bytes,
            ErrorCode::kOutOfRange, "rows", w.rows, "times the row bytes overflow int64; row bytes",
            row_bytes);
  check_arg(w.data != nullptr || w.rows == 0 || w.cols == 0, ErrorCode::kInvalidArgument,
            "data of a rows x cols matrix with rows", w.rows, "is null; cols", w.cols);
}

namespace detail {

/// One path's kernels: rows [r0, r1) of a job, and one row's dequantization.
struct LinearKernels {
  void (*rows)(const LinearJob& job, std::int64_t r0, std::int64_t r1, float* scratch) noexcept;
  void (*dequantize)(GgmlType type, const std::byte* row, std::int64_t cols, float* out) noexcept;
};

/// The kernels of `isa`; throws `Error{kUnsupported}` when this build or CPU lacks it.
inline LinearKernels linear_kernels(LinearIsa isa) {
  if (!linear_isa_supported(isa)) {
    // Only here: CPUID traps to the hypervisor in a VM (microseconds), too slow for every call.
    check_arg(false, ErrorCode::kUnsupported, "cpu isa", linear_isa_name(isa),
              "is not supported by this CPU or build; the best is",
              linear_isa_name(best_linear_isa()));
  }
  switch (isa) {
#if INFERKIT_CPU_DISPATCH
    case LinearIsa::kAvx512:
      return {&linear_avx512::linear_rows, &linear_avx512::dequantize};
    case LinearIsa::kAvx2:
      return {&linear_avx2::linear_rows, &linear_avx2::dequantize};
#endif
    default:
      break;
  }
  return {&linear_baseline::linear_rows, &linear_baseline::dequantize};
}

/// Multiply-adds below which linear() stays on the calling thread: waking a team costs about
/// as much as a 64K-MAC product.
inline constexpr std::int64_t kLinearParallelMinMacs = std::int64_t{1} << 16;

/// What check_products() finds in the products of one input: the width they share (-1 when
/// none has rows) and the multiply-adds of all of them over n tokens.
struct ProductsShape {
  std::int64_t cols = -1;  ///< the shared input's width; -1: no product has rows
  std::int64_t macs = 0;   ///< sum of rows x cols x n over the products
};

/// Checks the products of a fused call (linear() or linear_int8() of several products of one
/// input of n tokens): each names its weights, those with rows share one width (one with no rows
/// reads and writes nothing, whatever its shape) and, with tokens, each with rows has outputs.
/// `shape_of(*p.w)` checks a product's weights and returns {rows, cols}. Throws the
/// `Error{kInvalidArgument}` naming `products[i].w`, `products[i].w cols` or `products[i].y`.
template <class Product, class ShapeOf>
ProductsShape check_products(std::span<const Product> products, std::int64_t n, ShapeOf shape_of) {
  check_arg(n >= 0, ErrorCode::kInvalidArgument, "n (tokens)", n, "must be >=", 0);
  ProductsShape shape;
  for (std::size_t i = 0; i < products.size(); ++i) {
    const Product& p = products[i];
    const auto name = [&](const char* field) {
      return "products[" + std::to_string(i) + "]." + field;
    };
    check_arg(
        p.w != nullptr, ErrorCode::kInvalidArgument, [&] { return name("w"); }, "null",
        "must name the product's weights; products:", products.size());
    const auto [rows, cols] = shape_of(*p.w);
    if (rows == 0) continue;
    if (shape.cols < 0) shape.cols = cols;
    check_arg(
        cols == shape.cols, ErrorCode::kInvalidArgument, [&] { return name("w cols"); }, cols,
        "must equal the first product's (the products share one input):", shape.cols);
    if (n == 0) continue;
    check_arg(
        p.y != nullptr, ErrorCode::kInvalidArgument, [&] { return name("y"); }, "null",
        "must hold the product's outputs; rows", rows);
    shape.macs += rows * shape.cols * n;
  }
  return shape;
}

/// A thread's share of work units numbered one product after another (product j's units are
/// [first[j], first[j + 1])): thread `id` of `threads` takes a contiguous run of them all, so the
/// products of one input (a layer's q, k and v, or gate and up) wake one team, not one each.
/// Calls fn(j, u0, u1) for each product j it shares, with its units [u0, u1) counted from j's
/// first.
template <class Fn>
void for_thread_share(std::span<const std::int64_t> first, int id, int threads, Fn&& fn) {
  const std::int64_t total = first.back();
  const std::int64_t mine0 = total * id / threads;
  const std::int64_t mine1 = total * (id + 1) / threads;
  for (std::size_t j = 0; j + 1 < first.size(); ++j) {
    const std::int64_t u0 = std::max(mine0, first[j]) - first[j];
    const std::int64_t u1 = std::min(mine1, first[j + 1]) - first[j];
    if (u0 < u1) fn(j, u0, u1);
  }
}

/// linear() of several products of one input on the path `isa` (tests run every path; linear()
/// takes the process's path).
inline void linear_on(LinearIsa isa, std::span<const LinearProduct> products, const float* x,
                      std::int64_t n) {
  const auto [cols, macs] = check_products(products, n, [](const LinearWeights& w) {
    validate(w);
    return std::pair{w.rows, w.cols};
  });
  if (n == 0 || cols < 0) return;  // no tokens, no products or no rows: nothing read or written
  check_arg(x != nullptr || cols == 0, ErrorCode::kInvalidArgument, "x of tokens", n,
            "is null; cols", cols);
  const LinearKernels kernels = linear_kernels(isa);
  // The products' 16-row panels, numbered one after another (for_thread_share).
  std::vector<LinearJob> jobs;
  std::vector<std::int64_t> first_panel;  // product j's: [first_panel[j], first_panel[j + 1])
  jobs.reserve(products.size());
  first_panel.reserve(products.size() + 1);
  first_panel.push_back(0);
  std::int64_t scratch_floats = 0;
  for (const LinearProduct& p : products) {
    if (p.w->rows == 0) continue;
    LinearJob job;
    job.type = p.w->type;
    job.w = p.w->data;
    job.rows = p.w->rows;
    job.cols = cols;
    job.row_bytes = ggml_row_bytes(p.w->type, cols);
    job.x = x;
    job.n = n;
    job.y = p.y;
    jobs.push_back(job);
    first_panel.push_back(first_panel.back() +
                          (job.rows + kLinearPanelRows - 1) / kLinearPanelRows);
    scratch_floats = std::max(scratch_floats, linear_scratch_floats(job));
  }
  const std::int64_t panels = first_panel.back();
  const bool parallel = panels > 1 && macs >= kLinearParallelMinMacs;
#if INFERKIT_HAS_OPENMP
  const int max_threads = parallel ? omp_get_max_threads() : 1;
#else
  const int max_threads = 1;
  (void)parallel;  // serial build (INFERKIT_OPENMP=OFF): one thread whatever the size
#endif
  // Allocated here, not in the parallel region, where bad_alloc could not propagate.
  const std::unique_ptr<float[]> scratch(
      scratch_floats > 0 ? new float[static_cast<std::size_t>(scratch_floats * max_threads)]
                         : nullptr);
#if INFERKIT_HAS_OPENMP
#  pragma omp parallel num_threads(max_threads) if (parallel)
#endif
  {
#if INFERKIT_HAS_OPENMP
    const int threads = omp_get_num_threads();
    const int id = omp_get_thread_num();
#else
    const int threads = 1;
    const int id = 0;
#endif
    // Threads take contiguous runs of whole panels; no row's dot product is ever split.
    for_thread_share(
        first_panel, id, threads, [&](std::size_t j, std::int64_t p0, std::int64_t p1) {
          const LinearJob& job = jobs[j];
          const std::int64_t r0 = p0 * kLinearPanelRows;
          const std::int64_t r1 = std::min(p1 * kLinearPanelRows, job.rows);
          kernels.rows(job, r0, r1, scratch ? scratch.get() + id * scratch_floats : nullptr);
        });
  }
}

/// linear() on the path `isa` (tests run every path; linear() takes the process's path).
inline void linear_on(LinearIsa isa, const LinearWeights& w, const float* x, std::int64_t n,
                      float* y) {
  validate(w);
  check_arg(n >= 0, ErrorCode::kInvalidArgument, "n (tokens)", n, "must be >=", 0);
  if (n == 0 || w.rows == 0) return;
  check_arg(y != nullptr, ErrorCode::kInvalidArgument, "y of tokens", n, "is null; rows", w.rows);
  const LinearProduct product{&w, y};
  linear_on(isa, std::span<const LinearProduct>(&product, 1), x, n);
}

/// dequantize_row() on the path `isa`.
inline void dequantize_row_on(LinearIsa isa, GgmlType type, const std::byte* row, std::int64_t cols,
                              float* out) {
  (void)ggml_row_bytes(type, cols);
  if (cols == 0) return;
  check_arg(row != nullptr, ErrorCode::kInvalidArgument, "row of cols", cols, "is", "null");
  check_arg(out != nullptr, ErrorCode::kInvalidArgument, "out of cols", cols, "is", "null");
  linear_kernels(isa).dequantize(type, row, cols, out);
}

}  // namespace detail

/// Decodes one row of `cols` values of `type` at `row` into `out[cols]` as fp32: exactly the
/// weights linear() multiplies (Q4_0: (q - 8) d; Q4_1: q d + m, rounded once; Q8_0: q d; float
/// types: their exact value). Use it for embedding lookups. Throws `Error{kUnsupported}` for an
/// unreadable type, `Error{kInvalidArgument}` for cols that are negative or not a whole number of
/// blocks, or null pointers when cols > 0. O(cols).
inline void dequantize_row(GgmlType type, const std::byte* row, std::int64_t cols, float* out) {
  detail::dequantize_row_on(detail::linear_isa(), type, row, cols, out);
}

/// y[n][rows] = x[n][cols] · Wᵀ: fp32 activations `x` (token t at x + t cols), fp32
/// accumulation, one output row per weight row (token t at y + t rows); `y` must not overlap `x`.
/// n = 1 (decode) streams the weights once, decoding each block in registers; larger n decodes
/// 16-row panels once to fp32 and reuses them across register tiles of tokens.
///
/// Batch-invariant: y[t][r] is the same float whatever n is, whatever the other tokens are, and
/// however many OpenMP threads run (each row's dot product has one fixed order and runs on one
/// thread). The instruction-set path is chosen once per process (AVX-512, AVX2+FMA+F16C or
/// portable, by CPUID; INFERKIT_CPU_ISA=avx512|avx2|baseline forces one); the AVX-512 and AVX2
/// paths give the same floats, the portable one may differ in the last bits.
///
/// Throws what validate() throws, `Error{kInvalidArgument}` for n < 0 or null x / y when they
/// are read or written, and `Error{kInvalidArgument}` / `Error{kUnsupported}` when
/// INFERKIT_CPU_ISA names an unknown path or one this CPU lacks. O(n rows cols) multiply-adds.
inline void linear(const LinearWeights& w, const float* x, std::int64_t n, float* y) {
  detail::linear_on(detail::linear_isa(), w, x, n, y);
}

/// Several products of the same input (a layer's q, k and v projections; gate and up), each as
/// linear(*p.w, x, n, p.y), with one team of threads sharing the 16-row panels of all of them: a
/// decode step wakes one team where it woke one per product. The same bits as the separate
/// calls. Throws `Error{kInvalidArgument}` naming the product for a null weights pointer, a
/// product whose cols differ from the first's, or a null y it would write, before anything is
/// written; otherwise what linear() throws. O(n Σ rows cols).
inline void linear(std::span<const LinearProduct> products, const float* x, std::int64_t n) {
  detail::linear_on(detail::linear_isa(), products, x, n);
}

}  // namespace inferkit
