// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for sim/trace_csv.hpp: any byte string is either a trace or an
// inferkit::Error; anything else (a crash, a sanitizer report, another exception, a request
// that breaks the documented ranges) is a bug. Built and run by scripts/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <inferkit/core/error.hpp>
#include <inferkit/sim/trace_csv.hpp>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  inferkit::TraceOptions options;
  options.max_requests = 4096;
  try {
    const auto trace = inferkit::parse_trace_csv(text, options);
    double last = 0.0;
    for (const inferkit::SimRequestSpec& r : trace) {
      const bool ok = r.arrival_s >= last && r.prompt_tokens >= 1 && r.output_tokens >= 1 &&
                      r.prompt_tokens <= options.max_tokens &&
                      r.output_tokens <= options.max_tokens && r.prefix_group >= -1;
      if (!ok) std::abort();
      last = r.arrival_s;
    }
  } catch (const inferkit::Error&) {
    // Malformed input: the documented outcome.
  }
  return 0;
}
