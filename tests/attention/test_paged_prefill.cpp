// SPDX-License-Identifier: Apache-2.0
// Tests of paged_prefill (CPU) against the double-precision reference: chunked prefill of new
// tokens over cached pages (causal, sliding window, soft cap), tree masks from speculative
// verification, batches mixing chunk sizes, every KV dtype, agreement with paged_decode, and q
// read in place from a fused QKV projection (q strides) on every instruction-set path.
// Tolerances as in test_paged_decode.cpp: the reference reads the same dequantized values, so
// only fp32 accumulation error remains (2e-5 on outputs and natural-log LSE).
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <inferkit/attention/attention.hpp>
#include <inferkit/core/bfloat16.hpp>
#include <inferkit/core/float16.hpp>
#include <inferkit/core/float8.hpp>
#include <inferkit/core/rng.hpp>
#include <string>
#include <tests/support/attention_kernels.hpp>
#include <tests/support/cpu_paths.hpp>
#include <tests/support/error_code.hpp>
#include <tests/support/fused_qkv.hpp>
#include <tests/support/paged_fixture.hpp>
#include <utility>
#include <vector>

namespace {

using namespace inferkit;
using inferkit::test::make_paged_kv;
using inferkit::test::max_abs_diff;

constexpr double kOutTol = 2e-5;
constexpr double kLseTol = 2e-5;

struct PrefillCase {
  std::int32_t head_dim;
  std::int32_t num_kv_heads;
  std::int32_t group;
  std::int32_t block_size;
  std::vector<std::int64_t> seq_lens;    // total tokens (cached + new)
  std::vector<std::int32_t> new_tokens;  // chunk size per sequence
  AttentionParams params;
  bool tree_mask = false;
};

template <class KV>
void check_prefill_case(const PrefillCase& c, std::uint64_t seed) {
  Rng rng(seed);
  const auto f = make_paged_kv<KV>(rng, c.seq_lens, c.num_kv_heads, c.block_size, c.head_dim);
  const std::int32_t qo_heads = c.num_kv_heads * c.group;
  const std::size_t row = static_cast<std::size_t>(qo_heads * c.head_dim);
  std::vector<std::int32_t> q_indptr = {0};
  for (std::int32_t n : c.new_tokens) q_indptr.push_back(q_indptr.back() + n);
  const auto total_q = static_cast<std::size_t>(q_indptr.back());
  const auto q = test::random_floats(rng, total_q * row, -2.0f, 2.0f);
  // Tree mask: random bits, but every query keeps itself so most rows see something; some rows
  // of the mask are all zero to check the empty-row rule (out 0, lse -inf).
  std::vector<std::uint8_t> mask;
  std::vector<std::size_t> mask_begin;
  for (std::size_t s = 0; s < c.seq_lens.size(); ++s) {
    mask_begin.push_back(mask.size());
    if (!c.tree_mask) continue;
    const std::int64_t len = c.seq_lens[s];
    const std::int32_t n = c.new_tokens[s];
    for (std::int32_t i = 0; i < n; ++i) {
      const bool empty_row = i == 1;
      for (std::int64_t j = 0; j < len; ++j) {
        const bool self = j == len - n + i;
        mask.push_back(empty_row ? 0 : static_cast<std::uint8_t>(self || rng.below(3) != 0));
      }
    }
  }
  std::vector<float> out(total_q * row, -7.0f);
  std::vector<float> lse(total_q * static_cast<std::size_t>(qo_heads), -7.0f);
  PagedPrefillArgs<KV> args;
  args.q = q.data();
  args.q_indptr = q_indptr.data();
  args.kv = f.view();
  args.pages = f.table();
  args.num_qo_heads = qo_heads;
  args.head_dim = c.head_dim;
  args.custom_mask = c.tree_mask ? mask.data() : nullptr;
  args.out = out.data();
  args.lse = lse.data();
  args.params = c.params;
  paged_prefill(cpu{}, args);

  for (std::int32_t s = 0; s < f.num_seqs(); ++s) {
    const auto n = static_cast<std::size_t>(c.new_tokens[static_cast<std::size_t>(s)]);
    const auto b = static_cast<std::size_t>(q_indptr[static_cast<std::size_t>(s)]);
    INFO("dtype " << test::kv_type_name<KV>() << " head_dim " << c.head_dim << " group " << c.group
                  << " block " << c.block_size << " seq " << s << " len "
                  << c.seq_lens[static_cast<std::size_t>(s)] << " new " << n);
    std::vector<double> want_out, want_lse;
    std::span<const std::uint8_t> m;
    if (c.tree_mask) {
      m = std::span<const std::uint8_t>(mask).subspan(
          mask_begin[static_cast<std::size_t>(s)],
          n * static_cast<std::size_t>(c.seq_lens[static_cast<std::size_t>(s)]));
    }
    test::reference_for_sequence(f, s, std::span<const float>(q).subspan(b * row, n * row),
                                 static_cast<std::int32_t>(n), qo_heads, c.params, want_out,
                                 want_lse, m);
    CHECK(max_abs_diff(std::span<const float>(out).subspan(b * row, n * row), want_out) <= kOutTol);
    CHECK(max_abs_diff(std::span<const float>(lse).subspan(b * static_cast<std::size_t>(qo_heads),
                                                           n * static_cast<std::size_t>(qo_heads)),
                       want_lse) <= kLseTol);
  }
}

}  // namespace

