// SPDX-License-Identifier: Apache-2.0
// Tests of paged_decode (CPU) against the double-precision reference on randomized paged KV:
// every KV dtype, head_dim 64/128/256 and odd sizes, GQA groups 1/4/7/8, page sizes 1/8/16/32,
// shuffled page tables, NaN in unwritten slots, mixed short/long batches, split-KV determinism,
// and q read in place from a fused QKV projection (q strides) on every instruction-set path.
//
// Tolerances: the reference is fed exactly the dequantized values the kernel reads (to_float(q)
// * scale, in float), so the dtype only changes the data, not the error budget: what remains is
// fp32 accumulation, a polynomial exp (~2e-7 relative) and the float scale. We allow 2e-5 on
// outputs (|v| <= ~1.3 for every dtype here) and 2e-5 on the natural-log LSE.
#include <algorithm>
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <inferkit/attention/attention.hpp>
#include <inferkit/core/bfloat16.hpp>
#include <inferkit/core/float16.hpp>
#include <inferkit/core/float8.hpp>
#include <inferkit/core/rng.hpp>
#include <limits>
#include <span>
#include <string>
#include <tests/support/attention_kernels.hpp>
#include <tests/support/cpu_paths.hpp>
#include <tests/support/error_code.hpp>
#include <tests/support/fused_qkv.hpp>
#include <tests/support/paged_fixture.hpp>
#include <utility>
#include <vector>

#if INFERKIT_HAS_OPENMP
#  include <omp.h>
#endif

namespace {

using namespace inferkit;
using inferkit::test::make_paged_kv;
using inferkit::test::max_abs_diff;
using inferkit::test::PagedKVFixture;

constexpr double kOutTol = 2e-5;
constexpr double kLseTol = 2e-5;

#ifdef INFERKIT_TEST_SANITIZED
constexpr std::int64_t kLongSeq = 1200;
#else
constexpr std::int64_t kLongSeq = 5000;
#endif

struct DecodeCase {
  std::int32_t head_dim;
  std::int32_t num_kv_heads;
  std::int32_t group;
  std::int32_t block_size;
  std::int32_t q_per_seq;
  std::vector<std::int64_t> seq_lens;
  AttentionParams params;
};

struct DecodeResult {
  std::vector<float> out, lse;
};

template <class KV>
DecodeResult run_decode(const PagedKVFixture<KV>& f, const std::vector<float>& q,
                        std::int32_t qo_heads, std::int32_t q_per_seq,
                        const AttentionParams& params, std::int32_t split = kDefaultKvSplitTokens) {
  DecodeResult r;
  const auto rows = static_cast<std::size_t>(f.num_seqs() * q_per_seq * qo_heads);
  r.out.assign(rows * static_cast<std::size_t>(f.head_dim), -7.0f);
  r.lse.assign(rows, -7.0f);
  PagedDecodeArgs<KV> args;
  args.q = q.data();
  args.kv = f.view();
  args.pages = f.table();
  args.num_qo_heads = qo_heads;
  args.head_dim = f.head_dim;
  args.q_per_seq = q_per_seq;
  args.out = r.out.data();
  args.lse = r.lse.data();
  args.params = params;
  args.kv_split_tokens = split;
  paged_decode(cpu{}, args);
  return r;
}

/// Runs one case and checks every sequence against the reference.
template <class KV>
void check_decode_case(const DecodeCase& c, std::uint64_t seed) {
  Rng rng(seed);
  const auto f = make_paged_kv<KV>(rng, c.seq_lens, c.num_kv_heads, c.block_size, c.head_dim);
  const std::int32_t qo_heads = c.num_kv_heads * c.group;
  const std::size_t row_elems = static_cast<std::size_t>(c.q_per_seq * qo_heads * c.head_dim);
  const auto q = inferkit::test::random_floats(rng, row_elems * c.seq_lens.size(), -2.0f, 2.0f);
  const DecodeResult got = run_decode(f, q, qo_heads, c.q_per_seq, c.params);
  for (std::int32_t s = 0; s < f.num_seqs(); ++s) {
    INFO("dtype " << test::kv_type_name<KV>() << " head_dim " << c.head_dim << " group " << c.group
                  << " block " << c.block_size << " q_per_seq " << c.q_per_seq << " seq " << s
                  << " len " << c.seq_lens[static_cast<std::size_t>(s)]);
    std::vector<double> want_out, want_lse;
    const std::span<const float> qs(q.data() + static_cast<std::size_t>(s) * row_elems, row_elems);
    test::reference_for_sequence(f, s, qs, c.q_per_seq, qo_heads, c.params, want_out, want_lse);
    const std::size_t lse_n = static_cast<std::size_t>(c.q_per_seq * qo_heads);
    CHECK(max_abs_diff(std::span<const float>(got.out).subspan(
                           static_cast<std::size_t>(s) * row_elems, row_elems),
                       want_out) <= kOutTol);
    CHECK(max_abs_diff(
              std::span<const float>(got.lse).subspan(static_cast<std::size_t>(s) * lse_n, lse_n),
              want_lse) <= kLseTol);
  }
}

AttentionParams default_params() { return AttentionParams{}; }

}  // namespace

