// SPDX-License-Identifier: Apache-2.0
// Device tests of attention/cuda/paged_attention.cuh: paged_decode and paged_prefill on the GPU
// against the double reference and the CPU backend, on the CPU tests' randomized paged fixtures
// (shuffled pages, NaN in every unwritten slot): head_dim 64/128/256, GQA 1/4/8, page sizes
// 1/16/128, lengths 1 to 32K, every CUDA KV dtype (packed int4 included), fp32 and 16-bit q/out,
// q_per_seq > 1, window / soft cap / non-causal / custom mask, forced and planned splits, batches
// beyond one launch's kMaxPlanSeqs, and q read in place from a fused QKV buffer (q strides).
//
// Tolerances: decode runs fp32 math on the exact dequantized values, so only accumulation
// order separates it from the reference (5e-5; 2e-4 at 32K keys), plus the rounding of a 16-bit
// out. Prefill rounds q and the probabilities P to the KV type for the tensor cores: the
// reference gets the rounded q, and P's rounding costs up to 2^-11 (fp16) / 2^-8 (bf16) of |v|.
#include <cuda_runtime.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <inferkit/attention/attention.hpp>
#include <inferkit/attention/cuda/paged_attention.cuh>
#include <inferkit/core/cuda/device_buffer.cuh>
#include <inferkit/core/rng.hpp>
#include <tests/cuda/cpu_backend.hpp>
#include <tests/cuda/cuda_test_support.cuh>
#include <tests/support/fused_qkv.hpp>
#include <tests/support/paged_fixture.hpp>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

using namespace inferkit;

struct Case {
  std::int32_t head_dim;
  std::int32_t num_kv_heads;
  std::int32_t group;
  std::int32_t block_size;
  std::int32_t q_per_seq;  // decode; prefill: n_q = min(len, q_per_seq * (s + 1))
  std::vector<std::int64_t> seq_lens;
  AttentionParams params = {};
  std::int32_t max_chunk_tokens = 0;
};

template <class QO>
double out_tolerance(double math) {
  if constexpr (std::is_same_v<QO, float16>) return math + 1.5e-3;
  if constexpr (std::is_same_v<QO, bfloat16>) return math + 1.2e-2;
  return math;
}

template <class T>
std::vector<T> converted(const std::vector<float>& x) {
  std::vector<T> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = T(x[i]);
  return out;
}

template <class KV, class QO>
void check_decode(const Case& c, std::uint64_t seed) {
  Rng rng(seed);
  const auto f = test::make_paged_kv<KV>(rng, c.seq_lens, c.num_kv_heads, c.block_size, c.head_dim);
  const test::DevicePagedFixture<KV> d(f);
  const std::int32_t qo_heads = c.num_kv_heads * c.group;
  const auto row_elems = static_cast<std::size_t>(c.q_per_seq * qo_heads * c.head_dim);
  const auto q32 = test::random_floats(rng, row_elems * c.seq_lens.size(), -2.0f, 2.0f);
  const std::vector<QO> q = converted<QO>(q32);
  const std::vector<float> q_seen = test::as_floats(q);
  const DeviceBuffer<QO> dq(q);
  DeviceBuffer<QO> dout(q.size());
  dout.fill_bytes(0xFF);
  DeviceBuffer<float> dlse(q.size() / static_cast<std::size_t>(c.head_dim));
  PagedDecodeArgs<KV, QO> args;
  args.q = dq.data();
  args.kv = d.view();
  args.pages = d.pages();
  args.host_pages = d.host_pages;
  args.num_qo_heads = qo_heads;
  args.head_dim = c.head_dim;
  args.q_per_seq = c.q_per_seq;
  args.out = dout.data();
  args.lse = dlse.data();
  args.params = c.params;
  args.max_chunk_tokens = c.max_chunk_tokens;
  paged_decode(cuda{}, args);
  test::finish_device();
  const std::vector<float> out = test::as_floats(dout.download());
  const std::vector<float> lse = dlse.download();
  std::int64_t longest = 0;
  for (std::int64_t len : c.seq_lens) longest = std::max(longest, len);
  const double tol = out_tolerance<QO>(longest > 8192 ? 2e-4 : 5e-5);
  for (std::int32_t s = 0; s < f.num_seqs(); ++s) {
    INFO(test::kv_type_name<KV>() << " head_dim " << c.head_dim << " group " << c.group << " block "
                                  << c.block_size << " q_per_seq " << c.q_per_seq << " seq " << s
                                  << " len " << f.seq_lens[static_cast<std::size_t>(s)]);
    std::vector<double> want_out, want_lse;
    const std::span<const float> qs(q_seen.data() + static_cast<std::size_t>(s) * row_elems,
                                    row_elems);
    test::reference_for_sequence(f, s, qs, c.q_per_seq, qo_heads, c.params, want_out, want_lse);
    const std::size_t lse_n = static_cast<std::size_t>(c.q_per_seq * qo_heads);
    CHECK(test::max_abs_diff(std::span<const float>(out).subspan(
                                 static_cast<std::size_t>(s) * row_elems, row_elems),
                             want_out) <= tol);
    CHECK(test::max_abs_diff(
              std::span<const float>(lse).subspan(static_cast<std::size_t>(s) * lse_n, lse_n),
              want_lse) <= 1e-4);
  }
  if constexpr (std::is_same_v<KV, float16> && std::is_same_v<QO, float>) {
    // The CPU backend on the same fixture and queries.
    std::vector<float> cpu_out(q.size());
    std::vector<float> cpu_lse(lse.size());
    PagedDecodeArgs<float16> host;
    host.q = q_seen.data();
    host.kv = f.view();
    host.pages = f.table();
    host.num_qo_heads = qo_heads;
    host.head_dim = c.head_dim;
    host.q_per_seq = c.q_per_seq;
    host.out = cpu_out.data();
    host.lse = cpu_lse.data();
    host.params = c.params;
    test::cpu_paged_decode(host);
    std::vector<double> gpu(out.begin(), out.end());
    CHECK(test::max_abs_diff(cpu_out, gpu) <= 2 * tol);
  }
}

