// SPDX-License-Identifier: Apache-2.0
// White-box tests of the CPU attention tile kernel (cpu/detail/attention_tile.hpp), called
// directly as run_paged_attention calls it: one block of query rows (tokens x GQA group) of one
// KV head attends to a key range [kv_begin, kv_end) of one sequence's shuffled paged K/V. Row
// counts 1/2/4/8 take the register path, others the fp32-scratch path; head dims take the
// compiled (kHeadDim) and the runtime (kHeadDim = 0) paths; every instruction-set path of the
// build that the CPU runs is tested (detail::baseline, avx2, avx512, neon). Outputs and
// natural-log LSEs are compared with the double-precision oracle (reference_attention) on the
// same dequantized K/V, over exactly the range and visibility rules the kernel is given.
//
// The fixture holds NaN in every unwritten slot of a partial last page (and every unused block),
// and the tests also overwrite every token outside [kv_begin, kv_end) with NaN, so any read
// outside the range, past a row's head_dim or into an unwritten slot makes the output NaN.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <inferkit/attention/attention_params.hpp>
#include <inferkit/attention/cpu/detail/attention_tile.hpp>
#include <inferkit/attention/cpu/detail/kv_head_source.hpp>
#include <inferkit/attention/cpu/detail/simd.hpp>
#include <inferkit/attention/reference.hpp>
#include <inferkit/core/float16.hpp>
#include <inferkit/core/rng.hpp>
#include <inferkit/kv/paged_kv_view.hpp>
#include <limits>
#include <string>
#include <tests/support/cpu_paths.hpp>
#include <tests/support/paged_fixture.hpp>
#include <vector>

namespace {

using namespace inferkit;
using detail::AttentionScratch;
using detail::KvHeadSource;
using detail::QueryRowBlock;
using test::PagedKVFixture;

// Tolerances (absolute) against the double reference. The reference reads exactly the values the
// kernel reads (fp16 KV is dequantized exactly to fp32), so fp32 and fp16 KV share one budget:
// fp32 rounding of q * scale and of the dot products (|logit| <~ 5 here), the polynomial exp of
// the AVX-512 policy (<= 2.3e-7 relative, measured) and fp32 accumulation of up to ~200
// probability-weighted values. Outputs are convex combinations of |v| <= 1, so an absolute bound
// is also a relative one. Measured worst cases over the sweep: 1.7e-7 on outputs, 4.8e-7 on the
// LSE (|lse| <~ 10, where one fp32 ulp is ~1e-6); 1e-5 leaves room for other seeds and compilers.
constexpr double kOutTol = 1e-5;
constexpr double kLseTol = 1e-5;

constexpr std::int32_t kKvHeads = 2;
constexpr std::int32_t kHead = 1;  // the KV head under test: not 0, so head offsets matter
constexpr float kSentinel = -7.0f;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
/// The driver's prefetch distance (kPrefetchAhead in paged_attention.hpp).
constexpr std::int32_t kPrefetchAhead = 16;

struct TileCase {
  std::int32_t tokens = 1;  ///< query tokens of the block
  std::int32_t group = 1;   ///< query heads per KV head; rows = tokens * group
  std::int32_t head_dim = 64;
  bool compiled = true;  ///< kHeadDim = head_dim (64, 80, 128), else kHeadDim = 0
  std::int32_t block_size = 16;
  std::int64_t seq_len = 0;
  std::int64_t kv_begin = 0;
  std::int64_t kv_end = 0;
  std::int64_t first_position = 0;  ///< position of query token 0
  AttentionParams params;
  bool mask = false;  ///< a random custom mask [tokens][seq_len]
  /// NaN in K and V of every key in [kv_begin, kv_end) that some row of the block does not see
  /// (causal, window or mask): such a key must not reach those rows.
  bool nan_hidden = false;
  std::string what;

