// SPDX-License-Identifier: Apache-2.0
// How many threads the next engine step should run on, learnt from the steps themselves. On a
// shared host the best team is not the number of cores: with another process busy on one of two
// cores, a 2-thread step waits at every OpenMP barrier for the thread that lost its core (each
// wait up to a scheduler time slice), and batch-1 decode fell to 0.22-0.66 of the quiet 1-thread
// rate (benchmarks/bench_model.cpp, BM_Model_Decode_BusyNeighbour), where one thread alone would
// keep it. OMP_WAIT_POLICY=passive removes the collapse but costs the quiet case 3.6x (107 to 29
// tokens/s on the same host), so the team size itself has to follow the host.
//
// The tuner runs the chosen team and, now and then, one probe step on a team one smaller or one
// larger. Step shapes drift (batch sizes, prefill chunks), so a probe is judged against the
// team's last steps (the median of three), per unit of work (tokens): a probe that is cheaper by
// `switch_margin` twice in a row becomes the team. A probe that loses doubles the interval to the
// next one (up to `max_probe_interval`, or `max_probe_interval_reduced` below the full team, where
// only a probe can tell that the host got quiet again), so a quiet host pays for probing less and
// less, and always long enough that lost probes cost at most `max_probe_overhead` of the time.
// Two steps in a row that cost `slowdown_trigger` times the team's running average (the host got
// busier) probe at once. Outputs never depend on it: every kernel gives the same floats on
// any number of threads.
//
// Threads: one instance per engine, used by one thread at a time; pure arithmetic, no clock of
// its own (the caller times the steps).
#pragma once

#include <algorithm>
#include <cstdint>
#include <inferkit/core/error.hpp>

namespace inferkit {

/// Tuning of ThreadTuner (the defaults suit steps of about 1-100 ms).
struct ThreadTunerOptions {
  std::int32_t min_probe_interval = 16;  ///< steps between probes after a switch
  /// After a lost probe the interval doubles, up to this while the team is all max_threads (a
  /// quiet host: probing costs a slower step each time) ...
  std::int32_t max_probe_interval = 1024;
  /// ... and up to this while it is smaller: only a probe can see that the host got quieter
  /// (a smaller team's steps cost the same either way).
  std::int32_t max_probe_interval_reduced = 64;
  double switch_margin = 0.1;     ///< a probe must cost <= (1 - margin) x the step before
  double slowdown_trigger = 1.5;  ///< step cost / team's average that probes at once
  double average_weight = 0.25;   ///< weight of the newest step in the team's average
  /// A lost probe that cost x times the team's step waits at least (x - 1) / max_probe_overhead
  /// steps before the next, whatever the caps: a 2-thread step beside a busy neighbour can cost
  /// 50 one-thread steps (a scheduler time slice at each of its barriers).
  double max_probe_overhead = 0.02;
};

/// Picks the team size of each step from 1..max_threads by probing (see the file comment).
class ThreadTuner {
 public:
  /// A tuner over 1..max_threads that starts at max_threads. Throws `Error{kInvalidArgument}`
  /// for max_threads < 1 or options out of range (intervals < 1 or min > max, margin outside
  /// [0, 1), trigger <= 1, weight outside (0, 1]).
  explicit ThreadTuner(std::int32_t max_threads, ThreadTunerOptions options = {})
      : options_(options), max_threads_(max_threads), team_(max_threads) {
    check_arg(max_threads >= 1, ErrorCode::kInvalidArgument, "max_threads", max_threads,
              "must be >=", 1);
    check_arg(options.min_probe_interval >= 1, ErrorCode::kInvalidArgument, "min_probe_interval",
              options.min_probe_interval, "must be >=", 1);
    check_arg(options.max_probe_interval >= options.min_probe_interval, ErrorCode::kInvalidArgument,
              "max_probe_interval", options.max_probe_interval, "must be >= min_probe_interval",
              options.min_probe_interval);
    check_arg(options.max_probe_interval_reduced >= options.min_probe_interval,
              ErrorCode::kInvalidArgument, "max_probe_interval_reduced",
              options.max_probe_interval_reduced, "must be >= min_probe_interval",
              options.min_probe_interval);
    check_arg(options.switch_margin >= 0.0 && options.switch_margin < 1.0,
              ErrorCode::kInvalidArgument, "switch_margin", options.switch_margin, "must be in",
              "[0, 1)");
    check_arg(options.slowdown_trigger > 1.0, ErrorCode::kInvalidArgument, "slowdown_trigger",
              options.slowdown_trigger, "must be >", 1.0);
    check_arg(options.max_probe_overhead > 0.0 && options.max_probe_overhead <= 1.0,
              ErrorCode::kInvalidArgument, "max_probe_overhead", options.max_probe_overhead,
              "must be in", "(0, 1]");
    check_arg(options.average_weight > 0.0 && options.average_weight <= 1.0,
              ErrorCode::kInvalidArgument, "average_weight", options.average_weight, "must be in",
              "(0, 1]");
    interval_ = options.min_probe_interval;
    countdown_ = interval_;
  }