TEMPLATE_TEST_CASE("paged_decode: matches the double reference for every KV dtype",
                   "[attention][paged_decode]", float, float16, bfloat16, float8_e4m3, float8_e5m2,
                   std::int8_t, std::uint8_t) {
  // Mixed batches: 1 token, exactly one full page, exactly full pages, odd tails, long.
  const std::vector<DecodeCase> cases = {
      {128, 2, 4, 16, 1, {1, 16, 64, 37, 300}, default_params()},
      {64, 1, 8, 8, 1, {8, 1, 129, 40}, default_params()},
      {256, 1, 1, 32, 1, {33, 96}, default_params()},
      {80, 2, 7, 1, 1, {5, 23}, default_params()},
  };
  std::uint64_t seed = 100;
  for (const DecodeCase& c : cases) check_decode_case<TestType>(c, seed++);
}

TEST_CASE("paged_decode: covers head dims GQA groups and page sizes on fp16",
          "[attention][paged_decode]") {
  AttentionParams window;
  window.window_left = 50;
  AttentionParams capped;
  capped.logit_soft_cap = 2.5f;
  capped.sm_scale = 0.3f;
  AttentionParams noncausal;
  noncausal.causal = false;
  const std::vector<DecodeCase> cases = {
      {64, 4, 1, 16, 1, {17, 200, 1, 48}, default_params()},
      {96, 1, 4, 32, 1, {31, 32, 65}, default_params()},
      {72, 2, 4, 8, 1, {9, 100}, default_params()},  // odd head_dim: generic path, tails
      {128, 2, 8, 16, 1, {kLongSeq, 3, 700}, default_params()},
      {128, 1, 7, 16, 3, {40, 3, 129}, default_params()},  // speculative: 3 queries / seq
      {64, 2, 4, 16, 2, {300, 2, 65}, window},             // sliding window
      {128, 1, 4, 8, 1, {250, 1}, capped},                 // soft cap and explicit scale
      {64, 1, 4, 16, 4, {37, 1, 0}, noncausal},            // non-causal, one empty sequence
      {256, 2, 4, 16, 1, {kLongSeq / 2 + 3}, window},
  };
  std::uint64_t seed = 500;
  for (const DecodeCase& c : cases) check_decode_case<float16>(c, seed++);
}

TEST_CASE("paged_decode: unwritten slots holding NaN never reach the output",
          "[attention][paged_decode]") {
  // The fixture fills every unwritten slot and unused block with NaN; check explicitly that
  // the last page is partial and that outputs are finite.
  Rng rng(7);
  const std::vector<std::int64_t> lens = {17, 5, 31};
  const auto f = make_paged_kv<float16>(rng, lens, 2, 16, 64);
  REQUIRE(std::isnan(to_float(f.k[static_cast<std::size_t>(
      f.view().offset(f.indices[1], 0, 1))])));  // slot 1 of seq 0's last page
  const auto q = test::random_floats(rng, 3 * 8 * 64, -2.0f, 2.0f);
  for (std::int32_t split : {0, 16}) {
    const DecodeResult r = run_decode(f, q, 8, 1, default_params(), split);
    for (float x : r.out) REQUIRE(std::isfinite(x));
    for (float x : r.lse) REQUIRE(std::isfinite(x));
  }
  auto f8 = make_paged_kv<std::int8_t>(rng, lens, 2, 16, 64);  // int8: NaN scales
  const DecodeResult r8 = run_decode(f8, q, 8, 1, default_params());
  for (float x : r8.out) REQUIRE(std::isfinite(x));
}