  std::int32_t rows() const { return tokens * group; }
  std::int32_t qo_heads() const { return kKvHeads * group; }
  std::int32_t padded() const { return (head_dim + 15) / 16 * 16; }
};

template <class KV>
struct TileInputs {
  PagedKVFixture<KV> f;
  std::vector<float> q;            ///< [tokens][qo_heads][head_dim]
  std::vector<std::uint8_t> mask;  ///< [tokens][seq_len], empty: none
};

/// Whether query token t of case c sees key `key` (causal/window rules and the custom mask).
bool sees(const TileCase& c, const std::vector<std::uint8_t>& mask, std::int32_t t,
          std::int64_t key) {
  return c.params.visible(c.first_position + t, key) &&
         (mask.empty() || mask[static_cast<std::size_t>(t * c.seq_len + key)] != 0);
}

/// Paged K/V of one sequence (NaN in unwritten slots), with every token outside [kv_begin,
/// kv_end) overwritten by NaN too (and, c.nan_hidden, every key some row does not see), random
/// queries and an optional custom mask.
template <class KV>
TileInputs<KV> make_inputs(const TileCase& c, Rng& rng) {
  TileInputs<KV> in;
  in.f = test::make_paged_kv<KV>(rng, {c.seq_len}, kKvHeads, c.block_size, c.head_dim);
  const PagedKVView<const KV> view = in.f.view();
  const auto fill_nan = [&](std::int64_t pos) {
    const std::int32_t block = in.f.indices[static_cast<std::size_t>(pos / c.block_size)];
    const auto slot = static_cast<std::int32_t>(pos % c.block_size);
    for (std::int32_t h = 0; h < kKvHeads; ++h) {
      const auto off = static_cast<std::size_t>(view.offset(block, h, slot));
      std::fill_n(in.f.k.begin() + static_cast<std::ptrdiff_t>(off), view.token_stride(),
                  test::nan_element<KV>());
      std::fill_n(in.f.v.begin() + static_cast<std::ptrdiff_t>(off), view.token_stride(),
                  test::nan_element<KV>());
      if constexpr (PagedKVFixture<KV>::kPerToken) {  // int8 and int4 have no NaN code
        const auto si = static_cast<std::size_t>(view.token_scale_index(block, h, slot));
        in.f.k_scale[si] = in.f.v_scale[si] = std::numeric_limits<float>::quiet_NaN();
      }
    }
  };
  for (std::int64_t pos = 0; pos < c.seq_len; ++pos) {
    if (pos < c.kv_begin || pos >= c.kv_end) fill_nan(pos);
  }
  in.q = test::random_floats(rng, static_cast<std::size_t>(c.tokens * c.qo_heads() * c.head_dim),
                             -2.0f, 2.0f);
  if (c.mask) {
    in.mask.resize(static_cast<std::size_t>(c.tokens * c.seq_len));
    for (std::uint8_t& m : in.mask) m = rng.below(4) != 0 ? 1 : 0;
  }
  if (c.nan_hidden) {
    for (std::int64_t key = c.kv_begin; key < c.kv_end; ++key) {
      for (std::int32_t t = 0; t < c.tokens; ++t) {
        if (!sees(c, in.mask, t, key)) {
          fill_nan(key);
          break;
        }
      }
    }
  }
  return in;
}

/// The source run_paged_attention builds for KV head `head` of sequence 0.
template <class KV>
KvHeadSource<const KV> head_source(const PagedKVFixture<KV>& f, std::int32_t head) {
  return detail::make_kv_head_source(f.view(), f.indices.data() + f.indptr[0], head);
}

/// Outputs of every query head (only KV head kHead's group is written; the rest keep kSentinel).
struct TileResult {
  std::vector<float> out;  ///< [tokens][qo_heads][head_dim]
  std::vector<float> lse;  ///< [tokens][qo_heads]
};

template <class Kernels, int kHeadDim, class KV>
TileResult run_tile(const TileInputs<KV>& in, const TileCase& c, std::int32_t prefetch,
                    AttentionScratch& s) {
  const std::int64_t q_token_stride = std::int64_t{c.qo_heads()} * c.head_dim;
  const std::int64_t head_offset = std::int64_t{kHead} * c.group * c.head_dim;
  TileResult r;
  r.out.assign(static_cast<std::size_t>(c.tokens * q_token_stride), kSentinel);
  r.lse.assign(static_cast<std::size_t>(c.tokens * c.qo_heads()), kSentinel);
  QueryRowBlock rows;
  rows.num_tokens = c.tokens;
  rows.group = c.group;
  rows.q = in.q.data() + head_offset;
  rows.q_token_stride = q_token_stride;
  rows.first_position = c.first_position;
  if (!in.mask.empty()) {
    rows.mask = in.mask.data();
    rows.mask_stride = c.seq_len;
  }
  rows.out = r.out.data() + head_offset;
  rows.out_token_stride = q_token_stride;
  rows.lse = r.lse.data() + std::int64_t{kHead} * c.group;
  rows.lse_token_stride = c.qo_heads();
  Kernels::template attend_rows<kHeadDim>(rows, head_source(in.f, kHead), c.kv_begin, c.kv_end,
                                          c.head_dim, c.params, prefetch, s);
  return r;
}

/// Runs a case with the kHeadDim the driver would use (c.compiled) or the runtime path.
template <class Kernels, class KV>
TileResult run_case(const TileInputs<KV>& in, const TileCase& c, std::int32_t prefetch,
                    AttentionScratch& s) {
  if (c.compiled) {
    switch (c.head_dim) {
      case 64:
        return run_tile<Kernels, 64>(in, c, prefetch, s);
      case 80:
        return run_tile<Kernels, 80>(in, c, prefetch, s);
      case 128:
        return run_tile<Kernels, 128>(in, c, prefetch, s);
      default:
        FAIL("no compiled kHeadDim for head_dim " << c.head_dim);
    }
  }
  return run_tile<Kernels, 0>(in, c, prefetch, s);
}

/// The project's double-precision oracle (reference_attention) on the block's rows over keys
/// [kv_begin, kv_end). The kernel's positions are absolute (query t at first_position + t), the
/// oracle's relative to its own key range, so the causal/window rules (AttentionParams::visible)
/// and the custom mask are handed to it as one explicit mask. `seen[r]`: row r sees a key.
struct Reference {
  std::vector<double> out;  ///< [rows][head_dim], row r = t * group + g
  std::vector<double> lse;  ///< [rows]
  std::vector<bool> seen;
};

template <class KV>
Reference reference_tile(const TileInputs<KV>& in, const TileCase& c) {
  const std::int32_t dim = c.head_dim;
  const auto n_keys = static_cast<std::int32_t>(c.kv_end - c.kv_begin);
  const auto at = [](std::int64_t i) { return static_cast<std::size_t>(i); };
  std::vector<double> q(at(std::int64_t{c.rows()} * dim));  // [tokens][group][dim]: kHead's group
  for (std::int32_t t = 0; t < c.tokens; ++t) {
    for (std::int32_t g = 0; g < c.group; ++g) {
      for (std::int32_t d = 0; d < dim; ++d) {
        q[at((std::int64_t{t} * c.group + g) * dim + d)] =
            in.q[at((std::int64_t{t} * c.qo_heads() + kHead * c.group + g) * dim + d)];
      }
    }
  }
  std::vector<double> k(at(std::int64_t{n_keys} * dim));  // [n_keys][1][dim], dequantized
  std::vector<double> v(k.size());
  for (std::int32_t j = 0; j < n_keys; ++j) {
    for (std::int32_t d = 0; d < dim; ++d) {
      k[at(std::int64_t{j} * dim + d)] =
          in.f.value(in.f.k, in.f.k_scale, in.f.k_zero, 0, c.kv_begin + j, kHead, d);
      v[at(std::int64_t{j} * dim + d)] =
          in.f.value(in.f.v, in.f.v_scale, in.f.v_zero, 0, c.kv_begin + j, kHead, d);
    }
  }
  std::vector<std::uint8_t> visible(at(std::int64_t{c.tokens} * n_keys));
  for (std::int32_t t = 0; t < c.tokens; ++t) {
    for (std::int32_t j = 0; j < n_keys; ++j) {
      const std::int64_t key = c.kv_begin + j;
      visible[at(std::int64_t{t} * n_keys + j)] = sees(c, in.mask, t, key);
    }
  }
  AttentionShape shape;
  shape.num_q_tokens = c.tokens;
  shape.num_kv_tokens = n_keys;
  shape.num_qo_heads = c.group;
  shape.num_kv_heads = 1;
  shape.head_dim = dim;
  AttentionParams params = c.params;
  params.causal = false;  // carried by `visible`
  params.window_left = -1;
  // The kernel's scale is the float resolved_scale; handing the oracle the same value keeps the
  // comparison about the kernel, not about 1/sqrt(d) rounding.
  params.sm_scale = c.params.resolved_scale(dim);
  Reference ref;
  ref.out.resize(q.size());
  ref.lse.resize(at(c.rows()));
  reference_attention<double>(q, k, v, shape, params, ref.out, ref.lse, visible);
  for (const double l : ref.lse) ref.seen.push_back(l != -std::numeric_limits<double>::infinity());
  return ref;
}

std::string describe(const TileCase& c) {
  std::string s = c.what + ": tokens " + std::to_string(c.tokens) + " group " +
                  std::to_string(c.group) + " head_dim " + std::to_string(c.head_dim) +
                  (c.compiled ? " (compiled)" : " (runtime)") + " block " +
                  std::to_string(c.block_size) + " seq_len " + std::to_string(c.seq_len) + " kv [" +
                  std::to_string(c.kv_begin) + ", " + std::to_string(c.kv_end) +
                  ") first_position " + std::to_string(c.first_position);
  return s;
}

/// Compares a result with the reference: the block's rows within tolerance (rows that see no
/// key: out exactly 0, lse -inf), every other query head untouched.
template <class KV>
void check_against_reference(const TileInputs<KV>& in, const TileCase& c, const TileResult& got,
                             double& worst_out, double& worst_lse) {
  const Reference ref = reference_tile(in, c);
  const std::int32_t dim = c.head_dim;
  for (std::int32_t t = 0; t < c.tokens; ++t) {
    for (std::int32_t h = 0; h < c.qo_heads(); ++h) {
      const float* out = &got.out[static_cast<std::size_t>((t * c.qo_heads() + h) * dim)];
      const float lse = got.lse[static_cast<std::size_t>(t * c.qo_heads() + h)];
      if (h / c.group != kHead) {  // another KV head's query heads: never written
        CHECK(std::all_of(out, out + dim, [](float x) { return x == kSentinel; }));
        CHECK(lse == kSentinel);
        continue;
      }
      const auto r = static_cast<std::size_t>(t * c.group + h % c.group);
      INFO("token " << t << " group member " << h % c.group);
      if (!ref.seen[r]) {
        CHECK(std::all_of(out, out + dim, [](float x) { return x == 0.0f; }));
        CHECK(lse == kNegInf);
        continue;
      }
      if (std::isnan(ref.lse[r])) {  // the row sees a NaN key (c.nan_hidden): so must the kernel
        CHECK(std::isnan(lse));
        continue;
      }
      double err = 0.0;
      for (std::int32_t d = 0; d < dim; ++d) {
        const double diff = std::abs(
            out[d] - ref.out[r * static_cast<std::size_t>(dim) + static_cast<std::size_t>(d)]);
        err = std::isnan(diff) ? std::numeric_limits<double>::infinity() : std::max(err, diff);
      }
      const double lse_err =
          std::isnan(lse) ? std::numeric_limits<double>::infinity() : std::abs(lse - ref.lse[r]);
      worst_out = std::max(worst_out, err);
      worst_lse = std::max(worst_lse, lse_err);
      CHECK(err <= kOutTol);
      CHECK(lse_err <= kLseTol);
    }
  }
}

/// A sequence length in [lo, lo + span) whose last page is partial (block_size > 1).
std::int64_t partial_page_len(Rng& rng, std::int64_t lo, std::uint32_t span,
                              std::int32_t block_size) {
  std::int64_t len = lo + rng.below(span);
  if (block_size > 1 && len % block_size == 0) ++len;
  return len;
}

/// The sweep: row blocks of 1..9 rows (tokens x group mixed), head dims 64/128 (compiled),
/// 80 (compiled and runtime), 72 (runtime), and per combination four key ranges: the whole
/// sequence (causal decode/append: the block's last token is the last key), a middle split
/// [kv_begin, kv_end) with varied masking, a single key, and an empty range.
std::vector<TileCase> sweep_cases(Rng& rng) {
  struct RowShape {
    std::int32_t tokens, group;
  };
  // 3, 5 and 6 rows run on the direct path as 4 and 8 (direct_path_rows): {1, 3} is a GQA-3
  // decode block (SmolLM2's), {3, 1} and {2, 3} multi-token ones whose padding rows must neither
  // write nor read a mask row past the block.
  const RowShape shapes[] = {{1, 1}, {1, 2}, {2, 1}, {3, 1}, {1, 3}, {1, 4},
                             {2, 2}, {5, 1}, {2, 3}, {2, 4}, {1, 8}, {3, 3}};
  struct Dim {
    std::int32_t head_dim;
    bool compiled;
  };
  const Dim dims[] = {{64, true}, {128, true}, {80, true}, {80, false}, {72, false}};
  const std::int32_t block_sizes[] = {16, 3, 32, 1, 7};
  std::vector<TileCase> cases;
  int combo = 0;
  for (const RowShape& shape : shapes) {
    for (const Dim& dim : dims) {
      ++combo;
      TileCase base;
      base.tokens = shape.tokens;
      base.group = shape.group;
      base.head_dim = dim.head_dim;
      base.compiled = dim.compiled;
      base.block_size = block_sizes[combo % 5];
      base.seq_len = partial_page_len(rng, 40, 150, base.block_size);
      base.first_position = base.seq_len - base.tokens;  // the new tokens are the last ones

      TileCase full = base;  // causal: token t sees keys [0, first_position + t]
      full.what = "full range";
      full.kv_end = full.seq_len;
      cases.push_back(full);

      TileCase mid = base;  // a split-KV chunk with unaligned ends
      mid.kv_begin = 1 + rng.below(static_cast<std::uint32_t>(base.seq_len / 2));
      mid.kv_end =
          mid.kv_begin + 1 + rng.below(static_cast<std::uint32_t>(base.seq_len - 1 - mid.kv_begin));
      switch (combo % 4) {
        case 0:
          mid.what = "middle split, causal";
          break;
        case 1:
          mid.what = "middle split, soft cap and explicit scale";
          mid.params.logit_soft_cap = 2.5f;
          mid.params.sm_scale = 0.3f;
          break;
        case 2:  // the window's left edge falls inside the chunk, one key later per token
          mid.what = "middle split, sliding window";
          mid.params.window_left =
              static_cast<std::int32_t>(base.first_position - (mid.kv_begin + mid.kv_end) / 2);
          break;
        default:
          mid.what = "middle split, non-causal with a custom mask";
          mid.params.causal = false;
          mid.mask = true;
          break;
      }
      cases.push_back(mid);

      TileCase one = base;
      one.what = "single key";
      // Odd combos: the last key (in the partial last page), which only the block's last token
      // sees under causal masking; even combos: a random key every row sees.
      one.kv_begin = combo % 2 == 1 ? base.seq_len - 1
                                    : rng.below(static_cast<std::uint32_t>(base.first_position));
      one.kv_end = one.kv_begin + 1;
      cases.push_back(one);

      TileCase none = base;
      none.what = "empty range";
      none.kv_begin = none.kv_end = rng.below(static_cast<std::uint32_t>(base.seq_len + 1));
      cases.push_back(none);
    }
  }
  return cases;
}

template <class Kernels, class KV>
void check_sweep_against_reference(std::uint64_t seed, bool nan_hidden = false) {
  Rng rng(seed);
  double worst_out = 0.0;
  double worst_lse = 0.0;
  for (TileCase c : sweep_cases(rng)) {
    c.nan_hidden = nan_hidden;
    const TileInputs<KV> in = make_inputs<KV>(c, rng);
    AttentionScratch s;
    s.reserve(c.rows(), c.padded());
    INFO(test::kv_type_name<KV>() << " " << describe(c));
    const TileResult got = run_case<Kernels>(in, c, kPrefetchAhead, s);
    check_against_reference(in, c, got, worst_out, worst_lse);
  }
  INFO(test::kv_type_name<KV>() << " worst out error " << worst_out << " worst lse error "
                                << worst_lse);
  CHECK(worst_out <= kOutTol);
}

template <class Kernels, class KV>
void check_sweep_prefetch_invariant(std::uint64_t seed) {
  Rng rng(seed);
  for (const TileCase& c : sweep_cases(rng)) {
    const TileInputs<KV> in = make_inputs<KV>(c, rng);
    // One scratch for both runs, as a thread reuses it across work items: what the first run
    // leaves in it must not matter either.
    AttentionScratch s;
    s.reserve(c.rows(), c.padded());
    INFO(test::kv_type_name<KV>() << " " << describe(c));
    const TileResult a = run_case<Kernels>(in, c, 0, s);
    const TileResult b = run_case<Kernels>(in, c, 16, s);
    const TileResult far = run_case<Kernels>(in, c, 40, s);  // not a tile multiple
    CHECK(a.out == b.out);
    CHECK(a.lse == b.lse);
    CHECK(a.out == far.out);
    CHECK(a.lse == far.lse);
  }
}

}  // namespace

