// SPDX-License-Identifier: Apache-2.0
// Internal: which instruction-set path the quantized linear layers take. Every path is compiled
// in the headers (x86: AVX-512 and AVX2+FMA+F16C in function-level target regions, plus the
// portable baseline); the choice is the process's CPU kernel path (core/cpu_isa.hpp: CPUID, or
// INFERKIT_CPU_ISA), with NEON served by the portable baseline, which has no NEON kernels of its
// own yet.
#pragma once

#include <cstdint>
#include <inferkit/core/cpu_isa.hpp>
#include <string_view>

namespace inferkit::detail {

/// An instruction-set path of the linear-layer kernels.
enum class LinearIsa : std::uint8_t {
  kBaseline,  ///< portable C++ that the compiler vectorizes, any CPU
  kAvx2,      ///< x86 AVX2 + FMA + F16C
  kAvx512,    ///< x86 AVX-512 F/BW/VL (+ the AVX2 set)
};

/// The linear-layer path for the CPU kernel path `isa`.
constexpr LinearIsa to_linear_isa(CpuIsa isa) noexcept {
  switch (isa) {
    case CpuIsa::kAvx2:
      return LinearIsa::kAvx2;
    case CpuIsa::kAvx512:
      return LinearIsa::kAvx512;
    case CpuIsa::kBaseline:
    case CpuIsa::kNeon:
      break;
  }
  return LinearIsa::kBaseline;
}

/// The INFERKIT_CPU_ISA spelling of `isa`.
constexpr std::string_view linear_isa_name(LinearIsa isa) noexcept {
  switch (isa) {
    case LinearIsa::kAvx2:
      return to_string(CpuIsa::kAvx2);
    case LinearIsa::kAvx512:
      return to_string(CpuIsa::kAvx512);
    case LinearIsa::kBaseline:
      break;
  }
  return to_string(CpuIsa::kBaseline);
}

/// The best path this build and this CPU have (CPUID probed once).
inline LinearIsa best_linear_isa() noexcept { return to_linear_isa(cpu_isa_choice().best); }

/// Whether this build and this CPU can run the path `isa` (CPUID probed once).
inline bool linear_isa_supported(LinearIsa isa) noexcept {
  switch (isa) {
    case LinearIsa::kAvx2:
      return cpu_isa_supported(CpuIsa::kAvx2);
    case LinearIsa::kAvx512:
      return cpu_isa_supported(CpuIsa::kAvx512);
    case LinearIsa::kBaseline:
      break;
  }
  return true;
}

/// The path of this process: the CPU kernels' (INFERKIT_CPU_ISA if set, else the best one),
/// decided on first use. Throws `Error` when the variable names an unknown or unsupported path.
inline LinearIsa linear_isa() { return to_linear_isa(cpu_isa()); }

}  // namespace inferkit::detail