TEST_CASE("paged_decode: e4m3 tiles without NaN codes give the bits of the checked loads",
          "[attention][paged_decode]") {
  // The SIMD paths load NaN-free e4m3 tiles without the NaN fix-up, as value / 256 with the 256
  // folded into the scales, which must not change a bit. Two queries per sequence (positions 68
  // and 69): a NaN code in key 69 sends its tile through the checked loads, while query 68
  // cannot see that key (causal), so its rows must be bit for bit those of the clean run, where
  // every tile takes the raw loads. Groups 1, 2 and 4 give 2, 4 and 8 rows (register path);
  // head_dim 72 has a partial last chunk and row tails in the NaN scan.
  struct Shape {
    std::int32_t head_dim, group;
  };
  const Shape shapes[] = {{128, 1}, {128, 2}, {128, 4}, {72, 4}, {64, 2}};
  std::uint64_t seed = 950;
  for (const Shape& sh : shapes) {
    for (const std::int32_t d : {0, sh.head_dim - 1}) {
      Rng rng(seed++);
      auto f = make_paged_kv<float8_e4m3>(rng, {70, 40}, 2, 16, sh.head_dim);
      const std::int32_t qo_heads = 2 * sh.group;
      constexpr std::int32_t kQueries = 2;
      const auto rows = static_cast<std::size_t>(kQueries * qo_heads);
      const auto q =
          test::random_floats(rng, rows * 2 * static_cast<std::size_t>(sh.head_dim), -2.0f, 2.0f);
      const DecodeResult clean = run_decode(f, q, qo_heads, kQueries, default_params());
      const auto block = f.indices[static_cast<std::size_t>(69 / f.block_size)];
      const auto off = f.view().offset(block, 1, 69 % f.block_size) + d;
      f.k[static_cast<std::size_t>(off)] = float8_e4m3::from_bits(0x7F);
      const DecodeResult poisoned = run_decode(f, q, qo_heads, kQueries, default_params());
      INFO("head_dim " << sh.head_dim << " group " << sh.group << " dim " << d);
      const auto per_query = static_cast<std::size_t>(qo_heads);
      const auto hd = static_cast<std::size_t>(sh.head_dim);
      std::size_t nan_rows = 0;
      for (std::size_t r = 0; r < 2 * rows; ++r) {
        const bool sees_nan = r / per_query == 1 && (r % per_query) / sh.group == 1;
        nan_rows += std::isnan(poisoned.lse[r]) ? 1 : 0;
        if (sees_nan) continue;  // query 69, KV head 1: NaN, as the NaN test checks
        INFO("row " << r);
        REQUIRE(std::bit_cast<std::uint32_t>(poisoned.lse[r]) ==
                std::bit_cast<std::uint32_t>(clean.lse[r]));
        for (std::size_t i = r * hd; i < (r + 1) * hd; ++i) {
          REQUIRE(std::bit_cast<std::uint32_t>(poisoned.out[i]) ==
                  std::bit_cast<std::uint32_t>(clean.out[i]));
        }
      }
      CHECK(nan_rows == static_cast<std::size_t>(sh.group));
    }
  }
}