TEMPLATE_TEST_CASE("attend_rows: matches a double softmax for 1 to 9 rows, head dims, KV ranges",
                   "[attention]", INFERKIT_TEST_CPU_PATHS) {
  if (!test::path_runs_here<TestType>()) return;
  check_sweep_against_reference<TestType, float>(301);
  check_sweep_against_reference<TestType, float16>(302);
  check_sweep_against_reference<TestType, std::uint8_t>(305);  // packed int4: zero points
}

TEMPLATE_TEST_CASE("attend_rows: keys a row does not see never reach it, even holding NaN",
                   "[attention]", INFERKIT_TEST_CPU_PATHS) {
  // Causal diagonals, window edges and custom masks hide keys inside the range from some rows
  // (all rows of a decode block, some of a multi-token one): a hidden NaN V must not come
  // through as 0 x NaN; rows that do see a NaN key are NaN, as in the reference.
  if (!test::path_runs_here<TestType>()) return;
  check_sweep_against_reference<TestType, float>(303, true);
  check_sweep_against_reference<TestType, float16>(304, true);
  check_sweep_against_reference<TestType, std::uint8_t>(306, true);
}

TEMPLATE_TEST_CASE("attend_rows: prefetch distance leaves every output bit unchanged",
                   "[attention]", INFERKIT_TEST_CPU_PATHS) {
  if (!test::path_runs_here<TestType>()) return;
  check_sweep_prefetch_invariant<TestType, float>(401);
  check_sweep_prefetch_invariant<TestType, float16>(402);
  check_sweep_prefetch_invariant<TestType, std::uint8_t>(403);
}

