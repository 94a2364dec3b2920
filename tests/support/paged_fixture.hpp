// SPDX-License-Identifier: Apache-2.0
// Test fixture for attention over paged KV: random K/V in any storage dtype written into
// randomly shuffled physical blocks, CSR page tables, NaN in every unwritten slot (and unused
// block), and the dequantized contiguous K/V of each sequence for the double-precision reference.
// Built directly on PagedKVView / PageTableView (no allocator), seeded by the caller's Rng.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <inferkit/attention/attention_params.hpp>
#include <inferkit/attention/reference.hpp>
#include <inferkit/core/bfloat16.hpp>
#include <inferkit/core/float16.hpp>
#include <inferkit/core/float8.hpp>
#include <inferkit/core/rng.hpp>
#include <inferkit/kv/paged_kv_view.hpp>
#include <limits>
#include <numeric>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace inferkit::test {

/// A uniform float in [lo, hi).
inline float uniform(Rng& rng, float lo, float hi) { return lo + (hi - lo) * rng.uniform(); }

/// Random floats in [lo, hi).
inline std::vector<float> random_floats(Rng& rng, std::size_t n, float lo, float hi) {
  std::vector<float> out(n);
  for (float& x : out) x = uniform(rng, lo, hi);
  return out;
}

/// The name of a KV storage type, for test messages.
template <class KV>
std::string kv_type_name() {
  if constexpr (std::is_same_v<KV, float>) return "fp32";
  if constexpr (std::is_same_v<KV, float16>) return "fp16";
  if constexpr (std::is_same_v<KV, bfloat16>) return "bf16";
  if constexpr (std::is_same_v<KV, float8_e4m3>) return "fp8_e4m3";
  if constexpr (std::is_same_v<KV, float8_e5m2>) return "fp8_e5m2";
  if constexpr (std::is_same_v<KV, std::int8_t>) return "int8";
  if constexpr (std::is_same_v<KV, std::uint8_t>) return "int4";
  return "?";
}

/// One stored element as the kernels read it (before scaling): to_float, or the int8 value.
template <class KV>
float stored_to_float(KV x) {
  if constexpr (std::is_same_v<KV, float>) {
    return x;
  } else if constexpr (std::is_same_v<KV, std::int8_t>) {
    return static_cast<float>(x);
  } else {
    return to_float(x);
  }
}

/// A stored element holding NaN (int8 and int4 have none: their slot's scale is NaN instead).
template <class KV>
KV nan_element() {
  if constexpr (std::is_same_v<KV, std::int8_t> || std::is_same_v<KV, std::uint8_t>) {
    return KV{0};
  } else if constexpr (std::is_same_v<KV, float>) {
    return std::numeric_limits<float>::quiet_NaN();
  } else {
    return KV(std::numeric_limits<float>::quiet_NaN());
  }
}

/// Paged K/V of a batch of sequences for one layer, plus their page tables.
template <class KV>
struct PagedKVFixture {
  std::int32_t num_kv_heads = 0;
  std::int32_t block_size = 0;
  std::int32_t head_dim = 0;
  std::int32_t num_blocks = 0;
  std::vector<KV> k, v;                 // packed int4 (KV = std::uint8_t): two dims a byte
  std::vector<float> k_scale, v_scale;  // empty for fp32/fp16/bf16
  std::vector<float> k_zero, v_zero;    // int4 only
  std::vector<std::int32_t> indptr, indices, last_page_len;
  std::vector<std::int64_t> seq_lens;

  static constexpr bool kPackedInt4 = std::is_same_v<KV, std::uint8_t>;
  static constexpr bool kPerToken = std::is_same_v<KV, std::int8_t> || kPackedInt4;
  static constexpr bool kPerBlock =
      std::is_same_v<KV, float8_e4m3> || std::is_same_v<KV, float8_e5m2>;