TEST_CASE("paged_decode: an e4m3 NaN code in a visible key or value reaches the output",
          "[attention][paged_decode]") {
  // A NaN code (0x7F or 0xFF) must give exactly the NaNs of the reference: a NaN key makes its
  // rows all NaN (score, LSE, every output), a NaN value only that output element.
  // Group 4 and 8 take the register path, 3 queries x 4 the fp32-scratch path; head_dim 72 the
  // runtime path with a partial last chunk; the code sits at the first or last dim, at a key
  // every query row sees (3 queries: positions 67-69). (A NaN value at a key a row cannot see
  // still reaches it, as 0 * NaN: the kernels multiply whole tiles.)
  struct Poison {
    bool in_v;
    std::int64_t pos;
    std::int32_t head;
    bool last_dim;
    std::uint8_t code;
  };
  const Poison poisons[] = {{false, 40, 1, false, 0x7F},
                            {true, 5, 0, true, 0xFF},
                            {true, 66, 1, false, 0x7F},
                            {false, 17, 0, true, 0xFF}};
  struct Shape {
    std::int32_t head_dim, group, q_per_seq;
  };
  const Shape shapes[] = {{128, 4, 1}, {128, 8, 1}, {72, 4, 1}, {128, 4, 3}};
  std::uint64_t seed = 900;
  for (const Shape& sh : shapes) {
    for (const Poison& p : poisons) {
      Rng rng(seed++);
      auto f = make_paged_kv<float8_e4m3>(rng, {70, 33}, 2, 16, sh.head_dim);
      const std::int32_t d = p.last_dim ? sh.head_dim - 1 : 0;
      const auto block = f.indices[static_cast<std::size_t>(p.pos / f.block_size)];
      const auto slot = static_cast<std::int32_t>(p.pos % f.block_size);
      const auto off = f.view().offset(block, p.head, slot) + d;
      (p.in_v ? f.v : f.k)[static_cast<std::size_t>(off)] = float8_e4m3::from_bits(p.code);
      const std::int32_t qo_heads = 2 * sh.group;
      const auto row_elems = static_cast<std::size_t>(sh.q_per_seq * qo_heads * sh.head_dim);
      const auto q = test::random_floats(rng, row_elems * 2, -2.0f, 2.0f);
      const DecodeResult got = run_decode(f, q, qo_heads, sh.q_per_seq, default_params());
      INFO("head_dim " << sh.head_dim << " group " << sh.group << " q_per_seq " << sh.q_per_seq
                       << (p.in_v ? " V" : " K") << " NaN at position " << p.pos << " head "
                       << p.head << " dim " << d);
      std::vector<double> want_out, want_lse;
      test::reference_for_sequence(f, 0, std::span<const float>(q.data(), row_elems), sh.q_per_seq,
                                   qo_heads, default_params(), want_out, want_lse);
      std::size_t nans = 0;
      double worst = 0.0;
      for (std::size_t i = 0; i < row_elems; ++i) {
        REQUIRE(std::isnan(got.out[i]) == std::isnan(want_out[i]));
        if (std::isnan(want_out[i])) {
          ++nans;
        } else {
          worst = std::max(worst, std::abs(got.out[i] - want_out[i]));
        }
      }
      for (std::size_t i = 0; i < want_lse.size(); ++i) {
        REQUIRE(std::isnan(got.lse[i]) == std::isnan(want_lse[i]));
      }
      CHECK(worst <= kOutTol);
      // A NaN key poisons its KV head's whole group; a NaN value one dim of each of its rows.
      const auto rows = static_cast<std::size_t>(sh.q_per_seq * sh.group);
      CHECK(nans == (p.in_v ? rows : rows * static_cast<std::size_t>(sh.head_dim)));
      // The other sequence's pages hold no NaN code: its outputs stay finite.
      for (std::size_t i = row_elems; i < 2 * row_elems; ++i) REQUIRE(std::isfinite(got.out[i]));
    }
  }
}

TEST_CASE("paged_decode: results are identical for any thread count and any batch",
          "[attention][paged_decode]") {
  Rng rng(11);
  const std::vector<std::int64_t> lens = {3000, 17, 900};
  const auto f = make_paged_kv<bfloat16>(rng, lens, 2, 16, 128);
  const auto q = test::random_floats(rng, 3 * 8 * 128, -2.0f, 2.0f);
  const DecodeResult all = run_decode(f, q, 8, 1, default_params(), 512);
#if INFERKIT_HAS_OPENMP
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const DecodeResult serial = run_decode(f, q, 8, 1, default_params(), 512);
  omp_set_num_threads(threads);
  CHECK(serial.out == all.out);
  CHECK(serial.lse == all.lse);
#endif
  // Sequence 0 alone (same pages, a one-sequence table) gives the same bits.
  auto alone = f;
  alone.seq_lens = {lens[0]};
  alone.indptr = {0, f.indptr[1]};
  alone.last_page_len = {f.last_page_len[0]};
  const DecodeResult one = run_decode(alone, q, 8, 1, default_params(), 512);
  CHECK(std::vector<float>(all.out.begin(), all.out.begin() + 8 * 128) == one.out);
  // Splitting changes only rounding.
  const DecodeResult unsplit = run_decode(f, q, 8, 1, default_params(), 0);
  std::vector<double> ref(unsplit.out.begin(), unsplit.out.end());
  CHECK(max_abs_diff(all.out, ref) <= kOutTol);
}