TEMPLATE_TEST_CASE("attend_rows: rows that see no key get out 0 and lse -inf", "[attention]",
                   INFERKIT_TEST_CPU_PATHS) {
  if (!test::path_runs_here<TestType>()) return;
  Rng rng(501);
  for (const std::int32_t rows : {1, 3, 4, 8, 9}) {  // register and scratch paths
    TileCase c;
    c.tokens = rows;
    c.group = 1;
    c.head_dim = 64;
    c.seq_len = 100;
    // A split-KV chunk after the first queries (as for the early tokens of an append block):
    // causal hides [60, 75) from tokens at positions < 60, so tokens 0..4 see nothing at all.
    c.first_position = 55;
    c.kv_begin = 60;
    c.kv_end = 75;
    c.what = "chunk after the query";
    const TileInputs<float16> in = make_inputs<float16>(c, rng);
    AttentionScratch s;
    s.reserve(c.rows(), c.padded());
    INFO(describe(c));
    const TileResult got = run_case<TestType>(in, c, kPrefetchAhead, s);
    double worst_out = 0.0;
    double worst_lse = 0.0;
    check_against_reference(in, c, got, worst_out, worst_lse);
    const std::int64_t hq = std::int64_t{kHead} * c.group;
    for (std::int32_t t = 0; t < std::min(rows, 5); ++t) {  // spelled out for the blind rows
      CHECK(got.lse[static_cast<std::size_t>(t * c.qo_heads() + hq)] == kNegInf);
    }
    // An empty range: every row, even after the scratch held a previous result.
    c.kv_begin = c.kv_end = 42;
    const TileResult empty = run_case<TestType>(in, c, kPrefetchAhead, s);
    for (std::int32_t t = 0; t < c.tokens; ++t) {
      CHECK(empty.lse[static_cast<std::size_t>(t * c.qo_heads() + hq)] == kNegInf);
      const float* out = &empty.out[static_cast<std::size_t>((t * c.qo_heads() + hq) * 64)];
      CHECK(std::all_of(out, out + 64, [](float x) { return x == 0.0f; }));
    }
  }
}