/// Prefill: sequence s attends with n_s = min(len, q_per_seq * (s + 1)) new tokens.
template <class KV, class QO>
void check_prefill(const Case& c, std::uint64_t seed, bool tree_mask = false) {
  Rng rng(seed);
  const auto f = test::make_paged_kv<KV>(rng, c.seq_lens, c.num_kv_heads, c.block_size, c.head_dim);
  const test::DevicePagedFixture<KV> d(f);
  const std::int32_t qo_heads = c.num_kv_heads * c.group;
  std::vector<std::int32_t> q_indptr = {0};
  std::vector<std::uint8_t> mask;
  for (std::size_t s = 0; s < c.seq_lens.size(); ++s) {
    const auto n = static_cast<std::int32_t>(std::min<std::int64_t>(
        c.seq_lens[s], std::int64_t{c.q_per_seq} * static_cast<std::int64_t>(s + 1)));
    q_indptr.push_back(q_indptr.back() + n);
    for (std::int64_t i = 0; i < std::int64_t{n} * c.seq_lens[s]; ++i) {
      mask.push_back(rng.below(4) != 0 ? 1 : 0);
    }
  }
  const auto elems =
      static_cast<std::size_t>(q_indptr.back()) * static_cast<std::size_t>(qo_heads * c.head_dim);
  const std::vector<QO> q = converted<QO>(test::random_floats(rng, elems, -2.0f, 2.0f));
  const std::vector<float> q_seen = test::rounded_to<KV>(test::as_floats(q));  // tensor-core input
  const DeviceBuffer<QO> dq(q);
  const DeviceBuffer<std::int32_t> dindptr(q_indptr);
  const DeviceBuffer<std::uint8_t> dmask(mask);
  DeviceBuffer<QO> dout(elems);
  dout.fill_bytes(0xFF);
  DeviceBuffer<float> dlse(elems / static_cast<std::size_t>(c.head_dim));
  PagedPrefillArgs<KV, QO> args;
  args.q = dq.data();
  args.q_indptr = dindptr.data();
  args.host_q_indptr = q_indptr.data();
  args.kv = d.view();
  args.pages = d.pages();
  args.host_pages = d.host_pages;
  args.num_qo_heads = qo_heads;
  args.head_dim = c.head_dim;
  args.custom_mask = tree_mask ? dmask.data() : nullptr;
  args.out = dout.data();
  args.lse = dlse.data();
  args.params = c.params;
  args.max_chunk_tokens = c.max_chunk_tokens;
  paged_prefill(cuda{}, args);
  test::finish_device();
  const std::vector<float> out = test::as_floats(dout.download());
  const std::vector<float> lse = dlse.download();
  const double p_rounding = std::is_same_v<KV, float16> ? 3e-3 : 2e-2;
  std::size_t mask_at = 0;
  for (std::int32_t s = 0; s < f.num_seqs(); ++s) {
    const auto su = static_cast<std::size_t>(s);
    const std::int32_t n = q_indptr[su + 1] - q_indptr[su];
    INFO(test::kv_type_name<KV>() << " head_dim " << c.head_dim << " group " << c.group << " block "
                                  << c.block_size << " seq " << s << " n_q " << n << " len "
                                  << f.seq_lens[su]);
    const auto row_elems = static_cast<std::size_t>(qo_heads * c.head_dim);
    const std::span<const float> qs(
        q_seen.data() + static_cast<std::size_t>(q_indptr[su]) * row_elems,
        static_cast<std::size_t>(n) * row_elems);
    const auto mask_n = static_cast<std::size_t>(std::int64_t{n} * f.seq_lens[su]);
    const std::span<const std::uint8_t> ms =
        tree_mask ? std::span<const std::uint8_t>(mask.data() + mask_at, mask_n)
                  : std::span<const std::uint8_t>();
    mask_at += mask_n;
    std::vector<double> want_out, want_lse;
    test::reference_for_sequence(f, s, qs, n, qo_heads, c.params, want_out, want_lse, ms);
    CHECK(test::max_abs_diff(std::span<const float>(out).subspan(
                                 static_cast<std::size_t>(q_indptr[su]) * row_elems, qs.size()),
                             want_out) <= out_tolerance<QO>(p_rounding));
    CHECK(test::max_abs_diff(
              std::span<const float>(lse).subspan(static_cast<std::size_t>(q_indptr[su] * qo_heads),
                                                  static_cast<std::size_t>(n * qo_heads)),
              want_lse) <= 1e-3);
  }
  if constexpr (std::is_same_v<KV, float16> && std::is_same_v<QO, float>) {
    std::vector<float> cpu_out(elems);
    PagedPrefillArgs<float16> host;
    host.q = q_seen.data();
    host.q_indptr = q_indptr.data();
    host.kv = f.view();
    host.pages = f.table();
    host.num_qo_heads = qo_heads;
    host.head_dim = c.head_dim;
    host.custom_mask = tree_mask ? mask.data() : nullptr;
    host.out = cpu_out.data();
    host.params = c.params;
    test::cpu_paged_prefill(host);
    std::vector<double> gpu(out.begin(), out.end());
    CHECK(test::max_abs_diff(cpu_out, gpu) <= p_rounding);
  }
}