TEST_CASE("paged_decode: a begin/end page table with gaps gives the same bits as CSR",
          "[attention][paged_decode]") {
  Rng rng(12);
  const std::vector<std::int64_t> lens = {700, 1, 16, 33, 2100};
  const auto f = make_paged_kv<float16>(rng, lens, 2, 16, 64);
  const auto q = test::random_floats(rng, lens.size() * 8 * 64, -2.0f, 2.0f);
  const DecodeResult csr = run_decode(f, q, 8, 1, default_params(), 512);
  const test::GappedPageTable g = test::make_gapped_table(f);
  auto gapped = [&](std::int32_t first, std::int32_t count) {
    const auto row = static_cast<std::size_t>(8 * 64);
    std::vector<float> out(static_cast<std::size_t>(count) * row, -7.0f);
    PagedDecodeArgs<float16> args;
    args.q = q.data() + static_cast<std::size_t>(first) * row;
    args.kv = f.view();
    args.pages = g.view(first, count);
    args.num_qo_heads = 8;
    args.head_dim = 64;
    args.out = out.data();
    args.kv_split_tokens = 512;
    paged_decode(cpu{}, args);
    return out;
  };
  CHECK(gapped(0, 5) == csr.out);
  // A sub-range of sequences is a view of its own (the decode part of a scheduler's step).
  const std::vector<float> tail = gapped(2, 3);
  CHECK(std::vector<float>(csr.out.begin() + 2 * 8 * 64, csr.out.end()) == tail);
}

TEST_CASE("paged_decode: the portable path matches the reference", "[attention][paged_decode]") {
  // Group 4 takes the direct (register) path, group 7 the fp32-scratch path.
  for (const std::int32_t group : {4, 7}) {
    Rng rng(21 + static_cast<std::uint64_t>(group));
    const std::vector<std::int64_t> lens = {70, 1, 33};
    const auto f = make_paged_kv<float8_e4m3>(rng, lens, 2, 8, 72);
    const std::int32_t qo = 2 * group;
    const auto row = static_cast<std::size_t>(qo * 72);
    const auto q = test::random_floats(rng, 3 * row, -2.0f, 2.0f);
    std::vector<float> out(3 * row), lse(3 * static_cast<std::size_t>(qo));
    detail::PagedAttentionProblem<float8_e4m3> pb;
    pb.q = q.data();
    pb.q_per_seq = 1;
    pb.kv = f.view();
    pb.pages = f.table();
    pb.num_qo_heads = qo;
    pb.head_dim = 72;
    pb.out = out.data();
    pb.lse = lse.data();
    pb.kv_split_tokens = 32;
    detail::dispatch_paged_attention<detail::baseline::IsaKernels>(pb);
    for (std::int32_t s = 0; s < 3; ++s) {
      INFO("group " << group << " seq " << s);
      const auto si = static_cast<std::size_t>(s);
      std::vector<double> want_out, want_lse;
      test::reference_for_sequence(f, s, std::span<const float>(q).subspan(si * row, row), 1, qo,
                                   AttentionParams{}, want_out, want_lse);
      CHECK(max_abs_diff(std::span<const float>(out).subspan(si * row, row), want_out) <= kOutTol);
      CHECK(max_abs_diff(std::span<const float>(lse).subspan(si * static_cast<std::size_t>(qo),
                                                             static_cast<std::size_t>(qo)),
                         want_lse) <= kLseTol);
    }
  }
}