  /// The team size the next step should run on, in [1, max_threads()].
  [[nodiscard]] std::int32_t threads() const noexcept { return probing_ ? probe_ : team_; }
  /// The team size the tuner has settled on (probes aside).
  [[nodiscard]] std::int32_t team() const noexcept { return team_; }
  /// The largest team it picks from (1..max_threads).
  [[nodiscard]] std::int32_t max_threads() const noexcept { return max_threads_; }
  /// Probe steps run so far.
  [[nodiscard]] std::int64_t probes() const noexcept { return probes_; }
  /// Times the team changed (a probe size that won twice in a row).
  [[nodiscard]] std::int64_t switches() const noexcept { return switches_; }

  /// Records the step just run on threads() threads: its wall `seconds` for `work` units (> 0;
  /// tokens computed, say). A step with work <= 0 or seconds < 0 is ignored.
  void record(double seconds, double work) noexcept {
    if (!(work > 0.0) || !(seconds >= 0.0)) return;
    const double cost = seconds / work;
    if (probing_) {
      finish_probe(cost);
      return;
    }
    const bool slowed = average_ > 0.0 && cost > options_.slowdown_trigger * average_;
    slowed_streak_ = slowed ? slowed_streak_ + 1 : 0;
    average_ = average_ > 0.0 ? average_ + options_.average_weight * (cost - average_) : cost;
    recent_[recent_count_ % 3] = cost;
    ++recent_count_;
    if (max_threads_ == 1) return;
    // Two slow steps in a row: the host got busier; find out now, not in up to
    // max_probe_interval steps (one slow step is more often noise: a fault, an interrupt).
    if (slowed_streak_ >= 2 && pending_ == 0) countdown_ = 0;
    if (countdown_ > 0) --countdown_;
    if (countdown_ == 0) start_probe();
  }

 private:
  void start_probe() noexcept {
    // Alternate below and above the team, where both exist.
    const bool down = team_ > 1 && (team_ == max_threads_ || !last_probe_down_);
    probe_ = down ? team_ - 1 : team_ + 1;
    slowed_streak_ = 0;
    last_probe_down_ = down;
    probing_ = true;
  }

  // What the team's steps cost now: the median of its last three, which follows a change of
  // shape or of the host within two steps and ignores a single spike.
  [[nodiscard]] double reference_cost() const noexcept {
    if (recent_count_ < 3) return recent_[(recent_count_ + 2) % 3];  // the last one
    const double a = recent_[0], b = recent_[1], c = recent_[2];
    return std::max(std::min(a, b), std::min(std::max(a, b), c));
  }

  void finish_probe(double cost) noexcept {
    probing_ = false;
    ++probes_;
    const bool won = cost <= (1.0 - options_.switch_margin) * reference_cost();
    if (won && probe_ == pending_) {  // the second win in a row for this team size
      team_ = probe_;
      average_ = cost;
      recent_count_ = 0;
      slowed_streak_ = 0;
      pending_ = 0;
      ++switches_;
      interval_ = options_.min_probe_interval;
      countdown_ = interval_;
      return;
    }
    if (won) {  // confirm against three fresh team steps, before noise can move the team
      pending_ = probe_;
      recent_count_ = 0;
      countdown_ = 3;
      last_probe_down_ = !last_probe_down_;  // probe the same side again
      return;
    }
    pending_ = 0;
    const std::int32_t cap =
        team_ == max_threads_ ? options_.max_probe_interval : options_.max_probe_interval_reduced;
    interval_ = std::min(cap, interval_ * 2);
    // Probing must not cost more than max_probe_overhead of the team's time.
    const double excess = cost / reference_cost() - 1.0;
    const double floor = std::min(excess / options_.max_probe_overhead, 1e6);
    if (floor > interval_) interval_ = static_cast<std::int32_t>(floor) + 1;
    countdown_ = interval_;
  }

  ThreadTunerOptions options_;
  std::int32_t max_threads_;
  std::int32_t team_;
  std::int32_t probe_ = 0;
  std::int32_t pending_ = 0;  // a probe size that won once (0: none)
  bool probing_ = false;
  bool last_probe_down_ = false;
  std::int32_t interval_ = 0;
  std::int32_t countdown_ = 0;
  double average_ = 0.0;   // the team's running seconds per unit of work
  double recent_[3] = {};  // the team's last steps, seconds per unit of work (a ring)
  std::int64_t recent_count_ = 0;
  std::int32_t slowed_streak_ = 0;  // consecutive team steps over slowdown_trigger x average
  std::int64_t probes_ = 0;
  std::int64_t switches_ = 0;
};

}  // namespace inferkit