TEMPLATE_TEST_CASE("paged_prefill: chunked prefill matches the double reference for every dtype",
                   "[attention][paged_prefill]", float, float16, bfloat16, float8_e4m3, float8_e5m2,
                   std::int8_t, std::uint8_t) {
  const std::vector<PrefillCase> cases = {
      // whole prompt, chunk over cached pages, one-token chunk, exactly full pages
      {128, 2, 4, 16, {40, 300, 17, 64}, {40, 33, 1, 16}, AttentionParams{}},
      {64, 1, 7, 8, {90, 9}, {21, 9}, AttentionParams{}},
  };
  std::uint64_t seed = 900;
  for (const PrefillCase& c : cases) check_prefill_case<TestType>(c, seed++);
}

TEST_CASE("paged_prefill: covers windows soft caps odd head dims and page sizes",
          "[attention][paged_prefill]") {
  AttentionParams window;
  window.window_left = 20;
  AttentionParams capped;
  capped.logit_soft_cap = 3.0f;
  AttentionParams noncausal;
  noncausal.causal = false;
  const std::vector<PrefillCase> cases = {
      {256, 1, 8, 32, {100, 33}, {70, 33}, AttentionParams{}},
      {72, 2, 1, 1, {45, 12}, {30, 5}, window},
      {96, 2, 4, 16, {130, 64}, {19, 64}, capped},
      {64, 1, 4, 16, {50, 20}, {10, 0}, noncausal},  // a sequence with no new tokens
      {128, 1, 8, 16, {600}, {200}, window},
  };
  std::uint64_t seed = 1300;
  for (const PrefillCase& c : cases) check_prefill_case<float16>(c, seed++);
}

TEST_CASE("paged_prefill: tree masks from speculative verification are applied",
          "[attention][paged_prefill]") {
  const std::vector<PrefillCase> cases = {
      {64, 2, 4, 16, {60, 25}, {8, 5}, AttentionParams{}, true},
      {128, 1, 8, 8, {40}, {12}, AttentionParams{}, true},
  };
  std::uint64_t seed = 1700;
  for (const PrefillCase& c : cases) check_prefill_case<bfloat16>(c, seed++);
}

TEST_CASE("paged_prefill: a uniform chunk gives the same bits as paged_decode",
          "[attention][paged_prefill]") {
  Rng rng(31);
  const std::vector<std::int64_t> lens = {3000, 50};
  const auto f = make_paged_kv<float16>(rng, lens, 2, 16, 128);
  const auto q = test::random_floats(rng, 2 * 2 * 8 * 128, -2.0f, 2.0f);
  std::vector<float> a(q.size()), b(q.size());
  PagedDecodeArgs<float16> d;
  d.q = q.data();
  d.kv = f.view();
  d.pages = f.table();
  d.num_qo_heads = 8;
  d.head_dim = 128;
  d.q_per_seq = 2;
  d.out = a.data();
  paged_decode(cpu{}, d);
  const std::vector<std::int32_t> q_indptr = {0, 2, 4};
  PagedPrefillArgs<float16> p;
  p.q = q.data();
  p.q_indptr = q_indptr.data();
  p.kv = f.view();
  p.pages = f.table();
  p.num_qo_heads = 8;
  p.head_dim = 128;
  p.out = b.data();
  paged_prefill(cpu{}, p);
  CHECK(a == b);
}