/// q read in place from a fused QKV buffer [tokens][(Hq + 2 Hkv) * D] (q_row_stride) gives the
/// bits of its packed copy: decode (one query per sequence) or chunked prefill, forced splits.
template <class KV, class QO>
void check_fused_qkv(std::int32_t head_dim, std::int32_t group, bool prefill, std::uint64_t seed) {
  Rng rng(seed);
  constexpr std::int32_t kKvHeads = 2;
  const std::vector<std::int64_t> lens = {40, 300, 17};
  const std::vector<std::int32_t> q_indptr =
      prefill ? std::vector<std::int32_t>{0, 40, 110, 111} : std::vector<std::int32_t>{0, 1, 2, 3};
  const auto f = test::make_paged_kv<KV>(rng, lens, kKvHeads, 16, head_dim);
  const test::DevicePagedFixture<KV> d(f);
  const std::int32_t qo_heads = kKvHeads * group;
  const std::int64_t tokens = q_indptr.back();
  const test::FusedQkv<QO> qkv(rng, tokens, qo_heads, kKvHeads, head_dim, 0);
  const DeviceBuffer<QO> dfused(qkv.data());
  const DeviceBuffer<QO> dpacked(qkv.packed_q());
  const DeviceBuffer<std::int32_t> dindptr(q_indptr);
  const auto rows = static_cast<std::size_t>(tokens * qo_heads);
  const auto run = [&](const QO* q, std::int64_t row_stride) {
    DeviceBuffer<QO> dout(rows * static_cast<std::size_t>(head_dim));
    dout.fill_bytes(0xFF);
    DeviceBuffer<float> dlse(rows);
    if (prefill) {
      PagedPrefillArgs<KV, QO> args;
      args.q = q;
      args.q_row_stride = row_stride;
      args.q_indptr = dindptr.data();
      args.host_q_indptr = q_indptr.data();
      args.kv = d.view();
      args.pages = d.pages();
      args.host_pages = d.host_pages;
      args.num_qo_heads = qo_heads;
      args.head_dim = head_dim;
      args.out = dout.data();
      args.lse = dlse.data();
      args.max_chunk_tokens = 64;
      paged_prefill(cuda{}, args);
    } else {
      PagedDecodeArgs<KV, QO> args;
      args.q = q;
      args.q_row_stride = row_stride;
      args.kv = d.view();
      args.pages = d.pages();
      args.host_pages = d.host_pages;
      args.num_qo_heads = qo_heads;
      args.head_dim = head_dim;
      args.out = dout.data();
      args.lse = dlse.data();
      args.max_chunk_tokens = 64;
      paged_decode(cuda{}, args);
    }
    test::finish_device();
    return std::make_pair(dout.download(), dlse.download());
  };
  INFO(test::kv_type_name<KV>() << (prefill ? " prefill" : " decode") << " head_dim " << head_dim
                                << " group " << group);
  const auto want = run(dpacked.data(), 0);
  const auto got = run(dfused.data(), qkv.row_stride());
  CHECK(test::same_bits(got.first, want.first));
  CHECK(test::same_bits(got.second, want.second));
}

