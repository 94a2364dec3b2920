// SPDX-License-Identifier: Apache-2.0
// LatencyHistogram: a fixed-bucket histogram of durations (seconds) in constant memory, as a
// long-running server exports them (Prometheus' cumulative `_bucket`, `_sum`, `_count`). The
// serving front keeps one each for time to first token, inter-token latency, queue time and
// end-to-end latency.
// Threads: one thread at a time per histogram while observe writes it (AsyncEngine guards its
// histograms with a mutex); const reads may run together; distinct histograms are independent.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>

namespace inferkit {

/// Counts of observations per bucket; bucket i counts values <= bounds()[i] and greater than
/// the bound before it, the last one everything above the largest bound (+Inf).
class LatencyHistogram {
 public:
  /// Upper bounds in seconds, 1 ms to 10 min, about 2.5x apart (vLLM's latency buckets span the
  /// same range).
  static constexpr std::array<double, 20> kBounds = {0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06,
                                                     0.08,  0.1,    0.25,  0.5,  0.75, 1.0,  2.5,
                                                     5.0,   10.0,   20.0,  40.0, 80.0, 600.0};

  /// Records `seconds`; a negative or NaN value is ignored (a time that did not happen).
  void observe(double seconds) noexcept {
    if (!(seconds >= 0.0)) return;
    const auto it = std::lower_bound(kBounds.begin(), kBounds.end(), seconds);
    ++counts_[static_cast<std::size_t>(it - kBounds.begin())];
    ++count_;
    sum_ += seconds;
  }

  /// The bucket bounds (seconds).
  [[nodiscard]] static std::span<const double> bounds() noexcept { return kBounds; }
  /// Observations per bucket, [bounds().size() + 1] (the last is above every bound).
  [[nodiscard]] std::span<const std::uint64_t> counts() const noexcept { return counts_; }
  /// Observations in all.
  [[nodiscard]] std::uint64_t count() const noexcept { return count_; }
  /// Sum of the observed values (seconds).
  [[nodiscard]] double sum() const noexcept { return sum_; }

 private:
  std::array<std::uint64_t, kBounds.size() + 1> counts_{};
  std::uint64_t count_ = 0;
  double sum_ = 0.0;
};

}  // namespace inferkit
