// SPDX-License-Identifier: Apache-2.0
// StopStringMatcher: finds a request's stop strings in its streamed text, across token
// boundaries. A server streams text as tokens arrive, but may not show text that could still
// turn out to begin a stop string: the matcher holds back the longest tail of the text that is a
// prefix of some stop string, and releases it once it cannot be (or at the end). Used by the
// serving front (engine/async_engine.hpp) on the engine thread.
// Threads: one thread at a time per matcher (push and finish change it); one matcher per request.
#pragma once

#include <algorithm>
#include <cstddef>
#include <inferkit/core/error.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace inferkit {

/// The most stop strings one request may give (OpenAI allows 4; llama-server and vLLM more).
/// With kMaxStopStringBytes, it bounds the matcher's work per byte.
inline constexpr std::size_t kMaxStopStrings = 16;
/// The longest stop string, in bytes.
inline constexpr std::size_t kMaxStopStringBytes = 256;

/// Streams text through a set of stop strings.
class StopStringMatcher {
 public:
  /// A matcher for `stops`. Throws `Error{kInvalidArgument}` for more than kMaxStopStrings
  /// strings, an empty one, or one longer than kMaxStopStringBytes.
  explicit StopStringMatcher(std::vector<std::string> stops = {}) : stops_(std::move(stops)) {
    check_arg(stops_.size() <= kMaxStopStrings, ErrorCode::kInvalidArgument, "stop.size()",
              stops_.size(), "must be <=", kMaxStopStrings);
    for (std::size_t i = 0; i < stops_.size(); ++i) {
      check_arg(
          !stops_[i].empty() && stops_[i].size() <= kMaxStopStringBytes,
          ErrorCode::kInvalidArgument, [&] { return "stop[" + std::to_string(i) + "].size()"; },
          stops_[i].size(),
          "must be in [1, kMaxStopStringBytes] with kMaxStopStringBytes =", kMaxStopStringBytes);
      longest_ = std::max(longest_, stops_[i].size());
    }
  }

  /// Adds `text` and returns what may be shown now: the text before the earliest stop string
  /// once one appears (then `stopped()` is true and later pushes return nothing), else all but
  /// the held tail that could still begin one.
  [[nodiscard]] std::string push(std::string_view text) {
    if (stopped_) return {};
    held_.append(text);
    if (stops_.empty()) return std::exchange(held_, {});
    // A match must end in the new text; it can start up to longest_ - 1 bytes before it.
    const std::size_t from = held_.size() - text.size() >= longest_ - 1
                                 ? held_.size() - text.size() - (longest_ - 1)
                                 : 0;
    std::size_t first = std::string::npos;
    for (std::size_t s = 0; s < stops_.size(); ++s) {
      const std::size_t at = held_.find(stops_[s], from);
      if (at < first) {
        first = at;
        matched_ = s;
      }
    }
    if (first != std::string::npos) {
      stopped_ = true;
      std::string out = held_.substr(0, first);
      held_.clear();
      return out;
    }
    const std::size_t keep = held_tail();
    std::string out = held_.substr(0, held_.size() - keep);
    held_.erase(0, held_.size() - keep);
    return out;
  }

  /// Ends the text: returns the held tail (no stop string can begin it any more).
  [[nodiscard]] std::string finish() { return std::exchange(held_, {}); }

  /// Whether a stop string appeared.
  [[nodiscard]] bool stopped() const noexcept { return stopped_; }
  /// The stop string that appeared first (earliest start); nullopt before one did.
  [[nodiscard]] std::optional<std::string_view> matched() const {
    if (!stopped_) return std::nullopt;
    return std::string_view(stops_[matched_]);
  }
  /// Bytes held back now.
  [[nodiscard]] std::size_t held_bytes() const noexcept { return held_.size(); }

 private:
  // The longest suffix of held_ that is a proper prefix of some stop string.
  [[nodiscard]] std::size_t held_tail() const {
    const std::size_t max_len = std::min(held_.size(), longest_ - 1);
    for (std::size_t len = max_len; len > 0; --len) {
      const std::string_view tail(held_.data() + held_.size() - len, len);
      for (const std::string& s : stops_) {
        if (s.size() > len && std::string_view(s).substr(0, len) == tail) return len;
      }
    }
    return 0;
  }

  std::vector<std::string> stops_;
  std::size_t longest_ = 1;
  std::string held_;
  bool stopped_ = false;
  std::size_t matched_ = 0;
};

}  // namespace inferkit
