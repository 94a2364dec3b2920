// SPDX-License-Identifier: Apache-2.0
// Internal: which instruction-set path the quantized linear layers take. Every path is compiled
// in the headers (x86: AVX-512 and AVX2+FMA+F16C in function-level target regions, plus the
// portable baseline), and one is picked once per process from CPUID, or from the environment
// variable INFERKIT_CPU_ISA (avx512, avx2, baseline) when it is set. A small stand-in for the
// general CPU dispatcher of the attention kernels, to be merged with it.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <inferkit/core/config.hpp>
#include <inferkit/core/error.hpp>
#include <string>
#include <string_view>

#if INFERKIT_CPU_DISPATCH
#  include <cpuid.h>
#endif

namespace inferkit::detail {

/// An instruction-set path of the linear-layer kernels.
enum class LinearIsa : std::uint8_t {
  kBaseline,  ///< portable C++ that the compiler vectorizes, any CPU
  kAvx2,      ///< x86 AVX2 + FMA + F16C
  kAvx512,    ///< x86 AVX-512 F/BW/VL (+ the AVX2 set)
};

/// The INFERKIT_CPU_ISA spelling of `isa`.
constexpr std::string_view linear_isa_name(LinearIsa isa) noexcept {
  switch (isa) {
    case LinearIsa::kAvx2:
      return "avx2";
    case LinearIsa::kAvx512:
      return "avx512";
    case LinearIsa::kBaseline:
      break;
  }
  return "baseline";
}

/// The best path this build and this CPU have, probed without caching. __builtin_cpu_supports
/// also checks that the OS saves the ymm/zmm state; F16C comes from CPUID leaf 1 (clang 14
/// rejects __builtin_cpu_supports("f16c")).
inline LinearIsa probe_linear_isa() noexcept {
#if INFERKIT_CPU_DISPATCH
  __builtin_cpu_init();
  unsigned a = 0, b = 0, c = 0, d = 0;
  const bool f16c = __get_cpuid(1, &a, &b, &c, &d) != 0 && ((c >> 29) & 1u) != 0;
  const bool avx2 =
      f16c && __builtin_cpu_supports("avx2") != 0 && __builtin_cpu_supports("fma") != 0;
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") != 0 &&
                      __builtin_cpu_supports("avx512bw") != 0 &&
                      __builtin_cpu_supports("avx512vl") != 0;
  if (avx512) return LinearIsa::kAvx512;
  if (avx2) return LinearIsa::kAvx2;
#endif
  return LinearIsa::kBaseline;
}

/// Whether this build and this CPU can run the path `isa` (CPUID probed once).
inline bool linear_isa_supported(LinearIsa isa) noexcept {
  static const LinearIsa best = probe_linear_isa();
  return static_cast<int>(isa) <= static_cast<int>(best);
}

/// The process's path, or why INFERKIT_CPU_ISA cannot be honoured.
struct LinearIsaChoice {
  LinearIsa isa = LinearIsa::kBaseline;           ///< the path taken when ok
  bool ok = true;                                 ///< false: `error` and `message` say why
  ErrorCode error = ErrorCode::kInvalidArgument;  ///< kInvalidArgument or kUnsupported
  std::string message;                            ///< for the Error thrown when not ok
};

/// The choice for an INFERKIT_CPU_ISA value `requested` (null, "" or "auto": the best path).
inline LinearIsaChoice choose_linear_isa(const char* requested) {
  LinearIsaChoice choice;
  choice.isa = probe_linear_isa();
  if (requested == nullptr || *requested == '\0' || std::string_view(requested) == "auto") {
    return choice;
  }
  for (LinearIsa isa : {LinearIsa::kBaseline, LinearIsa::kAvx2, LinearIsa::kAvx512}) {
    if (linear_isa_name(isa) != requested) continue;
    if (static_cast<int>(isa) > static_cast<int>(choice.isa)) {
      choice.ok = false;
      choice.error = ErrorCode::kUnsupported;
      choice.message = concat({"INFERKIT_CPU_ISA = '", requested,
                               "' is not supported by this CPU or build; the best is '",
                               linear_isa_name(choice.isa), "'"});
    }
    choice.isa = isa;
    return choice;
  }
  choice.ok = false;
  choice.message =
      concat({"INFERKIT_CPU_ISA = '", requested, "' is not one of auto, avx512, avx2, baseline"});
  return choice;
}

/// The path of this process: INFERKIT_CPU_ISA if set, else the best one; decided on first use.
/// Throws `Error` when the variable names an unknown or unsupported path.
inline LinearIsa linear_isa() {
  static const LinearIsaChoice choice = choose_linear_isa(std::getenv("INFERKIT_CPU_ISA"));
  if (!choice.ok) throw_error(choice.error, choice.message);
  return choice.isa;
}

}  // namespace inferkit::detail
