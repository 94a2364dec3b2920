// SPDX-License-Identifier: Apache-2.0
// Test fixture for the engine's fused QKV layout: one projection buffer
// [tokens][(num_qo_heads + 2 * num_kv_heads) * head_stride] whose q, k and v heads the kernels
// read in place through row and head strides, with its packed copies to compare against, a
// bit-for-bit comparison, and the strided double-precision reference over a paged fixture.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <inferkit/attention/attention_params.hpp>
#include <inferkit/attention/reference.hpp>
#include <inferkit/core/rng.hpp>
#include <limits>
#include <span>
#include <tests/support/paged_fixture.hpp>
#include <vector>

namespace inferkit::test {

/// A fused QKV buffer of `T` (float, float16 or bfloat16): token t holds its q heads, then its
/// k heads, then its v heads, each head `head_dim` random values in [-2, 2) followed by
/// `head_gap` NaNs (never to be read), so head_stride = head_dim + head_gap.
template <class T>
class FusedQkv {
 public:
  FusedQkv(Rng& rng, std::int64_t tokens, std::int32_t qo_heads, std::int32_t kv_heads,
           std::int32_t head_dim, std::int64_t head_gap)
      : tokens_(tokens),
        qo_heads_(qo_heads),
        kv_heads_(kv_heads),
        head_dim_(head_dim),
        head_stride_(head_dim + head_gap) {
    const std::int64_t heads = qo_heads + 2 * std::int64_t{kv_heads};
    data_.resize(static_cast<std::size_t>(tokens * heads * head_stride_));
    const T nan = T(std::numeric_limits<float>::quiet_NaN());
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(data_.size()); ++i) {
      data_[static_cast<std::size_t>(i)] =
          i % head_stride_ < head_dim ? T(uniform(rng, -2.0f, 2.0f)) : nan;
    }
  }

  /// Elements between consecutive tokens: (qo_heads + 2 * kv_heads) * head_stride.
  [[nodiscard]] std::int64_t row_stride() const noexcept {
    return (qo_heads_ + 2 * std::int64_t{kv_heads_}) * head_stride_;
  }
  /// Elements between consecutive heads of one token (0 when packed: head_gap = 0).
  [[nodiscard]] std::int64_t head_stride() const noexcept {
    return head_stride_ == head_dim_ ? 0 : head_stride_;
  }
  [[nodiscard]] std::int32_t num_qo_heads() const noexcept { return qo_heads_; }
  [[nodiscard]] const T* q() const noexcept { return data_.data(); }
  [[nodiscard]] const T* k() const noexcept { return data_.data() + qo_heads_ * head_stride_; }
  [[nodiscard]] const T* v() const noexcept {
    return data_.data() + (qo_heads_ + std::int64_t{kv_heads_}) * head_stride_;
  }
  /// The whole buffer (for windows into it).
  [[nodiscard]] std::span<const T> data() const noexcept { return data_; }

  /// q packed: [tokens][qo_heads][head_dim].
  [[nodiscard]] std::vector<T> packed_q() const { return packed(q(), qo_heads_); }
  /// k (or v) packed: [tokens][kv_heads][head_dim].
  [[nodiscard]] std::vector<T> packed_k() const { return packed(k(), kv_heads_); }
  [[nodiscard]] std::vector<T> packed_v() const { return packed(v(), kv_heads_); }

 private:
  std::vector<T> packed(const T* first, std::int32_t heads) const {
    std::vector<T> out;
    out.reserve(static_cast<std::size_t>(tokens_ * heads * head_dim_));
    for (std::int64_t t = 0; t < tokens_; ++t) {
      for (std::int64_t h = 0; h < heads; ++h) {
        const T* src = first + t * row_stride() + h * head_stride_;
        out.insert(out.end(), src, src + head_dim_);
      }
    }
    return out;
  }

  std::int64_t tokens_;
  std::int32_t qo_heads_;
  std::int32_t kv_heads_;
  std::int32_t head_dim_;
  std::int64_t head_stride_;
  std::vector<T> data_;
};

/// Whether two ranges hold the same bits (not just equal values: -0 vs 0 and NaN payloads
/// count).
template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

/// Reference attention of sequence s of `f` for the `n_q` query tokens starting at token
/// `first_token` of the fused buffer, q read through its strides (as reference_for_sequence).
template <class KV>
void strided_reference(const PagedKVFixture<KV>& f, std::int32_t s, const FusedQkv<float>& qkv,
                       std::int64_t first_token, std::int32_t n_q, const AttentionParams& params,
                       std::vector<double>& out, std::vector<double>& lse) {
  const std::vector<float> k = f.dense(s, false);
  const std::vector<float> v = f.dense(s, true);
  const std::int32_t qo_heads = qkv.num_qo_heads();
  AttentionShape shape;
  shape.num_q_tokens = n_q;
  shape.num_kv_tokens = static_cast<std::int32_t>(f.seq_lens[static_cast<std::size_t>(s)]);
  shape.num_qo_heads = qo_heads;
  shape.num_kv_heads = f.num_kv_heads;
  shape.head_dim = f.head_dim;
  shape.q_row_stride = qkv.row_stride();
  shape.q_head_stride = qkv.head_stride();
  out.assign(static_cast<std::size_t>(n_q) * static_cast<std::size_t>(qo_heads * f.head_dim), 0.0);
  lse.assign(static_cast<std::size_t>(n_q) * static_cast<std::size_t>(qo_heads), 0.0);
  reference_attention<float>(
      qkv.data().subspan(static_cast<std::size_t>(first_token * qkv.row_stride())), k, v, shape,
      params, out, lse);
}

}  // namespace inferkit::test