AttentionParams windowed(std::int32_t w) {
  AttentionParams p;
  p.window_left = w;
  return p;
}
AttentionParams capped() {
  AttentionParams p;
  p.logit_soft_cap = 2.5f;
  p.sm_scale = 0.3f;
  return p;
}
AttentionParams noncausal() {
  AttentionParams p;
  p.causal = false;
  return p;
}

}  // namespace

TEMPLATE_TEST_CASE("paged_decode(cuda): matches the reference for every KV dtype",
                   "[cuda][paged_attention]", float16, bfloat16, float8_e4m3, float8_e5m2,
                   std::uint8_t) {
  const std::vector<Case> cases = {
      {128, 2, 4, 16, 1, {1, 16, 64, 37, 300}},
      {64, 1, 8, 1, 1, {5, 23, 1}},
      {256, 1, 1, 128, 1, {129, 300, 128}},
      {128, 2, 4, 16, 1, {1000, 3, 2049}, {}, 256},  // forced splits and their merge
  };
  std::uint64_t seed = 300;
  for (const Case& c : cases) check_decode<TestType, float>(c, seed++);
}

TEST_CASE("paged_decode(cuda): GQA, q_per_seq, masks, 16-bit q/out, long and skewed batches",
          "[cuda][paged_attention]") {
  check_decode<float16, float>({64, 4, 1, 16, 1, {17, 200, 1, 48}}, 400);
  check_decode<float16, float>({128, 1, 4, 16, 3, {40, 3, 129}}, 401);        // speculative verify
  check_decode<float16, float>({128, 1, 8, 16, 4, {40, 300}, {}, 256}, 402);  // 32 rows: 4 blocks
  check_decode<float16, float>({64, 2, 4, 16, 2, {300, 2, 65}, windowed(50)}, 403);
  check_decode<float16, float>({128, 1, 4, 8, 1, {250, 1}, capped()}, 404);
  check_decode<float16, float>({128, 2, 4, 16, 1, {30, 77}, noncausal()}, 405);
  check_decode<float16, float16>({128, 2, 4, 16, 1, {1, 100, 700}}, 406);
  check_decode<bfloat16, bfloat16>({256, 1, 8, 128, 1, {5, 1000}}, 407);
  // One 5K sequence among 63 short ones: the planner splits it; 300 sequences: two launches.
  std::vector<std::int64_t> skewed(64, 37);
  skewed[9] = 5000;
  check_decode<float16, float>({128, 8, 1, 16, 1, skewed}, 408);
  check_decode<float16, float>({64, 1, 4, 16, 1, std::vector<std::int64_t>(300, 20)}, 409);
}