TEST_CASE("paged_prefill: a begin/end page table with gaps gives the same bits as CSR",
          "[attention][paged_prefill]") {
  Rng rng(32);
  const std::vector<std::int64_t> lens = {900, 40, 1, 300};
  const std::vector<std::int32_t> q_indptr = {0, 1, 41, 42, 142};  // decode, whole, 1, chunk
  const auto f = make_paged_kv<bfloat16>(rng, lens, 2, 16, 64);
  const auto q = test::random_floats(rng, 142 * 8 * 64, -2.0f, 2.0f);
  const test::GappedPageTable g = test::make_gapped_table(f);
  auto run = [&](PageTableView pages) {
    std::vector<float> out(q.size(), -7.0f);
    PagedPrefillArgs<bfloat16> p;
    p.q = q.data();
    p.q_indptr = q_indptr.data();
    p.kv = f.view();
    p.pages = pages;
    p.num_qo_heads = 8;
    p.head_dim = 64;
    p.out = out.data();
    p.kv_split_tokens = 256;
    paged_prefill(cpu{}, p);
    return out;
  };
  CHECK(run(g.view(0, 4)) == run(f.table()));
}

TEMPLATE_TEST_CASE("paged_prefill: q read in place from a fused QKV buffer gives the packed bits",
                   "[attention][paged_prefill]", INFERKIT_TEST_CPU_PATHS) {
  // As the decode case: a chunked-prefill batch (whole prompt, a chunk over cached pages, one
  // token) reads q from [tokens][(Hq + 2 Hkv) * D] through q_row_stride (then with a gap between
  // heads too); every path gives the bits of the packed copy and agrees with the reference.
  using Kernels = TestType;
  if (!test::path_runs_here<Kernels>()) return;
  std::uint64_t seed = 2300;
  const std::vector<std::int64_t> lens = {40, 300, 17};
  const std::vector<std::int32_t> q_indptr = {0, 40, 110, 111};
  const std::int64_t tokens = q_indptr.back();
  for (const std::int32_t head_dim : {64, 128}) {
    for (const std::int32_t group : {1, 4}) {
      for (const std::int64_t head_gap : {std::int64_t{0}, std::int64_t{16}}) {
        Rng rng(seed++);
        constexpr std::int32_t kKvHeads = 2;
        const auto f = make_paged_kv<float16>(rng, lens, kKvHeads, 16, head_dim);
        const std::int32_t qo_heads = kKvHeads * group;
        const test::FusedQkv<float> qkv(rng, tokens, qo_heads, kKvHeads, head_dim, head_gap);
        INFO("path " << std::string(to_string(Kernels::kIsa)) << " head_dim " << head_dim
                     << " group " << group << " head gap " << head_gap);
        const auto run = [&](const float* q, std::int64_t row_stride, std::int64_t head_stride) {
          std::pair<std::vector<float>, std::vector<float>> r;
          r.first.assign(static_cast<std::size_t>(tokens * qo_heads * head_dim), -7.0f);
          r.second.assign(static_cast<std::size_t>(tokens * qo_heads), -7.0f);
          PagedPrefillArgs<float16> args;
          args.q = q;
          args.q_row_stride = row_stride;
          args.q_head_stride = head_stride;
          args.q_indptr = q_indptr.data();
          args.kv = f.view();
          args.pages = f.table();
          args.num_qo_heads = qo_heads;
          args.head_dim = head_dim;
          args.out = r.first.data();
          args.lse = r.second.data();
          args.kv_split_tokens = 64;
          validate(args);
          detail::dispatch_paged_attention<Kernels>(detail::make_problem(args));
          return r;
        };
        const std::vector<float> packed = qkv.packed_q();
        const auto want = run(packed.data(), 0, 0);
        const auto got = run(qkv.q(), qkv.row_stride(), qkv.head_stride());
        CHECK(test::same_bits(got.first, want.first));
        CHECK(test::same_bits(got.second, want.second));
        const auto row = static_cast<std::size_t>(qo_heads);
        const auto dim = static_cast<std::size_t>(head_dim);
        for (std::int32_t s = 0; s < f.num_seqs(); ++s) {
          const auto b = static_cast<std::size_t>(q_indptr[static_cast<std::size_t>(s)]);
          const auto n = static_cast<std::size_t>(q_indptr[static_cast<std::size_t>(s) + 1]) - b;
          std::vector<double> ref_out, ref_lse;
          test::strided_reference(f, s, qkv, static_cast<std::int64_t>(b),
                                  static_cast<std::int32_t>(n), AttentionParams{}, ref_out,
                                  ref_lse);
          CHECK(
              max_abs_diff(std::span<const float>(got.first).subspan(b * row * dim, n * row * dim),
                           ref_out) <= kOutTol);
          CHECK(max_abs_diff(std::span<const float>(got.second).subspan(b * row, n * row),
                             ref_lse) <= kLseTol);
        }
      }
    }
  }
}