  PagedKVView<const KV> view() const {
    PagedKVView<const KV> out;
    out.k = k.data();
    out.v = v.data();
    out.k_scale = k_scale.empty() ? nullptr : k_scale.data();
    out.v_scale = v_scale.empty() ? nullptr : v_scale.data();
    out.k_zero = k_zero.empty() ? nullptr : k_zero.data();
    out.v_zero = v_zero.empty() ? nullptr : v_zero.data();
    out.packed_int4 = kPackedInt4;
    out.num_blocks = num_blocks;
    out.num_kv_heads = num_kv_heads;
    out.block_size = block_size;
    out.head_dim = head_dim;
    return out;
  }
  PageTableView table() const {
    return {indptr.data(), indices.data(), last_page_len.data(),
            static_cast<std::int32_t>(seq_lens.size())};
  }
  std::int32_t num_seqs() const { return static_cast<std::int32_t>(seq_lens.size()); }

  /// Dequantized value of element d of (sequence s, token pos, head h), as the kernels see it
  /// (int4: (nibble - zero) * scale, each step in float).
  float value(const std::vector<KV>& data, const std::vector<float>& scales,
              const std::vector<float>& zeros, std::int32_t s, std::int64_t pos, std::int32_t h,
              std::int32_t d) const {
    const PagedKVView<const KV> vw = view();
    const auto page = static_cast<std::int32_t>(pos / block_size);
    const auto slot = static_cast<std::int32_t>(pos % block_size);
    const std::int32_t block =
        indices[static_cast<std::size_t>(indptr[static_cast<std::size_t>(s)] + page)];
    if constexpr (kPackedInt4) {
      const std::uint8_t byte = data[static_cast<std::size_t>(vw.offset(block, h, slot) + d / 2)];
      const auto nibble = static_cast<float>(d % 2 == 0 ? byte & 0x0F : byte >> 4);
      const auto si = static_cast<std::size_t>(vw.token_scale_index(block, h, slot));
      return (nibble - zeros[si]) * scales[si];
    } else {
      const float x =
          stored_to_float(data[static_cast<std::size_t>(vw.offset(block, h, slot) + d)]);
      if constexpr (kPerToken) {
        return x * scales[static_cast<std::size_t>(vw.token_scale_index(block, h, slot))];
      } else if constexpr (kPerBlock) {
        return x * scales[static_cast<std::size_t>(std::int64_t{block} * num_kv_heads + h)];
      } else {
        return x;
      }
    }
  }

  /// Contiguous dequantized K (or V) of sequence s: [seq_len][num_kv_heads][head_dim].
  std::vector<float> dense(std::int32_t s, bool want_v) const {
    const std::int64_t len = seq_lens[static_cast<std::size_t>(s)];
    std::vector<float> out(static_cast<std::size_t>(len * num_kv_heads * head_dim));
    std::size_t i = 0;
    for (std::int64_t p = 0; p < len; ++p) {
      for (std::int32_t h = 0; h < num_kv_heads; ++h) {
        for (std::int32_t d = 0; d < head_dim; ++d) {
          out[i++] = want_v ? value(v, v_scale, v_zero, s, p, h, d)
                            : value(k, k_scale, k_zero, s, p, h, d);
        }
      }
    }
    return out;
  }
};