TEST_CASE("paged_decode(cuda): a 32K context with GQA 8", "[cuda][paged_attention][slow]") {
  check_decode<bfloat16, float>({128, 8, 8, 16, 1, {32768}}, 410);
  check_decode<float8_e4m3, float>({128, 8, 4, 128, 1, {32768, 1}}, 411);
  check_decode<std::uint8_t, float>({64, 3, 3, 16, 1, {32768, 7}}, 412);  // SmolLM2's shape
}

TEMPLATE_TEST_CASE("paged_prefill(cuda): matches the reference on tensor cores",
                   "[cuda][paged_attention]", float16, bfloat16) {
  using QO = std::conditional_t<std::is_same_v<TestType, float16>, float, bfloat16>;
  std::uint64_t seed = 500;
  check_prefill<TestType, QO>({128, 2, 4, 16, 40, {100, 17, 300}}, seed++);
  check_prefill<TestType, QO>({64, 4, 1, 1, 33, {70, 5}}, seed++);
  check_prefill<TestType, QO>({256, 1, 8, 128, 20, {129, 60}}, seed++);
  check_prefill<TestType, QO>({128, 1, 4, 16, 64, {200, 700}, {}, 256}, seed++);  // split
  check_prefill<TestType, QO>({128, 2, 4, 16, 30, {90, 150}, windowed(40)}, seed++);
  check_prefill<TestType, QO>({64, 2, 1, 16, 50, {64, 120}, capped()}, seed++);
  check_prefill<TestType, QO>({128, 1, 4, 16, 10, {40, 80}}, seed++, /*tree_mask=*/true);
}

TEST_CASE("paged_decode(cuda): rejects what the CUDA backend cannot run",
          "[cuda][paged_attention]") {
  Rng rng(1);
  const auto f = test::make_paged_kv<float16>(rng, {10}, 1, 16, 96);
  const test::DevicePagedFixture<float16> d(f);
  DeviceBuffer<float> q(96);
  DeviceBuffer<float> out(96);
  PagedDecodeArgs<float16> args;
  args.q = q.data();
  args.out = out.data();
  args.kv = d.view();
  args.pages = d.pages();
  args.num_qo_heads = 1;
  args.head_dim = 96;
  CHECK_THROWS_AS(paged_decode(cuda{}, args), Error);  // no host mirror
  args.host_pages = d.host_pages;
  try {
    paged_decode(cuda{}, args);
    FAIL("head_dim 96 accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::kUnsupported);
  }
}

TEST_CASE("paged attention(cuda): q read in place from a fused QKV buffer gives the packed bits",
          "[cuda][paged_attention]") {
  std::uint64_t seed = 600;
  for (const std::int32_t head_dim : {64, 128}) {
    for (const std::int32_t group : {1, 4}) {
      for (const bool prefill : {false, true}) {
        check_fused_qkv<float16, float>(head_dim, group, prefill, seed++);
        check_fused_qkv<bfloat16, bfloat16>(head_dim, group, prefill, seed++);
      }
    }
  }
}

TEST_CASE("paged_decode(cuda): q strides must be whole 16-byte vectors",
          "[cuda][paged_attention]") {
  Rng rng(2);
  const auto f = test::make_paged_kv<float16>(rng, {10}, 1, 16, 64);
  const test::DevicePagedFixture<float16> d(f);
  DeviceBuffer<float16> q(4 * 64 + 8);
  DeviceBuffer<float16> out(64);
  PagedDecodeArgs<float16, float16> args;
  args.q = q.data();
  args.out = out.data();
  args.kv = d.view();
  args.pages = d.pages();
  args.host_pages = d.host_pages;
  args.num_qo_heads = 1;
  args.head_dim = 64;
  args.q_row_stride = 64 + 4;  // 136 bytes
  CHECK_THROWS_AS(paged_decode(cuda{}, args), Error);
  args.q_row_stride = 0;
  args.q_head_stride = 64 + 2;
  CHECK_THROWS_AS(paged_decode(cuda{}, args), Error);
  args.q_head_stride = 0;
  args.q_row_stride = 64 + 8;  // 144 bytes: runs
  paged_decode(cuda{}, args);
  test::finish_device();
}