TEMPLATE_TEST_CASE("paged_prefill: 16-bit q read in place from a fused QKV buffer",
                   "[attention][paged_prefill]", float16, bfloat16) {
  using QO = TestType;
  Rng rng(2400);
  const auto f = make_paged_kv<bfloat16>(rng, {30, 70}, 1, 16, 64);
  const std::vector<std::int32_t> q_indptr = {0, 30, 40};
  const test::FusedQkv<QO> qkv(rng, 40, 4, 1, 64, 0);
  const auto run = [&](const QO* q, std::int64_t row_stride) {
    std::vector<QO> out(40 * 4 * 64);
    PagedPrefillArgs<bfloat16, QO> args;
    args.q = q;
    args.q_row_stride = row_stride;
    args.q_indptr = q_indptr.data();
    args.kv = f.view();
    args.pages = f.table();
    args.num_qo_heads = 4;
    args.head_dim = 64;
    args.out = out.data();
    paged_prefill(cpu{}, args);
    return out;
  };
  const std::vector<QO> packed = qkv.packed_q();
  CHECK(test::same_bits(run(qkv.q(), qkv.row_stride()), run(packed.data(), 0)));
}

TEST_CASE("paged_prefill: bad arguments throw before any output is written",
          "[attention][paged_prefill]") {
  Rng rng(4);
  const auto f = make_paged_kv<float>(rng, {20, 5}, 1, 8, 64);
  const auto q = test::random_floats(rng, 10 * 4 * 64, -1.0f, 1.0f);
  std::vector<float> out(10 * 4 * 64, 3.0f);
  std::vector<std::int32_t> q_indptr = {0, 4, 10};  // 6 new tokens > 5 cached: causal error
  PagedPrefillArgs<float> args;
  args.q = q.data();
  args.q_indptr = q_indptr.data();
  args.kv = f.view();
  args.pages = f.table();
  args.num_qo_heads = 4;
  args.head_dim = 64;
  args.out = out.data();
  CHECK_THROWS_AS(paged_prefill(cpu{}, args), Error);
  q_indptr = {0, 5, 4};
  CHECK_THROWS_AS(paged_prefill(cpu{}, args), Error);
  q_indptr = {1, 5, 9};
  CHECK_THROWS_AS(paged_prefill(cpu{}, args), Error);
  args.q_indptr = nullptr;
  CHECK_THROWS_AS(paged_prefill(cpu{}, args), Error);
  q_indptr = {0, 4, 5};  // valid again: only the strides are wrong below
  args.q_indptr = q_indptr.data();
  std::string message;
  args.q_row_stride = 4 * 64 - 1;
  CHECK(test::code_of([&] { paged_prefill(cpu{}, args); }, &message) ==
        ErrorCode::kInvalidArgument);
  CHECK_THAT(message, Catch::Contains("q_row_stride = 255") && Catch::Contains("= 256"));
  args.q_row_stride = 0;
  args.q_head_stride = 32;
  CHECK(test::code_of([&] { paged_prefill(cpu{}, args); }, &message) ==
        ErrorCode::kInvalidArgument);
  CHECK_THAT(message, Catch::Contains("q_head_stride = 32") && Catch::Contains("= 64"));
  CHECK(out == std::vector<float>(10 * 4 * 64, 3.0f));
  args.q_head_stride = 0;
  paged_prefill(cpu{}, args);  // the same call with packed strides runs
  CHECK(out != std::vector<float>(10 * 4 * 64, 3.0f));
  out.assign(out.size(), 3.0f);
  args.q_row_stride = -5;
  CHECK_THROWS_AS(paged_prefill(cpu{}, args), Error);
  CHECK(out == std::vector<float>(10 * 4 * 64, 3.0f));
}
