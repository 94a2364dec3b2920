// SPDX-License-Identifier: Apache-2.0
// Internal row kernels shared by the sampler and the verifiers: a blocked sum of a nonnegative
// weight over a probability row (float lanes per block, double across blocks, so the loop
// vectorizes and 256K-entry rows keep ~1e-7 relative accuracy) and the matching inverse-CDF walk.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <inferkit/core/detail/exp_nonpositive.hpp>
#include <inferkit/core/error.hpp>
#include <iterator>
#include <limits>
#include <span>
#include <vector>

namespace inferkit::detail {

inline constexpr std::size_t kSumLanes = 16;
inline constexpr std::size_t kSumBlock = 1024;  // floats per float-accumulated block
inline constexpr std::size_t kWalkBlock = 64;   // floats per block summed for the walk

/// The largest value of `values`, skipping NaN; -inf for an empty or all-NaN row. Kept in lanes so
/// the loop vectorizes.
inline float max_value(std::span<const float> values) noexcept {
  float lanes[kSumLanes];
  std::fill(std::begin(lanes), std::end(lanes), -std::numeric_limits<float>::infinity());
  const float* x = values.data();
  const std::size_t n = values.size();
  const std::size_t full_end = n / kSumLanes * kSumLanes;  // as in lane_sum: no wrapping bound
  std::size_t i = 0;
  for (; i < full_end; i += kSumLanes) {
    for (std::size_t l = 0; l < kSumLanes; ++l) {
      lanes[l] = x[i + l] > lanes[l] ? x[i + l] : lanes[l];  // NaN compares false
    }
  }
  float best = -std::numeric_limits<float>::infinity();
  for (; i < n; ++i) {
    best = x[i] > best ? x[i] : best;
  }
  for (float lane : lanes) {
    best = lane > best ? lane : best;
  }
  return best;
}

/// Sum of `weight(i)` for i in [begin, end), in float lanes (vectorizable). Needs begin <= end.
template <class Weight>
inline float lane_sum(const Weight& weight, std::size_t begin, std::size_t end) {
  INFERKIT_ASSERT(begin <= end);
  float lanes[kSumLanes] = {};
  // Trip counts from the length, not `i + kSumLanes <= end`: that test wraps for an `end` near
  // SIZE_MAX, so g++ 12 at -O3 could not bound the tail loop and warned (as an error under
  // -Werror) that its 2^62-th iteration overflows the index. The tail is now < kSumLanes.
  const std::size_t length = end - begin;
  const std::size_t full_end = begin + length / kSumLanes * kSumLanes;
  std::size_t i = begin;
  for (; i < full_end; i += kSumLanes) {
    for (std::size_t l = 0; l < kSumLanes; ++l) {
      lanes[l] += weight(i + l);
    }
  }
  float tail = 0.0f;
  for (std::size_t t = 0; t < length % kSumLanes; ++t) {
    tail += weight(full_end + t);
  }
  float total = tail;
  for (float lane : lanes) {
    total += lane;
  }
  return total;
}

/// Sum of `weight(i)` for i in [0, n): float lanes inside blocks, double across blocks.
template <class Weight>
inline double weight_sum(const Weight& weight, std::size_t n) {
  double total = 0.0;
  for (std::size_t begin = 0; begin < n; begin += kSumBlock) {
    total += static_cast<double>(lane_sum(weight, begin, std::min(n, begin + kSumBlock)));
  }
  return total;
}

/// The sum (double across blocks, as `weight_sum`) and the smallest entry of a row: a NaN or
/// infinite entry makes the sum NaN or infinite, so the two together tell whether a row can be a
/// distribution.
struct SumAndMin {
  double sum = 0.0;
  float min = std::numeric_limits<float>::infinity();

  /// Adds `values` [n] in one vectorized pass.
  void add(const float* values, std::size_t n) noexcept {
    for (std::size_t begin = 0; begin < n; begin += kSumBlock) {
      const std::size_t end = std::min(n, begin + kSumBlock);
      float sums[kSumLanes] = {};
      float mins[kSumLanes];
      std::fill(std::begin(mins), std::end(mins), std::numeric_limits<float>::infinity());
      std::size_t i = begin;
      for (; i + kSumLanes <= end; i += kSumLanes) {
        for (std::size_t l = 0; l < kSumLanes; ++l) {
          sums[l] += values[i + l];
          mins[l] = values[i + l] < mins[l] ? values[i + l] : mins[l];
        }
      }
      float block = 0.0f;
      for (; i < end; ++i) {
        block += values[i];
        min = values[i] < min ? values[i] : min;
      }
      for (std::size_t l = 0; l < kSumLanes; ++l) {
        block += sums[l];
        min = mins[l] < min ? mins[l] : min;
      }
      sum += static_cast<double>(block);
    }
  }
};

/// The `SumAndMin` of `values` [n].
inline SumAndMin sum_and_min(const float* values, std::size_t n) noexcept {
  SumAndMin result;
  result.add(values, n);
  return result;
}

/// The audit hook of `sample_weights` that does nothing.
struct NoAudit {
  void operator()(std::size_t /*begin*/, std::size_t /*end*/) const noexcept {}
};

/// What `sample_weights` returns when the weights sum to NaN or infinity.
inline constexpr std::int64_t kNonFiniteWeights = -2;

/// Draws an index with probability weight(i) / sum(weight) using the uniform `u` in [0, 1), in
/// one pass over the row: the pass stores per-block sums (64 floats a block), so the inverse-CDF
/// walk then scans those sums and re-reads a single block. Returns -1 when every weight is zero,
/// kNonFiniteWeights when the sum is NaN or infinite (a weight mapped to NaN flags a bad entry);
/// if rounding leaves the target unreached, the last index with positive weight.
/// `audit(begin, end)` runs after each block of the first pass, while the block is in L1, so a
/// caller can check the rows behind the weights without a pass of its own.
template <class Weight, class Audit = NoAudit>
inline std::int64_t sample_weights(const Weight& weight, std::size_t n, double u,
                                   Audit&& audit = {}) {
  thread_local std::vector<float> block_sums;  // grows once per thread to the largest row
  const std::size_t blocks = (n + kWalkBlock - 1) / kWalkBlock;
  if (block_sums.size() < blocks) {
    block_sums.resize(blocks);
  }
  float* sums = block_sums.data();
  double total = 0.0;
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::size_t begin = b * kWalkBlock;
    const std::size_t end = std::min(n, begin + kWalkBlock);
    sums[b] = lane_sum(weight, begin, end);
    audit(begin, end);
    total += static_cast<double>(sums[b]);
  }
  if (!std::isfinite(total)) {
    return kNonFiniteWeights;
  }
  if (!(total > 0.0)) {
    return -1;
  }
  const double target = u * total;
  double cumulative = 0.0;
  for (std::size_t b = 0; b < blocks; ++b) {
    if (cumulative + static_cast<double>(sums[b]) <= target) {
      cumulative += static_cast<double>(sums[b]);
      continue;
    }
    const std::size_t end = std::min(n, (b + 1) * kWalkBlock);
    for (std::size_t i = b * kWalkBlock; i < end; ++i) {
      const float w = weight(i);
      if (w > 0.0f) {
        cumulative += static_cast<double>(w);
        if (cumulative > target) {
          return static_cast<std::int64_t>(i);
        }
      }
    }
  }
  for (std::size_t i = n; i-- > 0;) {  // rounding: fall back to the last positive weight
    if (weight(i) > 0.0f) {
      return static_cast<std::int64_t>(i);
    }
  }
  return -1;
}

}  // namespace inferkit::detail