TEMPLATE_TEST_CASE("attend_rows: unwritten NaN slots of a partial last page never reach decode",
                   "[attention]", INFERKIT_TEST_CPU_PATHS) {
  if (!test::path_runs_here<TestType>()) return;
  Rng rng(601);
  for (const std::int32_t group : {1, 4, 5}) {
    for (const std::int32_t head_dim : {72, 128}) {  // 72: the row tail is a partial chunk
      TileCase c;
      c.group = group;
      c.head_dim = head_dim;
      c.compiled = head_dim == 128;
      c.block_size = 16;
      c.seq_len = 37;  // last page: 5 of 16 slots written
      c.kv_end = c.seq_len;
      c.first_position = c.seq_len - 1;  // causal decode: the query is the last token
      c.what = "decode at the last token";
      const TileInputs<float> in = make_inputs<float>(c, rng);
      const PagedKVView<const float> view = in.f.view();
      const std::int32_t last_block = in.f.indices.back();
      REQUIRE(in.f.indices.size() == 3u);
      for (std::int32_t slot = 5; slot < 16; ++slot) {
        REQUIRE(std::isnan(in.f.k[static_cast<std::size_t>(view.offset(last_block, kHead, slot))]));
        REQUIRE(std::isnan(in.f.v[static_cast<std::size_t>(view.offset(last_block, kHead, slot))]));
      }
      AttentionScratch s;
      s.reserve(c.rows(), c.padded());
      INFO(describe(c));
      const TileResult got = run_case<TestType>(in, c, kPrefetchAhead, s);
      for (std::int32_t g = 0; g < group; ++g) {
        const float* out = &got.out[static_cast<std::size_t>((kHead * group + g) * head_dim)];
        CHECK(std::all_of(out, out + head_dim, [](float x) { return std::isfinite(x); }));
        CHECK(std::isfinite(got.lse[static_cast<std::size_t>(kHead * group + g)]));
      }
      double worst_out = 0.0;
      double worst_lse = 0.0;
      check_against_reference(in, c, got, worst_out, worst_lse);
    }
  }
}