TEMPLATE_TEST_CASE("paged_decode: q read in place from a fused QKV buffer gives the packed bits",
                   "[attention][paged_decode]", INFERKIT_TEST_CPU_PATHS) {
  // The engine's layout: one projection [tokens][(Hq + 2 Hkv) * D], q its first Hq heads. Read
  // through q_row_stride (and, second, with a gap between heads), every path must give the bits
  // of the packed copy, and the strided reference must agree. Groups 1 and 4, head_dim 64 and
  // 128, one and two queries per sequence, a long sequence split into merged chunks.
  using Kernels = TestType;
  if (!test::path_runs_here<Kernels>()) return;
  std::uint64_t seed = 1300;
  for (const std::int32_t head_dim : {64, 128}) {
    for (const std::int32_t group : {1, 4}) {
      for (const std::int32_t q_per_seq : {1, 2}) {
        for (const std::int64_t head_gap : {std::int64_t{0}, std::int64_t{16}}) {
          Rng rng(seed++);
          constexpr std::int32_t kKvHeads = 2;
          const std::vector<std::int64_t> lens = {1 + (q_per_seq - 1), 37, 300};
          const auto f = make_paged_kv<bfloat16>(rng, lens, kKvHeads, 16, head_dim);
          const std::int32_t qo_heads = kKvHeads * group;
          const auto tokens = static_cast<std::int64_t>(lens.size()) * q_per_seq;
          const test::FusedQkv<float> qkv(rng, tokens, qo_heads, kKvHeads, head_dim, head_gap);
          INFO("path " << std::string(to_string(Kernels::kIsa)) << " head_dim " << head_dim
                       << " group " << group << " q_per_seq " << q_per_seq << " head gap "
                       << head_gap);
          const auto run = [&](const float* q, std::int64_t row_stride, std::int64_t head_stride) {
            DecodeResult r;
            r.out.assign(static_cast<std::size_t>(tokens * qo_heads * head_dim), -7.0f);
            r.lse.assign(static_cast<std::size_t>(tokens * qo_heads), -7.0f);
            PagedDecodeArgs<bfloat16> args;
            args.q = q;
            args.q_row_stride = row_stride;
            args.q_head_stride = head_stride;
            args.kv = f.view();
            args.pages = f.table();
            args.num_qo_heads = qo_heads;
            args.head_dim = head_dim;
            args.q_per_seq = q_per_seq;
            args.out = r.out.data();
            args.lse = r.lse.data();
            args.kv_split_tokens = 64;
            validate(args);
            detail::dispatch_paged_attention<Kernels>(detail::make_problem(args));
            return r;
          };
          const std::vector<float> packed = qkv.packed_q();
          const DecodeResult want = run(packed.data(), 0, 0);
          const DecodeResult got = run(qkv.q(), qkv.row_stride(), qkv.head_stride());
          CHECK(test::same_bits(got.out, want.out));
          CHECK(test::same_bits(got.lse, want.lse));
          const auto row = static_cast<std::int64_t>(q_per_seq) * qo_heads;
          for (std::int32_t s = 0; s < f.num_seqs(); ++s) {
            std::vector<double> ref_out, ref_lse;
            test::strided_reference(f, s, qkv, s * std::int64_t{q_per_seq}, q_per_seq,
                                    AttentionParams{}, ref_out, ref_lse);
            CHECK(max_abs_diff(std::span<const float>(got.out).subspan(
                                   static_cast<std::size_t>(s * row * head_dim),
                                   static_cast<std::size_t>(row * head_dim)),
                               ref_out) <= kOutTol);
            CHECK(
                max_abs_diff(std::span<const float>(got.lse).subspan(
                                 static_cast<std::size_t>(s * row), static_cast<std::size_t>(row)),
                             ref_lse) <= kLseTol);
          }
        }
      }
    }
  }
}

TEMPLATE_TEST_CASE("paged_decode: 16-bit q read in place from a fused QKV buffer",
                   "[attention][paged_decode]", float16, bfloat16) {
  // The public entry with 16-bit q (converted through fp32): strided in place gives the bits of
  // the packed copy.
  using QO = TestType;
  Rng rng(1400);
  const auto f = make_paged_kv<float16>(rng, {5, 40, 130}, 2, 16, 128);
  const test::FusedQkv<QO> qkv(rng, 3, 8, 2, 128, 0);
  const auto run = [&](const QO* q, std::int64_t row_stride) {
    std::vector<QO> out(3 * 8 * 128);
    std::vector<float> lse(3 * 8);
    PagedDecodeArgs<float16, QO> args;
    args.q = q;
    args.q_row_stride = row_stride;
    args.kv = f.view();
    args.pages = f.table();
    args.num_qo_heads = 8;
    args.head_dim = 128;
    args.out = out.data();
    args.lse = lse.data();
    paged_decode(cpu{}, args);
    return std::make_pair(out, lse);
  };
  const std::vector<QO> packed = qkv.packed_q();
  const auto want = run(packed.data(), 0);
  const auto got = run(qkv.q(), qkv.row_stride());
  CHECK(test::same_bits(got.first, want.first));
  CHECK(test::same_bits(got.second, want.second));
}

