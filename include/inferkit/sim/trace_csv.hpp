// SPDX-License-Identifier: Apache-2.0
// Request traces in CSV, so a user can replay their own traffic through the simulator: one
// request per line, `arrival_s,prompt_tokens,output_tokens[,prefix_group]`, an optional header
// line, `#` comments and blank lines. A trace is untrusted input: every malformed field is an
// `Error` naming the line, the column and the value (the parser is fuzzed), never a crash.
// Threads: pure functions (read_trace_csv also reads its file); safe from any number of threads.
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <inferkit/core/error.hpp>
#include <inferkit/sim/workload.hpp>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace inferkit {

/// How a trace's requests are built.
struct TraceOptions {
  /// Tokens of the shared prefix of requests that name a prefix group (capped at each prompt's
  /// length - 1): the trace gives the group, not the length.
  std::int64_t prefix_tokens = 256;
  std::int64_t max_tokens = std::int64_t{1} << 31;    ///< largest prompt or output accepted
  std::int64_t max_requests = std::int64_t{1} << 24;  ///< largest trace accepted
};

namespace detail {

inline std::string_view trim(std::string_view s) noexcept {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

[[noreturn]] inline void trace_error(std::int64_t line, std::string_view column,
                                     std::string_view text, std::string_view rule) {
  std::string field(text.substr(0, 40));
  if (text.size() > 40) field += "...";
  throw_error(ErrorCode::kInvalidArgument, concat({"trace line ", std::to_string(line), ": ",
                                                   column, " = '", field, "' ", rule}));
}

inline std::int64_t trace_integer(std::string_view text, std::int64_t line, std::string_view column,
                                  std::int64_t lo, std::int64_t hi) {
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size() || value < lo ||
      value > hi) {
    trace_error(
        line, column, text,
        concat({"must be an integer in [", std::to_string(lo), ", ", std::to_string(hi), "]"}));
  }
  return value;
}

inline double trace_seconds(std::string_view text, std::int64_t line) {
  double value = 0.0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size() ||
      !std::isfinite(value) || value < 0.0 || value > 1e12) {
    trace_error(line, "arrival_s", text, "must be a number of seconds in [0, 1e12]");
  }
  return value;
}

}  // namespace detail

/// Parses a CSV trace. Columns: arrival_s (seconds >= 0), prompt_tokens and output_tokens
/// (integers in [1, max_tokens]), and optionally prefix_group (an integer >= 0, or empty). A
/// first line whose first field is not a number is a header and is skipped. Requests are
/// returned sorted by arrival (stable, so ties keep file order). Throws
/// `Error{kInvalidArgument}` naming the line, column and value for a malformed field, a wrong
/// number of columns, or more than max_requests lines.
inline std::vector<SimRequestSpec> parse_trace_csv(std::string_view text,
                                                   const TraceOptions& options = {}) {
  check_arg(options.prefix_tokens >= 0, ErrorCode::kInvalidArgument, "prefix_tokens",
            options.prefix_tokens, "must be >=", 0);
  std::vector<SimRequestSpec> out;
  std::int64_t line_no = 0;
  bool first_data = true;
  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    const std::string_view raw = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    ++line_no;
    const std::string_view line = detail::trim(raw);
    if (line.empty() || line.front() == '#') continue;
    std::string_view fields[5];
    std::size_t count = 0;
    std::string_view rest = line;
    for (;;) {
      const std::size_t comma = rest.find(',');
      if (count == 5) detail::trace_error(line_no, "line", line, "has more than 4 columns");
      fields[count++] = detail::trim(rest.substr(0, comma));
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
    const bool header = first_data && !fields[0].empty() &&
                        !(fields[0].front() >= '0' && fields[0].front() <= '9') &&
                        fields[0].front() != '.' && fields[0].front() != '-' &&
                        fields[0].front() != '+';
    first_data = false;
    if (header) continue;
    if (count < 3 || count > 4) {
      detail::trace_error(line_no, "line", line,
                          "must have 3 or 4 columns: arrival_s,prompt_tokens,output_tokens"
                          "[,prefix_group]");
    }
    if (static_cast<std::int64_t>(out.size()) >= options.max_requests) {
      detail::trace_error(
          line_no, "line", line,
          detail::concat({"exceeds max_requests = ", std::to_string(options.max_requests)}));
    }
    SimRequestSpec r;
    r.arrival_s = detail::trace_seconds(fields[0], line_no);
    r.prompt_tokens =
        detail::trace_integer(fields[1], line_no, "prompt_tokens", 1, options.max_tokens);
    r.output_tokens =
        detail::trace_integer(fields[2], line_no, "output_tokens", 1, options.max_tokens);
    if (count == 4 && !fields[3].empty()) {
      r.prefix_group = static_cast<std::int32_t>(detail::trace_integer(
          fields[3], line_no, "prefix_group", 0, (std::int64_t{1} << 31) - 2));
      r.prefix_tokens = options.prefix_tokens;
    }
    out.push_back(r);
  }
  std::stable_sort(out.begin(), out.end(), [](const SimRequestSpec& a, const SimRequestSpec& b) {
    return a.arrival_s < b.arrival_s;
  });
  return out;
}

/// Reads and parses the CSV trace at `path`. Throws `Error{kInvalidArgument}` when the file
/// cannot be read, and as `parse_trace_csv`.
inline std::vector<SimRequestSpec> read_trace_csv(const std::string& path,
                                                  const TraceOptions& options = {}) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    detail::throw_error(ErrorCode::kInvalidArgument, "trace file '" + path + "' cannot be opened");
  }
  std::string text;
  char buffer[1 << 16];
  std::size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, file)) > 0) text.append(buffer, n);
  const bool failed = std::ferror(file) != 0;
  std::fclose(file);
  if (failed)
    detail::throw_error(ErrorCode::kInvalidArgument, "trace file '" + path + "' read failed");
  return parse_trace_csv(text, options);
}

}  // namespace inferkit
