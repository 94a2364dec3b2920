// SPDX-License-Identifier: Apache-2.0
// Which instruction-set path the CPU kernels take. Each kernel is compiled in the headers for
// every path this architecture has (x86: AVX-512, AVX2+FMA+F16C and the portable baseline, in
// function-level target regions; aarch64: NEON and the baseline), in namespaces named after the
// path, and cpu_isa() picks one once per process: the best the CPU supports, or the one the
// environment variable INFERKIT_CPU_ISA names (avx512, avx2, neon, baseline; for tests and
// benchmarks). No -march flag is needed for full speed.
// Threads: safe from any number of threads: the choice is a function-local static made once, on
// first use, when INFERKIT_CPU_ISA is read (do not setenv it concurrently with that first use).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <inferkit/core/config.hpp>
#include <inferkit/core/error.hpp>
#include <string>
#include <string_view>

#if INFERKIT_CPU_DISPATCH
#  include <cpuid.h>
#  if defined(__linux__)
#    include <sys/syscall.h>
#    include <unistd.h>
#  endif
#endif

namespace inferkit {

/// An instruction-set path of the CPU kernels.
enum class CpuIsa : std::uint8_t {
  kBaseline,  ///< portable C++ (generic vectors), any CPU
  kAvx2,      ///< x86 AVX2 + FMA + F16C (+ BMI1/2)
  kAvx512,    ///< x86 AVX-512 F/BW/VL (+ the AVX2 set)
  kNeon,      ///< AArch64 Advanced SIMD
};

/// The lowercase name INFERKIT_CPU_ISA uses for `isa`: "baseline", "avx2", "avx512", "neon".
constexpr std::string_view to_string(CpuIsa isa) noexcept {
  switch (isa) {
    case CpuIsa::kAvx2:
      return "avx2";
    case CpuIsa::kAvx512:
      return "avx512";
    case CpuIsa::kNeon:
      return "neon";
    case CpuIsa::kBaseline:
      break;
  }
  return "baseline";
}

namespace detail {
inline namespace INFERKIT_ISA_ABI {

/// What this CPU can run, probed once (CPUID leaves 1 and 7, and XGETBV for the OS-enabled
/// register state: a CPU with AVX-512 under an OS that does not save zmm state cannot use it).
struct CpuFeatures {
  bool avx2 = false;         ///< AVX2, FMA, F16C, BMI1, BMI2, ymm state enabled
  bool avx512 = false;       ///< avx2 and AVX-512 F/BW/VL, zmm and opmask state enabled
  bool avx512_vnni = false;  ///< avx512 and AVX512-VNNI (int8 dot products: vpdpbusd)
  bool avx_vnni = false;     ///< avx2 and AVX-VNNI (vpdpbusd on ymm)
  bool amx_int8 = false;     ///< avx512_vnni, AMX-TILE and AMX-INT8, tile state enabled in XCR0
};

inline CpuFeatures probe_cpu_features() noexcept {
  CpuFeatures f;
#if INFERKIT_CPU_DISPATCH
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(1, &a, &b, &c, &d) == 0) return f;
  const bool fma = (c >> 12) & 1u, osxsave = (c >> 27) & 1u, avx = (c >> 28) & 1u,
             f16c = (c >> 29) & 1u;
  if (!osxsave || !avx) return f;
  unsigned xcr0 = 0, xcr0_hi = 0;
  __asm__ volatile("xgetbv" : "=a"(xcr0), "=d"(xcr0_hi) : "c"(0));
  unsigned b7 = 0, c7 = 0, d7 = 0;
  if (__get_cpuid_count(7, 0, &a, &b7, &c7, &d7) == 0) return f;
  const bool ymm_state = (xcr0 & 0x6u) == 0x6u;    // SSE + AVX state
  const bool zmm_state = (xcr0 & 0xE6u) == 0xE6u;  // + opmask, ZMM_Hi256, Hi16_ZMM
  const bool bmi = (b7 >> 3) & 1u, avx2 = (b7 >> 5) & 1u, bmi2 = (b7 >> 8) & 1u;
  const bool avx512f = (b7 >> 16) & 1u, avx512bw = (b7 >> 30) & 1u, avx512vl = (b7 >> 31) & 1u;
  f.avx2 = ymm_state && avx2 && fma && f16c && bmi && bmi2;
  f.avx512 = f.avx2 && zmm_state && avx512f && avx512bw && avx512vl;
  f.avx512_vnni = f.avx512 && ((c7 >> 11) & 1u);
  unsigned a71 = 0, b71 = 0, c71 = 0, d71 = 0;
  if (__get_cpuid_count(7, 1, &a71, &b71, &c71, &d71) != 0)
    f.avx_vnni = f.avx2 && ((a71 >> 4) & 1u);
  const bool tile_state = (xcr0 & 0x60000u) == 0x60000u;  // XTILECFG + XTILEDATA
  f.amx_int8 = f.avx512_vnni && tile_state && ((d7 >> 24) & 1u) && ((d7 >> 25) & 1u);
#endif
  return f;
}

/// Whether this build and this CPU have the path `isa` (no caching; see cpu_isa_supported).
inline bool probe_cpu_isa(CpuIsa isa, const CpuFeatures& f) noexcept {
  switch (isa) {
    case CpuIsa::kBaseline:
      return true;
    case CpuIsa::kAvx2:
      return INFERKIT_CPU_DISPATCH && f.avx2;
    case CpuIsa::kAvx512:
      return INFERKIT_CPU_DISPATCH && f.avx512;
    case CpuIsa::kNeon:
      return INFERKIT_HAS_NEON != 0;
  }
  return false;
}

/// The outcome of reading INFERKIT_CPU_ISA once: the path, or why the request cannot be met.
struct CpuIsaChoice {
  CpuIsa isa = CpuIsa::kBaseline;
  CpuIsa best = CpuIsa::kBaseline;
  ErrorCode error = ErrorCode::kInvalidArgument;
  bool ok = true;
  char requested[32] = {};  ///< the variable's value (cut to 31 characters) when not ok
};

inline CpuIsaChoice choose_cpu_isa(const char* requested) noexcept {
  const CpuFeatures f = probe_cpu_features();
  CpuIsaChoice c;
  for (CpuIsa isa : {CpuIsa::kNeon, CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (probe_cpu_isa(isa, f)) c.best = isa;
  }
  c.isa = c.best;
  if (requested == nullptr || *requested == '\0' || std::string_view(requested) == "auto") {
    return c;
  }
  bool known = false;
  for (CpuIsa isa : {CpuIsa::kBaseline, CpuIsa::kAvx2, CpuIsa::kAvx512, CpuIsa::kNeon}) {
    if (to_string(isa) == requested) {
      known = true;
      c.isa = isa;
      c.ok = probe_cpu_isa(isa, f);
      c.error = ErrorCode::kUnsupported;
    }
  }
  if (!known) c.ok = false;
  if (!c.ok) std::strncpy(c.requested, requested, sizeof(c.requested) - 1);
  return c;
}

/// The process's choice, made on first use.
inline const CpuIsaChoice& cpu_isa_choice() noexcept {
  static const CpuIsaChoice choice = choose_cpu_isa(std::getenv("INFERKIT_CPU_ISA"));
  return choice;
}

/// The chosen path for kernels that cannot throw: what cpu_isa() returns, or the best path
/// when INFERKIT_CPU_ISA is invalid (cpu_isa() and every throwing entry point report that).
inline CpuIsa kernel_isa() noexcept {
  const CpuIsaChoice& c = cpu_isa_choice();
  return c.ok ? c.isa : c.best;
}

}  // namespace INFERKIT_ISA_ABI
}  // namespace detail

inline namespace INFERKIT_ISA_ABI {

/// Whether the CPU kernels of this build have the path `isa` and this CPU can run it.
inline bool cpu_isa_supported(CpuIsa isa) noexcept {
  static const detail::CpuFeatures features = detail::probe_cpu_features();
  return detail::probe_cpu_isa(isa, features);
}

/// Whether this build and CPU have AVX512-VNNI (the int8 dot products of int8_linear.hpp's
/// fastest path; CPUID probed once).
inline bool cpu_has_avx512_vnni() noexcept {
  static const bool vnni = INFERKIT_CPU_DISPATCH && detail::probe_cpu_features().avx512_vnni;
  return vnni;
}

/// Whether this build and CPU have AVX-VNNI (the same dot products on ymm; CPUID probed once).
inline bool cpu_has_avx_vnni() noexcept {
  static const bool vnni = INFERKIT_CPU_DISPATCH && detail::probe_cpu_features().avx_vnni;
  return vnni;
}

/// Whether this process may run AMX-INT8 tile instructions (the int8 products' batched path):
/// the CPU has them, the OS keeps their state, and Linux granted the tile data permission
/// (arch_prctl ARCH_REQ_XCOMP_PERM, requested once, on first call; without it the first tile
/// instruction would kill the process). False elsewhere, and when INFERKIT_AMX is "off" or "0".
inline bool cpu_has_amx_int8() noexcept {
  static const bool amx = [] {
#if INFERKIT_CPU_DISPATCH && defined(__linux__)
    if (!detail::probe_cpu_features().amx_int8) return false;
    const char* env = std::getenv("INFERKIT_AMX");  // NOLINT(concurrency-mt-unsafe): read once
    if (env != nullptr && (std::string_view(env) == "off" || std::string_view(env) == "0")) {
      return false;
    }
    constexpr long kArchReqXcompPerm = 0x1023;  // asm/prctl.h
    constexpr long kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
    return false;
#endif
  }();
  return amx;
}

/// The path every CPU kernel takes in this process: INFERKIT_CPU_ISA (avx512, avx2, neon,
/// baseline; empty or "auto": detect) if set, else the best one the CPU supports. The variable is
/// read once, on first use. Throws `Error{kInvalidArgument}` for an unknown value and
/// `Error{kUnsupported}` for a path this build or CPU lacks (each call throws again).
inline CpuIsa cpu_isa() {
  const detail::CpuIsaChoice& c = detail::cpu_isa_choice();
  if (!c.ok) [[unlikely]] {
    const std::string value(c.requested);
    if (c.error == ErrorCode::kUnsupported) {
      detail::throw_error(ErrorCode::kUnsupported,
                          "INFERKIT_CPU_ISA = " + value +
                              ": this build or CPU cannot run that path (the best here is " +
                              std::string(to_string(c.best)) + ")");
    }
    detail::throw_error(
        ErrorCode::kInvalidArgument,
        "INFERKIT_CPU_ISA = '" + value + "' must be one of avx512, avx2, neon, baseline or auto");
  }
  return c.isa;
}

}  // namespace INFERKIT_ISA_ABI

}  // namespace inferkit