/// Builds paged K/V for sequences of `seq_lens` tokens: pages are drawn from a random
/// permutation of all blocks (`spare_blocks` stay unused), values are random, and every slot
/// no sequence owns holds NaN (int8: a NaN scale; int4: a NaN scale and zero point).
template <class KV>
PagedKVFixture<KV> make_paged_kv(Rng& rng, const std::vector<std::int64_t>& seq_lens,
                                 std::int32_t num_kv_heads, std::int32_t block_size,
                                 std::int32_t head_dim, std::int32_t spare_blocks = 3) {
  PagedKVFixture<KV> f;
  f.num_kv_heads = num_kv_heads;
  f.block_size = block_size;
  f.head_dim = head_dim;
  f.seq_lens = seq_lens;
  std::int32_t total_pages = 0;
  f.indptr.push_back(0);
  for (std::int64_t len : seq_lens) {
    const auto pages = static_cast<std::int32_t>((len + block_size - 1) / block_size);
    total_pages += pages;
    f.indptr.push_back(total_pages);
    f.last_page_len.push_back(
        pages == 0 ? 0 : static_cast<std::int32_t>(len - std::int64_t{pages - 1} * block_size));
  }
  f.num_blocks = total_pages + spare_blocks;
  std::vector<std::int32_t> perm(static_cast<std::size_t>(f.num_blocks));
  std::iota(perm.begin(), perm.end(), 0);
  for (std::size_t i = perm.size(); i > 1; --i) {  // Fisher-Yates
    std::swap(perm[i - 1], perm[rng.below(static_cast<std::uint32_t>(i))]);
  }
  f.indices.assign(perm.begin(), perm.begin() + total_pages);

  const PagedKVView<const KV> shape = f.view();
  const auto elems = static_cast<std::size_t>(shape.block_stride() * f.num_blocks);
  f.k.assign(elems, nan_element<KV>());
  f.v.assign(elems, nan_element<KV>());
  const float nan = std::numeric_limits<float>::quiet_NaN();
  if constexpr (PagedKVFixture<KV>::kPerToken) {
    const auto n = static_cast<std::size_t>(std::int64_t{f.num_blocks} * num_kv_heads * block_size);
    f.k_scale.assign(n, nan);
    f.v_scale.assign(n, nan);
    if constexpr (PagedKVFixture<KV>::kPackedInt4) {
      f.k_zero.assign(n, nan);
      f.v_zero.assign(n, nan);
    }
  } else if constexpr (PagedKVFixture<KV>::kPerBlock) {
    const auto n = static_cast<std::size_t>(std::int64_t{f.num_blocks} * num_kv_heads);
    f.k_scale.resize(n);
    f.v_scale.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      f.k_scale[i] = uniform(rng, 0.25f, 1.0f);
      f.v_scale[i] = uniform(rng, 0.25f, 1.0f);
    }
  }
  auto element = [&](float scale) -> KV {
    if constexpr (std::is_same_v<KV, std::int8_t>) {
      return static_cast<std::int8_t>(static_cast<int>(rng.below(255)) - 127);
    } else if constexpr (std::is_same_v<KV, float>) {
      return uniform(rng, -1.0f, 1.0f);
    } else {
      return KV(uniform(rng, -1.0f, 1.0f) / scale);
    }
  };
  for (std::int32_t s = 0; s < f.num_seqs(); ++s) {
    const std::int64_t len = seq_lens[static_cast<std::size_t>(s)];
    for (std::int64_t p = 0; p < len; ++p) {
      const std::int32_t block = f.indices[static_cast<std::size_t>(
          f.indptr[static_cast<std::size_t>(s)] + p / block_size)];
      const auto slot = static_cast<std::int32_t>(p % block_size);
      for (std::int32_t h = 0; h < num_kv_heads; ++h) {
        float ks = 1.0f;
        float vs = 1.0f;
        if constexpr (PagedKVFixture<KV>::kPackedInt4) {
          // Values (nibble - zero) * scale within about +-1.3, as the other types'.
          const auto si = static_cast<std::size_t>(shape.token_scale_index(block, h, slot));
          f.k_scale[si] = uniform(rng, 0.02f, 0.09f);
          f.v_scale[si] = uniform(rng, 0.02f, 0.09f);
          f.k_zero[si] = uniform(rng, 0.0f, 15.0f);
          f.v_zero[si] = uniform(rng, 0.0f, 15.0f);
          const auto off = static_cast<std::size_t>(shape.offset(block, h, slot));
          for (std::int32_t d = 0; d < head_dim; d += 2) {
            const auto at = off + static_cast<std::size_t>(d / 2);
            f.k[at] = static_cast<std::uint8_t>(rng.below(16) | (rng.below(16) << 4));
            f.v[at] = static_cast<std::uint8_t>(rng.below(16) | (rng.below(16) << 4));
          }
          continue;
        } else if constexpr (PagedKVFixture<KV>::kPerToken) {
          const auto si = static_cast<std::size_t>(shape.token_scale_index(block, h, slot));
          f.k_scale[si] = uniform(rng, 0.002f, 0.01f);
          f.v_scale[si] = uniform(rng, 0.002f, 0.01f);
        } else if constexpr (PagedKVFixture<KV>::kPerBlock) {
          ks = f.k_scale[static_cast<std::size_t>(std::int64_t{block} * num_kv_heads + h)];
          vs = f.v_scale[static_cast<std::size_t>(std::int64_t{block} * num_kv_heads + h)];
        }
        const auto off = static_cast<std::size_t>(shape.offset(block, h, slot));
        for (std::int32_t d = 0; d < head_dim; ++d) {
          f.k[off + static_cast<std::size_t>(d)] = element(ks);
          f.v[off + static_cast<std::size_t>(d)] = element(vs);
        }
      }
    }
  }
  return f;
}