TEST_CASE("direct_path_rows: register tiles of 1, 2, 4, 8 rows; more rows take the scratch path",
          "[attention]") {
  const std::int32_t expected[] = {0, 1, 2, 4, 4, 8, 8, 8, 8, 0, 0};
  for (std::int32_t rows = 0; rows <= 10; ++rows) {
    INFO("rows " << rows);
    CHECK(detail::direct_path_rows(rows) == expected[rows]);
  }
}

TEST_CASE("AttentionScratch: every row of every buffer starts on a cache line", "[attention]") {
  // The kernels load and store whole vectors of padded rows (multiples of 16 floats): each row
  // sits in whole 64-byte lines only if the buffers are 64-byte aligned.
  const auto on_line = [](const float* p) { return reinterpret_cast<std::uintptr_t>(p) % 64 == 0; };
  for (const std::int32_t rows : {1, 3, 8, 33}) {
    for (const std::int32_t head_dim : {1, 64, 72, 128, 256}) {
      AttentionScratch s;
      const std::int32_t padded = detail::padded_head_dim(head_dim);
      s.reserve(rows, padded);
      INFO("rows " << rows << ", head_dim " << head_dim);
      CHECK(padded % 16 == 0);
      for (const auto* buffer : {&s.q, &s.o, &s.p, &s.acc, &s.k_tile, &s.v_tile, &s.row_sum}) {
        CHECK(on_line(buffer->data()));
      }
      // Room for the rows the block is computed as: 3 rows run on the direct path as 4.
      const std::int32_t computed = std::max(rows, detail::direct_path_rows(rows));
      CHECK(computed == (rows == 3 ? 4 : rows));
      CHECK(s.q.size() == static_cast<std::size_t>(computed) * static_cast<std::size_t>(padded));
    }
  }
}