TEST_CASE("paged_decode: bad arguments throw before any output is written",
          "[attention][paged_decode]") {
  Rng rng(3);
  auto f = make_paged_kv<float16>(rng, {20, 5}, 2, 16, 64);
  const auto q = test::random_floats(rng, 2 * 8 * 64, -1.0f, 1.0f);
  std::vector<float> out(2 * 8 * 64, 3.0f);
  PagedDecodeArgs<float16> args;
  args.q = q.data();
  args.kv = f.view();
  args.pages = f.table();
  args.num_qo_heads = 8;
  args.head_dim = 64;
  args.out = out.data();
  const auto expect_error = [&](PagedDecodeArgs<float16> bad, ErrorCode code) {
    try {
      paged_decode(cpu{}, bad);
      FAIL("no Error thrown");
    } catch (const Error& e) {
      CHECK(e.code() == code);
    }
    CHECK(out == std::vector<float>(2 * 8 * 64, 3.0f));
  };
  SECTION("head_dim mismatch") {
    auto bad = args;
    bad.head_dim = 128;
    expect_error(bad, ErrorCode::kInvalidArgument);
  }
  SECTION("qo heads not a multiple of kv heads") {
    auto bad = args;
    bad.num_qo_heads = 7;
    expect_error(bad, ErrorCode::kInvalidArgument);
  }
  SECTION("page index out of range") {
    auto idx = f.indices;
    idx[1] = f.num_blocks;
    auto bad = args;
    bad.pages.indices = idx.data();
    expect_error(bad, ErrorCode::kOutOfRange);
  }
  SECTION("last_page_len outside 1..block_size") {
    std::vector<std::int32_t> last = {17, 5};
    auto bad = args;
    bad.pages.last_page_len = last.data();
    expect_error(bad, ErrorCode::kOutOfRange);
    last = {0, 5};
    expect_error(bad, ErrorCode::kOutOfRange);
  }
  SECTION("null pointers") {
    auto bad = args;
    bad.q = nullptr;
    expect_error(bad, ErrorCode::kInvalidArgument);
    bad = args;
    bad.kv.k = nullptr;
    expect_error(bad, ErrorCode::kInvalidArgument);
  }
  SECTION("sequence shorter than its queries") {
    auto bad = args;
    bad.q_per_seq = 6;
    expect_error(bad, ErrorCode::kInvalidArgument);
  }
  SECTION("bad params") {
    auto bad = args;
    bad.params.window_left = -2;
    expect_error(bad, ErrorCode::kInvalidArgument);
  }
  SECTION("q strides smaller than packed name the stride, its value and the limit") {
    std::string message;
    auto bad = args;
    bad.q_row_stride = 8 * 64 - 1;
    CHECK(test::code_of([&] { paged_decode(cpu{}, bad); }, &message) ==
          ErrorCode::kInvalidArgument);
    CHECK_THAT(message, Catch::Contains("q_row_stride = 511") && Catch::Contains("= 512"));
    expect_error(bad, ErrorCode::kInvalidArgument);
    bad = args;
    bad.q_head_stride = 63;
    CHECK(test::code_of([&] { paged_decode(cpu{}, bad); }, &message) ==
          ErrorCode::kInvalidArgument);
    CHECK_THAT(message, Catch::Contains("q_head_stride = 63") && Catch::Contains("= 64"));
    expect_error(bad, ErrorCode::kInvalidArgument);
    // A head stride of 80 makes a row 7 * 80 + 64 = 624 elements: the packed 512 overlaps.
    bad.q_head_stride = 80;
    bad.q_row_stride = 512;
    CHECK(test::code_of([&] { paged_decode(cpu{}, bad); }, &message) ==
          ErrorCode::kInvalidArgument);
    CHECK_THAT(message, Catch::Contains("q_row_stride = 512") && Catch::Contains("= 624"));
    expect_error(bad, ErrorCode::kInvalidArgument);
    bad.q_row_stride = -1;
    expect_error(bad, ErrorCode::kInvalidArgument);
    bad = args;
    bad.q_head_stride = -64;
    expect_error(bad, ErrorCode::kInvalidArgument);
  }
  SECTION("begin/end tables: an end before its begin, a negative begin, a bad id in a run") {
    const test::GappedPageTable g = test::make_gapped_table(f);
    auto bad = args;
    bad.pages = g.view(0, 2);
    auto ends = g.end;
    ends[1] = g.begin[1] - 1;
    bad.pages.indptr_end = ends.data();
    std::string message;
    CHECK(test::code_of([&] { paged_decode(cpu{}, bad); }, &message) ==
          ErrorCode::kInvalidArgument);
    CHECK_THAT(message, Catch::Contains("pages.indptr_end[1]"));
    auto begins = g.begin;
    begins[0] = -1;
    bad.pages = g.view(0, 2);
    bad.pages.indptr = begins.data();
    expect_error(bad, ErrorCode::kInvalidArgument);
    auto indices = g.indices;
    indices[static_cast<std::size_t>(g.begin[0])] = -1;  // a page the kernel would follow
    bad.pages = g.view(0, 2);
    bad.pages.indices = indices.data();
    expect_error(bad, ErrorCode::kOutOfRange);
  }
}