/// Reference attention of `n_q` query rows of sequence s (q: [n_q][qo_heads][head_dim]) in
/// double, returned as float-comparable doubles: out [n_q][qo_heads][head_dim], lse [n_q][qo].
template <class KV>
void reference_for_sequence(const PagedKVFixture<KV>& f, std::int32_t s, std::span<const float> q,
                            std::int32_t n_q, std::int32_t num_qo_heads,
                            const AttentionParams& params, std::vector<double>& out,
                            std::vector<double>& lse,
                            std::span<const std::uint8_t> custom_mask = {}) {
  const std::vector<float> k = f.dense(s, false);
  const std::vector<float> v = f.dense(s, true);
  AttentionShape shape;
  shape.num_q_tokens = n_q;
  shape.num_kv_tokens = static_cast<std::int32_t>(f.seq_lens[static_cast<std::size_t>(s)]);
  shape.num_qo_heads = num_qo_heads;
  shape.num_kv_heads = f.num_kv_heads;
  shape.head_dim = f.head_dim;
  out.assign(static_cast<std::size_t>(n_q) * static_cast<std::size_t>(num_qo_heads * f.head_dim),
             0.0);
  lse.assign(static_cast<std::size_t>(n_q) * static_cast<std::size_t>(num_qo_heads), 0.0);
  reference_attention<float>(q, k, v, shape, params, out, lse, custom_mask);
}

/// Largest |a - b| over two equally long ranges; infinities equal when both are the same inf,
/// NaN anywhere gives NaN.
inline double max_abs_diff(std::span<const float> got, std::span<const double> want) {
  double worst = 0.0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double g = got[i];
    const double w = want[i];
    if (std::isnan(g) || std::isnan(w)) return std::numeric_limits<double>::quiet_NaN();
    if (std::isinf(g) || std::isinf(w)) {
      if (g != w) return std::numeric_limits<double>::infinity();
      continue;
    }
    worst = std::max(worst, std::abs(g - w));
  }
  return worst;
}

/// A fixture's page tables re-laid in the begin/end form (PageTableView::indptr_end): the
/// sequences' page runs in reverse order with gaps between them, and every gap entry holds an
/// id no kernel may follow (-1 or num_blocks + 7), so reading one fails validation or the test.
struct GappedPageTable {
  std::vector<std::int32_t> begin, end, indices, last_page_len;

  /// The view of sequences [first, first + count).
  [[nodiscard]] PageTableView view(std::int32_t first, std::int32_t count) const {
    const auto f = static_cast<std::size_t>(first);
    return {begin.data() + f, indices.data(), last_page_len.data() + f, count, end.data() + f};
  }
};

template <class KV>
GappedPageTable make_gapped_table(const PagedKVFixture<KV>& f) {
  GappedPageTable g;
  const auto n = static_cast<std::size_t>(f.num_seqs());
  g.begin.resize(n);
  g.end.resize(n);
  g.last_page_len = f.last_page_len;
  std::int32_t poison = -1;
  const auto gap = [&](std::size_t count) {
    for (std::size_t i = 0; i < count; ++i) g.indices.push_back(poison);
    poison = poison == -1 ? f.num_blocks + 7 : -1;
  };
  for (std::size_t s = n; s-- > 0;) {
    gap(1 + s % 3);
    g.begin[s] = static_cast<std::int32_t>(g.indices.size());
    g.indices.insert(g.indices.end(), f.indices.begin() + f.indptr[s],
                     f.indices.begin() + f.indptr[s + 1]);
    g.end[s] = static_cast<std::int32_t>(g.indices.size());
  }
  gap(2);
  return g;
}

}  // namespace inferkit::test