TEST_CASE("paged_decode: int4 KV without its flag, zero points or an even head_dim is an Error",
          "[attention][paged_decode]") {
  Rng rng(4);
  const auto f = make_paged_kv<std::uint8_t>(rng, {20, 5}, 2, 16, 64);
  const auto q = test::random_floats(rng, 2 * 8 * 64, -1.0f, 1.0f);
  std::vector<float> out(2 * 8 * 64, 3.0f);
  PagedDecodeArgs<std::uint8_t> args;
  args.q = q.data();
  args.kv = f.view();
  args.pages = f.table();
  args.num_qo_heads = 8;
  args.head_dim = 64;
  args.out = out.data();
  const auto expect_error = [&](const PagedDecodeArgs<std::uint8_t>& bad, const char* names) {
    std::string message;
    CHECK(test::code_of([&] { paged_decode(cpu{}, bad); }, &message) ==
          ErrorCode::kInvalidArgument);
    CHECK_THAT(message, Catch::Contains(names));
    CHECK(out == std::vector<float>(2 * 8 * 64, 3.0f));
  };
  auto bad = args;
  bad.kv.packed_int4 = false;
  expect_error(bad, "kv.packed_int4 = 0");
  bad = args;
  bad.kv.v_zero = nullptr;
  expect_error(bad, "kv.k_zero/kv.v_zero");
  bad = args;
  bad.kv.k_scale = nullptr;
  expect_error(bad, "kv.k_scale/kv.v_scale");
  bad = args;
  bad.head_dim = bad.kv.head_dim = 63;
  expect_error(bad, "head_dim = 63");
  // A flag on a type it does not describe.
  auto f16 = make_paged_kv<float16>(rng, {20}, 2, 16, 64);
  PagedDecodeArgs<float16> other;
  other.q = q.data();
  other.kv = f16.view();
  other.kv.packed_int4 = true;
  other.pages = f16.table();
  other.num_qo_heads = 8;
  other.head_dim = 64;
  other.out = out.data();
  std::string message;
  CHECK(test::code_of([&] { paged_decode(cpu{}, other); }, &message) ==
        ErrorCode::kInvalidArgument);
  CHECK_THAT(message, Catch::Contains("kv.packed_int4 = 1"));
  // And the well-formed arguments run.
  paged_decode(cpu{}, args);
  CHECK(out != std::vector<float>(2 * 8 * 64, 3.0f));
}

TEMPLATE_TEST_CASE("paged_decode: 16-bit q and out run through fp32 on the CPU",
                   "[attention][paged_decode]", float16, bfloat16) {
  using QO = TestType;
  Rng rng(77);
  const auto f = make_paged_kv<bfloat16>(rng, {5, 40, 130}, 2, 16, 64);
  const std::int32_t qo_heads = 8;
  const auto rows = static_cast<std::size_t>(f.num_seqs() * qo_heads);
  const auto q32 = test::random_floats(rng, rows * 64, -2.0f, 2.0f);
  std::vector<QO> q16(q32.size());
  std::vector<float> q_rounded(q32.size());
  for (std::size_t i = 0; i < q32.size(); ++i) {
    q16[i] = QO(q32[i]);
    q_rounded[i] = static_cast<float>(q16[i]);
  }
  const DecodeResult want = run_decode(f, q_rounded, qo_heads, 1, AttentionParams{});
  std::vector<QO> out16(q32.size());
  std::vector<float> lse(rows);
  PagedDecodeArgs<bfloat16, QO> args;
  args.q = q16.data();
  args.kv = f.view();
  args.pages = f.table();
  args.num_qo_heads = qo_heads;
  args.head_dim = 64;
  args.out = out16.data();
  args.lse = lse.data();
  paged_decode(cpu{}, args);
  for (std::size_t i = 0; i < out16.size(); ++i) {
    INFO("element " << i);
    CHECK(static_cast<float>(out16[i]) == static_cast<float>(QO(want.out[i])));
  }
  CHECK(lse == want.lse);
}
